// A buffer that does not outlive the scope cannot be lent to it.
fn main() {
    let ctx = rucx::Context::new().unwrap();
    let mut w = ctx.create_worker().unwrap();
    let ep = w.connect(&w.address()).unwrap();
    w.scope(|s| {
        let data = vec![1u8; 8];
        let _p = s.tag_send(ep, &data, 1);
    });
}
