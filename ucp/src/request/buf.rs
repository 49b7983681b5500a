//! Raw views of user buffers held by in-flight requests.
//!
//! This is the one place in ucp that dereferences user memory through raw
//! pointers. Each view is created by an API tier that guarantees the memory
//! stays valid (and, for receive buffers, unaliased) until the request
//! completes: the scope drains before the borrow ends, the owned tier holds
//! the buffer in the request, the raw tier is `unsafe` with that contract.
#![allow(unsafe_code)]

/// A send buffer: read-only bytes valid while its request is active.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendBuf {
    ptr: *const u8,
    len: usize,
    /// Whether a rendezvous registration of it may stay cached.
    cacheable: crate::reg::Cacheable,
}

// SAFETY: the buffer is only read, from the thread that owns the worker; the
// tier that created it keeps the memory alive and unmodified.
unsafe impl Send for SendBuf {}

impl SendBuf {
    /// # Safety
    /// `ptr..ptr+len` must be readable and unmodified until the request
    /// holding this view completes (or `len` is 0).
    pub(crate) unsafe fn new(ptr: *const u8, len: usize) -> SendBuf {
        SendBuf {
            ptr,
            len,
            cacheable: crate::reg::Cacheable::Yes,
        }
    }

    /// Marks the buffer as a bounce buffer of rucx's own, whose rendezvous
    /// registrations are never cached (`crate::reg::Cacheable::No`).
    pub(crate) fn bounce(self) -> SendBuf {
        SendBuf {
            cacheable: crate::reg::Cacheable::No,
            ..self
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn ptr_at(&self, offset: usize) -> *const u8 {
        self.ptr.wrapping_add(offset)
    }

    /// Bytes `offset..offset+len`, clamped to the buffer.
    pub(crate) fn slice(&self, offset: usize, len: usize) -> &[u8] {
        let start = offset.min(self.len);
        let n = len.min(self.len - start);
        if n == 0 {
            return &[];
        }
        // SAFETY: in bounds by the clamps above; valid and unmodified for
        // the request's lifetime by the constructor's contract, and the
        // returned borrow does not outlive `self`'s use in one call.
        unsafe { std::slice::from_raw_parts(self.ptr.add(start), n) }
    }
}

/// A receive buffer: writable bytes owned by its request while active.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecvBuf {
    ptr: *mut u8,
    cap: usize,
    /// Whether a rendezvous registration of it may stay cached.
    cacheable: crate::reg::Cacheable,
}

// SAFETY: written only from the thread that owns the worker; the tier that
// created it grants exclusive access until completion.
unsafe impl Send for RecvBuf {}

impl RecvBuf {
    /// # Safety
    /// `ptr..ptr+cap` must be writable, and accessed by nobody else, until
    /// the request holding this view completes (or `cap` is 0).
    pub(crate) unsafe fn new(ptr: *mut u8, cap: usize) -> RecvBuf {
        RecvBuf {
            ptr,
            cap,
            cacheable: crate::reg::Cacheable::Yes,
        }
    }

    /// As [`SendBuf::bounce`].
    pub(crate) fn bounce(self) -> RecvBuf {
        RecvBuf {
            cacheable: crate::reg::Cacheable::No,
            ..self
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    /// Address of byte `offset` (not dereferenced here).
    pub(crate) fn ptr_at(&self, offset: usize) -> *mut u8 {
        self.ptr.wrapping_add(offset)
    }

    /// Bytes `offset..offset + len` of this buffer (clamped to it), as a
    /// buffer of their own for a request that this buffer's request
    /// waits for.
    pub(crate) fn sub(&self, offset: usize, len: usize) -> RecvBuf {
        let start = offset.min(self.cap);
        RecvBuf {
            ptr: self.ptr.wrapping_add(start),
            cap: len.min(self.cap - start),
            cacheable: self.cacheable,
        }
    }

    /// Copies `data` to `offset`, dropping what falls beyond the capacity.
    /// Returns the number of bytes written.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> usize {
        if offset >= self.cap {
            return 0;
        }
        let n = data.len().min(self.cap - offset);
        if n > 0 {
            // SAFETY: destination in bounds by the checks above and
            // exclusively ours by the constructor's contract; `data` is a
            // live slice that cannot overlap memory lent to the request.
            unsafe { crate::ucs::copy::copy_small(data.as_ptr(), self.ptr.add(offset), n) };
        }
        n
    }
}

impl RecvBuf {
    /// A destination for a transport to write bytes `offset..` (at most
    /// `len`, clamped to the capacity) of this buffer straight from the
    /// wire (`AmSink::am_begin`); `hdr` and `token` as `AmDest` takes them.
    ///
    /// The caller (the receive's protocol) keeps the request open until the
    /// transport reports `am_end` for `token`.
    pub(crate) fn dest(
        &self,
        hdr: usize,
        offset: usize,
        len: usize,
        token: crate::uct::Token,
    ) -> crate::uct::AmDest {
        let start = offset.min(self.cap);
        let n = len.min(self.cap - start);
        // SAFETY: `[start, start + n)` lies in the buffer (clamped above),
        // which is exclusively the request's until it completes
        // (`RecvBuf::new`'s contract); the request does not complete
        // before the transport's `am_end` for `token` (see
        // `proto/direct.rs`), and an iface that is dropped writes no more.
        unsafe { crate::uct::AmDest::new(hdr, self.ptr.wrapping_add(start), n, token) }
    }
}

/// Bytes of a request's send buffer lent to a transport for a zero-copy
/// send or write ([`SendBuf::lend`]).
///
/// What makes handing it to a transport sound: the range lies in the
/// buffer, which stays valid and unchanged until its request completes,
/// and a request does not complete while an operation posted with it is
/// in flight (the protocols count each one; `Core::complete` checks).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lent(crate::uct::Iov);

/// Bytes of a request's receive buffer lent to a transport for a
/// zero-copy read into it ([`RecvBuf::lend`]); as [`Lent`], and the range
/// is the request's alone meanwhile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LentMut(crate::uct::IovMut);

impl Lent {
    /// The range, for the transport.
    pub(crate) fn iov(self) -> crate::uct::Iov {
        self.0
    }
}

impl LentMut {
    /// The range, for the transport.
    pub(crate) fn iov(self) -> crate::uct::IovMut {
        self.0
    }
}

impl SendBuf {
    /// Lends bytes `offset..offset+len`, clamped to the buffer.
    pub(crate) fn lend(&self, offset: usize, len: usize) -> Lent {
        let start = offset.min(self.len);
        let n = len.min(self.len - start);
        Lent(crate::uct::Iov {
            ptr: self.ptr.wrapping_add(start),
            len: n,
        })
    }
}

impl RecvBuf {
    /// Lends bytes `offset..offset+len`, clamped to the capacity.
    pub(crate) fn lend(&self, offset: usize, len: usize) -> LentMut {
        let start = offset.min(self.cap);
        let n = len.min(self.cap - start);
        LentMut(crate::uct::IovMut {
            ptr: self.ptr.wrapping_add(start),
            len: n,
        })
    }
}

impl SendBuf {
    /// Registers the whole buffer with memory domain `md` of `ctx`, for
    /// peers to read (a rendezvous by get).
    ///
    /// The caller keeps the registration in the request, whose completion
    /// releases it (`Core::complete`) before the buffer goes back to its
    /// owner: peers read it only while it is valid and unchanged.
    pub(crate) fn register_for_reads(
        &self,
        ctx: &crate::Context,
        md: usize,
    ) -> crate::ucs::Result<crate::reg::BufReg> {
        // SAFETY: valid and unmodified until the request completes (the
        // constructor's contract), which releases the registration first.
        unsafe {
            ctx.register_buffer(
                md,
                self.ptr.cast_mut(),
                self.len,
                crate::uct::Access::REMOTE_READ,
                self.cacheable,
            )
        }
    }
}

impl RecvBuf {
    /// Registers bytes `start..end` of the buffer with memory domain `md`
    /// of `ctx`, for peers to write (a rendezvous by put, or the tail of a
    /// split one). Fails if the range is not inside the buffer.
    ///
    /// As [`SendBuf::register_for_reads`]: the request keeps the
    /// registration, and completing it releases the registration before
    /// the buffer goes back, so no write of the transfer reaches it after.
    pub(crate) fn register_for_writes(
        &self,
        ctx: &crate::Context,
        md: usize,
        start: usize,
        end: usize,
    ) -> crate::ucs::Result<crate::reg::BufReg> {
        if start > end || end > self.cap {
            return Err(crate::ucs::Error::InvalidParam(format!(
                "registering {start}..{end} of a {}-byte buffer",
                self.cap
            )));
        }
        // SAFETY: in bounds (checked), and the request's alone until it
        // completes (the constructor's contract), which releases the
        // registration first.
        unsafe {
            ctx.register_buffer(
                md,
                self.ptr.wrapping_add(start),
                end - start,
                crate::uct::Access::REMOTE_WRITE,
                self.cacheable,
            )
        }
    }
}

/// Where a fetching one-sided atomic's result goes: a word of the
/// caller's, 8 bytes (a 32-bit value widened) or exactly the operation's
/// width, written when the answer arrives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResultWord {
    ptr: *mut u8,
    /// Bytes written: 8, or 4 for a 32-bit result kept at its width.
    len: u8,
}

// SAFETY: written only from the thread that owns the worker; the caller of
// the operation keeps the word valid until completion.
unsafe impl Send for ResultWord {}

impl ResultWord {
    /// # Safety
    /// The 8 bytes at `ptr` (any alignment) stay writable, and untouched
    /// by anyone else, until the request holding this completes.
    pub(crate) unsafe fn new(ptr: *mut u64) -> ResultWord {
        ResultWord {
            ptr: ptr.cast(),
            len: 8,
        }
    }

    /// A word of `width` bytes (4 or 8; anything else is taken as 8).
    ///
    /// # Safety
    /// As for [`ResultWord::new`], for `width` bytes.
    pub(crate) unsafe fn exact(ptr: *mut u8, width: usize) -> ResultWord {
        ResultWord {
            ptr,
            len: if width == 4 { 4 } else { 8 },
        }
    }

    /// Stores `v` (the request has not completed: the caller checks).
    pub(crate) fn write(self, v: u64) {
        // SAFETY: `len` bytes valid and the request's until it completes
        // (the constructors' contracts).
        unsafe {
            if self.len == 4 {
                self.ptr.cast::<u32>().write_unaligned(v as u32)
            } else {
                self.ptr.cast::<u64>().write_unaligned(v)
            }
        }
    }
}

/// Rebuilds the `&'a mut [u8]` that a scoped receive borrowed.
///
/// # Safety
/// `b` must come from a `&'a mut [u8]` whose borrow was moved into the
/// request, and the request must have completed.
pub(crate) unsafe fn into_mut_slice<'a>(b: RecvBuf) -> &'a mut [u8] {
    if b.cap == 0 {
        return &mut [];
    }
    // SAFETY: by the contract, the memory is the caller's `&'a mut [u8]`,
    // nobody else accesses it any more.
    unsafe { std::slice::from_raw_parts_mut(b.ptr, b.cap) }
}
