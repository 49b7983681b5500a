//! A second reading of a capture that does not depend on tshark's MPA
//! dissector: each direction of each iWARP connection is put back together
//! from the raw TCP payload and walked FPDU by FPDU (MPA frame, then
//! length, pad and CRC field of every FPDU, to the last byte).
//!
//! tshark 4.0's MPA dissector loses its place when TCP ends a segment a
//! few bytes into an FPDU's header (which happens on loopback when the
//! receive window fills): the next segment is then read as if an FPDU
//! started there. The wire tests use this walk to tell such a misreading
//! (the bytes frame correctly) from a framing fault of the sender.

use std::collections::BTreeMap;
use std::path::Path;

use super::check::read;

const REQ_KEY: &[u8; 16] = b"MPA ID Req Frame";
const REP_KEY: &[u8; 16] = b"MPA ID Rep Frame";
/// The CRC flag of an MPA frame (first byte after the key).
const CRC_FLAG: u8 = 0x40;
/// The shortest DDP header: a tagged one.
const MIN_ULPDU: usize = 14;

/// Payload bytes of one direction of a TCP stream, by sequence number.
#[derive(Default)]
struct Direction {
    segs: BTreeMap<u64, Vec<u8>>,
}

impl Direction {
    /// The bytes in order; an error at a gap (a segment not captured).
    fn bytes(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut next = None;
        for (&seq, data) in &self.segs {
            let end = seq + data.len() as u64;
            match next {
                Some(n) if seq > n => return Err(format!("bytes {n}..{seq} not captured")),
                // A retransmission or overlap: keep only what is new.
                Some(n) if end <= n => continue,
                Some(n) => out.extend_from_slice(&data[(n - seq) as usize..]),
                None => out.extend_from_slice(data),
            }
            next = Some(end);
        }
        Ok(out)
    }
}

/// The MPA frame at the start of `b` (`key` expected): its CRC flag and
/// its length with the private data.
fn mpa_frame(b: &[u8], key: &[u8; 16]) -> Result<(bool, usize), String> {
    if b.len() < 20 || &b[..16] != key {
        return Err(format!(
            "does not start with {:?}",
            String::from_utf8_lossy(key)
        ));
    }
    let pd = usize::from(u16::from_be_bytes([b[18], b[19]]));
    Ok((b[16] & CRC_FLAG != 0, 20 + pd))
}

/// Walks the FPDUs of `b` from `at` to its end; how many there were.
/// Every FPDU ends with the 4-byte CRC field, zero when CRCs are off
/// (RFC 5044, 4.1); with `crc`, each is checked not to be zero.
fn walk(b: &[u8], mut at: usize, crc: bool) -> Result<usize, String> {
    let mut n = 0;
    while at < b.len() {
        if b.len() - at < 2 {
            return Err(format!(
                "byte {at}: {} bytes left, no FPDU header",
                b.len() - at
            ));
        }
        let ulpdu = usize::from(u16::from_be_bytes([b[at], b[at + 1]]));
        if ulpdu < MIN_ULPDU {
            return Err(format!(
                "byte {at}: FPDU of {ulpdu} bytes, shorter than a DDP header"
            ));
        }
        let unpadded = 2 + ulpdu;
        let len = unpadded + (4 - unpadded % 4) % 4 + 4;
        if b.len() - at < len {
            return Err(format!(
                "byte {at}: FPDU of {len} bytes, {} left",
                b.len() - at
            ));
        }
        let field = &b[at + len - 4..at + len];
        if crc == (field == [0; 4]) {
            let state = if crc { "zero" } else { "set" };
            return Err(format!(
                "byte {at}: CRC field {state} with CRCs {}",
                on_off(crc)
            ));
        }
        at += len;
        n += 1;
    }
    Ok(n)
}

fn on_off(crc: bool) -> &'static str {
    if crc {
        "on"
    } else {
        "off"
    }
}

/// Walks every iWARP connection of `file` (streams whose initiator sent an
/// MPA Request); the number of FPDUs, or what is wrong where.
pub(crate) fn raw_framing(file: &Path) -> Result<usize, String> {
    let text = read(
        file,
        &[
            "-Y",
            "tcp.len > 0",
            "-T",
            "fields",
            "-e",
            "tcp.stream",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.seq",
            "-e",
            "tcp.payload",
        ],
    );
    let mut dirs: BTreeMap<(u32, u16), Direction> = BTreeMap::new();
    for line in text.lines() {
        let c: Vec<&str> = line.split('\t').collect();
        let [stream, port, seq, payload] = c[..] else {
            continue;
        };
        let (Ok(stream), Ok(port), Ok(seq)) = (stream.parse(), port.parse(), seq.parse()) else {
            continue;
        };
        let bytes: Vec<u8> = (0..payload.len() / 2)
            .map(|i| u8::from_str_radix(&payload[2 * i..2 * i + 2], 16).unwrap_or(0))
            .collect();
        // A retransmission may repeat a sequence number with more bytes:
        // keep the longest.
        let segs = &mut dirs.entry((stream, port)).or_default().segs;
        match segs.get(&seq) {
            Some(old) if old.len() >= bytes.len() => {}
            _ => {
                segs.insert(seq, bytes);
            }
        }
    }
    let mut by_stream: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    for ((stream, port), d) in &dirs {
        let b = d
            .bytes()
            .map_err(|e| format!("stream {stream} from port {port}: {e}"))?;
        by_stream.entry(*stream).or_default().push(b);
    }
    let mut fpdus = 0;
    for (stream, mut sides) in by_stream {
        // The initiator's side starts with the Request.
        sides.sort_by_key(|b| !b.starts_with(REQ_KEY));
        let [init, resp] = &sides[..] else {
            continue;
        };
        if !init.starts_with(REQ_KEY) {
            continue;
        }
        let at = |side: &str, e: String| format!("stream {stream}, {side}: {e}");
        let (crc_i, start_i) = mpa_frame(init, REQ_KEY).map_err(|e| at("initiator", e))?;
        let (crc_r, start_r) = mpa_frame(resp, REP_KEY).map_err(|e| at("responder", e))?;
        let crc = crc_i || crc_r;
        fpdus += walk(init, start_i, crc).map_err(|e| at("initiator", e))?;
        fpdus += walk(resp, start_r, crc).map_err(|e| at("responder", e))?;
    }
    Ok(fpdus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_exact_framing_and_rejects_the_rest() {
        // Two FPDUs: 14 bytes of ULPDU (2 + 14 = 16, no pad) and 19
        // (2 + 19 = 21, 3 of pad), each with its CRC field.
        let fpdus = |crc: [u8; 4]| {
            let mut b = vec![0u8; 4];
            b.extend([0, 14]);
            b.extend([0; 14]);
            b.extend(crc);
            b.extend([0, 19]);
            b.extend([0; 19 + 3]);
            b.extend(crc);
            b
        };
        let (with, without) = (fpdus([1, 2, 3, 4]), fpdus([0; 4]));
        assert_eq!(walk(&with, 4, true), Ok(2));
        assert_eq!(walk(&without, 4, false), Ok(2));
        assert!(walk(&with, 4, false).is_err(), "CRC field set, CRCs off");
        assert!(walk(&without, 4, true).is_err(), "CRC field zero, CRCs on");
        assert!(walk(&with[..with.len() - 1], 4, true).is_err(), "cut short");
        assert!(
            walk(&[0, 3, 0, 0, 0, 0, 0, 0], 0, false).is_err(),
            "too short for DDP"
        );
    }

    #[test]
    fn gaps_are_errors_and_overlaps_are_merged() {
        let mut d = Direction::default();
        d.segs.insert(100, b"abcd".to_vec());
        d.segs.insert(102, b"cdef".to_vec());
        assert_eq!(d.bytes().as_deref(), Ok(&b"abcdef"[..]));
        d.segs.insert(110, b"x".to_vec());
        assert!(d.bytes().is_err());
    }
}
