// A pending operation cannot leave the scope that drains it.
fn main() {
    let ctx = rucx::Context::new().unwrap();
    let mut w = ctx.create_worker().unwrap();
    let ep = w.connect(&w.address()).unwrap();
    let data = vec![1u8; 8];
    let p = w.scope(|s| s.tag_send(ep, &data, 1));
    drop(p);
}
