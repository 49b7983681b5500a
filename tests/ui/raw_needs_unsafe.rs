// The raw tier is unsafe to call: the caller keeps memory valid.
fn main() {
    let ctx = rucx::Context::new().unwrap();
    let mut w = ctx.create_worker().unwrap();
    let ep = w.connect(&w.address()).unwrap();
    let data = [1u8; 8];
    let _ = w.tag_send_raw(ep, data.as_ptr(), 8, 1, rucx::Op::new());
}
