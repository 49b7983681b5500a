//! Memory registration and remote keys of the `shm` memory domain, which
//! the FIFO transport (`posix`) and cross-memory attach (`cma`) share.
//!
//! A registration is an entry of the process-wide [`REGS`] table: nothing is
//! pinned or mapped. A packed key is [`uct::KeyLayout`] with tag `b"shm\0"`
//! and version 2, whose owner field is the registering process's
//! [`ProcessId::encode`] (pid and start time, 12 bytes), so a key names one
//! process for the life of the host even after its pid is reused.
//!
//! The key of memory the domain allocated (`mem_alloc`: a shared segment)
//! has a segment entry after those 56 bytes, which peers on the same host
//! use to map the segment (`rkey_ptr`); the segment's owner is the key's:
//!
//! | offset | bytes | field |
//! |-------:|------:|-------|
//! | 56 | 32 | [`HostId`] of the owner |
//! | 88 | 4 | the owner's descriptor of the segment (at most `i32::MAX`) |
//! | 92 | 8 | segment length (1 to `isize::MAX`, at least the declared length) |
//!
//! A key is exactly 56 or exactly 100 bytes long.
//!
//! # Who checks a key
//!
//! Where the target takes part in an access (the FIFO transport), it checks
//! the live registration itself ([`REGS`], `RegTable::with_range`). With CMA
//! it does not: the kernel reads and writes the target's memory directly,
//! and the target never learns of the access. So the initiator checks what
//! it can from the key ([`key_owner`] and the declared range and rights):
//! the access must lie inside the declared range, carry the right, and go
//! to the process that packed the key. This stops mistakes (a key of another
//! process, a stale range, a get from write-only memory), not a hostile
//! initiator: a key forged with a wider range or more rights, or one whose
//! registration ended, is not refused by anyone, and an initiator can reach
//! any address of its peer that way. That is inherent to CMA, which the
//! kernel allows only where the initiator may `ptrace` the target (same
//! user, per the Yama policy) and so could read and write all of its memory
//! anyway. When the key's owner is the initiator itself, the registration
//! table is at hand and the live registration is checked as the target
//! would.
//!
//! What this module does not do: open interfaces or list resources (the
//! memory domain does), or move bytes (the transports do).

use std::sync::{Arc, OnceLock};

use uct::ucs::{Error, Result};
use uct::{Access, KeyFields, KeyLayout, MemHandle, RegCost, RegTable, RemoteKey};

use crate::proc_id::{HostId, ProcessId, HOST_ID_LEN, PROCESS_ID_LEN};

/// Name of the memory domain, in [`RemoteKey::md_name`].
pub(crate) const MD_NAME: &str = "shm";

/// The registrations of this process that `shm` keys name.
pub(crate) static REGS: RegTable = RegTable::new(MD_NAME);

/// Cost of one registration: an insert into a slab under an uncontended
/// write lock, nothing pinned or mapped, so a constant and nothing per
/// byte. Measured with `reg_cost_estimate` below (release build, 2-core
/// VM): `register` about 65 ns each while the table grows to 200k live
/// entries, `deregister` about 12 ns; `register` + `pack` (which asks the
/// kernel for the pid and allocates the key) + `deregister` about 210 ns.
#[cfg_attr(all(loom, test), allow(dead_code))]
pub(crate) const REG_COST: RegCost = RegCost { c0: 65e-9, c1: 0.0 };

/// Layout of a packed key; version 2 (the version that may carry a
/// segment entry).
const LAYOUT: KeyLayout = KeyLayout {
    tag: *b"shm\0",
    version: 2,
    owner_len: PROCESS_ID_LEN,
    name: MD_NAME,
};

/// This process, as keys name it. Recomputed if the pid changed (after a
/// `fork`), so that a child never packs keys in its parent's name.
pub(crate) fn me() -> Result<ProcessId> {
    static ME: OnceLock<ProcessId> = OnceLock::new();
    if let Some(me) = ME.get() {
        if me.pid == uct::ucs::sys::pid() {
            return Ok(*me);
        }
        return ProcessId::current();
    }
    let me = ProcessId::current()?;
    Ok(*ME.get_or_init(|| me))
}

/// Records a registration. A length of 0 is allowed; a null pointer, a
/// range that wraps or exceeds `isize::MAX` bytes, or unknown access bits
/// are `InvalidParam`. The memory is not touched.
pub(crate) fn register(addr: *mut u8, len: usize, access: Access) -> Result<MemHandle> {
    REGS.register(addr, len, access)
}

/// Ends a registration, after any same-process copy in progress on it;
/// `InvalidParam` if it is not live. Peers using CMA are not told (see the
/// module doc).
pub(crate) fn deregister(memh: &MemHandle) -> Result<()> {
    REGS.deregister(memh)
}

/// The packed key of a live registration; `InvalidParam` if it is not
/// live, an error if this process's identity cannot be read from `/proc`.
pub(crate) fn pack(memh: &MemHandle) -> Result<Vec<u8>> {
    let fields = REGS.key_fields(memh)?;
    Ok(pack_as(&me()?, &fields))
}

/// Packs `f` as a registration of process `owner`.
pub(crate) fn pack_as(owner: &ProcessId, f: &KeyFields) -> Vec<u8> {
    LAYOUT.pack(&owner.encode(), f)
}

/// Bytes of the segment entry: host, descriptor, segment length.
pub(crate) const SEG_ENTRY_LEN: usize = HOST_ID_LEN + 4 + 8;

/// Where peers on the owner's host map the memory of a key: the segment
/// that the key's owner holds open as descriptor `fd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegEntry {
    pub(crate) host: HostId,
    pub(crate) fd: u32,
    pub(crate) len: u64,
}

impl SegEntry {
    /// Appends the entry to the packed key `k`.
    #[cfg_attr(all(loom, test), allow(dead_code))]
    pub(crate) fn append_to(&self, k: &mut Vec<u8>) {
        k.extend_from_slice(self.host.as_bytes());
        k.extend_from_slice(&self.fd.to_le_bytes());
        k.extend_from_slice(&self.len.to_le_bytes());
    }
}

/// What a packed key says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decoded {
    pub(crate) owner: ProcessId,
    pub(crate) fields: KeyFields,
    /// The segment holding the memory, for memory the domain allocated.
    pub(crate) seg: Option<SegEntry>,
}

fn invalid(what: &str) -> Error {
    Error::InvalidParam(format!("{MD_NAME}: invalid remote key: {what}"))
}

/// Checks the form of a peer's key (`InvalidParam` naming the fault:
/// length, tag, version, reserved bytes, access bits, a range that wraps,
/// a pid of 0, a bad segment entry). Whose key it is and whether it may be
/// used is checked when it is used.
pub(crate) fn unpack(packed: &[u8]) -> Result<RemoteKey> {
    let d = decode(packed)?;
    Ok(RemoteKey {
        md_name: MD_NAME.into(),
        packed: Arc::from(packed),
        addr: d.fields.addr,
        len: d.fields.len,
        access: d.fields.access,
    })
}

/// The owner, fields and segment entry of a packed key.
pub(crate) fn decode(packed: &[u8]) -> Result<Decoded> {
    let base = LAYOUT.key_len();
    let (key, entry) = match packed.len() {
        n if n == base => (packed, None),
        n if n == base + SEG_ENTRY_LEN => (&packed[..base], Some(&packed[base..])),
        n => {
            return Err(invalid(&format!(
                "{n} bytes, expected {base} or {}",
                base + SEG_ENTRY_LEN
            )))
        }
    };
    let (owner, fields) = LAYOUT.decode(key)?;
    let owner = ProcessId::decode(owner).ok_or_else(|| invalid("owner pid 0"))?;
    let seg = match entry {
        None => None,
        Some(e) => Some(decode_segment(e, &fields)?),
    };
    Ok(Decoded { owner, fields, seg })
}

/// The segment entry `e` (exactly [`SEG_ENTRY_LEN`] bytes) of a key that
/// declares `fields`.
fn decode_segment(e: &[u8], fields: &KeyFields) -> Result<SegEntry> {
    let host = HostId::decode(&e[..HOST_ID_LEN]).ok_or_else(|| invalid("bad host"))?;
    let mut f = [0u8; 4];
    f.copy_from_slice(&e[HOST_ID_LEN..HOST_ID_LEN + 4]);
    let mut l = [0u8; 8];
    l.copy_from_slice(&e[HOST_ID_LEN + 4..]);
    let (fd, len) = (u32::from_le_bytes(f), u64::from_le_bytes(l));
    if fd > i32::MAX as u32 {
        return Err(invalid(&format!("segment descriptor {fd}")));
    }
    if len == 0 || len > isize::MAX as u64 {
        return Err(invalid(&format!("segment length {len}")));
    }
    if fields.len > len {
        return Err(invalid(&format!(
            "{} declared bytes in a segment of {len}",
            fields.len
        )));
    }
    Ok(SegEntry { host, fd, len })
}

/// The process that packed `rkey` and the key's decoded contents (the
/// declared range and rights of the [`RemoteKey`] struct are not used:
/// they are copies a caller may have changed). `InvalidParam` for a key of
/// another memory domain or a malformed one.
pub(crate) fn key_decode(rkey: &RemoteKey) -> Result<Decoded> {
    if rkey.md_name != MD_NAME {
        return Err(Error::InvalidParam(format!(
            "shm: remote key of memory domain {:?}",
            rkey.md_name
        )));
    }
    decode(&rkey.packed)
}

/// The process that packed `rkey` and the registration fields it carries
/// (see [`key_decode`]).
pub(crate) fn key_owner(rkey: &RemoteKey) -> Result<(ProcessId, KeyFields)> {
    let d = key_decode(rkey)?;
    Ok((d.owner, d.fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uct::ucs::Status;

    #[test]
    fn register_pack_unpack_dereg() {
        let mut buf = vec![0u8; 100];
        let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
        let h = register(buf.as_mut_ptr(), 100, rw).unwrap();
        let packed = pack(&h).unwrap();
        assert_eq!(packed.len(), 8 + PROCESS_ID_LEN + 36);
        assert_eq!(&packed[..8], b"shm\0\x02\0\0\0");
        assert_eq!(packed[8..20], me().unwrap().encode());
        let k = unpack(&packed).unwrap();
        assert_eq!(k.md_name, "shm");
        assert_eq!((k.addr, k.len, k.access), (h.addr as u64, 100, rw));
        assert_eq!(&k.packed[..], &packed[..]);
        let (owner, f) = key_owner(&k).unwrap();
        assert_eq!(owner, ProcessId::current().unwrap());
        assert_eq!(f, REGS.key_fields(&h).unwrap());
        deregister(&h).unwrap();
        assert_eq!(deregister(&h).unwrap_err().status(), Status::InvalidParam);
        assert!(pack(&h).is_err());
        // The key still unpacks: only its owner can tell it is dead.
        assert!(unpack(&packed).is_ok());
        assert!(register(std::ptr::null_mut(), 1, rw).is_err());
    }

    #[test]
    fn foreign_and_malformed_keys_are_refused() {
        let mut buf = [0u8; 8];
        let h = register(buf.as_mut_ptr(), 8, Access::REMOTE_READ).unwrap();
        let packed = pack(&h).unwrap();
        let mut other = unpack(&packed).unwrap();
        other.md_name = "tcp".into();
        assert_eq!(
            key_owner(&other).unwrap_err().status(),
            Status::InvalidParam
        );
        let mut zero_pid = packed.clone();
        zero_pid[8..12].fill(0);
        assert!(unpack(&zero_pid).unwrap_err().to_string().contains("pid 0"));
        for n in 0..packed.len() {
            assert!(unpack(&packed[..n]).is_err(), "truncated to {n}");
        }
        let mut bad = packed.clone();
        bad[0] ^= 1;
        assert!(unpack(&bad).is_err());
        deregister(&h).unwrap();
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        let good = pack_as(
            &ProcessId {
                pid: 7,
                start_time: 9,
            },
            &KeyFields {
                index: 1,
                generation: 2,
                secret: 3,
                addr: 4096,
                len: 64,
                access: Access::REMOTE_READ,
            },
        );
        for round in 0..4000 {
            let len = usize::from(next()) % (LAYOUT.key_len() + 8);
            let mut k: Vec<u8> = (0..len).map(|_| next()).collect();
            if round % 2 == 0 && len >= 8 {
                k[..8].copy_from_slice(&good[..8]);
            }
            if let Ok(key) = unpack(&k) {
                let (owner, f) = key_owner(&key).unwrap();
                assert_eq!(pack_as(&owner, &f), k, "re-encodes");
            }
        }
    }

    /// Prints the cost of a registration (run with `--release --ignored
    /// --nocapture`); the source of [`REG_COST`].
    #[test]
    #[ignore = "a measurement, not a check"]
    fn reg_cost_estimate() {
        let mut buf = vec![0u8; 1 << 20];
        let n = 200_000;
        let t = std::time::Instant::now();
        let handles: Vec<MemHandle> = (0..n)
            .map(|i| register(buf[i % 4096..].as_mut_ptr(), 64, Access::REMOTE_READ).unwrap())
            .collect();
        let reg = t.elapsed().as_secs_f64() / n as f64;
        let t = std::time::Instant::now();
        for h in &handles {
            deregister(h).unwrap();
        }
        let dereg = t.elapsed().as_secs_f64() / n as f64;
        let t = std::time::Instant::now();
        for _ in 0..n {
            let h = register(buf.as_mut_ptr(), 64, Access::REMOTE_READ).unwrap();
            std::hint::black_box(pack(&h).unwrap());
            deregister(&h).unwrap();
        }
        let cycle = t.elapsed().as_secs_f64() / n as f64;
        println!(
            "register {:.0} ns, deregister {:.0} ns, register+pack+deregister {:.0} ns",
            reg * 1e9,
            dereg * 1e9,
            cycle * 1e9
        );
    }
}
