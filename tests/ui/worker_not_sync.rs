// A worker is used by one thread at a time: it is not Sync, and neither is
// a scope.
fn need_sync<T: Sync>() {}

fn main() {
    need_sync::<rucx::Worker>();
    need_sync::<rucx::Scope<'static, 'static>>();
}
