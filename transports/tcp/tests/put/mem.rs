//! Buffers reached only through raw pointers, and registrations of them.

use rucx_tcp::COMPONENT;
use uct::{Access, Component, Iov, MemHandle, MemoryDomain, RemoteKey};

/// The `tcp` memory domain (opened once per test).
pub(crate) fn md() -> Box<dyn MemoryDomain> {
    COMPONENT
        .md_open()
        .expect("open the tcp memory domain")
        .pop()
        .expect("one memory domain")
}

/// A heap buffer that operations read or write; no Rust reference to it
/// lives while one may.
#[derive(Debug)]
pub(crate) struct Mem {
    ptr: *mut u8,
    len: usize,
}

impl Mem {
    pub(crate) fn new(data: &[u8]) -> Mem {
        let b: Box<[u8]> = data.into();
        let len = b.len();
        Mem {
            ptr: Box::into_raw(b).cast::<u8>(),
            len,
        }
    }

    pub(crate) fn addr(&self, off: usize) -> u64 {
        assert!(off <= self.len);
        self.ptr.addr() as u64 + off as u64
    }

    pub(crate) fn iov(&self, off: usize, len: usize) -> Iov {
        assert!(off + len <= self.len);
        Iov {
            ptr: self.ptr.wrapping_add(off),
            len,
        }
    }

    pub(crate) fn read(&self) -> Vec<u8> {
        // SAFETY: `ptr` owns `len` initialized bytes; tests read only when
        // no operation on them is in flight.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.to_vec()
    }

    pub(crate) fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: in bounds; nothing else accesses the buffer meanwhile.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        let s = std::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
        // SAFETY: from `Box::into_raw` in `new`, freed only here.
        drop(unsafe { Box::from_raw(s) });
    }
}

/// A registered buffer with its key as a peer unpacked it; deregistered
/// when dropped (before its memory is freed).
pub(crate) struct Reg<'m> {
    md: &'m dyn MemoryDomain,
    memh: Option<MemHandle>,
    key: RemoteKey,
    pub(crate) mem: Mem,
}

impl<'m> Reg<'m> {
    pub(crate) fn new(md: &'m dyn MemoryDomain, data: &[u8], access: Access) -> Reg<'m> {
        let mem = Mem::new(data);
        // SAFETY: `mem` lives in the `Reg`, is reached only through its
        // pointer, and is freed after the deregistration in `Drop`.
        let memh = unsafe { md.mem_reg(mem.ptr, mem.len, access) }.expect("mem_reg");
        let packed = md.mkey_pack(&memh).expect("mkey_pack");
        let key = md.rkey_unpack(&packed).expect("rkey_unpack");
        Reg {
            md,
            memh: Some(memh),
            key,
            mem,
        }
    }

    pub(crate) fn key(&self) -> &RemoteKey {
        &self.key
    }

    pub(crate) fn addr(&self, off: usize) -> u64 {
        self.mem.addr(off)
    }

    pub(crate) fn dereg(&mut self) {
        let h = self.memh.take().expect("registered");
        self.md.mem_dereg(&h).expect("mem_dereg");
    }
}

impl Drop for Reg<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.memh.take() {
            let _ = self.md.mem_dereg(&h);
        }
    }
}
