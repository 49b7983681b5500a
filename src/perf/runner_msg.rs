//! What the message loops do with a message that arrived: active
//! messages taken from the handler, checks of length and content, and the
//! end-of-stream acknowledgement.

use super::{Runner, TAG, TAG_MASK};
use crate::perf::error::{PerfError, Result};
use crate::perf::pattern;
use crate::perf::worker::{PerfWorker, Started};

impl<W: PerfWorker> Runner<'_, W> {
    /// Waits for active message `sn` to reach the handler; with `-V`
    /// copies it into its slot and checks it.
    pub(super) fn am_recv(&mut self, sn: u64) -> Result<()> {
        loop {
            let out = if self.st.validate {
                // SAFETY: no operation uses receive slots in active
                // message tests; the handler's copy is the only writer.
                unsafe { self.st.recv.slice_mut(sn) }
            } else {
                &mut []
            };
            if let Some(len) = self.w.am_take(out)? {
                if len != self.st.msg_len || self.st.validate {
                    self.received(sn, len)?;
                }
                return Ok(());
            }
            self.poll()?;
        }
    }

    /// Checks a finished receive of message `sn`.
    #[cold]
    pub(super) fn received(&mut self, sn: u64, len: usize) -> Result<()> {
        if len != self.st.msg_len {
            return Err(PerfError::Length {
                iter: sn,
                expected: self.st.msg_len,
                actual: len,
            });
        }
        if self.st.validate {
            // SAFETY: the receive into this slot has finished and no other
            // operation uses the slot until a later `recv` posts one.
            let buf = unsafe { self.st.recv.slice_mut(sn) };
            pattern::check(buf, sn).map_err(|m| PerfError::Validation {
                iter: sn,
                offset: m.offset,
                expected: m.expected,
                actual: m.actual,
            })?;
        }
        Ok(())
    }

    /// Sends (`send == true`) or receives the 1-byte end-of-stream
    /// acknowledgement and waits for it.
    pub(super) fn ack(&mut self, send: bool) -> Result<()> {
        let ptr = self.st.ack.ptr(0);
        // SAFETY: the 1-byte ack buffer belongs to `st` and is used by this
        // one operation, which is waited for below (or leaked on failure).
        let started = unsafe {
            if send {
                self.w.tag_send(ptr, 1, TAG, false)
            } else {
                self.w.tag_recv(ptr, 1, TAG, TAG_MASK)
            }
        }?;
        let len = match started {
            Started::Done(len) => len,
            Started::InFlight(req) => loop {
                if let Some(outcome) = self.w.test(req) {
                    break outcome?;
                }
                self.poll()?;
            },
        };
        if !send && len != 1 {
            return Err(PerfError::Protocol(format!(
                "the end-of-stream acknowledgement has {len} bytes, not 1"
            )));
        }
        Ok(())
    }
}
