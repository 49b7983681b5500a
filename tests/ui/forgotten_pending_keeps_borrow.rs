// Leaking a pending receive does not end the borrow of its buffer: the
// buffer stays unusable until the scope (which drains it) has returned.
fn main() {
    let ctx = rucx::Context::new().unwrap();
    let mut w = ctx.create_worker().unwrap();
    let mut buf = vec![0u8; 8];
    w.scope(|s| {
        std::mem::forget(s.tag_recv(&mut buf, 1, rucx::TAG_MASK_ALL));
        println!("{}", buf[0]);
    });
}
