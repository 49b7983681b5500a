//! `RUCX_CMA_*` options, and the limits derived from them.

use uct::ucs;
use uct::ucs::config::{ConfigValue, MemUnits};
use uct::ucs::{Error, Result};

/// `SEG_SIZE` when set to `auto`.
const DEFAULT_SEG: usize = 512 << 10;

ucs::config_table! {
    /// Options of the cross-memory-attach transport, from `RUCX_CMA_*`.
    pub struct CmaConfig in CMA_TABLE ("cma", "CMA_") {
        /// Largest number of bytes one process_vm_readv/writev call moves.
        /// A larger put or get takes several calls, all within the
        /// operation (which returns when the whole copy is done); a smaller
        /// value bounds the time spent in the kernel per call. auto is
        /// 512k, inf is unlimited.
        SEG_SIZE seg_size: MemUnits = "512k",
        /// Most entries in the local iov of a put or get (capped by the
        /// system's IOV_MAX).
        MAX_IOV max_iov: usize = "16",
    }
}

/// Sizes an iface works with, checked and derived from a [`CmaConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Most bytes per system call, at least 1.
    pub(crate) seg_size: usize,
    /// Most local iov entries, from 1 to [`iov_max`].
    pub(crate) max_iov: usize,
}

/// The system's limit of iovec entries per call (`IOV_MAX`, 1024 on Linux).
pub(crate) fn iov_max() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_IOV_MAX) };
    match usize::try_from(n) {
        Ok(n) if n > 0 => n,
        _ => libc::UIO_MAXIOV as usize,
    }
}

impl Limits {
    /// `InvalidParam` for a segment or iov count of 0.
    pub(crate) fn from_config(c: &CmaConfig) -> Result<Limits> {
        let seg_size = c.seg_size.usize_or(DEFAULT_SEG).min(isize::MAX as usize);
        if seg_size == 0 {
            return Err(Error::InvalidParam(format!(
                "RUCX_CMA_SEG_SIZE={}: expected at least 1 byte",
                c.seg_size.to_text()
            )));
        }
        if c.max_iov == 0 {
            return Err(Error::InvalidParam(
                "RUCX_CMA_MAX_IOV=0: expected at least 1".into(),
            ));
        }
        Ok(Limits {
            seg_size,
            max_iov: c.max_iov.min(iov_max()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(var: &'static str, value: &'static str) -> Result<Limits> {
        let c = CmaConfig::from_lookup(|v| (v == var).then(|| value.to_string()))?;
        Limits::from_config(&c)
    }

    #[test]
    fn defaults_parse() {
        CMA_TABLE.check_defaults().unwrap();
        assert_eq!(CMA_TABLE.prefix, "CMA_");
        let l = Limits::from_config(&CmaConfig::default()).unwrap();
        assert_eq!(
            l,
            Limits {
                seg_size: 512 << 10,
                max_iov: 16
            }
        );
    }

    #[test]
    fn values_are_checked_and_capped() {
        assert_eq!(with("RUCX_CMA_SEG_SIZE", "4k").unwrap().seg_size, 4096);
        assert_eq!(
            with("RUCX_CMA_SEG_SIZE", "auto").unwrap().seg_size,
            DEFAULT_SEG
        );
        assert_eq!(
            with("RUCX_CMA_SEG_SIZE", "inf").unwrap().seg_size,
            isize::MAX as usize
        );
        assert!(with("RUCX_CMA_SEG_SIZE", "0").is_err());
        assert!(with("RUCX_CMA_SEG_SIZE", "lots").is_err());
        assert!(with("RUCX_CMA_MAX_IOV", "0").is_err());
        assert_eq!(
            with("RUCX_CMA_MAX_IOV", "1000000").unwrap().max_iov,
            iov_max()
        );
        assert!(iov_max() >= 16);
    }
}
