//! Client–server connections, as UCX's `ucp_listener` and
//! `ucp_ep_create` with a socket address or a connection request.
//!
//! A server's worker listens on a socket address ([`Worker::listen`]); a
//! client connects to it ([`Worker::connect_to`], or without blocking
//! [`Worker::connect_start`]). The two exchange worker addresses through
//! the socket connection manager of the transport layer
//! ([`crate::uct::sockcm`]); the listener's handler gets each client as a
//! [`ConnRequest`] and accepts it on this or another worker of the
//! context ([`Worker::accept`]) or rejects it ([`ConnRequest::reject`]:
//! the client's connect fails with a status of `Rejected`). After that
//! the endpoints are made from the worker addresses as
//! [`Worker::connect`] makes them, so lanes come from the model: two
//! processes of one host that met through a listener talk over shared
//! memory.
//!
//! The listener is polled every few progress calls and its socket is in
//! the worker's event set, so a worker sleeping in `wait_event` wakes for
//! a client. What misbehaving connections get is the connection
//! manager's rule: a bounded wait, a log line and a closed socket.

use super::ep_errors::EpParams;
use super::Worker;
use crate::api::WorkerMut;
use crate::uct::sockcm::{CmClient, CmConfig, CmListener, CmRequest};
use crate::wireup::address::WorkerAddress;
use crate::{Ep, Error, Result};
use std::net::SocketAddr;
use std::time::Duration;

/// A listener's handler: runs after `progress` for each client.
pub type ConnHandler = Box<dyn FnMut(&mut WorkerMut<'_>, ConnRequest) + Send>;

/// Names a listener of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Listener(usize);

/// A listener's state in its worker.
pub(crate) struct ListenerState {
    pub(crate) cm: CmListener,
    /// `None` while it runs.
    handler: Option<ConnHandler>,
}

/// A client that asked to connect: accept it ([`Worker::accept`], on any
/// worker of the context) or reject it. Dropped unanswered, the client
/// sees its connection close.
#[derive(Debug)]
pub struct ConnRequest {
    cm: CmRequest,
    /// The client worker's address.
    client: Vec<u8>,
    client_uuid: u64,
}

impl ConnRequest {
    /// The client's socket address, as the listener saw it.
    pub fn client_addr(&self) -> SocketAddr {
        self.cm.peer()
    }

    /// The uuid of the client's worker.
    pub fn client_uuid(&self) -> u64 {
        self.client_uuid
    }

    /// Rejects the client: its connect fails with [`Error::Transport`]
    /// whose status is `Rejected`.
    pub fn reject(self) -> Result<()> {
        self.cm.reject().map_err(Error::transport)
    }
}

/// A client's connect in progress ([`Worker::connect_start`]).
#[derive(Debug)]
pub struct Connecting {
    cm: CmClient,
    params: Option<EpParams>,
}

impl Connecting {
    /// The local and remote socket addresses of the connect (the
    /// client's end of its handshake connection and the listener's
    /// address); `None` if the socket cannot tell its own.
    pub fn sockaddrs(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.cm.addrs()
    }
}

/// The handshake timeout of listeners and clients (`RUCX_CM_TIMEOUT`
/// would set it; the default for now).
fn cm_config() -> CmConfig {
    CmConfig::default()
}

impl Worker {
    /// Listens on `addr` (IPv4 or IPv6; port 0 picks one, see
    /// [`Worker::listener_addr`]); `on_request` runs after `progress` for
    /// each client that asks to connect.
    pub fn listen(
        &mut self,
        addr: SocketAddr,
        on_request: impl FnMut(&mut WorkerMut<'_>, ConnRequest) + Send + 'static,
    ) -> Result<Listener> {
        let cm = CmListener::bind(addr, cm_config()).map_err(Error::transport)?;
        let fd = cm.fd();
        let slot = self.listeners.iter().position(Option::is_none);
        let st = ListenerState {
            cm,
            handler: Some(Box::new(on_request)),
        };
        let i = match slot {
            Some(i) => {
                self.listeners[i] = Some(st);
                i
            }
            None => {
                self.listeners.push(Some(st));
                self.listeners.len() - 1
            }
        };
        self.watch_listener(i, fd)?;
        Ok(Listener(i))
    }

    /// The socket address `l` listens on.
    pub fn listener_addr(&self, l: Listener) -> Result<SocketAddr> {
        let st = self.listener(l)?;
        st.cm.local_addr().map_err(Error::transport)
    }

    /// Stops listening; handshakes in progress are closed.
    pub fn listener_close(&mut self, l: Listener) -> Result<()> {
        let st = self.listener(l)?;
        let fd = st.cm.fd();
        self.unwatch_listener(fd);
        self.listeners[l.0] = None;
        Ok(())
    }

    fn listener(&self, l: Listener) -> Result<&ListenerState> {
        self.listeners
            .get(l.0)
            .and_then(Option::as_ref)
            .ok_or(Error::InvalidHandle)
    }

    /// Accepts client `req` on this worker: the endpoint to it, made as
    /// [`Worker::connect_with`] makes one, and the client learns this
    /// worker's address.
    ///
    /// A worker keeps one endpoint per peer worker: if this one has an
    /// endpoint to the client's worker already, that is the one returned,
    /// with `params` added to its error handling (as
    /// [`Worker::connect_with`] adds them) once the client has its
    /// answer; a client that left before the answer leaves that endpoint
    /// as it was (an endpoint made for it is closed).
    pub fn accept(&mut self, req: ConnRequest, params: EpParams) -> Result<Ep> {
        let (ep, pending) = match self.core.find_ep(req.client_uuid) {
            Some(id) => (Ep(id), Some(params)),
            None => (self.connect_with(&req.client, params)?, None),
        };
        let addrs = req.cm.local_addr().map(|local| (local, req.cm.peer()));
        if let Err(e) = req.cm.accept(&self.address()) {
            // The client is gone: so is the endpoint made for it.
            if pending.is_none() {
                let _ = self.ep_close(ep);
            }
            return Err(Error::transport(e));
        }
        if let Some(params) = pending {
            self.apply_ep_params(ep, params);
        }
        if let Some((local, peer)) = addrs {
            self.set_sockaddrs(ep, local, peer);
        }
        Ok(ep)
    }

    /// Starts connecting to the listener at `addr`; [`Connecting`] tells
    /// when the endpoint is there ([`Worker::connect_poll`]).
    pub fn connect_start(&mut self, addr: SocketAddr, params: EpParams) -> Result<Connecting> {
        let cfg = cm_config();
        let cm = CmClient::connect(addr, &self.address(), cfg.timeout).map_err(Error::transport)?;
        Ok(Connecting {
            cm,
            params: Some(params),
        })
    }

    /// The endpoint of connect `c` once the server answered: made as
    /// [`Worker::connect_with`] makes one if it accepted; the error if it
    /// rejected, broke the handshake or did not answer in time. `None`
    /// while it has not answered.
    pub fn connect_poll(&mut self, c: &mut Connecting) -> Option<Result<Ep>> {
        let server = match c.cm.poll()? {
            Ok(addr) => addr,
            Err(e) => return Some(Err(Error::transport(e))),
        };
        let params = c.params.take().unwrap_or_default();
        let r = self.connect_with(&server, params);
        if let (Ok(ep), Some((local, remote))) = (&r, c.cm.addrs()) {
            self.set_sockaddrs(*ep, local, remote);
        }
        Some(r)
    }

    fn set_sockaddrs(&mut self, ep: Ep, local: SocketAddr, remote: SocketAddr) {
        if self.core.eps.get(ep.0).is_some() {
            self.core.ep_sockaddrs.insert(ep.0, (local, remote));
        }
    }

    /// The local and remote socket addresses of the handshake that made
    /// `ep` (a client's connect or a listener's accept); `None` for an
    /// endpoint made from a worker address.
    pub fn ep_sockaddrs(&self, ep: Ep) -> Result<Option<(SocketAddr, SocketAddr)>> {
        self.core.eps.get(ep.0).ok_or(Error::InvalidHandle)?;
        Ok(self.core.ep_sockaddrs.get(&ep.0).copied())
    }

    /// Connects to the listener at `addr` and waits, progressing this
    /// worker, until the server answered.
    pub fn connect_to(&mut self, addr: SocketAddr, params: EpParams) -> Result<Ep> {
        let mut c = self.connect_start(addr, params)?;
        loop {
            if let Some(r) = self.connect_poll(&mut c) {
                return r;
            }
            if self.progress() == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Polls the listeners and runs their handlers for the clients that
    /// asked; returns how many connections moved.
    pub(crate) fn poll_listeners(&mut self) -> usize {
        let mut n = 0;
        let mut reqs = Vec::new();
        for i in 0..self.listeners.len() {
            let Some(st) = self.listeners[i].as_mut() else {
                continue;
            };
            n += st.cm.progress(&mut reqs);
            for cm in reqs.drain(..) {
                let client = cm.data().to_vec();
                let uuid = match WorkerAddress::decode(&client) {
                    Ok(a) => a.uuid,
                    Err(e) => {
                        tracing::warn!("listener: {}: bad worker address: {e}", cm.peer());
                        let _ = cm.reject();
                        continue;
                    }
                };
                let req = ConnRequest {
                    cm,
                    client,
                    client_uuid: uuid,
                };
                let Some(mut h) = self.listeners[i].as_mut().and_then(|s| s.handler.take()) else {
                    continue;
                };
                h(&mut WorkerMut::new(self), req);
                // The handler may have closed its own listener.
                if let Some(st) = self.listeners[i].as_mut() {
                    st.handler = Some(h);
                }
            }
        }
        n
    }
}
