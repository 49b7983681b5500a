//! Buffers that move into the worker for the owned tier.
#![allow(unsafe_code)]

/// A byte buffer whose memory stays put while it is owned by the worker.
///
/// # Safety
///
/// `as_ptr()` and `len()` must return the same values every time while the
/// value is not touched through `&mut`, and the memory must stay valid and
/// unmodified until the value is dropped, even if the value itself moves.
pub unsafe trait IoBuf: Send + 'static {
    /// Start of the bytes.
    fn as_ptr(&self) -> *const u8;
    /// Number of bytes.
    fn len(&self) -> usize;
    /// Whether there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A writable [`IoBuf`] for receives.
///
/// # Safety
///
/// As for [`IoBuf`], and `as_mut_ptr()` points at `len()` writable bytes.
pub unsafe trait IoBufMut: IoBuf {
    /// Start of the writable bytes.
    fn as_mut_ptr(&mut self) -> *mut u8;
}

// SAFETY: a Vec's heap buffer does not move when the Vec moves, and it is
// not resized while the worker owns the Vec.
unsafe impl IoBuf for Vec<u8> {
    fn as_ptr(&self) -> *const u8 {
        self.as_slice().as_ptr()
    }
    fn len(&self) -> usize {
        self.as_slice().len()
    }
}

// SAFETY: as for IoBuf on Vec<u8>.
unsafe impl IoBufMut for Vec<u8> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_slice().as_mut_ptr()
    }
}

// SAFETY: a boxed slice's memory does not move with the box.
unsafe impl IoBuf for Box<[u8]> {
    fn as_ptr(&self) -> *const u8 {
        (**self).as_ptr()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

// SAFETY: as for IoBuf on Box<[u8]>.
unsafe impl IoBufMut for Box<[u8]> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        (**self).as_mut_ptr()
    }
}

// SAFETY: static memory is valid forever and immutable through `&`.
unsafe impl IoBuf for &'static [u8] {
    fn as_ptr(&self) -> *const u8 {
        (*self).as_ptr()
    }
    fn len(&self) -> usize {
        (*self).len()
    }
}
