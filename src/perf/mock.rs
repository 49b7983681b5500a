//! An in-memory [`PerfWorker`] for testing the loops and the bootstrap
//! without a communication layer: workers of one [`MockNet`] exchange
//! tagged messages through mailboxes, sends complete on the next
//! `progress`, receives match in posting order. One-sided operations are
//! in `mock_rma.rs`.

#[path = "mock_rma.rs"]
mod rma;

use super::error::{PerfError, Result};
use super::worker::{AtomicKind, Exposed, PerfWorker, Started};
use rma::{MockRma, RmaMsg};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct NetState {
    inboxes: HashMap<Vec<u8>, VecDeque<(u64, Vec<u8>)>>,
    rma: HashMap<Vec<u8>, VecDeque<RmaMsg>>,
    dead: Vec<Vec<u8>>,
}

/// Mailboxes shared by the workers of a test.
#[derive(Debug, Default, Clone)]
pub(crate) struct MockNet {
    state: Arc<Mutex<NetState>>,
}

impl MockNet {
    /// A worker on this net with a unique address.
    pub(crate) fn worker(&self, name: &str) -> MockWorker {
        let addr = name.as_bytes().to_vec();
        if let Ok(mut st) = self.state.lock() {
            st.inboxes.insert(addr.clone(), VecDeque::new());
        }
        MockWorker {
            net: self.clone(),
            addr,
            peer: None,
            unexpected: VecDeque::new(),
            posted: VecDeque::new(),
            reqs: Vec::new(),
            sends_in_flight: Vec::new(),
            sent: 0,
            corrupt: None,
            truncate: None,
            no_rma: false,
            rma: MockRma::default(),
        }
    }

    /// Marks the worker with this address as dead: its peers fail.
    pub(crate) fn kill(&self, name: &str) {
        if let Ok(mut st) = self.state.lock() {
            st.dead.push(name.as_bytes().to_vec());
        }
    }
}

#[derive(Debug)]
enum ReqState {
    Pending,
    Finished(usize),
    Failed(String),
}

#[derive(Debug)]
struct PostedRecv {
    id: usize,
    ptr: *mut u8,
    len: usize,
    tag: u64,
    mask: u64,
}

/// One worker of a [`MockNet`].
#[derive(Debug)]
pub(crate) struct MockWorker {
    net: MockNet,
    addr: Vec<u8>,
    peer: Option<Vec<u8>>,
    unexpected: VecDeque<(u64, Vec<u8>)>,
    posted: VecDeque<PostedRecv>,
    reqs: Vec<Option<ReqState>>,
    sends_in_flight: Vec<usize>,
    sent: u64,
    /// Flip a byte in the n-th message sent.
    pub(crate) corrupt: Option<u64>,
    /// Send the n-th message one byte short.
    pub(crate) truncate: Option<u64>,
    /// Refuse to expose a buffer, as a layer without one-sided operations.
    pub(crate) no_rma: bool,
    rma: MockRma,
}

// SAFETY: the raw pointers of posted receives are only written during
// `progress` by the thread that owns the worker; the test that posts them
// keeps them valid (PerfWorker's contract).
unsafe impl Send for MockWorker {}

impl MockWorker {
    fn new_req(&mut self, st: ReqState) -> usize {
        self.reqs.push(Some(st));
        self.reqs.len() - 1
    }

    fn deliver(&mut self, tag: u64, data: Vec<u8>) -> Result<()> {
        let pos = self
            .posted
            .iter()
            .position(|p| p.tag & p.mask == tag & p.mask);
        match pos.and_then(|i| self.posted.remove(i)) {
            Some(p) => {
                if data.len() > p.len {
                    return Err(PerfError::Params("message truncated".into()));
                }
                // SAFETY: the poster promised `p.len` writable bytes at
                // `p.ptr` until this receive finishes, which is now.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.ptr, data.len()) };
                self.reqs[p.id] = Some(ReqState::Finished(data.len()));
            }
            None => self.unexpected.push_back((tag, data)),
        }
        Ok(())
    }

    fn peer_dead(&self) -> bool {
        let st = match self.net.state.lock() {
            Ok(st) => st,
            Err(_) => return true,
        };
        self.peer.as_ref().is_some_and(|p| st.dead.contains(p))
    }
}

impl PerfWorker for MockWorker {
    type Req = usize;

    fn address(&mut self) -> Result<Vec<u8>> {
        Ok(self.addr.clone())
    }

    fn connect(&mut self, remote: &[u8]) -> Result<()> {
        let known = self
            .net
            .state
            .lock()
            .map(|st| st.inboxes.contains_key(remote))
            .unwrap_or(false);
        if !known {
            return Err(PerfError::Params("unknown mock address".into()));
        }
        self.peer = Some(remote.to_vec());
        Ok(())
    }

    fn progress(&mut self) -> usize {
        let mut events = 0;
        for id in self.sends_in_flight.drain(..) {
            self.reqs[id] = Some(ReqState::Finished(0));
            events += 1;
        }
        let (incoming, rma): (Vec<(u64, Vec<u8>)>, Vec<RmaMsg>) = match self.net.state.lock() {
            Ok(mut st) => (
                st.inboxes
                    .get_mut(&self.addr)
                    .map(|q| q.drain(..).collect())
                    .unwrap_or_default(),
                st.rma
                    .get_mut(&self.addr)
                    .map(|q| q.drain(..).collect())
                    .unwrap_or_default(),
            ),
            Err(_) => (Vec::new(), Vec::new()),
        };
        for (tag, data) in incoming {
            events += 1;
            let _ = self.deliver(tag, data);
        }
        for msg in rma {
            events += 1;
            self.handle_rma(msg);
        }
        if events == 0 {
            // Test threads share few cores: let the peer run.
            std::thread::yield_now();
        }
        events
    }

    fn check_peer(&mut self) -> Result<()> {
        if self.peer_dead() {
            Err(PerfError::PeerGone("mock peer died".into()))
        } else {
            Ok(())
        }
    }

    unsafe fn tag_send(
        &mut self,
        ptr: *const u8,
        len: usize,
        tag: u64,
        _sync: bool,
    ) -> Result<Started<usize>> {
        let peer = self
            .peer
            .clone()
            .ok_or_else(|| PerfError::Params("not connected".into()))?;
        // SAFETY: the caller promised `len` readable bytes at `ptr`.
        let mut data = unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec();
        if self.corrupt == Some(self.sent) && !data.is_empty() {
            let mid = data.len() / 2;
            data[mid] ^= 0x40;
        }
        if self.truncate == Some(self.sent) {
            data.pop();
        }
        self.sent += 1;
        if let Ok(mut st) = self.net.state.lock() {
            if let Some(q) = st.inboxes.get_mut(&peer) {
                q.push_back((tag, data));
            }
        }
        // Every other send finishes later, to exercise the windows.
        if self.sent % 2 == 0 {
            let id = self.new_req(ReqState::Pending);
            self.sends_in_flight.push(id);
            Ok(Started::InFlight(id))
        } else {
            Ok(Started::Done(len))
        }
    }

    unsafe fn tag_recv(
        &mut self,
        ptr: *mut u8,
        len: usize,
        tag: u64,
        mask: u64,
    ) -> Result<Started<usize>> {
        let pos = self
            .unexpected
            .iter()
            .position(|(t, _)| t & mask == tag & mask);
        if let Some((_, data)) = pos.and_then(|i| self.unexpected.remove(i)) {
            if data.len() > len {
                return Err(PerfError::Params("message truncated".into()));
            }
            // SAFETY: the caller promised `len` writable bytes at `ptr`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
            return Ok(Started::Done(data.len()));
        }
        let id = self.new_req(ReqState::Pending);
        self.posted.push_back(PostedRecv {
            id,
            ptr,
            len,
            tag,
            mask,
        });
        Ok(Started::InFlight(id))
    }

    fn test(&mut self, req: usize) -> Option<Result<usize>> {
        match self.reqs.get(req) {
            Some(Some(ReqState::Finished(len))) => {
                let len = *len;
                self.reqs[req] = None;
                Some(Ok(len))
            }
            Some(Some(ReqState::Pending)) => None,
            Some(Some(ReqState::Failed(_))) => match self.reqs[req].take() {
                Some(ReqState::Failed(why)) => Some(Err(PerfError::Params(why))),
                _ => None,
            },
            _ => Some(Err(PerfError::Params(format!("stale request {req}")))),
        }
    }

    fn expose(&mut self, len: usize) -> Result<Exposed> {
        if self.no_rma {
            return Err(PerfError::Unsupported("no one-sided operations".into()));
        }
        self.rma_expose(len)
    }

    fn exposed_byte(&mut self, offset: usize) -> Result<u8> {
        self.rma_byte(offset)
    }

    fn exposed_read(&mut self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.rma_read(offset, out)
    }

    fn exposed_write(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        self.rma_write(offset, data)
    }

    fn set_remote(&mut self, addr: u64, rkey: &[u8]) -> Result<()> {
        self.rma_set_remote(addr, rkey)
    }

    unsafe fn put(&mut self, ptr: *const u8, len: usize, offset: u64) -> Result<Started<usize>> {
        // SAFETY: the same contract.
        unsafe { self.rma_put(ptr, len, offset) }
    }

    unsafe fn get(&mut self, ptr: *mut u8, len: usize, offset: u64) -> Result<Started<usize>> {
        self.rma_get(ptr, len, offset)
    }

    fn atomic_post(
        &mut self,
        op: AtomicKind,
        width: usize,
        value: u64,
        offset: u64,
    ) -> Result<Started<usize>> {
        if op == AtomicKind::Cswap {
            return Err(PerfError::Params("cswap is fetching only".into()));
        }
        self.rma_atomic(op, width, value, 0, None, offset)
    }

    unsafe fn atomic_fetch(
        &mut self,
        op: AtomicKind,
        width: usize,
        value: u64,
        compare: u64,
        result: *mut u8,
        offset: u64,
    ) -> Result<Started<usize>> {
        self.rma_atomic(op, width, value, compare, Some(result), offset)
    }
}

impl crate::perf::worker::ThreadedWorker for MockWorker {
    type Thread = MockWorker;

    fn into_threads(self, _n: usize, _busy: bool) -> Result<Vec<MockWorker>> {
        Err(crate::perf::error::PerfError::Unsupported(
            "threads (-T) in the mock layer".into(),
        ))
    }

    fn sibling(&self) -> Result<MockWorker> {
        Err(crate::perf::error::PerfError::Unsupported(
            "threads (-T) in the mock layer".into(),
        ))
    }
}
