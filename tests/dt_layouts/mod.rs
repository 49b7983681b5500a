//! Layouts for the datatype tests: a contiguous buffer, iovecs and a
//! generic strided datatype (an MPI vector type), each posted through the
//! same calls and read back as packed bytes.

use rucx::dt::{Iov, Pack, Unpack};
use rucx::{Info, Op, Posted, ReqId, Result, Worker};

/// How one side lays out the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One `Vec<u8>` through the plain calls.
    Contig,
    /// An iovec whose bytes all lie in one of its buffers.
    IovOne,
    /// An iovec spread over buffers of uneven sizes, some empty.
    IovMany,
    /// The strided generic datatype.
    Generic,
}

pub(crate) const LAYOUTS: [Layout; 4] = [
    Layout::Contig,
    Layout::IovOne,
    Layout::IovMany,
    Layout::Generic,
];

/// `len` packed bytes as blocks of `block` bytes with `gap` unused bytes
/// after each, in one allocation (MPI_Type_vector's shape).
#[derive(Debug)]
pub(crate) struct Strided {
    pub(crate) mem: Vec<u8>,
    block: usize,
    gap: usize,
    len: usize,
}

impl Strided {
    pub(crate) fn new(len: usize, block: usize, gap: usize) -> Strided {
        let blocks = len.div_ceil(block);
        Strided {
            mem: vec![0xEE; blocks * (block + gap)],
            block,
            gap,
            len,
        }
    }

    /// Where packed byte range `off..` of block `off / block` lives, and
    /// how many bytes of the block are left from there.
    fn at(&self, off: usize) -> (usize, usize) {
        let (b, i) = (off / self.block, off % self.block);
        (b * (self.block + self.gap) + i, self.block - i)
    }

    /// The packed bytes.
    pub(crate) fn packed(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        let mut me = Strided {
            mem: self.mem.clone(),
            ..*self
        };
        assert_eq!(me.pack(0, &mut out), self.len);
        out
    }
}

impl Pack for Strided {
    fn packed_size(&self) -> usize {
        self.len
    }

    fn pack(&mut self, offset: usize, dest: &mut [u8]) -> usize {
        let end = (offset + dest.len()).min(self.len);
        let mut off = offset;
        while off < end {
            let (at, left) = self.at(off);
            let n = left.min(end - off);
            dest[off - offset..off - offset + n].copy_from_slice(&self.mem[at..at + n]);
            off += n;
        }
        end.saturating_sub(offset)
    }
}

impl Unpack for Strided {
    fn packed_size(&self) -> usize {
        self.len
    }

    fn unpack(&mut self, offset: usize, src: &[u8]) -> Result<()> {
        let end = offset + src.len();
        assert!(end <= self.len, "unpack beyond the capacity");
        let mut off = offset;
        while off < end {
            let (at, left) = self.at(off);
            let n = left.min(end - off);
            self.mem[at..at + n].copy_from_slice(&src[off - offset..off - offset + n]);
            off += n;
        }
        Ok(())
    }
}

/// Splits `data` into buffers of uneven sizes (with empty ones between).
fn split(data: &[u8], seed: usize) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut at = 0;
    let mut k = seed;
    while at < data.len() {
        k = k.wrapping_mul(31).wrapping_add(7);
        let n = (1 + k % 9000).min(data.len() - at);
        out.push(data[at..at + n].to_vec());
        if k % 3 == 0 {
            out.push(Vec::new());
        }
        at += n;
    }
    out
}

/// A posted operation of any layout.
pub(crate) enum Posting {
    Contig(Posted<Vec<u8>>),
    Iov(Posted<Iov<Vec<u8>>>),
    Gen(Posted<Strided>),
}

impl Posting {
    /// The request, if it is in flight.
    pub(crate) fn id(&self) -> Option<ReqId> {
        match self {
            Posting::Contig(Posted::InFlight(id))
            | Posting::Iov(Posted::InFlight(id))
            | Posting::Gen(Posted::InFlight(id)) => Some(*id),
            _ => None,
        }
    }

    /// The result and the packed bytes of the layout, once complete.
    pub(crate) fn finish(self, w: &mut Worker) -> Result<(Info, Vec<u8>)> {
        fn done<D: 'static>(w: &mut Worker, p: Posted<D>) -> Result<(Info, D)> {
            match p {
                Posted::Done(info, d) => Ok((info, d)),
                Posted::InFlight(id) => match w.take::<D>(id).expect("completed") {
                    Ok(x) => Ok(x),
                    Err(e) => Err(e.error),
                },
            }
        }
        Ok(match self {
            Posting::Contig(p) => done(w, p)?,
            Posting::Iov(p) => {
                let (i, d) = done(w, p)?;
                (i, d.into_inner().concat())
            }
            Posting::Gen(p) => {
                let (i, d) = done(w, p)?;
                (i, d.packed())
            }
        })
    }
}

/// `data` laid out as `l`, for a send.
pub(crate) fn send_value(l: Layout, data: &[u8], seed: usize) -> SendValue {
    match l {
        Layout::Contig => SendValue::Contig(data.to_vec()),
        Layout::IovOne => SendValue::Iov(Iov::new(vec![Vec::new(), data.to_vec(), Vec::new()])),
        Layout::IovMany => SendValue::Iov(Iov::new(split(data, seed))),
        Layout::Generic => {
            let mut s = Strided::new(data.len(), 1 + seed % 61, 3 + seed % 5);
            s.unpack(0, data).expect("fill");
            SendValue::Gen(s)
        }
    }
}

/// A receive of capacity `cap` laid out as `l`.
pub(crate) fn recv_value(l: Layout, cap: usize, seed: usize) -> SendValue {
    match l {
        Layout::Contig => SendValue::Contig(vec![0; cap]),
        Layout::IovOne => SendValue::Iov(Iov::new(vec![vec![0; cap], Vec::new()])),
        Layout::IovMany => SendValue::Iov(Iov::new(split(&vec![0; cap], seed + 1))),
        Layout::Generic => SendValue::Gen(Strided::new(cap, 1 + seed % 37, 1 + seed % 4)),
    }
}

/// A layout's value before it is posted.
pub(crate) enum SendValue {
    Contig(Vec<u8>),
    Iov(Iov<Vec<u8>>),
    Gen(Strided),
}

impl SendValue {
    /// Posts it as a tag send.
    pub(crate) fn tag_send(self, w: &mut Worker, ep: rucx::Ep, tag: u64) -> Posting {
        match self {
            SendValue::Contig(v) => {
                Posting::Contig(w.tag_send(ep, v, tag, Op::new()).expect("send"))
            }
            SendValue::Iov(v) => Posting::Iov(w.tag_send_dt(ep, v, tag, Op::new()).expect("send")),
            SendValue::Gen(v) => Posting::Gen(w.tag_send_dt(ep, v, tag, Op::new()).expect("send")),
        }
    }

    /// Posts it as a tag receive of exactly `tag`.
    pub(crate) fn tag_recv(self, w: &mut Worker, tag: u64) -> Posting {
        let m = rucx::TAG_MASK_ALL;
        match self {
            SendValue::Contig(v) => {
                Posting::Contig(w.tag_recv(v, tag, m, Op::new()).expect("recv"))
            }
            SendValue::Iov(v) => Posting::Iov(w.tag_recv_dt(v, tag, m, Op::new()).expect("recv")),
            SendValue::Gen(v) => Posting::Gen(w.tag_recv_dt(v, tag, m, Op::new()).expect("recv")),
        }
    }

    /// Posts it as a stream send.
    pub(crate) fn stream_send(self, w: &mut Worker, ep: rucx::Ep) -> Posting {
        match self {
            SendValue::Contig(v) => Posting::Contig(w.stream_send(ep, v, Op::new()).expect("send")),
            SendValue::Iov(v) => Posting::Iov(w.stream_send_dt(ep, v, Op::new()).expect("send")),
            SendValue::Gen(v) => Posting::Gen(w.stream_send_dt(ep, v, Op::new()).expect("send")),
        }
    }

    /// Posts it as a stream receive that waits for all its bytes.
    pub(crate) fn stream_recv_all(self, w: &mut Worker, ep: rucx::Ep) -> Posting {
        match self {
            SendValue::Contig(v) => {
                Posting::Contig(w.stream_recv_all(ep, v, Op::new()).expect("recv"))
            }
            SendValue::Iov(v) => {
                Posting::Iov(w.stream_recv_all_dt(ep, v, Op::new()).expect("recv"))
            }
            SendValue::Gen(v) => {
                Posting::Gen(w.stream_recv_all_dt(ep, v, Op::new()).expect("recv"))
            }
        }
    }
}
