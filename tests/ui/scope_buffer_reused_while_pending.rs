// A receive buffer lent to a scope cannot be touched until it comes back.
fn main() {
    let ctx = rucx::Context::new().unwrap();
    let mut w = ctx.create_worker().unwrap();
    let mut buf = vec![0u8; 8];
    w.scope(|s| {
        let p = s.tag_recv(&mut buf, 1, rucx::TAG_MASK_ALL);
        buf[0] = 1;
        let _ = s.wait(p);
    });
}
