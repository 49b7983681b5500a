//! The checks every transport makes before an operation: sizes against the
//! limits of its [`IfaceAttr`](crate::IfaceAttr), iov entry counts, active
//! message ids. Each refuses with the error of [`exceeded`]
//! ([`Error::Limit`]), so that how a limit is refused is decided here
//! alone.
//!
//! `what` names the quantity checked (e.g. `"am_short payload"`).

use crate::iface::{AmId, Iov, AM_ID_MAX};
use crate::{Error, Result};

/// The error for a request whose `what` is `len` where at most `max` is
/// allowed: the one place that builds it.
pub fn exceeded(what: &'static str, len: usize, max: usize) -> Error {
    Error::limit(what, len, max)
}

/// `Ok` if `len <= max`, else [`exceeded`].
pub fn check_len(what: &'static str, len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(exceeded(what, len, max));
    }
    Ok(())
}

/// Checks the payload of `am_short` against `max_short`.
pub fn check_short(len: usize, max_short: usize) -> Result<()> {
    check_len("am_short payload", len, max_short)
}

/// Total length of `am_bcopy`'s `parts`, checked against `max_bcopy`.
pub fn bcopy_len(parts: &[&[u8]], max_bcopy: usize) -> Result<usize> {
    let total = parts.iter().fold(0usize, |t, p| t.saturating_add(p.len()));
    check_len("am_bcopy", total, max_bcopy)?;
    Ok(total)
}

/// Sum of the lengths of `iov`, saturating at `usize::MAX` (larger than
/// any limit).
pub fn iov_len(iov: &[Iov]) -> usize {
    iov.iter().fold(0usize, |t, v| t.saturating_add(v.len))
}

/// The name of the entry count of operation `op`'s iov.
fn iov_count(op: &'static str) -> &'static str {
    match op {
        "put_zcopy" => "put_zcopy iov count",
        "get_zcopy" => "get_zcopy iov count",
        "am_zcopy" => "am_zcopy iov count",
        _ => "iov count",
    }
}

/// Total length of the ranges of `op`: at most `max_iov` entries and
/// `max_len` bytes.
pub fn check_iov(op: &'static str, iov: &[Iov], max_iov: usize, max_len: usize) -> Result<usize> {
    check_len(iov_count(op), iov.len(), max_iov)?;
    let total = iov_len(iov);
    check_len(op, total, max_len)?;
    Ok(total)
}

/// Total length of `am_zcopy`'s iov: `header` at most `max_hdr` bytes,
/// the iov as for [`check_iov`] with `max_zcopy`.
pub fn check_zcopy(
    header: &[u8],
    iov: &[Iov],
    max_hdr: usize,
    max_iov: usize,
    max_zcopy: usize,
) -> Result<usize> {
    check_len("am_zcopy header", header.len(), max_hdr)?;
    check_iov("am_zcopy", iov, max_iov, max_zcopy)
}

/// `Ok` for an active message id open to the protocol layer (below
/// [`AM_ID_MAX`]).
pub fn check_am_id(id: AmId) -> Result<()> {
    check_len("active message id", id.into(), usize::from(AM_ID_MAX) - 1)
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
        assert!(check_short(8, 8).is_ok());
        assert_eq!(status(check_short(9, 8)), Status::InvalidParam);
        let e = exceeded("x", 9, 8);
        assert!(
            matches!(
                e,
                Error::Limit {
                    op: "x",
                    len: 9,
                    max: 8
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "x: 9 exceeds the maximum of 8");
    }

    #[test]
    fn bcopy_sums_parts_without_overflow() {
        let (a, b) = ([0u8; 3], [0u8; 4]);
        assert_eq!(bcopy_len(&[&a, &b], 7).unwrap(), 7);
        assert_eq!(bcopy_len(&[], 0).unwrap(), 0);
        assert_eq!(status(bcopy_len(&[&a, &b], 6)), Status::InvalidParam);
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
        assert_eq!(check_iov("put_zcopy", &[v, v], 2, 10).unwrap(), 10);
        assert_eq!(
            status(check_iov("put_zcopy", &[v, v], 1, 10)),
            Status::InvalidParam
        );
        assert_eq!(
            status(check_iov("put_zcopy", &[v, v], 2, 9)),
            Status::InvalidParam
        );
        assert_eq!(
            status(check_iov("put_zcopy", &[huge, v], 2, usize::MAX - 1)),
            Status::InvalidParam
        );
    }

    #[test]
    fn zcopy_checks_header_then_iov() {
        let buf = [0u8; 4];
        let v = [Iov::from_slice(&buf)];
        assert_eq!(check_zcopy(&[0; 2], &v, 2, 1, 4).unwrap(), 4);
        assert!(check_zcopy(&[0; 3], &v, 2, 1, 4).is_err());
        assert!(check_zcopy(&[], &v, 2, 0, 4).is_err());
        assert!(check_zcopy(&[], &v, 2, 1, 3).is_err());
    }

    #[test]
    fn am_ids_below_the_maximum() {
        assert!(check_am_id(AM_ID_MAX - 1).is_ok());
        assert_eq!(status(check_am_id(AM_ID_MAX)), Status::InvalidParam);
    }
}
