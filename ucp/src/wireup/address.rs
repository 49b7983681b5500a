//! Worker addresses: the bytes peers exchange out of band to meet.
//!
//! Layout (little-endian):
//!
//! ```text
//! u8   version (= 2)
//! u64  worker uuid
//! u8   number of ifaces, then for each:
//!      u8 + bytes   transport name (UTF-8, 1 to 32 bytes)
//!      u8 + bytes   name of the memory domain that owns the iface on
//!                   its worker (UTF-8, 1 to 64 bytes)
//!      u8 + bytes   device address
//!      u8 + bytes   iface address
//!      f64 x 3      latency (s), overhead (s), bandwidth (B/s)
//!      u32          capability bits (uct::Caps)
//! ```
//!
//! Both sides run lane selection on the same numbers, so the model travels
//! with the address. The memory domain name tells a peer which entry of a
//! packed remote key belongs to each of its lanes: keys are packed per
//! memory domain of their owner, and domain names may differ between hosts
//! (an RDMA domain is named after its device). A decoder fed garbage
//! returns an error.
//!
//! Version 1 had no memory domain names; this build refuses it.

use crate::uct::{Caps, PerfModel};
use crate::{Error, Result};

/// Address version this build writes and reads.
pub const VERSION: u8 = 2;

/// Longest transport name in an address, in bytes.
pub const MAX_TL_NAME: usize = 32;

/// Longest memory domain name in an address, in bytes.
pub const MAX_MD_NAME: usize = 64;

/// One iface in a worker address.
#[derive(Debug, Clone, PartialEq)]
pub struct IfaceEntry {
    /// Transport name.
    pub tl_name: String,
    /// Name of the memory domain that owns the iface on its worker: the
    /// name under which that worker's packed remote keys carry the key
    /// this iface's operations use.
    pub md_name: String,
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
    let len = u8::try_from(b.len()).map_err(|_| Error::Limit {
        op: "address field length",
        len: b.len(),
        max: u8::MAX.into(),
    })?;
    out.push(len);
    out.extend_from_slice(b);
    Ok(())
}

/// Writes a name the decoder accepts: 1 to `max` bytes.
fn put_name(out: &mut Vec<u8>, what: &str, name: &str, max: usize) -> Result<()> {
    if name.is_empty() || name.len() > max {
        return Err(Error::InvalidParam(format!(
            "{what} {name:?} of {} bytes (1 to {max})",
            name.len()
        )));
    }
    put_bytes(out, name.as_bytes())
}

impl WorkerAddress {
    /// Encodes the address.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = vec![VERSION];
        out.extend_from_slice(&self.uuid.to_le_bytes());
        let n = u8::try_from(self.ifaces.len()).map_err(|_| Error::Limit {
            op: "worker address ifaces",
            len: self.ifaces.len(),
            max: u8::MAX.into(),
        })?;
        out.push(n);
        for i in &self.ifaces {
            put_name(&mut out, "transport name", &i.tl_name, MAX_TL_NAME)?;
            put_name(&mut out, "memory domain name", &i.md_name, MAX_MD_NAME)?;
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
            let tl_name = r.name("transport name", MAX_TL_NAME)?;
            let md_name = r.name("memory domain name", MAX_MD_NAME)?;
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
                md_name,
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
    /// A length-prefixed UTF-8 name of 1 to `max` bytes.
    fn name(&mut self, what: &str, max: usize) -> Result<String> {
        let b = self.bytes()?;
        if b.is_empty() || b.len() > max {
            return Err(bad(format!("{what} of {} bytes", b.len())));
        }
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| bad(format!("{what} is not UTF-8")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WorkerAddress {
        WorkerAddress {
            uuid: 0x1122_3344_5566_7788,
            ifaces: vec![IfaceEntry {
                tl_name: "rc_iwarp".into(),
                md_name: "iwarp_eth1".into(),
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
    fn layout_is_the_documented_one() {
        let a = sample();
        let mut want = vec![2];
        want.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        want.push(1);
        want.extend_from_slice(b"\x08rc_iwarp");
        want.extend_from_slice(b"\x0aiwarp_eth1");
        want.extend_from_slice(&[4, 127, 0, 0, 1]);
        want.extend_from_slice(&[2, 1, 2]);
        for v in [5e-6f64, 1e-6, 2.2e9] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        let caps = (Caps::AM_SHORT | Caps::AM_BCOPY).bits();
        want.extend_from_slice(&caps.to_le_bytes());
        assert_eq!(a.encode().unwrap(), want);
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
        for version in [0, 1, 3, 0xff] {
            let mut other = b.clone();
            other[0] = version;
            assert!(WorkerAddress::decode(&other).is_err(), "version {version}");
        }
    }

    #[test]
    fn names_out_of_bounds_are_refused_both_ways() {
        let names = [
            (String::new(), true),
            ("x".repeat(MAX_MD_NAME), false),
            ("x".repeat(MAX_MD_NAME + 1), true),
        ];
        for (md_name, refused) in names {
            let mut a = sample();
            a.ifaces[0].md_name = md_name.clone();
            assert_eq!(a.encode().is_err(), refused, "{} bytes", md_name.len());
        }
        let mut a = sample();
        a.ifaces[0].tl_name = "x".repeat(MAX_TL_NAME + 1);
        assert!(a.encode().is_err());

        // The same lengths written by hand: the memory domain name's
        // length byte follows the transport name.
        let b = sample().encode().unwrap();
        let at = 1 + 8 + 1 + 1 + "rc_iwarp".len();
        let rest = &b[at + 1 + "iwarp_eth1".len()..];
        for name in [&b""[..], &[b'x'; MAX_MD_NAME + 1][..], &[0xff, 0xfe][..]] {
            let mut forged = b[..at].to_vec();
            forged.push(name.len() as u8);
            forged.extend_from_slice(name);
            forged.extend_from_slice(rest);
            assert!(WorkerAddress::decode(&forged).is_err(), "{name:?}");
        }
    }

    #[test]
    fn fields_and_iface_counts_past_a_byte_are_limits() {
        let mut a = sample();
        a.ifaces[0].dev_addr = vec![0; 300];
        assert!(matches!(
            a.encode(),
            Err(Error::Limit {
                op: "address field length",
                len: 300,
                max: 255
            })
        ));
        let mut a = sample();
        a.ifaces = vec![a.ifaces[0].clone(); 256];
        let e = a.encode().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Limit {
                    len: 256,
                    max: 255,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "worker address ifaces: 256 exceeds the maximum of 255"
        );
    }
}
