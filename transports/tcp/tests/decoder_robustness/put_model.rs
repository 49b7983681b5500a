//! The put part of the model: PUT frames into registered windows of the
//! iface under test, and the acknowledgements it must answer.
//!
//! Layouts as documented in the crate (`wire.rs` for the frames, `rkey.rs`
//! for the key), re-stated here from that documentation.

use uct::{Access, AmId, MemHandle, MemoryDomain};

/// Frame id of a put.
pub(crate) const CTRL_PUT: AmId = 0xf2;
/// Frame id of a put's acknowledgement.
pub(crate) const CTRL_PUT_ACK: AmId = 0xf3;
/// Length of a put header.
pub(crate) const PUT_HDR: usize = 56;
/// Length of an acknowledgement's payload.
pub(crate) const ACK_LEN: usize = 12;
/// Acknowledgement statuses.
pub(crate) const OK: u32 = 0;
pub(crate) const NO_REGISTRATION: u32 = 1;
pub(crate) const FOREIGN: u32 = 2;
pub(crate) const ACCESS: u32 = 3;

/// A registration of the iface under test, as a peer would name it.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// The owner fields in put-header order: host id, nonce, pid.
    pub(crate) owner: [u8; 20],
    pub(crate) index: u32,
    pub(crate) generation: u32,
    pub(crate) secret: u64,
    pub(crate) addr: u64,
    pub(crate) len: usize,
    /// Still registered.
    pub(crate) live: bool,
    /// Registered with remote write rights.
    pub(crate) writable: bool,
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl Window {
    /// The window of a registration, from its packed key (offsets of the
    /// documented key layout).
    pub(crate) fn of_key(packed: &[u8], memh: &MemHandle, live: bool) -> Window {
        assert_eq!(packed.len(), 64, "tcp key length");
        let mut owner = [0u8; 20];
        owner[..8].copy_from_slice(&packed[8..16]); // host id
        owner[8..16].copy_from_slice(&packed[20..28]); // nonce
        owner[16..].copy_from_slice(&packed[16..20]); // pid
        Window {
            owner,
            index: le32(packed, 28),
            generation: le32(packed, 32),
            secret: le64(packed, 36),
            addr: memh.addr as u64,
            len: memh.len,
            live,
            writable: memh.access.contains(Access::REMOTE_WRITE),
        }
    }

    /// A whole PUT frame of `data` to `off` bytes from the window's start
    /// (negative: before it).
    pub(crate) fn put(&self, seq: u64, off: i64, data: &[u8]) -> Vec<u8> {
        let mut v = super::frame_hdr(CTRL_PUT, (PUT_HDR + data.len()) as u32).to_vec();
        v.extend_from_slice(&seq.to_le_bytes());
        v.extend_from_slice(&self.addr.wrapping_add_signed(off).to_le_bytes());
        v.extend_from_slice(&self.owner);
        v.extend_from_slice(&self.index.to_le_bytes());
        v.extend_from_slice(&self.generation.to_le_bytes());
        v.extend_from_slice(&self.secret.to_le_bytes());
        v.extend_from_slice(&(data.len() as u32).to_le_bytes());
        v.extend_from_slice(data);
        v
    }
}

/// Registers `init` with `access` on `md` (deregistering it again unless
/// `live`). The buffer is leaked: a window may still be written by a late
/// frame, so its memory stays valid for the life of the process.
pub(crate) fn window(md: &dyn MemoryDomain, init: &[u8], access: Access, live: bool) -> Window {
    let ptr = Box::leak(init.to_vec().into_boxed_slice()).as_mut_ptr();
    // `read` and `reset` reach it from its address.
    ptr.expose_provenance();
    // SAFETY: the memory is leaked (valid forever) and reached only through
    // its raw pointer (`read`/`reset`), never through a reference.
    let memh = unsafe { md.mem_reg(ptr, init.len(), access) }.expect("mem_reg");
    let packed = md.mkey_pack(&memh).expect("mkey_pack");
    if !live {
        md.mem_dereg(&memh).expect("mem_dereg");
    }
    Window::of_key(&packed, &memh, live)
}

impl Window {
    /// The window's bytes.
    pub(crate) fn read(&self) -> Vec<u8> {
        let p = std::ptr::with_exposed_provenance::<u8>(self.addr as usize);
        // SAFETY: leaked memory of `len` bytes (see `window`), with the
        // provenance exposed there; nothing writes it during the call (the
        // iface runs on this thread).
        unsafe { std::slice::from_raw_parts(p, self.len) }.to_vec()
    }

    /// Overwrites the window's bytes with `data` (`len` bytes).
    pub(crate) fn reset(&self, data: &[u8]) {
        assert_eq!(data.len(), self.len);
        let p = std::ptr::with_exposed_provenance_mut::<u8>(self.addr as usize);
        // SAFETY: as for `read`; writable leaked memory.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, self.len) };
    }
}

/// What the model makes of one complete put header: the status, and where
/// (window, offset) its data goes when accepted.
pub(crate) fn judge(hdr: &[u8], windows: &[Window]) -> (u32, Option<(usize, usize)>) {
    let addr = le64(hdr, 8);
    let len = le32(hdr, 52) as u64;
    let mine = windows.first().map(|w| w.owner);
    if Some(&hdr[16..36]) != mine.as_ref().map(|o| &o[..]) {
        return (FOREIGN, None);
    }
    let (index, generation, secret) = (le32(hdr, 36), le32(hdr, 40), le64(hdr, 44));
    // A key names a registration only with its secret, which only the
    // windows' keys carry (any other live registration of the process has
    // a secret of its own, unknown here): anything else, like a window
    // that ended, names nothing.
    let Some((i, w)) = windows.iter().enumerate().find(|(_, w)| {
        w.live && w.index == index && w.generation == generation && w.secret == secret
    }) else {
        return (NO_REGISTRATION, None);
    };
    let inside = addr
        .checked_sub(w.addr)
        .filter(|off| off.checked_add(len).is_some_and(|end| end <= w.len as u64));
    match inside {
        Some(off) if w.writable => (OK, Some((i, off as usize))),
        _ => (ACCESS, None),
    }
}

/// The acknowledgements in what the iface sent back (ACCEPT, REJECT and
/// acknowledgement frames; anything else is a bug).
pub(crate) fn acks_in(mut bytes: &[u8]) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    while let Some((hdr, rest)) = bytes.split_first_chunk::<5>() {
        let len = le32(hdr, 1) as usize;
        match hdr[0] {
            super::CTRL_ACCEPT | super::CTRL_REJECT => assert_eq!(len, 0),
            CTRL_PUT_ACK => {
                assert_eq!(len, ACK_LEN, "acknowledgement length");
                if rest.len() < ACK_LEN {
                    break;
                }
                out.push((le64(rest, 0), le32(rest, 8)));
            }
            id => panic!("the iface sent frame id {id} to a raw peer"),
        }
        bytes = &rest[len.min(rest.len())..];
    }
    out
}

/// Whether `got` statuses are the predicted ones.
pub(crate) fn acks_match(got: &[(u64, u32)], want: &[(u64, u32)]) -> bool {
    got == want
}
