//! Non-blocking TCP sockets (IPv4 and IPv6) and epoll, each libc call
//! behind a small safe wrapper (for the network transports: tcp, iwarp).
//!
//! * `addr.rs`: socket addresses to and from `sockaddr_storage`;
//! * `keepalive.rs`: keepalive and user timeout of a connection, and their
//!   configuration values.
//!
//! Setup calls return [`Error`] naming the operation. The data-path
//! calls (`send`, `writev`, `recv`) return `io::Result` with "would block"
//! folded into the value, so that the hot path neither allocates nor builds
//! an error for back-pressure.

mod addr;
mod keepalive;

use std::io;
use std::mem;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::{Error, Result};
use addr::{from_sockaddr, to_sockaddr};

pub use keepalive::{KeepCount, Keepalive, UserTimeout, AUTO_KEEPCNT};

/// Turns a libc return value of -1 into the current `errno`.
macro_rules! syscall {
    ($call:expr) => {{
        let res = $call;
        if res == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}

/// Flags of every data-path send: never block, never raise `SIGPIPE`.
const SEND_FLAGS: libc::c_int = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;

/// A new non-blocking, close-on-exec TCP socket for addresses of the
/// family of `ip`. An IPv6 socket is IPv6-only (`IPV6_V6ONLY`): it never
/// carries IPv4 traffic as mapped addresses.
pub fn tcp_socket(ip: IpAddr) -> Result<OwnedFd> {
    let ty = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    let family = if ip.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: socket() takes no pointers.
    let fd =
        syscall!(unsafe { libc::socket(family, ty, 0) }).map_err(|e| Error::io("socket", e))?;
    // SAFETY: fd was just returned by socket() and nobody else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if ip.is_ipv6() {
        set_opt(
            &fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            1,
            "setsockopt(IPV6_V6ONLY)",
        )?;
    }
    Ok(fd)
}

/// Sets an integer socket option.
pub fn set_opt(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    what: &'static str,
) -> Result<()> {
    // SAFETY: the pointer and length describe `value`, alive for the call.
    syscall!(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
    .map_err(|e| Error::io(what, e))
}

/// Reads an integer socket option.
pub fn get_opt(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    what: &'static str,
) -> Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the pointers describe `value` and `len`, alive for the call.
    syscall!(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    })
    .map_err(|e| Error::io(what, e))?;
    Ok(value)
}

/// Kernel buffer sizes of a socket (`SO_SNDBUF`, `SO_RCVBUF`) as
/// configured; `None` leaves Linux's autotuning alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufSizes {
    /// `SO_SNDBUF`.
    pub snd: Option<libc::c_int>,
    /// `SO_RCVBUF`.
    pub rcv: Option<libc::c_int>,
}

impl BufSizes {
    /// From two configuration values (`auto` or a size, capped at
    /// `i32::MAX`).
    pub fn from_config(snd: crate::config::MemUnits, rcv: crate::config::MemUnits) -> BufSizes {
        let size =
            |v: crate::config::MemUnits| v.bytes().map(|n| n.min(i32::MAX as u64) as libc::c_int);
        BufSizes {
            snd: size(snd),
            rcv: size(rcv),
        }
    }

    /// Sets the sizes that are not `None` (best before `connect` or
    /// `listen`, so that the window scale fits them).
    pub fn apply(&self, fd: &OwnedFd) -> Result<()> {
        if let Some(n) = self.snd {
            set_opt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                n,
                "setsockopt(SO_SNDBUF)",
            )?;
        }
        if let Some(n) = self.rcv {
            set_opt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                n,
                "setsockopt(SO_RCVBUF)",
            )?;
        }
        Ok(())
    }
}

/// Sets the TCP congestion control algorithm of a socket by name
/// (`TCP_CONGESTION`; unprivileged processes may pick those listed in
/// `net.ipv4.tcp_allowed_congestion_control`).
pub fn set_congestion(fd: &OwnedFd, name: &str) -> Result<()> {
    // SAFETY: the pointer and length describe `name`, alive for the call.
    syscall!(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    })
    .map(drop)
    .map_err(|e| Error::io(format!("setsockopt(TCP_CONGESTION, {name:?})"), e))
}

/// The TCP congestion control algorithm of a socket.
pub fn congestion(fd: &OwnedFd) -> Result<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the pointers describe `buf` and `len`, alive for the call.
    syscall!(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    })
    .map_err(|e| Error::io("getsockopt(TCP_CONGESTION)", e))?;
    let name = &buf[..(len as usize).min(buf.len())];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Shuts down the sending side of a connection (the peer reads EOF after
/// what was sent). Errors are ignored: the connection is being given up.
pub fn shutdown_write(fd: &OwnedFd) {
    // SAFETY: shutdown() takes no pointers.
    let _ = unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) };
}

/// The pending error of a socket (`SO_ERROR`), cleared by reading it.
pub fn take_error(fd: &OwnedFd) -> io::Result<Option<io::Error>> {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the pointers describe `value` and `len`, alive for the call.
    syscall!(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok((value != 0).then(|| io::Error::from_raw_os_error(value)))
}

/// Binds a socket to an address (of the socket's family).
pub fn bind(fd: &OwnedFd, addr: SocketAddr) -> io::Result<()> {
    let (sa, len) = to_sockaddr(addr);
    // SAFETY: the pointer and length describe `sa`, alive for the call.
    syscall!(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_storage).cast(),
            len,
        )
    })
    .map(drop)
}

/// Starts listening.
pub fn listen(fd: &OwnedFd, backlog: libc::c_int) -> Result<()> {
    // SAFETY: listen() takes no pointers.
    syscall!(unsafe { libc::listen(fd.as_raw_fd(), backlog) })
        .map(drop)
        .map_err(|e| Error::io("listen", e))
}

/// The address a socket is bound to.
pub fn local_addr(fd: &OwnedFd) -> Result<SocketAddr> {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: the pointers describe `sa` and `len`, alive for the call.
    syscall!(unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut sa as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    })
    .map_err(|e| Error::io("getsockname", e))?;
    from_sockaddr(&sa)
        .ok_or_else(|| Error::io("getsockname", io::Error::from(io::ErrorKind::InvalidData)))
}

/// Starts connecting a non-blocking socket: `Ok(true)` when connected at
/// once, `Ok(false)` when the connection completes later.
pub fn connect(fd: &OwnedFd, addr: SocketAddr) -> io::Result<bool> {
    let (sa, len) = to_sockaddr(addr);
    loop {
        // SAFETY: the pointer and length describe `sa`, alive for the call.
        let res = syscall!(unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_storage).cast(),
                len,
            )
        });
        return match res {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// Accepts one connection as a non-blocking, close-on-exec socket; `None`
/// when no connection is waiting.
pub fn accept(fd: &OwnedFd) -> io::Result<Option<(OwnedFd, SocketAddr)>> {
    loop {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid
        // value.
        let mut sa: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: the pointers describe `sa` and `len`, alive for the call.
        let res = syscall!(unsafe {
            libc::accept4(
                fd.as_raw_fd(),
                (&mut sa as *mut libc::sockaddr_storage).cast(),
                &mut len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        });
        return match res {
            Ok(new) => {
                // SAFETY: accept4 returned a new descriptor that nobody
                // else owns.
                let new = unsafe { OwnedFd::from_raw_fd(new) };
                match from_sockaddr(&sa) {
                    Some(peer) => Ok(Some((new, peer))),
                    // Not a TCP/IP peer (cannot happen on an inet
                    // listener): drop it and take the next one.
                    None => continue,
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            // The connection died in the backlog: try the next one.
            Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// Sends what the socket takes of `buf`; 0 when it takes nothing now.
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: the pointer and length describe `buf`, alive for the call.
        let res = syscall!(unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), SEND_FLAGS) });
        return match res {
            Ok(n) => Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// Sends what the socket takes of the ranges in `iov`; 0 when it takes
/// nothing now.
///
/// # Safety
///
/// Every entry of `iov` must describe readable memory, valid for the call.
pub unsafe fn sendv(fd: RawFd, iov: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: sockaddr-less msghdr; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = iov.len() as _;
    loop {
        // SAFETY: msg points at `iov`, whose ranges the caller vouches for;
        // sendmsg only reads them.
        let res = syscall!(unsafe { libc::sendmsg(fd, &msg, SEND_FLAGS) });
        return match res {
            Ok(n) => Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// What a `recv` found.
#[derive(Debug)]
pub enum Recv {
    /// This many bytes arrived (at least one).
    Data(usize),
    /// Nothing to read now.
    WouldBlock,
    /// The peer closed its side.
    Eof,
}

/// Receives into `buf` (which must not be empty).
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<Recv> {
    // SAFETY: the pointer and length describe `buf`, alive and writable
    // for the call.
    unsafe { recv_raw(fd, buf.as_mut_ptr(), buf.len()) }
}

/// Receives into the `len` bytes at `ptr` (`len` not 0).
///
/// # Safety
///
/// `[ptr, ptr + len)` must be valid for writes during the call.
pub unsafe fn recv_raw(fd: RawFd, ptr: *mut u8, len: usize) -> io::Result<Recv> {
    // SAFETY: the caller vouches for the range; recv writes only within it.
    recv_retry(|| unsafe { libc::recv(fd, ptr.cast(), len, libc::MSG_DONTWAIT) })
}

/// Runs a receive call until it is not interrupted, and sorts its result.
fn recv_retry(mut call: impl FnMut() -> isize) -> io::Result<Recv> {
    loop {
        return match syscall!(call()) {
            Ok(0) => Ok(Recv::Eof),
            Ok(n) => Ok(Recv::Data(n as usize)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Recv::WouldBlock),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// Receives into the ranges of `iov` in order.
///
/// # Safety
///
/// Every entry of `iov` must describe memory valid for writes during the
/// call (and not be empty all together).
pub unsafe fn recvv(fd: RawFd, iov: &[libc::iovec]) -> io::Result<Recv> {
    // SAFETY: sockaddr-less msghdr; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: msg points at `iov`, whose ranges the caller vouches for;
    // recvmsg writes only within them.
    recv_retry(|| unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) })
}

/// Looks at the next byte without taking it: whether any data (or EOF) is
/// waiting.
pub fn peek(fd: RawFd) -> io::Result<Recv> {
    let mut b = 0u8;
    let flags = libc::MSG_DONTWAIT | libc::MSG_PEEK;
    // SAFETY: the pointer and length describe `b`, writable for the call.
    recv_retry(|| unsafe { libc::recv(fd, (&mut b as *mut u8).cast(), 1, flags) })
}

/// An `iovec` for a byte slice.
pub fn iovec(buf: &[u8]) -> libc::iovec {
    libc::iovec {
        iov_base: buf.as_ptr().cast_mut().cast(),
        iov_len: buf.len(),
    }
}

/// An epoll instance (level-triggered).
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// A new epoll instance (close-on-exec).
    pub fn new() -> Result<Epoll> {
        // SAFETY: epoll_create1 takes no pointers.
        let fd = syscall!(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })
            .map_err(|e| Error::io("epoll_create1", e))?;
        // SAFETY: fd was just returned by epoll_create1 and nobody else owns it.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Its descriptor, for a caller to sleep on.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: `ev` is alive for the call; epoll copies it.
        syscall!(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Adds `fd` with interest `events`, reported with `data`.
    pub fn add(&self, fd: RawFd, events: u32, data: u64) -> Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, data)
            .map_err(|e| Error::io("epoll_ctl(ADD)", e))
    }

    /// Changes the interest of `fd`.
    pub fn modify(&self, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, data)
    }

    /// Waits up to `timeout_ms` (0: not at all) and fills `events`; returns
    /// how many were filled.
    pub fn wait(
        &self,
        events: &mut [libc::epoll_event],
        timeout_ms: libc::c_int,
    ) -> io::Result<usize> {
        let max = events.len().min(libc::c_int::MAX as usize) as libc::c_int;
        // SAFETY: the pointer and count describe `events`, writable for the
        // call.
        let n = syscall!(unsafe {
            libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms)
        })?;
        Ok(n as usize)
    }
}

/// An empty epoll event, for filling event arrays.
pub const EMPTY_EVENT: libc::epoll_event = libc::epoll_event { events: 0, u64: 0 };
