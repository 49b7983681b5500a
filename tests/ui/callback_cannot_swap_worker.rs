// A completion callback cannot swap the worker it runs on for another one
// (and keep the first, with its requests, after a scope that lent it
// buffers has returned).
fn main() {
    let ctx = rucx::Context::new().unwrap();
    let w = ctx.create_worker().unwrap();
    let mut other = ctx.create_worker().unwrap();
    let op = rucx::Op::new().callback(move |w, _c| {
        std::mem::swap(&mut **w, &mut other);
    });
    drop((op, w));
}
