//! Moving rendezvous data with `put_zcopy` or `get_zcopy` over several
//! lanes: the shares of each lane (see [`split`]), the lanes a transfer
//! uses, and posting fragments round-robin until done or a lane is full.

use crate::proto::lanes::Lanes;
use crate::proto::select::{ProtocolId, SelectionTable};
use crate::request::buf::{RecvBuf, SendBuf};
use crate::uct::{EpId, Posted, RemoteKey, Token};
use crate::Error;

/// Splits `[0, len)` into consecutive shares, one per `(lane, weight)`:
/// `(lane, start, end)`. The last share takes the rounding; empty shares
/// are dropped.
pub(crate) fn split(len: usize, lanes: &[(usize, f64)]) -> Vec<(usize, usize, usize)> {
    let total: f64 = lanes.iter().map(|&(_, w)| w.max(0.0)).sum();
    let mut segs = Vec::with_capacity(lanes.len());
    let mut start = 0usize;
    for (i, &(lane, w)) in lanes.iter().enumerate() {
        let end = if i + 1 == lanes.len() || total <= 0.0 {
            len
        } else {
            let share = (len as f64 * w.max(0.0) / total) as usize;
            start.saturating_add(share).min(len)
        };
        if end > start {
            segs.push((lane, start, end));
        }
        start = end;
        if start == len {
            break;
        }
    }
    segs
}

/// The data lanes for `size` bytes by `proto`: those `table` chose for
/// that size if it chose `proto`, kept only if `usable(lane)`; else lane 0
/// alone.
pub(crate) fn data_lanes(
    table: &SelectionTable,
    size: usize,
    proto: ProtocolId,
    usable: impl Fn(usize) -> bool,
) -> Vec<(usize, f64)> {
    let choice = table.lookup(size);
    let mut lanes: Vec<(usize, f64)> = if choice.proto == proto {
        choice.lanes.iter().filter(|&(l, _)| usable(l)).collect()
    } else {
        Vec::new()
    };
    if lanes.is_empty() {
        lanes.push((0, 1.0));
    }
    lanes
}

/// Which one-sided operation moves the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// Local buffer to remote memory.
    Put,
    /// Remote memory to local buffer.
    Get,
}

/// The local side of a transfer: a send's buffer from offset `.1` on,
/// written to the peer, or a receive's buffer, read into.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Local {
    Send(SendBuf, usize),
    Recv(RecvBuf),
}

impl Local {
    fn dir(self) -> Dir {
        match self {
            Local::Send(..) => Dir::Put,
            Local::Recv(_) => Dir::Get,
        }
    }
}

/// What one round of posting did.
#[derive(Debug, Default)]
pub(crate) struct Posting {
    /// Operations now in flight (their completions come with the token).
    pub(crate) inflight: u32,
    /// The first operation that failed at post.
    pub(crate) failure: Option<Error>,
    /// A lane that was full; its segments wait.
    pub(crate) blocked: Option<usize>,
}

/// The remote side of a transfer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Remote<'a> {
    pub(crate) addr: u64,
    pub(crate) rkey: &'a RemoteKey,
    /// Per lane, a key that replaces `rkey` on it (a lane on another
    /// device, whose domain has a key of its own).
    pub(crate) lane_keys: &'a [Option<RemoteKey>],
}

/// Posts fragments of the segments `(lane, next, end)` (advancing `next`),
/// one per lane in turn, until all are posted, an operation fails, or a
/// lane is full. Fragments are at most `frag` bytes (0: the lane's limit)
/// and the lane's limit; offset `o` is local `base + o` and remote
/// `remote.addr + o`.
///
/// The ranges are lent from the request's buffer (`local`): the caller
/// keeps the request open until every operation posted here completed
/// (it counts those `Posting::inflight` reports).
pub(crate) fn post_segments(
    tx: &mut dyn Lanes,
    lanes: &[(usize, EpId)],
    segs: &mut [(usize, usize, usize)],
    frag: usize,
    local: Local,
    remote: Remote<'_>,
    token: Token,
) -> Posting {
    let dir = local.dir();
    let mut out = Posting::default();
    loop {
        let mut progressed = false;
        for seg in segs.iter_mut() {
            let (lane, next, end) = *seg;
            if next >= end || out.blocked == Some(lane) {
                continue;
            }
            let Some(&(ifi, uct_ep)) = lanes.get(lane) else {
                out.failure = Some(Error::InvalidHandle);
                return out;
            };
            let Some(attr) = tx.attr(ifi) else {
                out.failure = Some(Error::InvalidHandle);
                return out;
            };
            let limit = match dir {
                Dir::Put => attr.max_put_zcopy,
                Dir::Get => attr.max_get_zcopy,
            }
            .max(1);
            let len = (end - next).min(match frag {
                0 => limit,
                f => f.min(limit),
            });
            let at = remote.addr.wrapping_add(next as u64);
            let rkey = match remote.lane_keys.get(lane) {
                Some(Some(k)) => k,
                _ => remote.rkey,
            };
            let posted = match local {
                Local::Send(buf, base) => {
                    let src = buf.lend(base + next, len);
                    tx.put_zcopy(ifi, uct_ep, src, at, rkey, token)
                }
                Local::Recv(buf) => {
                    let dst = buf.lend(next, len);
                    tx.get_zcopy(ifi, uct_ep, dst, at, rkey, token)
                }
            };
            match posted {
                Ok(Posted::Done) => seg.1 += len,
                Ok(Posted::InFlight) => {
                    seg.1 += len;
                    out.inflight += 1;
                }
                Ok(Posted::NoResource) => {
                    out.blocked = Some(lane);
                    continue;
                }
                Err(e) => {
                    out.failure = Some(Error::endpoint(e));
                    return out;
                }
            }
            progressed = true;
        }
        if !progressed {
            return out;
        }
    }
}

/// Whether every segment is fully posted.
pub(crate) fn all_posted(segs: &[(usize, usize, usize)]) -> bool {
    segs.iter().all(|&(_, n, e)| n >= e)
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn shares_follow_the_weights_and_cover_everything() {
        assert_eq!(split(100, &[(0, 1.0)]), vec![(0, 0, 100)]);
        assert_eq!(
            split(100, &[(0, 3.0), (1, 1.0)]),
            vec![(0, 0, 75), (1, 75, 100)]
        );
        assert_eq!(split(1, &[(0, 1.0), (1, 1.0)]), vec![(1, 0, 1)]);
        assert!(split(0, &[(0, 1.0)]).is_empty());
        // Degenerate weights still cover the range.
        assert_eq!(split(10, &[(0, 0.0), (1, 0.0)]), vec![(0, 0, 10)]);
        let s = split(1 << 20, &[(0, 0.2), (1, 0.5), (2, 0.3)]);
        assert_eq!(s.first().map(|x| x.1), Some(0));
        assert_eq!(s.last().map(|x| x.2), Some(1 << 20));
        assert!(s.windows(2).all(|w| w[0].2 == w[1].1));
    }
}
