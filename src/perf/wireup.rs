//! The wireup payload of the bootstrap connection ([`Wireup`]): what a
//! side sends the other so that it can reach it.
//!
//! Encoding: `u32` length and the worker address (at most [`MAX_FRAME`]
//! bytes); `u32` length and the packed remote key of the sender's exposed
//! buffer (at most [`MAX_RKEY`] bytes); `u64` address of that buffer;
//! only when the worker address is empty (endpoints made through a
//! listener, `--sockaddr`), a `u16` listener port, 0 when the sender does
//! not listen. Tag tests expose nothing: key empty and address 0. A key
//! without an address, or an address without a key, is malformed.

use super::bootstrap::{MAX_FRAME, MAX_RKEY};
use super::error::{PerfError, Result};
use super::wire::{put_blob, Reader};

/// What a side needs to reach the other: its worker address (or, with
/// `--sockaddr`, none and the port of its listener) and, for one-sided
/// tests, the packed remote key and the address of its exposed (receive)
/// buffer; empty and 0 for tag tests. The module doc has the encoding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wireup {
    /// Worker address.
    pub address: Vec<u8>,
    /// Packed remote key of the receive buffer.
    pub rkey: Vec<u8>,
    /// Address of the receive buffer in the sender's memory.
    pub recv_buffer: u64,
    /// Port of the sender's listener, 0 for none; sent only with an empty
    /// worker address (ignored otherwise).
    pub listen_port: u16,
}

impl Wireup {
    /// `u32` length + address, `u32` length + rkey, `u64` buffer address,
    /// and without an address `u16` listener port (see the module doc).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.address.len() + self.rkey.len());
        put_blob(&mut out, &self.address);
        put_blob(&mut out, &self.rkey);
        out.extend_from_slice(&self.recv_buffer.to_le_bytes());
        if self.address.is_empty() {
            out.extend_from_slice(&self.listen_port.to_le_bytes());
        }
        out
    }

    /// Parses a wireup payload from the peer.
    pub fn decode(payload: &[u8]) -> Result<Wireup> {
        let mut r = Reader::new(payload, "wireup");
        let address = r.blob(MAX_FRAME)?.to_vec();
        let rkey = r.blob(MAX_RKEY)?.to_vec();
        let recv_buffer = r.u64()?;
        let listen_port = if address.is_empty() { r.u16()? } else { 0 };
        r.finish()?;
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
            listen_port,
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
            listen_port: 0,
        };
        let bytes = w.encode();
        assert_eq!(Wireup::decode(&bytes).unwrap(), w);
        for len in 0..bytes.len() {
            assert!(Wireup::decode(&bytes[..len]).is_err(), "len {len}");
        }
        let mut long = bytes.clone();
        long.push(1);
        assert!(Wireup::decode(&long).is_err());
        // Without an address the port follows; the old layout lacks it.
        let empty = Wireup::default().encode();
        assert_eq!(Wireup::decode(&empty).unwrap(), Wireup::default());
        assert!(Wireup::decode(&empty[..empty.len() - 2]).is_err());
    }

    #[test]
    fn wireup_of_a_listener() {
        let w = Wireup {
            listen_port: 40123,
            rkey: vec![3; 12],
            recv_buffer: 0x1000,
            ..Wireup::default()
        };
        let bytes = w.encode();
        assert_eq!(bytes.len(), 4 + 4 + 12 + 8 + 2);
        assert_eq!(Wireup::decode(&bytes).unwrap(), w);
        for len in 0..bytes.len() {
            assert!(Wireup::decode(&bytes[..len]).is_err(), "len {len}");
        }
        // A port beside a worker address is not sent.
        let both = Wireup {
            address: vec![1],
            listen_port: 9,
            ..Wireup::default()
        };
        assert_eq!(Wireup::decode(&both.encode()).unwrap().listen_port, 0);
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
            listen_port: 0,
        };
        assert_eq!(Wireup::decode(&one_sided.encode()).unwrap(), one_sided);
        for (rkey, recv_buffer) in [(vec![], 0x1000), (vec![1, 2], 0)] {
            let w = Wireup {
                address: vec![7],
                rkey,
                recv_buffer,
                listen_port: 0,
            };
            let e = Wireup::decode(&w.encode()).unwrap_err();
            assert!(e.to_string().contains("both or neither"), "{e}");
        }
        let long = Wireup {
            address: vec![7],
            rkey: vec![1; MAX_RKEY + 1],
            recv_buffer: 8,
            listen_port: 0,
        };
        let e = Wireup::decode(&long.encode()).unwrap_err();
        assert!(e.to_string().contains("exceeds the limit"), "{e}");
    }
}
