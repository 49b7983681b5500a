//! The wireup payload of the bootstrap connection ([`Wireup`]): what a
//! side sends the other so that it can reach it.
//!
//! Encoding: `u32` length and the worker address (1 to [`MAX_FRAME`]
//! bytes); `u32` length and the packed remote key of the sender's exposed
//! buffer (at most [`MAX_RKEY`] bytes); `u64` address of that buffer. Tag
//! tests expose nothing: key empty and address 0. A key without an
//! address, or an address without a key, is malformed.

use super::bootstrap::{MAX_FRAME, MAX_RKEY};
use super::error::{PerfError, Result};
use super::wire::{put_blob, Reader};

/// What a side needs to reach the other: its worker address and, for
/// one-sided tests, the packed remote key and the address of its exposed
/// (receive) buffer; empty and 0 for tag tests. The module doc has
/// the encoding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wireup {
    /// Worker address.
    pub address: Vec<u8>,
    /// Packed remote key of the receive buffer.
    pub rkey: Vec<u8>,
    /// Address of the receive buffer in the sender's memory.
    pub recv_buffer: u64,
}

impl Wireup {
    /// `u32` length + address, `u32` length + rkey, `u64` buffer address
    /// (see the module doc).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.address.len() + self.rkey.len());
        put_blob(&mut out, &self.address);
        put_blob(&mut out, &self.rkey);
        out.extend_from_slice(&self.recv_buffer.to_le_bytes());
        out
    }

    /// Parses a wireup payload from the peer.
    pub fn decode(payload: &[u8]) -> Result<Wireup> {
        let mut r = Reader::new(payload, "wireup");
        let address = r.blob(MAX_FRAME)?.to_vec();
        let rkey = r.blob(MAX_RKEY)?.to_vec();
        let recv_buffer = r.u64()?;
        r.finish()?;
        if address.is_empty() {
            return Err(PerfError::Protocol("wireup: empty worker address".into()));
        }
        if rkey.is_empty() != (recv_buffer == 0) {
            return Err(PerfError::Protocol(format!(
                "wireup: a remote key of {} bytes with buffer address {recv_buffer:#x} \
                 (both or neither must be given)",
                rkey.len()
            )));
        }
        Ok(Wireup {
            address,
            rkey,
            recv_buffer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wireup_round_trip_and_garbage() {
        let w = Wireup {
            address: vec![1, 2, 3, 4],
            rkey: vec![9; 40],
            recv_buffer: 0xdead_beef,
        };
        let bytes = w.encode();
        assert_eq!(Wireup::decode(&bytes).unwrap(), w);
        for len in 0..bytes.len() {
            assert!(Wireup::decode(&bytes[..len]).is_err(), "len {len}");
        }
        let mut long = bytes.clone();
        long.push(1);
        assert!(Wireup::decode(&long).is_err());
        let empty = Wireup::default().encode();
        assert!(Wireup::decode(&empty).is_err());
    }

    #[test]
    fn wireup_key_and_buffer_come_together() {
        let tag = Wireup {
            address: vec![7],
            ..Wireup::default()
        };
        assert_eq!(Wireup::decode(&tag.encode()).unwrap(), tag);
        let one_sided = Wireup {
            address: vec![7],
            rkey: vec![1; MAX_RKEY],
            recv_buffer: 1 << 40,
        };
        assert_eq!(Wireup::decode(&one_sided.encode()).unwrap(), one_sided);
        for (rkey, recv_buffer) in [(vec![], 0x1000), (vec![1, 2], 0)] {
            let w = Wireup {
                address: vec![7],
                rkey,
                recv_buffer,
            };
            let e = Wireup::decode(&w.encode()).unwrap_err();
            assert!(e.to_string().contains("both or neither"), "{e}");
        }
        let long = Wireup {
            address: vec![7],
            rkey: vec![1; MAX_RKEY + 1],
            recv_buffer: 8,
        };
        let e = Wireup::decode(&long.encode()).unwrap_err();
        assert!(e.to_string().contains("exceeds the limit"), "{e}");
    }
}
