//! How [`UcpWorker`] makes its endpoint: the parameters of `-e` (peer
//! error mode and a handler that records the failure), and the
//! connection through a listener of `--sockaddr` (the server listens and
//! accepts the one request, the client connects to its socket address).

use super::UcpWorker;
use crate::perf::error::{PerfError, Result};
use rucx_ucp::{ConnRequest, Connecting, EpParams, ErrMode, Listener};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// The failure the endpoint's error handler saw, if it ran.
pub(super) type Reported = Arc<Mutex<Option<String>>>;

/// Connection requests the listener's handler took.
type Requests = Arc<Mutex<Vec<ConnRequest>>>;

/// A listener waiting for the peer.
#[derive(Debug)]
struct Listening {
    listener: Listener,
    requests: Requests,
    accepted: bool,
}

/// Endpoint settings and the state of their making.
#[derive(Debug, Default)]
pub(super) struct EpSetup {
    /// Set by `-e`: endpoints get peer error mode and a handler that
    /// writes here.
    reported: Option<Reported>,
    /// `--sockaddr`: the listener, until the endpoint is there.
    listening: Option<Listening>,
    /// `--sockaddr`: the connect to the peer's listener, until it ends.
    connecting: Option<Connecting>,
}

/// Parameters of the next endpoint: with `-e`, peer error mode and a
/// handler that writes to `reported`.
fn ep_params(reported: &Option<Reported>) -> EpParams {
    match reported {
        None => EpParams::new(),
        Some(reported) => {
            let reported = Arc::clone(reported);
            EpParams::new()
                .err_mode(ErrMode::Peer)
                .on_error(move |_, _, e| {
                    if let Ok(mut r) = reported.lock() {
                        r.get_or_insert_with(|| e.to_string());
                    }
                })
        }
    }
}

impl EpSetup {
    /// What the error handler writes to, for threads that check it too.
    pub(super) fn reported_handle(&self) -> Option<Reported> {
        self.reported.clone()
    }

    /// The failure the error handler reported, if it ran.
    #[inline]
    pub(super) fn reported(&self) -> Result<()> {
        let Some(reported) = &self.reported else {
            return Ok(());
        };
        match reported.lock().ok().and_then(|r| r.clone()) {
            None => Ok(()),
            Some(e) => Err(PerfError::PeerGone(format!(
                "the endpoint's error handler reported: {e}"
            ))),
        }
    }
}

impl UcpWorker {
    /// Endpoints made from now on are in peer error mode with a handler.
    pub(super) fn enable_err_handling_impl(&mut self) {
        self.setup.reported.get_or_insert_with(Reported::default);
    }

    /// The endpoint to the worker with address `remote`, made with the
    /// settings.
    pub(super) fn connect_impl(&mut self, remote: &[u8]) -> Result<()> {
        let made = match self.setup.reported {
            None => self.worker.connect(remote),
            Some(_) => self
                .worker
                .connect_with(remote, ep_params(&self.setup.reported)),
        };
        let ep = made.map_err(|e| PerfError::transport("connect to the peer's worker", e))?;
        self.ep = Some(ep);
        Ok(())
    }

    /// Listens on `ip` and a free port for the peer; returns the port.
    pub(super) fn listen_impl(&mut self, ip: IpAddr) -> Result<u16> {
        let requests = Requests::default();
        let q = Arc::clone(&requests);
        let listener = self
            .worker
            .listen(SocketAddr::new(ip, 0), move |_, req| {
                if let Ok(mut q) = q.lock() {
                    q.push(req);
                }
            })
            .map_err(|e| PerfError::transport("listen for the peer", e))?;
        let port = self
            .worker
            .listener_addr(listener)
            .map_err(|e| PerfError::transport("query the listener's address", e))?
            .port();
        self.setup.listening = Some(Listening {
            listener,
            requests,
            accepted: false,
        });
        Ok(port)
    }

    /// Starts connecting to the peer's listener at `addr`.
    pub(super) fn connect_to_impl(&mut self, addr: SocketAddr) -> Result<()> {
        let params = ep_params(&self.setup.reported);
        let c = self
            .worker
            .connect_start(addr, params)
            .map_err(|e| PerfError::transport("connect to the peer's listener", e))?;
        self.setup.connecting = Some(c);
        Ok(())
    }

    /// Accepts the peer's request (rejecting any other), finishes the
    /// connect; `true` once both are done. The listener closes then.
    pub(super) fn connect_poll_impl(&mut self) -> Result<bool> {
        let UcpWorker {
            worker, ep, setup, ..
        } = self;
        worker.progress();
        if let Some(l) = setup.listening.as_mut() {
            let got = l.requests.lock().map(|mut q| std::mem::take(&mut *q));
            for req in got.unwrap_or_default() {
                if l.accepted {
                    let _ = req.reject();
                    continue;
                }
                let made = worker
                    .accept(req, ep_params(&setup.reported))
                    .map_err(|e| PerfError::transport("accept the peer's connection", e))?;
                *ep = Some(made);
                l.accepted = true;
            }
        }
        if let Some(c) = setup.connecting.as_mut() {
            if let Some(r) = worker.connect_poll(c) {
                setup.connecting = None;
                let made =
                    r.map_err(|e| PerfError::transport("connect to the peer's listener", e))?;
                *ep = Some(made);
            }
        }
        let done = setup.connecting.is_none()
            && setup.listening.as_ref().is_none_or(|l| l.accepted)
            && ep.is_some();
        if done {
            if let Some(l) = setup.listening.take() {
                let _ = worker.listener_close(l.listener);
            }
        }
        Ok(done)
    }
}
