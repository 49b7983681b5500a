//! The async echo server example (`examples/async_server.rs`) runs: its
//! demo (a server and three clients in one runtime), and its server in a
//! child process answering its client in this one.

mod async_common;
mod common;
#[allow(dead_code)]
#[path = "../examples/async_server.rs"]
mod example;

use async_common::{current, within};
use common::{is_child, spawn_child};
use std::time::Duration;

#[test]
fn the_async_demo_echoes() {
    if is_child() {
        return;
    }
    let n = current()
        .block_on(within(60, example::demo()))
        .expect("demo");
    assert_eq!(n, 6);
}

/// Child: the example's server on a free port, printing the port.
#[test]
fn server_child() {
    if !is_child() {
        return;
    }
    current().block_on(async {
        let w = rucx::Context::new()
            .expect("context")
            .create_worker()
            .expect("worker")
            .into_shared();
        let _d = rucx::ucp::tokio::spawn(&w);
        let served = example::serve(w, "127.0.0.1:0".parse().expect("addr"), |at| {
            println!("server port {}", at.port());
        });
        // Serves until killed; ends on its own after a minute.
        let _ = tokio::time::timeout(Duration::from_secs(60), served).await;
    });
}

#[test]
fn server_in_another_process() {
    if is_child() {
        return;
    }
    let mut child = spawn_child("server_child", &[]);
    let out = child.stdout.take().expect("stdout");
    let port = {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(out).lines();
        loop {
            let l = lines
                .next()
                .expect("the server printed no port")
                .expect("line");
            // The harness may print its own words before ours.
            if let Some((_, p)) = l.trim().rsplit_once("server port ") {
                break p.parse::<u16>().expect("port");
            }
        }
    };
    let words: Vec<String> = vec!["one".into(), "two".into(), "z".repeat(300_000)];
    let answers = current()
        .block_on(within(60, async {
            let w = rucx::Context::new()
                .expect("context")
                .create_worker()
                .expect("worker")
                .into_shared();
            let _d = rucx::ucp::tokio::spawn(&w);
            example::client(&w, ([127, 0, 0, 1], port).into(), &words).await
        }))
        .expect("client");
    assert_eq!(answers, words);
}
