//! Bounded failure detection on a connection: TCP keepalive (idle time,
//! probe interval, probe count) and the user timeout (`TCP_USER_TIMEOUT`:
//! how long sent data may stay unacknowledged before the kernel gives the
//! connection up with `ETIMEDOUT`), and the configuration values that set
//! them (`KEEPCNT`, `USER_TIMEOUT` of the network transports).

use std::os::fd::OwnedFd;
use std::time::Duration;

use super::{get_opt, set_opt};
use crate::config::{ConfigValue, Time};
use crate::{Error, Result};

/// Largest keepalive idle time and interval Linux accepts, seconds
/// (`MAX_TCP_KEEPIDLE`, `MAX_TCP_KEEPINTVL`).
const MAX_KEEP_SECS: u64 = 32767;
/// Largest keepalive probe count Linux accepts (`MAX_TCP_KEEPCNT`).
const MAX_KEEPCNT: u32 = 127;
/// Probes sent before a silent peer is given up, for `auto`.
pub const AUTO_KEEPCNT: u32 = 3;

/// A keepalive probe count: `auto` ([`AUTO_KEEPCNT`]) or 1 to 127.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepCount {
    /// [`AUTO_KEEPCNT`] probes.
    Auto,
    /// This many probes.
    Count(u32),
}

impl KeepCount {
    /// The number of probes.
    pub fn get(self) -> u32 {
        match self {
            KeepCount::Auto => AUTO_KEEPCNT,
            KeepCount::Count(n) => n,
        }
    }
}

impl ConfigValue for KeepCount {
    const KIND: &'static str = "count";
    const SYNTAX: &'static str = "\"auto\" (3) or a number of probes from 1 to 127";

    fn parse(text: &str) -> std::result::Result<Self, String> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(KeepCount::Auto);
        }
        match u32::parse(t) {
            Ok(n) if (1..=MAX_KEEPCNT).contains(&n) => Ok(KeepCount::Count(n)),
            _ => Err(format!("expected auto or 1 to {MAX_KEEPCNT}")),
        }
    }

    fn to_text(&self) -> String {
        match self {
            KeepCount::Auto => "auto".to_string(),
            KeepCount::Count(n) => n.to_string(),
        }
    }
}

/// A user timeout: a time, or `off` (also `0` or `inf`): no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserTimeout(pub Option<Duration>);

impl ConfigValue for UserTimeout {
    const KIND: &'static str = "time";
    const SYNTAX: &'static str =
        "time: <number>[s|ms|us|ns|m] (seconds without a unit), or \"off\" (also 0 or inf)";

    fn parse(text: &str) -> std::result::Result<Self, String> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("off") {
            return Ok(UserTimeout(None));
        }
        let time = Time::parse(t)?;
        Ok(UserTimeout(time.finite().filter(|d| !d.is_zero())))
    }

    fn to_text(&self) -> String {
        match self.0 {
            None => "off".to_string(),
            Some(d) => Time(d).to_text(),
        }
    }
}

/// The failure detection of a connection, checked from configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe, whole seconds; `None`: no
    /// keepalive.
    pub idle: Option<u32>,
    /// Interval between probes, whole seconds.
    pub intvl: u32,
    /// Probes without an answer before the connection fails.
    pub cnt: u32,
    /// `TCP_USER_TIMEOUT`, milliseconds; `None`: the kernel's default
    /// (retransmissions for about 15 minutes).
    pub user_timeout_ms: Option<u32>,
}

/// Whole seconds of `t` (rounded up), checked against Linux's limit.
fn keep_secs(var: &str, t: Duration) -> Result<u32> {
    let secs = t.as_secs() + u64::from(t.subsec_nanos() > 0);
    if secs > MAX_KEEP_SECS {
        return Err(Error::InvalidParam(format!(
            "{var}={}: expected at most {MAX_KEEP_SECS}s",
            Time(t).to_text()
        )));
    }
    Ok(secs.max(1) as u32)
}

impl Keepalive {
    /// From the values of `<prefix>KEEPIDLE` (`inf`: no keepalive),
    /// `<prefix>KEEPINTVL`, `<prefix>KEEPCNT` and `<prefix>USER_TIMEOUT`;
    /// `prefix` (e.g. `"RUCX_TCP_"`) names the variables in errors.
    /// Times round up to what the kernel takes (whole seconds, whole
    /// milliseconds); an infinite interval or a time above the kernel's
    /// limit is an error.
    pub fn from_config(
        prefix: &str,
        idle: Time,
        intvl: Time,
        cnt: KeepCount,
        user_timeout: UserTimeout,
    ) -> Result<Keepalive> {
        let intvl = intvl.finite().ok_or_else(|| {
            Error::InvalidParam(format!("{prefix}KEEPINTVL=inf: expected a finite time"))
        })?;
        let intvl = keep_secs(&format!("{prefix}KEEPINTVL"), intvl)?;
        let idle = match idle.finite() {
            Some(t) => Some(keep_secs(&format!("{prefix}KEEPIDLE"), t)?),
            None => None,
        };
        let user_timeout_ms = match user_timeout.0 {
            None => None,
            Some(t) => {
                let ms = t.as_millis() + u128::from(t.subsec_nanos() % 1_000_000 > 0);
                let ms = u32::try_from(ms).ok().filter(|&m| m <= i32::MAX as u32);
                Some(ms.ok_or_else(|| {
                    Error::InvalidParam(format!(
                        "{prefix}USER_TIMEOUT={}: expected at most {}ms",
                        Time(t).to_text(),
                        i32::MAX
                    ))
                })?)
            }
        };
        Ok(Keepalive {
            idle,
            intvl,
            cnt: cnt.get(),
            user_timeout_ms,
        })
    }

    /// Sets the options on a socket (`SO_KEEPALIVE`, `TCP_KEEPIDLE`,
    /// `TCP_KEEPINTVL`, `TCP_KEEPCNT`, `TCP_USER_TIMEOUT`); what is `None`
    /// is left as the socket has it.
    pub fn apply(&self, fd: &OwnedFd) -> Result<()> {
        use libc::{IPPROTO_TCP, SOL_SOCKET};
        if let Some(idle) = self.idle {
            set_opt(
                fd,
                SOL_SOCKET,
                libc::SO_KEEPALIVE,
                1,
                "setsockopt(SO_KEEPALIVE)",
            )?;
            let int = |v: u32| v as libc::c_int;
            set_opt(
                fd,
                IPPROTO_TCP,
                libc::TCP_KEEPIDLE,
                int(idle),
                "setsockopt(TCP_KEEPIDLE)",
            )?;
            let (intvl, cnt) = (int(self.intvl), int(self.cnt));
            set_opt(
                fd,
                IPPROTO_TCP,
                libc::TCP_KEEPINTVL,
                intvl,
                "setsockopt(TCP_KEEPINTVL)",
            )?;
            set_opt(
                fd,
                IPPROTO_TCP,
                libc::TCP_KEEPCNT,
                cnt,
                "setsockopt(TCP_KEEPCNT)",
            )?;
        }
        if let Some(ms) = self.user_timeout_ms {
            let ms = ms as libc::c_int;
            set_opt(
                fd,
                IPPROTO_TCP,
                libc::TCP_USER_TIMEOUT,
                ms,
                "setsockopt(TCP_USER_TIMEOUT)",
            )?;
        }
        Ok(())
    }

    /// What a socket has set (with `getsockopt`): `idle` is `None` when
    /// `SO_KEEPALIVE` is off, `user_timeout_ms` when it is 0.
    pub fn of(fd: &OwnedFd) -> Result<Keepalive> {
        use libc::{IPPROTO_TCP, SOL_SOCKET};
        let on = get_opt(
            fd,
            SOL_SOCKET,
            libc::SO_KEEPALIVE,
            "getsockopt(SO_KEEPALIVE)",
        )? != 0;
        let idle = get_opt(
            fd,
            IPPROTO_TCP,
            libc::TCP_KEEPIDLE,
            "getsockopt(TCP_KEEPIDLE)",
        )?;
        let intvl = get_opt(
            fd,
            IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            "getsockopt(TCP_KEEPINTVL)",
        )?;
        let cnt = get_opt(
            fd,
            IPPROTO_TCP,
            libc::TCP_KEEPCNT,
            "getsockopt(TCP_KEEPCNT)",
        )?;
        let ut = get_opt(
            fd,
            IPPROTO_TCP,
            libc::TCP_USER_TIMEOUT,
            "getsockopt(TCP_USER_TIMEOUT)",
        )?;
        let u = |v: libc::c_int| v.max(0) as u32;
        Ok(Keepalive {
            idle: on.then_some(u(idle)),
            intvl: u(intvl),
            cnt: u(cnt),
            user_timeout_ms: (ut > 0).then_some(u(ut)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn t(s: &str) -> Time {
        Time::parse(s).unwrap()
    }

    #[test]
    fn values_parse() {
        assert_eq!(KeepCount::parse("auto"), Ok(KeepCount::Auto));
        assert_eq!(KeepCount::parse("5"), Ok(KeepCount::Count(5)));
        assert_eq!(KeepCount::Auto.get(), AUTO_KEEPCNT);
        for bad in ["", "0", "128", "-1", "many", "3s"] {
            assert!(KeepCount::parse(bad).is_err(), "{bad:?}");
        }
        for off in ["off", "OFF", "0", "0s", "inf"] {
            assert_eq!(UserTimeout::parse(off), Ok(UserTimeout(None)), "{off:?}");
        }
        let ut = UserTimeout::parse("30s").unwrap();
        assert_eq!(ut, UserTimeout(Some(Duration::from_secs(30))));
        assert_eq!(UserTimeout::parse(&ut.to_text()), Ok(ut));
        for bad in ["", "soon", "5x", "-1s"] {
            assert!(UserTimeout::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn checked_from_config() {
        let k = Keepalive::from_config(
            "RUCX_X_",
            t("10s"),
            t("1500ms"),
            KeepCount::Auto,
            UserTimeout(Some(Duration::from_micros(2500))),
        )
        .unwrap();
        assert_eq!(k.idle, Some(10));
        assert_eq!(k.intvl, 2, "rounded up");
        assert_eq!(k.cnt, 3);
        assert_eq!(k.user_timeout_ms, Some(3), "rounded up");
        let off = Keepalive::from_config(
            "P_",
            Time::INF,
            t("2s"),
            KeepCount::Count(9),
            UserTimeout(None),
        );
        assert_eq!(off.unwrap().idle, None);
        let err =
            Keepalive::from_config("P_", t("1s"), Time::INF, KeepCount::Auto, UserTimeout(None))
                .unwrap_err();
        assert!(err.to_string().contains("P_KEEPINTVL"), "{err}");
        let err = Keepalive::from_config(
            "P_",
            t("40000s"),
            t("1s"),
            KeepCount::Auto,
            UserTimeout(None),
        )
        .unwrap_err();
        assert!(err.to_string().contains("P_KEEPIDLE"), "{err}");
        let long = UserTimeout(Some(Duration::from_secs(30 * 86400)));
        let err =
            Keepalive::from_config("P_", t("1s"), t("1s"), KeepCount::Auto, long).unwrap_err();
        assert!(err.to_string().contains("P_USER_TIMEOUT"), "{err}");
    }

    #[test]
    fn set_and_read_back() {
        let fd = super::super::tcp_socket(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        let k = Keepalive {
            idle: Some(7),
            intvl: 3,
            cnt: 4,
            user_timeout_ms: Some(12_000),
        };
        k.apply(&fd).unwrap();
        assert_eq!(Keepalive::of(&fd).unwrap(), k);
    }
}
