//! A queue pair's connection through its phases: TCP connect, MPA
//! request and reply, the ready-to-receive message, full operation,
//! lingering after the end.

use std::os::fd::OwnedFd;

use rucx_rdma::{CmEvent, ConnParam, QpState};
use uct::ucs::progress::Readiness;
use uct::ucs::sock;

use super::cm::{self, FrameRead};
use super::qp::{Conn, Env, Failure, Phase, Qp};
use crate::config::Settings;
use crate::wire::fpdu;
use crate::wire::mpa::MpaFrame;

/// Applies the socket options of the settings to a socket not yet
/// connected (the connections a listener accepts inherit them): the
/// congestion control, the segment size cap and the kernel buffer sizes,
/// set before the handshake so that the window scale fits them.
pub(crate) fn preset_socket(s: &Settings, fd: &OwnedFd) -> uct::Result<()> {
    if let Some(cc) = &s.congestion {
        sock::set_congestion(fd, cc)?;
    }
    if s.mss != 0 {
        sock::set_opt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            s.mss as libc::c_int,
            "setsockopt(TCP_MAXSEG)",
        )?;
    }
    s.bufs.apply(fd)?;
    Ok(())
}

/// Sets up an established TCP socket: no Nagle, keepalive and user
/// timeout (so that a vanished peer fails the connection with data in
/// flight or not), and the largest ULPDU that keeps an FPDU within one
/// segment.
pub(crate) fn setup_socket(s: &Settings, fd: &OwnedFd) -> uct::Result<usize> {
    sock::set_opt(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_NODELAY,
        1,
        "setsockopt(TCP_NODELAY)",
    )?;
    s.keepalive.apply(fd)?;
    current_mulpdu(fd)
}

/// The largest ULPDU whose FPDU fits the socket's current TCP segment.
/// Linux starts a connection's segment size at most at half the largest
/// window the peer has advertised, and raises it as the window opens (on
/// loopback: 32768 at setup, 65483 soon after).
fn current_mulpdu(fd: &OwnedFd) -> uct::Result<usize> {
    let mss = sock::get_opt(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_MAXSEG,
        "getsockopt(TCP_MAXSEG)",
    )?;
    Ok(fpdu::mulpdu(mss.max(0) as usize))
}

impl Conn {
    /// Follows the socket's segment size (as siw does for each work
    /// request): called before framing a message longer than one FPDU.
    /// Keeps the last value if the socket cannot tell.
    pub(crate) fn refresh_mulpdu(&mut self) {
        if let Ok(m) = current_mulpdu(&self.fd) {
            self.mulpdu = m;
        }
    }
}

impl Qp {
    /// Handles readiness of the queue pair's socket.
    pub(crate) fn handle(&mut self, env: &mut Env<'_>, r: Readiness) -> usize {
        let Some(conn) = self.conn.as_ref() else {
            return 0;
        };
        let mut work = 0;
        match conn.phase {
            Phase::TcpConnect { .. } => {
                self.on_connected(env);
                work += 1;
            }
            Phase::AwaitReply { .. } => {
                work += self.on_reply_readable(env);
            }
            _ => {}
        }
        let active = self.conn.as_ref().is_some_and(|c| {
            !matches!(c.phase, Phase::TcpConnect { .. } | Phase::AwaitReply { .. })
        });
        if active && (r.is_readable() || r.is_hangup() || r.is_error()) {
            match self.rx_progress(env) {
                Ok(n) => work += n,
                Err(f) => {
                    self.fail(env, f);
                    work += 1;
                }
            }
        }
        work + self.pump(env)
    }

    /// Sends what can be sent, failing the queue pair on errors; keeps the
    /// socket's interest in step.
    pub(crate) fn pump(&mut self, env: &mut Env<'_>) -> usize {
        let mut work = 0;
        for _ in 0..3 {
            match self.tx_progress(env) {
                Ok(n) => {
                    work += n;
                    break;
                }
                Err(f) => self.fail(env, f),
            }
        }
        self.sync_interest(env.events);
        work
    }

    /// The TCP connection of an initiator completed (or failed).
    fn on_connected(&mut self, env: &mut Env<'_>) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        match sock::take_error(&conn.fd) {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => {
                let why = format!("connect {}: {e}", conn.peer);
                self.fail(env, Failure::ConnectFailed(why));
                return;
            }
        }
        let mulpdu = match setup_socket(&env.shared.settings, &conn.fd) {
            Ok(m) => m,
            Err(e) => {
                self.fail(env, Failure::ConnectFailed(e.to_string()));
                return;
            }
        };
        conn.mulpdu = mulpdu;
        let Phase::TcpConnect { request } = std::mem::replace(&mut conn.phase, Phase::Rts) else {
            return;
        };
        self.tx.queue_raw(&request.encode());
        conn.phase = Phase::AwaitReply {
            request,
            buf: Vec::new(),
        };
    }

    /// Reads the MPA reply (initiator).
    fn on_reply_readable(&mut self, env: &mut Env<'_>) -> usize {
        let Some(conn) = self.conn.as_mut() else {
            return 0;
        };
        let Phase::AwaitReply { buf, .. } = &mut conn.phase else {
            return 0;
        };
        let reply = match cm::read_frame(&conn.fd, buf) {
            FrameRead::Pending => return 0,
            FrameRead::Failed(why) => {
                self.fail(env, Failure::ConnectFailed(why));
                return 1;
            }
            FrameRead::Done(f) => f,
        };
        let Phase::AwaitReply { request, .. } = std::mem::replace(&mut conn.phase, Phase::Rts)
        else {
            return 0;
        };
        if !reply.reply {
            let why = "an MPA request came back instead of a reply".to_string();
            self.fail(env, Failure::ConnectFailed(why));
            return 1;
        }
        if reply.reject {
            self.fail(env, Failure::Rejected(reply.private_data));
            return 1;
        }
        match cm::on_reply(&request, &reply) {
            Ok(agreed) => {
                conn.crc = agreed.crc;
                let own = cm::peer_param(&env.shared.settings, &request);
                self.ord = if agreed.ord == 0 { own.ord } else { agreed.ord };
                self.ird = if agreed.ird == 0 { own.ird } else { agreed.ird };
                self.tx.rtr = agreed.rtr;
                self.state = QpState::Rts;
                self.established = true;
                let param = cm::peer_param(&env.shared.settings, &reply);
                env.out.cm(CmEvent::Established { qp: self.id, param });
            }
            Err(why) => self.fail(env, Failure::ConnectFailed(why)),
        }
        1
    }

    /// Takes over an accepted connection (responder): the reply is sent,
    /// then full operation starts at once, or when the ready-to-receive
    /// message arrives in peer-to-peer mode.
    pub(crate) fn start_accepted(
        &mut self,
        env: &mut Env<'_>,
        fd: OwnedFd,
        peer: std::net::SocketAddr,
        mulpdu: usize,
        request: &MpaFrame,
        param: &ConnParam,
    ) {
        let (reply, agreed) = cm::accept_reply(&env.shared.settings, request, param);
        self.ord = agreed.ord;
        self.ird = agreed.ird;
        self.param = ConnParam {
            private_data: param.private_data.clone(),
            ord: agreed.ord,
            ird: agreed.ird,
        };
        self.tx.queue_raw(&reply.encode());
        let phase = if let Some(rtr) = agreed.rtr {
            self.rx.rtr = Some(rtr);
            self.tx.hold = true;
            self.state = QpState::Connecting;
            Phase::AwaitRtr
        } else {
            self.state = QpState::Rts;
            self.established = true;
            env.out.cm(CmEvent::Established {
                qp: self.id,
                param: self.param.clone(),
            });
            Phase::Rts
        };
        self.conn = Some(Conn {
            fd,
            peer,
            phase,
            crc: agreed.crc,
            mulpdu,
            interest: 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IwarpConfig;
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::time::{Duration, Instant};
    use uct::ucs::sock::Keepalive;

    fn settings(congestion: &'static str) -> Settings {
        let c = IwarpConfig::from_lookup(|v| {
            (v == "RUCX_IWARP_CONGESTION").then(|| congestion.to_string())
        })
        .unwrap();
        Settings::from_config(&c).unwrap()
    }

    /// A loopback connection whose sockets got `s`: (listener, client,
    /// accepted).
    fn connected(s: &Settings) -> (OwnedFd, OwnedFd, OwnedFd) {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let listener = sock::tcp_socket(lo).unwrap();
        preset_socket(s, &listener).unwrap();
        sock::bind(&listener, SocketAddr::new(lo, 0)).unwrap();
        sock::listen(&listener, 1).unwrap();
        let addr = sock::local_addr(&listener).unwrap();
        let client = sock::tcp_socket(lo).unwrap();
        preset_socket(s, &client).unwrap();
        sock::connect(&client, addr).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some((fd, _)) = sock::accept(&listener).unwrap() {
                return (listener, client, fd);
            }
            assert!(Instant::now() < deadline, "no connection on loopback");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn connections_use_the_configured_congestion_control() {
        let (l, c, a) = connected(&settings("reno"));
        for fd in [&l, &c, &a] {
            assert_eq!(sock::congestion(fd).unwrap(), "reno");
        }
        // `system` leaves the kernel's default alone.
        let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
            .unwrap()
            .trim()
            .to_string();
        let (_, c, a) = connected(&settings("system"));
        assert_eq!(sock::congestion(&c).unwrap(), default);
        assert_eq!(sock::congestion(&a).unwrap(), default);
    }

    #[test]
    fn connections_get_the_configured_keepalive_and_user_timeout() {
        let vars = [
            ("RUCX_IWARP_KEEPIDLE", "7s"),
            ("RUCX_IWARP_KEEPINTVL", "3"),
            ("RUCX_IWARP_KEEPCNT", "4"),
            ("RUCX_IWARP_USER_TIMEOUT", "1500ms"),
        ];
        let c = IwarpConfig::from_lookup(|v| {
            vars.iter()
                .find(|(k, _)| *k == v)
                .map(|(_, x)| x.to_string())
        })
        .unwrap();
        let s = Settings::from_config(&c).unwrap();
        let (_, c, a) = connected(&s);
        let want = Keepalive {
            idle: Some(7),
            intvl: 3,
            cnt: 4,
            user_timeout_ms: Some(1500),
        };
        // As the engine sets up both ends of an established connection.
        for fd in [&c, &a] {
            setup_socket(&s, fd).unwrap();
            assert_eq!(Keepalive::of(fd).unwrap(), want);
        }
    }

    #[test]
    fn an_unknown_algorithm_is_an_error_naming_it() {
        let fd = sock::tcp_socket(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        let e = preset_socket(&settings("no_such_cc"), &fd).unwrap_err();
        assert!(e.to_string().contains("no_such_cc"), "{e}");
    }
}
