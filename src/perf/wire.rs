//! Little-endian reading and writing for the bootstrap encodings.

use super::error::{PerfError, Result};

/// Reads fixed-width little-endian fields from untrusted bytes.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`; `what` names the structure in errors.
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader { buf, pos: 0, what }
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| {
                PerfError::Protocol(format!(
                    "{}: truncated at byte {} ({} bytes present, {} more needed)",
                    self.what,
                    self.pos,
                    self.buf.len(),
                    n
                ))
            })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    /// A `u8`.
    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// A little-endian `u16`.
    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A little-endian `u32`.
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A little-endian `u64`.
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A little-endian IEEE 754 `f64`.
    pub(crate) fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// A `u32` length followed by that many bytes, at most `max`.
    pub(crate) fn blob(&mut self, max: usize) -> Result<&'a [u8]> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(PerfError::Protocol(format!(
                "{}: field of {len} bytes exceeds the limit of {max}",
                self.what
            )));
        }
        self.bytes(len)
    }

    /// Fails unless every byte was consumed.
    pub(crate) fn finish(self) -> Result<()> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(PerfError::Protocol(format!(
                "{}: {} trailing bytes",
                self.what,
                self.buf.len() - self.pos
            )))
        }
    }
}

/// Appends a `u32` length and the bytes.
pub(crate) fn put_blob(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_in_order() {
        let mut buf = vec![7u8];
        buf.extend_from_slice(&0x1234u16.to_le_bytes());
        buf.extend_from_slice(&0xdead_beefu32.to_le_bytes());
        buf.extend_from_slice(&u64::MAX.to_le_bytes());
        buf.extend_from_slice(&1.5f64.to_bits().to_le_bytes());
        put_blob(&mut buf, b"abc");
        let mut r = Reader::new(&buf, "test");
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u16().unwrap(), 0x1234);
        assert_eq!(r.u32().unwrap(), 0xdead_beef);
        assert_eq!(r.u64().unwrap(), u64::MAX);
        assert_eq!(r.f64().unwrap(), 1.5);
        assert_eq!(r.blob(3).unwrap(), b"abc");
        r.finish().unwrap();
    }

    #[test]
    fn truncation_and_limits_are_errors() {
        assert!(Reader::new(&[1, 2, 3], "t").u32().is_err());
        let mut buf = Vec::new();
        put_blob(&mut buf, b"abcdef");
        assert!(Reader::new(&buf, "t").blob(5).is_err());
        // Declared length beyond the buffer.
        let buf = 100u32.to_le_bytes();
        assert!(Reader::new(&buf, "t").blob(1000).is_err());
        let mut r = Reader::new(&[1, 2], "t");
        r.u8().unwrap();
        assert!(r.finish().is_err());
    }
}
