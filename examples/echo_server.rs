//! An echo server and its client over rucx, in one file.
//!
//! ```sh
//! cargo run --release --example echo_server -- server 127.0.0.1:13400
//! cargo run --release --example echo_server -- client 127.0.0.1:13400 hello world
//! cargo run --release --example echo_server -- demo      # both, one process
//! ```
//!
//! The server listens on a socket address and accepts every client. Each
//! client sends its words as active messages to handler [`ECHO`], asking
//! for a reply endpoint; the server's handler sends each message back on
//! that endpoint to the client's handler [`ANSWER`]. Messages large enough
//! for a rendezvous are fetched by the handler first. Clients that go away
//! fail their endpoints, which the server logs and forgets.

use rucx::ucp::{AmParams, EpParams, ErrMode, Op, Posted, WorkerMut};
use rucx::{AmMsg, Context, Worker};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Active message id of requests to the server.
const ECHO: u16 = 1;
/// Active message id of the server's answers.
const ANSWER: u16 = 2;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => {
            let addr = args.get(1).ok_or("server <addr:port>")?.parse()?;
            let ctx = Context::new()?;
            let mut w = ctx.create_worker()?;
            let at = start_server(&mut w, addr)?;
            println!("echo server listening on {at}");
            loop {
                w.progress();
                w.wait_event(Some(Duration::from_millis(100)))?;
            }
        }
        Some("client") => {
            let addr = args.get(1).ok_or("client <addr:port> words...")?.parse()?;
            let ctx = Context::new()?;
            let mut w = ctx.create_worker()?;
            for answer in run_client(&mut w, addr, &args[2..], || {})? {
                println!("{answer}");
            }
            Ok(())
        }
        Some("demo") => {
            let n = demo()?;
            println!("demo: {n} messages echoed");
            Ok(())
        }
        _ => Err("usage: echo_server server <addr> | client <addr> words... | demo".into()),
    }
}

/// A server and a client in one thread: echoes a short and a large
/// message; returns how many came back right.
pub(crate) fn demo() -> Result<usize, Box<dyn std::error::Error>> {
    let ctx = Context::new()?;
    let mut server = ctx.create_worker()?;
    let at = start_server(&mut server, "127.0.0.1:0".parse()?)?;
    let mut client = ctx.create_worker()?;
    let words = ["hello".to_string(), "x".repeat(1 << 20)];
    // One thread: the client's waits progress the server too.
    let answers = run_client(&mut client, at, &words, || {
        server.progress();
    })?;
    if answers != words {
        return Err("the echo differs".into());
    }
    Ok(answers.len())
}

/// Makes `w` an echo server on `addr`; returns the bound address.
fn start_server(w: &mut Worker, addr: SocketAddr) -> rucx::Result<SocketAddr> {
    w.am_set_handler(ECHO, |w, msg: AmMsg| {
        let Some(back) = msg.reply_ep() else {
            eprintln!("a request without a reply endpoint: dropped");
            return;
        };
        // The data, now or once fetched: echo it.
        with_data(w, msg, move |w, data| {
            match w.am_send(back, ANSWER, &[], &data, AmParams::new()) {
                Ok(Posted::InFlight(id)) => w.request_release(id),
                Ok(Posted::Done(..)) => {}
                Err(e) => eprintln!("answering failed: {e}"),
            }
        });
    });
    let l = w.listen(addr, |w, req| {
        let from = req.client_addr();
        let params = EpParams::new()
            .err_mode(ErrMode::Peer)
            .on_error(move |_, _, e| eprintln!("client {from:?} gone: {e}"));
        if let Err(e) = w.accept(req, params) {
            eprintln!("accepting {from:?} failed: {e}");
        }
    })?;
    w.listener_addr(l)
}

/// Runs `then` with `msg`'s data: at once for an eager message; for a
/// rendezvous one once it is fetched (a handler must not wait: the peer
/// may need this thread to progress).
fn with_data(
    w: &mut WorkerMut<'_>,
    msg: AmMsg,
    then: impl FnOnce(&mut WorkerMut<'_>, Vec<u8>) + Send + 'static,
) {
    if !msg.is_rndv() {
        return then(w, msg.into_data());
    }
    // Shared by the two ways the fetch can end; one of them runs it.
    let then = Arc::new(Mutex::new(Some(then)));
    let on_done = Arc::clone(&then);
    let op = Op::new().callback(move |w, c| match w.take::<Vec<u8>>(c.id) {
        Some(Ok((_, data))) => {
            if let Some(f) = on_done.lock().unwrap().take() {
                f(w, data);
            }
        }
        Some(Err(e)) => eprintln!("fetching data failed: {}", e.error),
        None => eprintln!("fetched data went missing"),
    });
    let buf = vec![0u8; msg.data_len()];
    match w.am_recv_data(msg, buf, op) {
        Ok(Posted::Done(_, data)) => {
            if let Some(f) = then.lock().unwrap().take() {
                f(w, data);
            }
        }
        Ok(Posted::InFlight(_)) => {}
        Err(e) => eprintln!("fetching data failed: {e}"),
    }
}

/// Connects to the echo server at `addr`, sends every word and returns
/// the answers in order; `also` runs at each wait (for a server in the
/// same thread).
fn run_client(
    w: &mut Worker,
    addr: SocketAddr,
    words: &[String],
    mut also: impl FnMut(),
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let answers: Arc<Mutex<Vec<String>>> = Arc::default();
    let got = Arc::clone(&answers);
    w.am_set_handler(ANSWER, move |w, msg: AmMsg| {
        let got = Arc::clone(&got);
        with_data(w, msg, move |_, data| {
            got.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&data).into_owned());
        });
    });
    let mut connecting = w.connect_start(addr, EpParams::new().err_mode(ErrMode::Peer))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let ep = loop {
        also();
        if let Some(ep) = w.connect_poll(&mut connecting) {
            break ep?;
        }
        w.progress();
        if Instant::now() > deadline {
            return Err("no answer from the server".into());
        }
    };
    for word in words {
        let p = w.am_send(ep, ECHO, &[], word.as_bytes(), AmParams::new().reply())?;
        if let Posted::InFlight(id) = p {
            w.request_release(id);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while answers.lock().unwrap().len() < words.len() {
        also();
        w.progress();
        w.ep_status(ep)?;
        if Instant::now() > deadline {
            return Err("the server did not answer every message".into());
        }
    }
    let out = std::mem::take(&mut *answers.lock().unwrap());
    Ok(out)
}
