//! Bounce buffers of requests whose datatype is not contiguous
//! (`crate::dt`): a send's packed bytes, or a receive's landing area and
//! how to unpack it into the caller's layout when it completes.

use super::Info;
use crate::Result;
use std::any::Any;

/// Unpacks a completed receive's bytes into the datatype value that the
/// request's owner slot holds (monomorphised for its type).
pub(crate) type UnpackFn = fn(&mut (dyn Any + Send), &[u8]) -> Result<()>;

/// A request's bounce buffer.
pub(crate) struct Staged {
    /// The packed message (a send), or where it lands (a receive). Its
    /// heap memory is what the request's buffer view points at, so it is
    /// dropped only with the request or at completion.
    pub(crate) bounce: Vec<u8>,
    /// For a receive: the unpacking of `bounce` into the owner.
    pub(crate) unpack: Option<UnpackFn>,
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged")
            .field("bounce", &self.bounce.len())
            .field("unpack", &self.unpack.is_some())
            .finish()
    }
}

impl Staged {
    /// Finishes a request that completed with `result`: a receive's bytes
    /// go to `owner`. A failed unpack fails the request. The bounce
    /// buffer comes back, for reuse.
    pub(crate) fn finish(
        self,
        owner: Option<&mut (dyn Any + Send)>,
        result: Result<Info>,
    ) -> (Result<Info>, Vec<u8>) {
        let Staged { bounce, unpack } = self;
        let result = match (unpack, owner, result) {
            (Some(unpack), Some(owner), Ok(info)) => {
                let n = info.length.min(bounce.len());
                unpack(owner, &bounce[..n]).map(|()| info)
            }
            (_, _, result) => result,
        };
        (result, bounce)
    }
}

/// The [`UnpackFn`] of datatype `D`.
pub(crate) fn unpack_into<D: crate::dt::Unpack>(
    owner: &mut (dyn Any + Send),
    data: &[u8],
) -> Result<()> {
    match owner.downcast_mut::<D>() {
        Some(d) => d.unpack(0, data),
        None => Err(crate::Error::InvalidParam(
            "receive datatype changed under its request".into(),
        )),
    }
}
