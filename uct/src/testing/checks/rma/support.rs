//! Memory and operation helpers of the one-sided checks.
//!
//! Buffers that a transport reads or writes are [`RawBuf`]s, reached only
//! through their raw pointer, so that no Rust reference is live while an
//! operation may write them. Checks create their buffers and regions
//! before opening the [`Pair`], so that the ifaces are dropped first, even
//! when a check fails with an operation in flight.

use crate::testing::Pair;
use crate::{Access, EpId, Error, Iov, MemHandle, MemoryDomain, Posted, RemoteKey, Result, Token};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of guard on each side of a registered range.
pub(super) const GUARD: usize = 64;
/// What guard bytes hold.
const GUARD_BYTE: u8 = 0xA5;

/// A heap buffer reached only through its raw pointer.
#[derive(Debug)]
pub(super) struct RawBuf {
    ptr: *mut u8,
    len: usize,
}

impl RawBuf {
    /// A buffer holding `data`.
    pub(super) fn new(data: &[u8]) -> RawBuf {
        let b: Box<[u8]> = data.into();
        let len = b.len();
        RawBuf {
            ptr: Box::into_raw(b).cast::<u8>(),
            len,
        }
    }

    /// A buffer of `len` bytes of `byte`.
    pub(super) fn filled(byte: u8, len: usize) -> RawBuf {
        RawBuf::new(&vec![byte; len])
    }

    /// Address of byte `off` (at most the length).
    pub(super) fn at(&self, off: usize) -> *mut u8 {
        assert!(off <= self.len, "offset {off} beyond {} bytes", self.len);
        self.ptr.wrapping_add(off)
    }

    /// The range `[off, off + len)` as an iov entry.
    pub(super) fn iov(&self, off: usize, len: usize) -> Iov {
        assert!(off + len <= self.len, "range beyond {} bytes", self.len);
        Iov {
            ptr: self.at(off),
            len,
        }
    }

    /// A copy of the contents.
    pub(super) fn read(&self) -> Vec<u8> {
        // SAFETY: `ptr` owns `len` initialized bytes; no operation is in
        // flight when a check reads (operations complete before returning).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.to_vec()
    }

    /// Overwrites the bytes at `off` with `data`.
    pub(super) fn write(&self, off: usize, data: &[u8]) {
        assert!(
            off + data.len() <= self.len,
            "write beyond {} bytes",
            self.len
        );
        // SAFETY: in bounds (checked above), and nothing else accesses the
        // buffer during the call.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.at(off), data.len()) };
    }
}

impl Drop for RawBuf {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
        // SAFETY: `ptr` and `len` came from `Box::into_raw` of a boxed
        // slice in `new` and are freed only here.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// A registered range of `len` bytes between two guards, with its key as
/// the peer unpacked it. Deregistered when dropped (if still registered).
#[derive(Debug)]
pub(super) struct Region<'m> {
    md: &'m dyn MemoryDomain,
    buf: RawBuf,
    len: usize,
    memh: Option<MemHandle>,
    key: RemoteKey,
}

impl<'m> Region<'m> {
    /// Registers a range holding `init` with `access`;
    /// panics (naming the fixture `name`) if registering fails.
    pub(super) fn new(
        md: &'m dyn MemoryDomain,
        name: &str,
        init: &[u8],
        access: Access,
    ) -> Region<'m> {
        let len = init.len();
        let buf = RawBuf::filled(GUARD_BYTE, GUARD + len + GUARD);
        buf.write(GUARD, init);
        let (memh, key) = register(md, name, &buf, len, access);
        Region {
            md,
            buf,
            len,
            memh: Some(memh),
            key,
        }
    }

    /// Remote address of byte `off` of the range.
    pub(super) fn addr(&self, off: usize) -> u64 {
        self.buf.at(GUARD + off).addr() as u64
    }

    /// Remote address of the first guard byte.
    pub(super) fn span_start(&self) -> u64 {
        self.buf.at(0).addr() as u64
    }

    /// Remote address just past the last guard byte.
    pub(super) fn span_end(&self) -> u64 {
        self.buf.at(GUARD + self.len + GUARD).addr() as u64
    }

    /// The key a peer got for this region.
    pub(super) fn key(&self) -> &RemoteKey {
        &self.key
    }

    /// The packed key.
    pub(super) fn packed(&self) -> Vec<u8> {
        let memh = self.memh.as_ref().expect("region is registered");
        self.md.mkey_pack(memh).expect("mkey_pack of a live region")
    }

    /// Guards and range, as bytes.
    pub(super) fn snapshot(&self) -> Vec<u8> {
        self.buf.read()
    }

    /// The registered range, as bytes.
    pub(super) fn contents(&self) -> Vec<u8> {
        self.buf.read()[GUARD..GUARD + self.len].to_vec()
    }

    /// Overwrites the range at `off`.
    pub(super) fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len, "write beyond the range");
        self.buf.write(GUARD + off, data);
    }

    /// Panics unless both guards hold their fill.
    pub(super) fn assert_guards(&self, name: &str, what: &str) {
        let all = self.buf.read();
        let (head, rest) = all.split_at(GUARD);
        let tail = &rest[self.len..];
        if let Some(i) = head.iter().position(|&b| b != GUARD_BYTE) {
            panic!("{name}: {what}: wrote {} bytes before the range", GUARD - i);
        }
        if let Some(i) = tail.iter().rposition(|&b| b != GUARD_BYTE) {
            panic!("{name}: {what}: wrote {} bytes past the range", i + 1);
        }
    }

    /// Deregisters now.
    pub(super) fn dereg(&mut self) -> Result<()> {
        let memh = self.memh.take().expect("region is registered");
        self.md.mem_dereg(&memh)
    }

    /// The handle, while registered.
    pub(super) fn memh(&self) -> &MemHandle {
        self.memh.as_ref().expect("region is registered")
    }

    /// Registers the same range again (after [`Region::dereg`]) with
    /// `access`; returns the previous key.
    pub(super) fn reregister(&mut self, name: &str, access: Access) -> RemoteKey {
        assert!(self.memh.is_none(), "region is still registered");
        let (memh, key) = register(self.md, name, &self.buf, self.len, access);
        self.memh = Some(memh);
        std::mem::replace(&mut self.key, key)
    }
}

/// Registers `len` bytes of `buf` after its first guard, packs the key and
/// unpacks it as the peer would; panics (naming the fixture) on failure.
fn register(
    md: &dyn MemoryDomain,
    name: &str,
    buf: &RawBuf,
    len: usize,
    access: Access,
) -> (MemHandle, RemoteKey) {
    // SAFETY: the range lies in `buf`, which its `Region` owns, accesses
    // only through the raw pointer, and frees only after deregistering (in
    // `Drop`).
    let memh = unsafe { md.mem_reg(buf.at(GUARD), len, access) }
        .unwrap_or_else(|e| panic!("{name}: mem_reg of {len} bytes failed: {e}"));
    let packed = md
        .mkey_pack(&memh)
        .unwrap_or_else(|e| panic!("{name}: mkey_pack failed: {e}"));
    let key = md
        .rkey_unpack(&packed)
        .unwrap_or_else(|e| panic!("{name}: rkey_unpack of a fresh key failed: {e}"));
    (memh, key)
}

impl Drop for Region<'_> {
    fn drop(&mut self) {
        if let Some(memh) = self.memh.take() {
            let _ = self.md.mem_dereg(&memh);
        }
    }
}

/// A token not used before in this process.
fn fresh_token() -> Token {
    static NEXT: AtomicU64 = AtomicU64::new(1 << 40);
    Token(NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A one-sided operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// `put_zcopy`.
    Put,
    /// `get_zcopy`.
    Get,
}

impl Op {
    pub(super) fn name(self) -> &'static str {
        match self {
            Op::Put => "put_zcopy",
            Op::Get => "get_zcopy",
        }
    }
}

/// Runs `op` on `a`'s `ep` to completion: retried past `NoResource`; if
/// `InFlight`, driven until its completion, whose result it returns. A
/// `Done` operation must not report a completion too.
///
/// The ranges of `iov` must be in [`RawBuf`]s or [`Region`]s created
/// before the pair (see the module doc).
pub(super) fn run(
    p: &mut Pair,
    op: Op,
    ep: EpId,
    iov: &[Iov],
    remote: u64,
    key: &RemoteKey,
) -> Result<()> {
    let token = fresh_token();
    let posted = p.retry(
        op.name(),
        |a| match op {
            // SAFETY: the ranges lie in buffers that outlive the pair (the
            // caller's side of this function's contract), and this function
            // returns only once the operation completed.
            Op::Put => unsafe { a.put().unwrap().put_zcopy(ep, iov, remote, key, token) },
            // SAFETY: as above; the ranges are written only by the
            // operation until it completes.
            Op::Get => unsafe {
                a.get()
                    .unwrap()
                    .get_zcopy(ep, &crate::testing::writable(iov), remote, key, token)
            },
        },
        |r| *r == Posted::NoResource,
    )?;
    let name = p.name().to_owned();
    match posted {
        Posted::InFlight => {
            p.drive_until(op.name(), |p| p.sink_a.completion(token).is_some());
            assert_eq!(
                p.sink_a.completions(token),
                1,
                "{name}: {} completed more than once",
                op.name()
            );
            match p.sink_a.completion(token) {
                Some(Err(e)) => Err(e.duplicate()),
                _ => Ok(()),
            }
        }
        _ => {
            p.progress();
            assert_eq!(
                p.sink_a.completions(token),
                0,
                "{name}: {} returned Done and reported a completion",
                op.name()
            );
            Ok(())
        }
    }
}

/// An endpoint from `a` to `b` that has not been reported failed: `ep`
/// itself, or a new one (destroying `ep`) once the transport failed it,
/// as it may after a refused access.
pub(super) fn usable_ep(p: &mut Pair, ep: EpId) -> EpId {
    if p.sink_a.ep_failures(ep) == 0 {
        return ep;
    }
    p.a().ep_destroy(ep);
    p.sink_a.events.clear();
    p.ep_ab()
}

/// Panics unless `r` is an error.
pub(super) fn expect_refused(name: &str, what: &str, r: Result<()>) -> Error {
    match r {
        Err(e) => e,
        Ok(()) => panic!("{name}: {what} was accepted"),
    }
}

/// Panics, naming the first difference, unless `got` equals `want`.
pub(super) fn assert_bytes(name: &str, what: &str, got: &[u8], want: &[u8]) {
    if got != want {
        let at = got.iter().zip(want).position(|(x, y)| x != y);
        panic!(
            "{name}: {what}: {} bytes, expected {}, first difference at {at:?}",
            got.len(),
            want.len()
        );
    }
}
