//! One-sided operations of the mock, executed the way active-message
//! emulation does it: the initiator queues a request for the target, the
//! target applies it to its exposed buffer when it progresses and answers,
//! and the initiator finishes the operation when it progresses and finds
//! the answer. A passive side that does not progress stalls its peer, as
//! with the real thing.

use super::{MockWorker, ReqState};
use crate::perf::error::{PerfError, Result};
use crate::perf::worker::{AtomicKind, Exposed, Started};
use std::collections::HashMap;

/// Where the exposed buffer of every mock worker pretends to live.
const BASE: u64 = 0x1000_0000;

/// A message between mock workers' one-sided halves.
#[derive(Debug)]
pub(super) enum RmaMsg {
    Put {
        from: Vec<u8>,
        req: usize,
        key: Vec<u8>,
        addr: u64,
        data: Vec<u8>,
    },
    Get {
        from: Vec<u8>,
        req: usize,
        key: Vec<u8>,
        addr: u64,
        len: usize,
    },
    Atomic {
        from: Vec<u8>,
        req: usize,
        key: Vec<u8>,
        addr: u64,
        op: AtomicKind,
        width: usize,
        value: u64,
        compare: u64,
    },
    /// The answer: fetched bytes (none for put and posted atomics), or why
    /// the target refused.
    Reply {
        req: usize,
        outcome: std::result::Result<Vec<u8>, String>,
    },
}

/// Where an answer's bytes go.
#[derive(Debug)]
enum Sink {
    None,
    Bytes(*mut u8, usize),
}

/// The one-sided state of a mock worker.
#[derive(Debug, Default)]
pub(super) struct MockRma {
    exposed: Vec<u8>,
    remote: Option<(u64, Vec<u8>)>,
    sinks: HashMap<usize, Sink>,
}

impl MockWorker {
    fn key(&self) -> Vec<u8> {
        [b"key:".as_slice(), &self.addr].concat()
    }

    fn send_rma(&self, to: &[u8], msg: RmaMsg) {
        if let Ok(mut st) = self.net.state.lock() {
            st.rma.entry(to.to_vec()).or_default().push_back(msg);
        }
    }

    /// The range `addr..addr + len` of the exposed buffer, if inside.
    fn range(&self, key: &[u8], addr: u64, len: usize) -> std::result::Result<usize, String> {
        if key != self.key() {
            return Err("wrong key".into());
        }
        let off = addr.checked_sub(BASE).map(|o| o as usize);
        match off {
            Some(o)
                if o.checked_add(len)
                    .is_some_and(|e| e <= self.rma.exposed.len()) =>
            {
                Ok(o)
            }
            _ => Err(format!("{len} bytes at {addr:#x} are outside")),
        }
    }

    /// Applies a request for this worker's buffer, or an answer to one of
    /// its own; returns whether something happened.
    pub(super) fn handle_rma(&mut self, msg: RmaMsg) {
        let (to, req, outcome) = match msg {
            RmaMsg::Put {
                from,
                req,
                key,
                addr,
                data,
            } => {
                let r = self.range(&key, addr, data.len()).map(|o| {
                    self.rma.exposed[o..o + data.len()].copy_from_slice(&data);
                    Vec::new()
                });
                (from, req, r)
            }
            RmaMsg::Get {
                from,
                req,
                key,
                addr,
                len,
            } => {
                let r = self
                    .range(&key, addr, len)
                    .map(|o| self.rma.exposed[o..o + len].to_vec());
                (from, req, r)
            }
            RmaMsg::Atomic {
                from,
                req,
                key,
                addr,
                op,
                width,
                value,
                compare,
            } => {
                let r = self
                    .range(&key, addr, width)
                    .map(|o| self.apply(o, op, width, value, compare));
                (from, req, r)
            }
            RmaMsg::Reply { req, outcome } => {
                self.answered(req, outcome);
                return;
            }
        };
        self.send_rma(&to, RmaMsg::Reply { req, outcome });
    }

    /// Performs an atomic on the word at `o`; the old value as 8 bytes.
    fn apply(
        &mut self,
        o: usize,
        op: AtomicKind,
        width: usize,
        value: u64,
        compare: u64,
    ) -> Vec<u8> {
        let mut word = [0u8; 8];
        word[..width].copy_from_slice(&self.rma.exposed[o..o + width]);
        let (old, mask) = if width == 4 {
            let w = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
            (u64::from(w), u64::from(u32::MAX))
        } else {
            (u64::from_ne_bytes(word), u64::MAX)
        };
        let new = match op {
            AtomicKind::Add => old.wrapping_add(value) & mask,
            AtomicKind::Swap => value & mask,
            AtomicKind::Cswap if old == compare & mask => value & mask,
            AtomicKind::Cswap => old,
        };
        let bytes = if width == 4 {
            (new as u32).to_ne_bytes().to_vec()
        } else {
            new.to_ne_bytes().to_vec()
        };
        self.rma.exposed[o..o + width].copy_from_slice(&bytes);
        old.to_ne_bytes().to_vec()
    }

    fn answered(&mut self, req: usize, outcome: std::result::Result<Vec<u8>, String>) {
        let sink = self.rma.sinks.remove(&req).unwrap_or(Sink::None);
        let state = match (outcome, sink) {
            (Err(why), _) => ReqState::Failed(why),
            (Ok(data), Sink::Bytes(ptr, len)) => {
                let n = data.len().min(len);
                // SAFETY: the poster promised `len` writable bytes at `ptr`
                // until this operation finishes, which is now.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, n) };
                ReqState::Finished(n)
            }
            (Ok(_), Sink::None) => ReqState::Finished(0),
        };
        self.reqs[req] = Some(state);
    }

    /// The peer and where its buffer is.
    fn remote(&self) -> Result<(Vec<u8>, u64, Vec<u8>)> {
        match (&self.peer, &self.rma.remote) {
            (Some(p), Some((addr, key))) => Ok((p.clone(), *addr, key.clone())),
            _ => Err(PerfError::Params("no remote buffer".into())),
        }
    }

    fn post(
        &mut self,
        sink: Sink,
        msg: impl FnOnce(Vec<u8>, usize, Vec<u8>, u64) -> RmaMsg,
    ) -> Result<Started<usize>> {
        let (peer, addr, key) = self.remote()?;
        let id = self.new_req(ReqState::Pending);
        self.rma.sinks.insert(id, sink);
        let m = msg(self.addr.clone(), id, key, addr);
        self.send_rma(&peer, m);
        Ok(Started::InFlight(id))
    }

    pub(super) fn rma_expose(&mut self, len: usize) -> Result<Exposed> {
        self.rma.exposed = vec![0; len];
        Ok(Exposed {
            addr: BASE,
            rkey: self.key(),
        })
    }

    pub(super) fn rma_byte(&self, offset: usize) -> Result<u8> {
        self.rma
            .exposed
            .get(offset)
            .copied()
            .ok_or_else(|| PerfError::Params(format!("offset {offset} outside")))
    }

    pub(super) fn rma_read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let src = self
            .rma
            .exposed
            .get(offset..offset + out.len())
            .ok_or_else(|| PerfError::Params("read outside".into()))?;
        out.copy_from_slice(src);
        Ok(())
    }

    pub(super) fn rma_write(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        self.rma
            .exposed
            .get_mut(offset..offset + data.len())
            .ok_or_else(|| PerfError::Params("write outside".into()))?
            .copy_from_slice(data);
        Ok(())
    }

    pub(super) fn rma_set_remote(&mut self, addr: u64, rkey: &[u8]) -> Result<()> {
        if !rkey.starts_with(b"key:") {
            return Err(PerfError::Params("not a mock key".into()));
        }
        self.rma.remote = Some((addr, rkey.to_vec()));
        Ok(())
    }

    /// # Safety
    ///
    /// `len` readable bytes at `ptr` (copied at once).
    pub(super) unsafe fn rma_put(
        &mut self,
        ptr: *const u8,
        len: usize,
        offset: u64,
    ) -> Result<Started<usize>> {
        // SAFETY: the caller's promise.
        let mut data = unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec();
        if self.corrupt == Some(self.sent) && len > 1 {
            data[(len - 1) / 2] ^= 0x40;
        }
        self.sent += 1;
        self.post(Sink::None, |from, req, key, addr| RmaMsg::Put {
            from,
            req,
            key,
            addr: addr + offset,
            data,
        })
    }

    pub(super) fn rma_get(
        &mut self,
        ptr: *mut u8,
        len: usize,
        offset: u64,
    ) -> Result<Started<usize>> {
        self.post(Sink::Bytes(ptr, len), |from, req, key, addr| RmaMsg::Get {
            from,
            req,
            key,
            addr: addr + offset,
            len,
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn rma_atomic(
        &mut self,
        op: AtomicKind,
        width: usize,
        value: u64,
        compare: u64,
        result: Option<*mut u8>,
        offset: u64,
    ) -> Result<Started<usize>> {
        if width != 4 && width != 8 {
            return Err(PerfError::Params(format!("atomic width {width}")));
        }
        let sink = match result {
            Some(p) => Sink::Bytes(p, 8),
            None => Sink::None,
        };
        self.post(sink, |from, req, key, addr| RmaMsg::Atomic {
            from,
            req,
            key,
            addr: addr + offset,
            op,
            width,
            value,
            compare,
        })
    }
}
