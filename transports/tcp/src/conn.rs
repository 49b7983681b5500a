//! A connection between two ifaces: its socket, state, and both halves.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use uct::{EpId, SrcId, Token};

use crate::config::Limits;
use crate::rx::RxState;
use crate::sys::{self, Epoll};
use crate::tx::TxState;
use crate::wire::{Key, MAX_PUTS};

mod more;

pub(crate) use more::{ConnMore, EpList};

/// Interest besides `EPOLLOUT`: incoming bytes, and the peer going away.
const BASE_EVENTS: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnState {
    /// Opened by us; TCP connect in progress.
    Connecting,
    /// Opened by us; hello sent (or being sent), waiting for the answer.
    AwaitAccept,
    /// Opened by us and refused: the peer's own connection to us wins and
    /// our endpoints move to it when it arrives. The socket is closed.
    Rejected,
    /// Opened by the peer; waiting for its hello.
    AwaitHello,
    /// Frames flow both ways.
    Open,
}

/// Someone waiting for a connection's backlog to drain and for the
/// acknowledgements of the puts posted before ([`Flush::puts_before`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiter {
    /// `flush(Some(ep), token)`.
    Ep(EpId, Token),
    /// `flush(None, ..)`: index of the iface-wide flush.
    Global(u32),
}

/// A flush waiting on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flush {
    pub(crate) waiter: Waiter,
    /// Puts with a smaller seq must be acknowledged first.
    pub(crate) puts_before: u64,
}

/// A put waiting for its acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PutOut {
    pub(crate) seq: u64,
    pub(crate) ep: EpId,
    /// `None` once reported (canceled with its endpoint).
    pub(crate) token: Option<Token>,
}

/// One TCP connection. What few connections use is out of line (see
/// `more.rs`); [`tests::conn_stays_small`] bounds its size.
#[derive(Debug)]
pub(crate) struct Conn {
    fd: Option<OwnedFd>,
    /// The peer iface's key (see [`crate::wire::key`]) once known
    /// (`keyed`); before, the address of the socket's peer. Kept in a key,
    /// the shorter form of an address; only messages use the address.
    peer: Key,
    keyed: bool,
    /// This connection's epoll data.
    pub(crate) tag: u64,
    pub(crate) state: ConnState,
    /// Bytes of the iface's hello (sent first on a connection we opened)
    /// still to send.
    hello_left: u16,
    pub(crate) tx: TxState,
    pub(crate) rx: RxState,
    out_armed: bool,
    /// Endpoints sending on it.
    pub(crate) eps: EpList,
    /// Pending tokens, flushes and puts; `None` while all are empty.
    more: Option<Box<ConnMore>>,
    /// Whether it is in the iface's list of connections holding buffers.
    pub(crate) listed: bool,
    /// Whether it received or sent since the last sweep of that list.
    pub(crate) active: bool,
    /// The iface's [`TcpIface::epoch`](crate::iface::TcpIface) when a send
    /// was last written straight to its socket.
    pub(crate) wrote_in: u8,
}

impl Conn {
    /// A connection we opened to the iface `key` at `peer`; the iface's
    /// hello of `hello_len` bytes goes first once connected.
    pub(crate) fn connector(
        fd: OwnedFd,
        peer: SocketAddr,
        key: Key,
        hello_len: usize,
        connected: bool,
        limits: &Limits,
    ) -> Conn {
        let rx = RxState::new(limits.rx_buf, false);
        let mut c = Conn::new(fd, peer, limits.tx_buf, rx);
        c.set_key(key);
        // A hello is at most HELLO_MAX bytes.
        c.hello_left = u16::try_from(hello_len).unwrap_or(u16::MAX);
        c.state = if connected {
            ConnState::AwaitAccept
        } else {
            ConnState::Connecting
        };
        c
    }

    /// A connection the peer opened to us.
    pub(crate) fn acceptor(fd: OwnedFd, peer: SocketAddr, limits: &Limits) -> Conn {
        let rx = RxState::new(limits.rx_buf, true);
        Conn::new(fd, peer, limits.tx_buf, rx)
    }

    fn new(fd: OwnedFd, peer: SocketAddr, tx_cap: usize, rx: RxState) -> Conn {
        Conn {
            fd: Some(fd),
            peer: crate::wire::key(peer),
            keyed: false,
            tag: 0,
            state: ConnState::AwaitHello,
            hello_left: 0,
            tx: TxState::new(tx_cap),
            rx,
            out_armed: false,
            eps: EpList::Empty,
            more: None,
            listed: false,
            active: false,
            wrote_in: u8::MAX,
        }
    }

    /// Its id as a source of messages: its slot and the low 16 bits of the
    /// slot's generation, both taken from its epoll data.
    pub(crate) fn src(&self) -> SrcId {
        let gen = (self.tag >> 32) as u32 & 0xffff;
        SrcId((gen << 16) | self.tag as u32)
    }

    /// The peer iface's key, once known.
    pub(crate) fn key(&self) -> Option<Key> {
        self.keyed.then_some(self.peer)
    }

    /// Records the peer iface's key; messages then name its address.
    pub(crate) fn set_key(&mut self, key: Key) {
        self.peer = key;
        self.keyed = true;
    }

    /// The peer's address, for messages: the peer iface's listening
    /// address once known, else the address of the socket's peer.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer.addr()
    }

    pub(crate) fn raw_fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// The socket, if frames may be written to it now.
    pub(crate) fn open_fd(&self) -> Option<RawFd> {
        match self.state {
            ConnState::Open => self.raw_fd(),
            _ => None,
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.state == ConnState::Open
    }

    /// Its queues, if any is in use.
    pub(crate) fn queues(&self) -> Option<&ConnMore> {
        self.more.as_deref()
    }

    /// Its queues, if any is in use, to change or drain.
    pub(crate) fn queues_mut(&mut self) -> Option<&mut ConnMore> {
        self.more.as_deref_mut()
    }

    /// Its queues, allocated on first use.
    pub(crate) fn more(&mut self) -> &mut ConnMore {
        self.more.get_or_insert_with(Box::default)
    }

    /// Takes its queues (the connection is going away).
    pub(crate) fn take_queues(&mut self) -> ConnMore {
        self.more.take().map(|m| *m).unwrap_or_default()
    }

    /// Number of pending tokens.
    pub(crate) fn pending_len(&self) -> usize {
        self.queues().map_or(0, |m| m.pending.len())
    }

    /// Number of our puts not yet acknowledged.
    pub(crate) fn puts_len(&self) -> usize {
        self.queues().map_or(0, |m| m.puts.len())
    }

    /// The next pending token, taken off its queue.
    pub(crate) fn pop_pending(&mut self) -> Option<(EpId, Token)> {
        self.queues_mut()?.pending.pop_front()
    }

    /// Whether posted work can go out now: open with an empty backlog
    /// and room for another put.
    pub(crate) fn is_free(&self) -> bool {
        self.is_open() && !self.tx.has_backlog() && self.puts_len() < MAX_PUTS
    }

    /// Whether everything posted on it before `puts_before` is done: the
    /// backlog drained and those puts acknowledged.
    pub(crate) fn flushed(&self, puts_before: u64) -> bool {
        let first = self.queues().and_then(|m| m.puts.front());
        !self.tx.has_backlog() && first.is_none_or(|p| p.seq >= puts_before)
    }

    /// Whether a flush must wait for it.
    pub(crate) fn busy(&self) -> bool {
        self.tx.has_backlog() || self.puts_len() > 0
    }

    /// A flush of everything posted on it so far.
    pub(crate) fn flush_mark(&self, waiter: Waiter) -> Flush {
        Flush {
            waiter,
            puts_before: self.queues().map_or(0, |m| m.put_seq),
        }
    }

    fn wants_out(&self) -> bool {
        match self.state {
            ConnState::Connecting => true,
            ConnState::AwaitAccept => self.hello_left > 0,
            ConnState::Open => self.tx.has_backlog(),
            ConnState::Rejected | ConnState::AwaitHello => false,
        }
    }

    /// Epoll interest for the current state.
    pub(crate) fn events(&self) -> u32 {
        BASE_EVENTS
            | if self.wants_out() {
                libc::EPOLLOUT as u32
            } else {
                0
            }
    }

    /// Registers the socket with `epoll`.
    pub(crate) fn register(&mut self, epoll: &Epoll) -> uct::Result<()> {
        self.out_armed = self.wants_out();
        match self.raw_fd() {
            Some(fd) => epoll.add(fd, self.events(), self.tag),
            None => Ok(()),
        }
    }

    /// Watches `EPOLLOUT` exactly when something waits to be written.
    pub(crate) fn sync_interest(&mut self, epoll: &Epoll) -> io::Result<()> {
        let want = self.wants_out();
        if want != self.out_armed {
            if let Some(fd) = self.raw_fd() {
                epoll.modify(fd, self.events(), self.tag)?;
            }
            self.out_armed = want;
        }
        Ok(())
    }

    /// The result of the non-blocking connect, once the socket reports.
    pub(crate) fn finish_connect(&mut self) -> io::Result<()> {
        let fd = self.fd.as_ref().ok_or(io::ErrorKind::NotConnected)?;
        match sys::take_error(fd)? {
            Some(e) => Err(e),
            None => {
                self.state = ConnState::AwaitAccept;
                Ok(())
            }
        }
    }

    /// Writes what is left of `hello`, the iface's hello.
    pub(crate) fn send_hello(&mut self, hello: &[u8]) -> io::Result<()> {
        if self.hello_left > 0 {
            let fd = self.raw_fd().ok_or(io::ErrorKind::NotConnected)?;
            let from = hello.len().saturating_sub(usize::from(self.hello_left));
            let sent = sys::send(fd, &hello[from..])?;
            let sent = u16::try_from(sent).unwrap_or(u16::MAX);
            self.hello_left = self.hello_left.saturating_sub(sent);
        }
        Ok(())
    }

    /// Bytes of heap memory its buffers (receive buffer, backlog) and the
    /// box of its queues hold; what the queues hold is not counted.
    pub(crate) fn held(&self) -> usize {
        let more = self.more.as_ref().map_or(0, |_| size_of::<ConnMore>());
        self.rx.held() + self.tx.held() + more
    }

    /// Frees the buffers that hold nothing, and the queues if all are
    /// empty. Returns whether none is held.
    pub(crate) fn release(&mut self) -> bool {
        let rx = self.rx.release();
        let tx = self.tx.release();
        if self.more.as_ref().is_some_and(|m| m.is_idle()) {
            self.more = None;
        }
        rx && tx && self.more.is_none()
    }

    /// The socket, for tests that read its options.
    #[cfg(test)]
    pub(crate) fn fd(&self) -> Option<&OwnedFd> {
        self.fd.as_ref()
    }

    /// Closes the socket (the connection object may live on).
    pub(crate) fn close_socket(&mut self) {
        self.fd = None;
        self.out_armed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every connection pays for its `Conn`: it stays this small.
    #[test]
    fn conn_stays_small() {
        let size = size_of::<Conn>();
        assert!(size <= CONN_SIZE_MAX, "Conn is {size} bytes");
    }

    const CONN_SIZE_MAX: usize = 160;
}
