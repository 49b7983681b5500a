//! An async echo server and its client on tokio, over a
//! [`SharedWorker`](rucx::ucp::SharedWorker) driven by
//! [`rucx::ucp::tokio`].
//!
//! ```sh
//! cargo run --release --features tokio --example async_server -- server 127.0.0.1:13401
//! cargo run --release --features tokio --example async_server -- client 127.0.0.1:13401 hello world
//! cargo run --release --features tokio --example async_server -- demo   # both, one process
//! ```
//!
//! The server listens on a socket address and accepts clients in a loop,
//! one task per client. Each endpoint carries a byte stream of frames (a
//! 4-byte little-endian length, then that many bytes); the server's task
//! reads a frame and writes it back, until the client sends an empty frame
//! or goes away (its endpoints are in peer error mode, so its death fails
//! the pending receive instead of leaving it waiting). All of it runs on
//! one current-thread runtime, with the worker's driver as one more task.

use rucx::ucp::tokio as driver;
use rucx::ucp::{CloseMode, Ep, EpParams, ErrMode, SharedWorker};
use rucx::Context;
use std::net::SocketAddr;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match args.first().map(String::as_str) {
        Some("server") => {
            let addr: SocketAddr = args.get(1).ok_or("server <addr:port>")?.parse()?;
            rt.block_on(async {
                let w = Context::new()?.create_worker()?.into_shared();
                let _driver = driver::spawn(&w);
                serve(w, addr, |at| {
                    println!("async echo server listening on {at}")
                })
                .await
            })
        }
        Some("client") => {
            let addr: SocketAddr = args.get(1).ok_or("client <addr:port> words...")?.parse()?;
            rt.block_on(async {
                let w = Context::new()?.create_worker()?.into_shared();
                let _driver = driver::spawn(&w);
                for answer in client(&w, addr, &args[2..]).await? {
                    println!("{answer}");
                }
                Ok(())
            })
        }
        Some("demo") => {
            let n = rt.block_on(demo())?;
            println!("demo: {n} messages echoed");
            Ok(())
        }
        _ => Err("usage: async_server server <addr> | client <addr> words... | demo".into()),
    }
}

/// A server and three clients at once in one runtime; returns how many
/// messages came back right (an error if any did not).
pub(crate) async fn demo() -> Result<usize, Error> {
    let ctx = Context::new()?;
    let server = ctx.create_worker()?.into_shared();
    let _sd = driver::spawn(&server);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut tx = Some(tx);
    let srv = tokio::spawn(serve(server, "127.0.0.1:0".parse()?, move |at| {
        if let Some(tx) = tx.take() {
            let _ = tx.send(at);
        }
    }));
    let at = rx.await?;
    let mut clients = Vec::new();
    for c in 0..3 {
        let w = ctx.create_worker()?.into_shared();
        clients.push(tokio::spawn(async move {
            let _d = driver::spawn(&w);
            let words = vec![format!("hello from {c}"), "x".repeat(100_000 * (c + 1))];
            let answers = client(&w, at, &words).await?;
            if answers != words {
                return Err::<usize, Error>(format!("client {c}: the echo differs").into());
            }
            Ok(answers.len())
        }));
    }
    let mut n = 0;
    for c in clients {
        n += c.await??;
    }
    srv.abort();
    Ok(n)
}

/// Accepts clients on `addr` forever, one echo task each; `bound` is told
/// the address it listens on.
pub(crate) async fn serve(
    w: SharedWorker,
    addr: SocketAddr,
    bound: impl FnOnce(SocketAddr),
) -> Result<(), Error> {
    let listener = w.listen(addr)?;
    bound(listener.addr()?);
    loop {
        let ep = listener
            .accept(EpParams::new().err_mode(ErrMode::Peer))
            .await?;
        let w = w.clone();
        tokio::spawn(async move {
            if let Err(e) = echo(&w, ep).await {
                eprintln!("client gone: {e}");
            }
            let _ = w.ep_close(ep, CloseMode::Flush).await;
        });
    }
}

/// Echoes `ep`'s frames until an empty one.
async fn echo(w: &SharedWorker, ep: Ep) -> Result<(), Error> {
    loop {
        let len = read_len(w, ep).await?;
        if len == 0 {
            return Ok(());
        }
        let (_, data) = w
            .stream_recv_all(ep, vec![0u8; len])?
            .await
            .map_err(|e| e.error)?;
        write_frame(w, ep, data).await?;
    }
}

/// Connects to the server at `addr`, sends each word as a frame and
/// returns the answers in order; then says goodbye (an empty frame).
pub(crate) async fn client(
    w: &SharedWorker,
    addr: SocketAddr,
    words: &[String],
) -> Result<Vec<String>, Error> {
    let ep = w
        .connect_to(addr, EpParams::new().err_mode(ErrMode::Peer))
        .await?;
    let mut answers = Vec::new();
    for word in words {
        write_frame(w, ep, word.as_bytes().to_vec()).await?;
        let len = read_len(w, ep).await?;
        let (_, data) = w
            .stream_recv_all(ep, vec![0u8; len])?
            .await
            .map_err(|e| e.error)?;
        answers.push(String::from_utf8(data)?);
    }
    write_frame(w, ep, Vec::new()).await?;
    w.ep_close(ep, CloseMode::Flush).await?;
    Ok(answers)
}

/// Reads a frame's length.
async fn read_len(w: &SharedWorker, ep: Ep) -> Result<usize, Error> {
    let (_, b) = w
        .stream_recv_all(ep, vec![0u8; 4])?
        .await
        .map_err(|e| e.error)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// Writes `data` as one frame.
async fn write_frame(w: &SharedWorker, ep: Ep, data: Vec<u8>) -> Result<(), Error> {
    let len = u32::try_from(data.len())?.to_le_bytes().to_vec();
    w.stream_send(ep, len)?.await.map_err(|e| e.error)?;
    if !data.is_empty() {
        w.stream_send(ep, data)?.await.map_err(|e| e.error)?;
    }
    Ok(())
}
