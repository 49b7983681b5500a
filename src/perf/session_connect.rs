//! Steps 1 and 2 of a run between two processes, and the loopback's
//! endpoint: the worker with its settings (`-e`), the exposed buffer, the
//! [`Wireup`] exchange and the endpoint, made from the peer's worker
//! address or, with `--sockaddr`, through a listener of the server.
//!
//! With `--sockaddr` the server listens on the address the client reached
//! over the bootstrap and a free port, and sends the port in its wireup
//! (with no worker address); the client connects to that socket address.
//! A side that fails to make the endpoint then sends an abort frame rather
//! than a failed status, so that a server still waiting for the request
//! stops at once.

use super::{no_progress, peer_outcome, SETUP_TIMEOUT};
use crate::perf::bootstrap::{Bootstrap, FrameKind, Wireup};
use crate::perf::error::{PerfError, Result};
use crate::perf::params::TestParams;
use crate::perf::runner::{LoopState, Side};
use crate::perf::worker::{Exposed, PerfWorker};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// How often a side waiting for its endpoint looks at the bootstrap.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// Steps 1 and 2: the local setup with its outcome to the peer (`what`
/// names the step in the peer's failure), then the wireups and the
/// endpoint; the connected worker and its loop state.
pub(super) fn set_up<W: PerfWorker>(
    boot: &mut Bootstrap,
    params: &TestParams,
    side: Side,
    what: &str,
    make_worker: impl FnOnce() -> Result<W>,
) -> Result<(W, LoopState<W::Req>)> {
    let local = local_setup(params, side, boot.local_ip(), make_worker);
    let (mut w, st, wireup) = match local {
        Ok(setup) => setup,
        Err(e) => {
            let _ = boot.send_outcome(FrameKind::Status, Err(e.to_string()));
            return Err(e);
        }
    };
    boot.send_outcome(FrameKind::Status, Ok(()))?;
    peer_outcome(boot, what, &mut no_progress)?;
    wire_up(boot, &mut w, params, side, &wireup)?;
    Ok((w, st))
}

/// Step 1's local part: the worker with the settings of `params`, the
/// loop state and the wireup to send. A `--sockaddr` server listens on
/// `listen_ip` already.
pub(super) fn local_setup<W: PerfWorker>(
    params: &TestParams,
    side: Side,
    listen_ip: IpAddr,
    make_worker: impl FnOnce() -> Result<W>,
) -> Result<(W, LoopState<W::Req>, Wireup)> {
    let mut w = make_worker()?;
    if params.err_handling {
        w.enable_err_handling()?;
    }
    set_layout(&mut w, params)?;
    let st = LoopState::<W::Req>::new(params)?;
    let mut wireup = Wireup::default();
    if !params.sockaddr {
        wireup.address = w.address()?;
    } else if side == Side::Server {
        wireup.listen_port = w.listen(listen_ip)?;
    }
    if let Some(len) = st.exposed_len() {
        let e = expose(&mut w, len)?;
        (wireup.rkey, wireup.recv_buffer) = (e.rkey, e.addr);
    }
    Ok((w, st, wireup))
}

/// Step 2: the wireups both ways, the endpoint, the peer's buffer for a
/// one-sided test, and the outcome of both sides.
pub(super) fn wire_up<W: PerfWorker>(
    boot: &mut Bootstrap,
    w: &mut W,
    params: &TestParams,
    side: Side,
    wireup: &Wireup,
) -> Result<()> {
    boot.send(FrameKind::Wireup, &wireup.encode())?;
    let remote = boot
        .recv(FrameKind::Wireup, SETUP_TIMEOUT, &mut no_progress)
        .and_then(|p| Wireup::decode(&p))?;
    let one_sided = params.test.info().command.is_one_sided();
    let made = connect(boot, w, params.sockaddr, side, &remote)
        .and_then(|()| set_remote(w, one_sided, &remote));
    if let Err(e) = made {
        if params.sockaddr {
            if !matches!(e, PerfError::PeerAborted(_) | PerfError::PeerGone(_)) {
                boot.abort(&e.to_string());
            }
        } else {
            let _ = boot.send_outcome(FrameKind::Status, Err(e.to_string()));
        }
        return Err(e);
    }
    boot.send_outcome(FrameKind::Status, Ok(()))?;
    peer_outcome(boot, "connection", &mut || {
        w.progress();
        Ok(())
    })
}

/// The endpoint of a loopback run: to the worker itself, from its address
/// or through a listener on 127.0.0.1 (`--sockaddr`); and the exposed
/// buffer as the target of a one-sided test.
pub(super) fn loopback_connect<W: PerfWorker>(
    w: &mut W,
    st: &LoopState<W::Req>,
    params: &TestParams,
) -> Result<()> {
    if params.err_handling {
        w.enable_err_handling()?;
    }
    set_layout(w, params)?;
    if params.sockaddr {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let port = w.listen(ip)?;
        w.connect_to(SocketAddr::new(ip, port))?;
        let deadline = Instant::now() + SETUP_TIMEOUT;
        while !w.connect_poll()? {
            if Instant::now() >= deadline {
                return Err(PerfError::Timeout(
                    "no connection through the listener".into(),
                ));
            }
        }
    } else {
        let address = w.address()?;
        w.connect(&address)?;
    }
    if let Some(len) = st.exposed_len() {
        let exposed = expose(w, len)?;
        w.set_remote(exposed.addr, &exposed.rkey)?;
    }
    Ok(())
}

/// Exposes `len` bytes for the peer's one-sided operations.
fn expose<W: PerfWorker>(w: &mut W, len: usize) -> Result<Exposed> {
    let exposed = w.expose(len)?;
    if exposed.addr == 0 || exposed.rkey.is_empty() {
        return Err(PerfError::Params(
            "the exposed buffer has no address or no key".into(),
        ));
    }
    Ok(exposed)
}

/// Makes the endpoint to the peer of `remote`.
fn connect<W: PerfWorker>(
    boot: &mut Bootstrap,
    w: &mut W,
    sockaddr: bool,
    side: Side,
    remote: &Wireup,
) -> Result<()> {
    if !sockaddr {
        if remote.address.is_empty() {
            return Err(PerfError::Protocol("wireup: empty worker address".into()));
        }
        return w.connect(&remote.address);
    }
    if !remote.address.is_empty() {
        return Err(PerfError::Protocol(
            "wireup: a worker address in a run through a listener".into(),
        ));
    }
    if side == Side::Client {
        if remote.listen_port == 0 {
            return Err(PerfError::Protocol(
                "wireup: the server sent no listener port".into(),
            ));
        }
        w.connect_to(SocketAddr::new(boot.peer_ip(), remote.listen_port))?;
    }
    // Both progress until the endpoint is there; a peer that failed
    // aborts or goes away.
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut looked = Instant::now();
    while !w.connect_poll()? {
        let now = Instant::now();
        if now.duration_since(looked) >= LOOK_EVERY {
            looked = now;
            boot.check_alive()?;
            if now >= deadline {
                return Err(PerfError::Timeout(format!(
                    "no connection through the listener with {}",
                    boot.peer()
                )));
            }
        }
    }
    Ok(())
}

/// For a one-sided test, takes the peer's exposed buffer as the target.
fn set_remote<W: PerfWorker>(w: &mut W, one_sided: bool, remote: &Wireup) -> Result<()> {
    if one_sided {
        if remote.rkey.is_empty() {
            return Err(PerfError::Protocol(
                "the peer exposed no buffer for a one-sided test".into(),
            ));
        }
        w.set_remote(remote.recv_buffer, &remote.rkey)?;
    }
    Ok(())
}

/// The data layouts of `-D`: iovecs whose entries are the `-s` sizes.
fn set_layout<W: PerfWorker>(w: &mut W, params: &TestParams) -> Result<()> {
    let sizes = || params.msg_sizes.clone();
    w.set_iov(params.iov.0.then(sizes), params.iov.1.then(sizes))?;
    w.am_expect(params.message_size(), params.validate)
}
