//! Datatypes: how a message lies in memory when it is not one contiguous
//! buffer (UCX's `ucp_dt_make_iov` and `ucp_dt_create_generic`).
//!
//! A message on the wire is always a run of bytes, its *packed* form. A
//! sender describes where those bytes come from with a [`Pack`], a
//! receiver where they go with an [`Unpack`]; the layouts of the two
//! sides are independent (an [`Iov`] sent, a contiguous buffer received,
//! a generic datatype on either side all deliver the same bytes).
//!
//! * **Contiguous** buffers are the ordinary operations (`tag_send`,
//!   `tag_recv`, ...): every protocol reads and writes them in place,
//!   zero-copy where the lane can.
//! * **Iovecs** ([`Iov`]) are lists of buffers whose concatenation is the
//!   message. An iovec whose bytes all lie in one of its buffers is
//!   contiguous and takes the contiguous paths, zero-copy included; one
//!   spread over several buffers is packed into a bounce buffer of the
//!   request before the send starts, and a receive into one lands in a
//!   bounce buffer that is unpacked into the list when it completes.
//! * **Generic** datatypes are any other type implementing [`Pack`] or
//!   [`Unpack`]: MPI's derived datatypes map onto them as onto UCX's
//!   `pack`/`unpack`/`packed_size` callbacks. They go through bounce
//!   buffers on every protocol (eager and each rendezvous scheme).
//!
//! The `*_dt` operations of [`Worker`](crate::Worker) take these; the
//! datatype value moves into the request and comes back with
//! [`Worker::take`](crate::Worker::take), as buffers of the owned tier do.
//!
//! What this does not do (yet): an iovec spread over several buffers is
//! not handed to the transports as a gather list (UCX sends up to the
//! lane's `max_iov` entries zero-copy); a generic datatype is packed whole
//! when its send starts, not fragment by fragment as the transport takes
//! it.

mod iov;

pub use iov::Iov;

use crate::Result;

/// The sending side of a datatype: produces the packed bytes of a message
/// (`ucp_generic_dt_ops_t`'s `start_pack`, `packed_size`, `pack`; dropping
/// the value is `finish`).
pub trait Pack: Send + 'static {
    /// Length of the packed message in bytes.
    fn packed_size(&self) -> usize;

    /// Writes packed bytes `offset..offset + dest.len()` (or up to the end
    /// of the message) into `dest`; returns how many it wrote.
    fn pack(&mut self, offset: usize, dest: &mut [u8]) -> usize;

    /// The packed message as memory of the value's that is already
    /// contiguous, for the zero-copy paths. Only [`Iov`] can say so.
    #[doc(hidden)]
    fn contiguous(&self) -> Option<Contig> {
        None
    }
}

/// The receiving side of a datatype: takes the packed bytes of a message
/// apart (`start_unpack`, `packed_size`, `unpack`; dropping is `finish`).
pub trait Unpack: Send + 'static {
    /// Most packed bytes the layout takes: the receive's capacity. A
    /// longer message completes with [`Error::Truncated`](crate::Error::Truncated).
    fn packed_size(&self) -> usize;

    /// Stores packed bytes `offset..offset + src.len()`. An error fails
    /// the receive with it.
    fn unpack(&mut self, offset: usize, src: &[u8]) -> Result<()>;

    /// As [`Pack::contiguous`], for receiving in place.
    #[doc(hidden)]
    fn contiguous_mut(&mut self) -> Option<ContigMut> {
        None
    }
}

/// Contiguous bytes of an [`Iov`] whose memory stays put while the value
/// is owned by the worker (the `IoBuf` contract); made only in this crate.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Contig {
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
}

/// As [`Contig`], writable.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct ContigMut {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

/// For [`Pack`] and [`Unpack`] implementations over a list of segments:
/// calls `f(segment, offset in it, offset in the range, length)` for each
/// piece of the packed range `offset..offset + len` over segments of
/// lengths `lens`, in order; returns the bytes covered.
pub fn for_each_piece(
    lens: impl Iterator<Item = usize>,
    offset: usize,
    len: usize,
    mut f: impl FnMut(usize, usize, usize, usize),
) -> usize {
    let end = offset.saturating_add(len);
    let (mut base, mut done) = (0usize, 0usize);
    for (i, n) in lens.enumerate() {
        if base >= end {
            break;
        }
        let (lo, hi) = (base.max(offset), base.saturating_add(n).min(end));
        if lo < hi {
            f(i, lo - base, lo - offset, hi - lo);
            done += hi - lo;
        }
        base = base.saturating_add(n);
    }
    done
}
