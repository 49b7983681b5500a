// A buffer given to the owned tier belongs to the worker until taken back.
fn main() {
    let ctx = rucx::Context::new().unwrap();
    let mut w = ctx.create_worker().unwrap();
    let ep = w.connect(&w.address()).unwrap();
    let data = vec![1u8; 8];
    let _ = w.tag_send(ep, data, 1, rucx::Op::new()).unwrap();
    println!("{}", data.len());
}
