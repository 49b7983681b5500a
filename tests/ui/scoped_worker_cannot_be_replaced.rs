// The worker a scope lends to `with_worker` cannot be replaced by another
// one: the scope drains the worker it was opened on.
fn main() {
    let ctx = rucx::Context::new().unwrap();
    let mut w = ctx.create_worker().unwrap();
    let other = ctx.create_worker().unwrap();
    let mut buf = vec![0u8; 64];
    w.scope(|s| {
        let _recv = s.tag_recv(&mut buf, 1, u64::MAX);
        s.with_worker(|inner| {
            let kept = std::mem::replace(&mut **inner, other);
            drop(kept);
        });
    });
}
