//! The echo server example (`examples/echo_server.rs`) runs: a server and
//! a client in one process echo a short and a rendezvous-sized message.

#[allow(dead_code)]
#[path = "../examples/echo_server.rs"]
mod echo;

#[test]
fn the_echo_example_echoes() {
    assert_eq!(echo::demo().expect("demo"), 2);
}
