//! Worker addresses: the bytes peers exchange out of band to meet.
//!
//! Layout (little-endian):
//!
//! ```text
//! u8   version (= 1)
//! u64  worker uuid
//! u8   number of ifaces, then for each:
//!      u8 + bytes   transport name (UTF-8, at most 32 bytes)
//!      u8 + bytes   device address
//!      u8 + bytes   iface address
//!      f64 x 3      latency (s), overhead (s), bandwidth (B/s)
//!      u32          capability bits (uct::Caps)
//! ```
//!
//! Both sides run lane selection on the same numbers, so the model travels
//! with the address. A decoder fed garbage returns an error.

use crate::uct::{Caps, PerfModel};
use crate::{Error, Result};

/// Address version this build writes and reads.
pub const VERSION: u8 = 1;

/// One iface in a worker address.
#[derive(Debug, Clone, PartialEq)]
pub struct IfaceEntry {
    /// Transport name.
    pub tl_name: String,
    /// Device address.
    pub dev_addr: Vec<u8>,
    /// Iface address.
    pub iface_addr: Vec<u8>,
    /// Performance model of the remote iface.
    pub model: PerfModel,
    /// Capabilities of the remote iface.
    pub caps: Caps,
}

/// A decoded worker address.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerAddress {
    /// The worker's unique id.
    pub uuid: u64,
    /// Its ifaces.
    pub ifaces: Vec<IfaceEntry>,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) -> Result<()> {
    let len = u8::try_from(b.len())
        .map_err(|_| Error::InvalidParam(format!("address field of {} bytes", b.len())))?;
    out.push(len);
    out.extend_from_slice(b);
    Ok(())
}

impl WorkerAddress {
    /// Encodes the address.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = vec![VERSION];
        out.extend_from_slice(&self.uuid.to_le_bytes());
        let n = u8::try_from(self.ifaces.len())
            .map_err(|_| Error::InvalidParam("more than 255 ifaces".into()))?;
        out.push(n);
        for i in &self.ifaces {
            put_bytes(&mut out, i.tl_name.as_bytes())?;
            put_bytes(&mut out, &i.dev_addr)?;
            put_bytes(&mut out, &i.iface_addr)?;
            for v in [i.model.latency, i.model.overhead, i.model.bandwidth] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&i.caps.bits().to_le_bytes());
        }
        Ok(out)
    }

    /// Decodes and validates an address from untrusted bytes.
    pub fn decode(bytes: &[u8]) -> Result<WorkerAddress> {
        let mut r = Reader { b: bytes, at: 0 };
        let version = r.u8()?;
        if version != VERSION {
            return Err(bad(format!(
                "version {version}, this build reads {VERSION}"
            )));
        }
        let uuid = r.u64()?;
        let n = r.u8()?;
        let mut ifaces = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let name = r.bytes()?;
            if name.is_empty() || name.len() > 32 {
                return Err(bad(format!("transport name of {} bytes", name.len())));
            }
            let tl_name = std::str::from_utf8(name)
                .map_err(|_| bad("transport name is not UTF-8".into()))?
                .to_string();
            let dev_addr = r.bytes()?.to_vec();
            let iface_addr = r.bytes()?.to_vec();
            let latency = r.f64()?;
            let overhead = r.f64()?;
            let bandwidth = r.f64()?;
            let ok = |v: f64| v.is_finite() && v >= 0.0;
            if !ok(latency) || !ok(overhead) || !ok(bandwidth) || bandwidth == 0.0 {
                return Err(bad(format!("performance model of {tl_name}")));
            }
            let caps = Caps::from_bits_truncate(r.u32()?);
            ifaces.push(IfaceEntry {
                tl_name,
                dev_addr,
                iface_addr,
                model: PerfModel {
                    latency,
                    overhead,
                    bandwidth,
                },
                caps,
            });
        }
        if r.at != bytes.len() {
            return Err(bad(format!("{} trailing bytes", bytes.len() - r.at)));
        }
        Ok(WorkerAddress { uuid, ifaces })
    }
}

fn bad(why: String) -> Error {
    Error::InvalidAddress(why)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| bad(format!("truncated at byte {}", self.at)))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u8()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WorkerAddress {
        WorkerAddress {
            uuid: 0x1122_3344_5566_7788,
            ifaces: vec![IfaceEntry {
                tl_name: "tcp".into(),
                dev_addr: vec![127, 0, 0, 1],
                iface_addr: vec![1, 2],
                model: PerfModel {
                    latency: 5e-6,
                    overhead: 1e-6,
                    bandwidth: 2.2e9,
                },
                caps: Caps::AM_SHORT | Caps::AM_BCOPY,
            }],
        }
    }

    #[test]
    fn round_trip() {
        let a = sample();
        assert_eq!(WorkerAddress::decode(&a.encode().unwrap()).unwrap(), a);
    }

    #[test]
    fn every_truncation_and_extension_is_an_error() {
        let b = sample().encode().unwrap();
        for n in 0..b.len() {
            assert!(WorkerAddress::decode(&b[..n]).is_err(), "prefix {n}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(WorkerAddress::decode(&longer).is_err());
        let mut v2 = b;
        v2[0] = 2;
        assert!(WorkerAddress::decode(&v2).is_err());
    }
}
