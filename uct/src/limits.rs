//! The checks every transport makes before an operation: sizes against the
//! limits of its [`IfaceAttr`](crate::IfaceAttr), iov entry counts, active
//! message ids. Each refuses with the error of [`exceeded`], so that how a limit is refused is decided here alone.
//!
//! `tl` names the transport in the error's text, `what` the quantity
//! checked (e.g. `"am_short payload"`).

use crate::iface::{AmId, Iov, AM_ID_MAX};
use crate::{Error, Result};

/// The error for a request whose `what` is `len` where at most `max` is
/// allowed: the one place that builds it.
pub fn exceeded(tl: &str, what: &str, len: usize, max: usize) -> Error {
    Error::InvalidParam(format!("{tl}: {what} of {len} exceeds {max}"))
}

/// `Ok` if `len <= max`, else [`exceeded`].
pub fn check_len(tl: &str, what: &str, len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(exceeded(tl, what, len, max));
    }
    Ok(())
}

/// Checks the payload of `am_short` against `max_short`.
pub fn check_short(tl: &str, len: usize, max_short: usize) -> Result<()> {
    check_len(tl, "am_short payload", len, max_short)
}

/// Total length of `am_bcopy`'s `parts`, checked against `max_bcopy`.
pub fn bcopy_len(tl: &str, parts: &[&[u8]], max_bcopy: usize) -> Result<usize> {
    let total = parts.iter().fold(0usize, |t, p| t.saturating_add(p.len()));
    check_len(tl, "am_bcopy", total, max_bcopy)?;
    Ok(total)
}

/// Sum of the lengths of `iov`, saturating at `usize::MAX` (larger than
/// any limit).
pub fn iov_len(iov: &[Iov]) -> usize {
    iov.iter().fold(0usize, |t, v| t.saturating_add(v.len))
}

/// Total length of the ranges of `op`: at most `max_iov` entries and
/// `max_len` bytes.
pub fn check_iov(tl: &str, op: &str, iov: &[Iov], max_iov: usize, max_len: usize) -> Result<usize> {
    check_len(tl, &format!("{op} iov count"), iov.len(), max_iov)?;
    let total = iov_len(iov);
    check_len(tl, op, total, max_len)?;
    Ok(total)
}

/// Total length of `am_zcopy`'s iov: `header` at most `max_hdr` bytes,
/// the iov as for [`check_iov`] with `max_zcopy`.
pub fn check_zcopy(
    tl: &str,
    header: &[u8],
    iov: &[Iov],
    max_hdr: usize,
    max_iov: usize,
    max_zcopy: usize,
) -> Result<usize> {
    check_len(tl, "am_zcopy header", header.len(), max_hdr)?;
    check_iov(tl, "am_zcopy", iov, max_iov, max_zcopy)
}

/// `Ok` for an active message id open to the protocol layer (below
/// [`AM_ID_MAX`]).
pub fn check_am_id(tl: &str, id: AmId) -> Result<()> {
    check_len(
        tl,
        "active message id",
        id.into(),
        usize::from(AM_ID_MAX) - 1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    fn status<T: std::fmt::Debug>(r: Result<T>) -> Status {
        r.expect_err("should be refused").status()
    }

    #[test]
    fn lengths_at_the_limit_pass_beyond_fail() {
        assert!(check_short("t", 8, 8).is_ok());
        assert_eq!(status(check_short("t", 9, 8)), Status::InvalidParam);
        let e = exceeded("t", "x", 9, 8).to_string();
        assert!(e.contains("t: x of 9 exceeds 8"), "{e}");
    }

    #[test]
    fn bcopy_sums_parts_without_overflow() {
        let (a, b) = ([0u8; 3], [0u8; 4]);
        assert_eq!(bcopy_len("t", &[&a, &b], 7).unwrap(), 7);
        assert_eq!(bcopy_len("t", &[], 0).unwrap(), 0);
        assert_eq!(status(bcopy_len("t", &[&a, &b], 6)), Status::InvalidParam);
    }

    #[test]
    fn iov_counts_and_lengths() {
        let buf = [0u8; 5];
        let v = Iov::from_slice(&buf);
        let huge = Iov {
            ptr: std::ptr::null(),
            len: usize::MAX,
        };
        assert_eq!(iov_len(&[v, v]), 10);
        assert_eq!(iov_len(&[huge, v]), usize::MAX);
        assert_eq!(check_iov("t", "put_zcopy", &[v, v], 2, 10).unwrap(), 10);
        assert_eq!(
            status(check_iov("t", "put_zcopy", &[v, v], 1, 10)),
            Status::InvalidParam
        );
        assert_eq!(
            status(check_iov("t", "put_zcopy", &[v, v], 2, 9)),
            Status::InvalidParam
        );
        assert_eq!(
            status(check_iov("t", "put_zcopy", &[huge, v], 2, usize::MAX - 1)),
            Status::InvalidParam
        );
    }

    #[test]
    fn zcopy_checks_header_then_iov() {
        let buf = [0u8; 4];
        let v = [Iov::from_slice(&buf)];
        assert_eq!(check_zcopy("t", &[0; 2], &v, 2, 1, 4).unwrap(), 4);
        assert!(check_zcopy("t", &[0; 3], &v, 2, 1, 4).is_err());
        assert!(check_zcopy("t", &[], &v, 2, 0, 4).is_err());
        assert!(check_zcopy("t", &[], &v, 2, 1, 3).is_err());
    }

    #[test]
    fn am_ids_below_the_maximum() {
        assert!(check_am_id("t", AM_ID_MAX - 1).is_ok());
        assert_eq!(status(check_am_id("t", AM_ID_MAX)), Status::InvalidParam);
    }
}
