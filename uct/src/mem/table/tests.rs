//! The registration table: slots, secrets, handles, the lock.

use super::*;
use crate::Status;

static TABLE: RegTable = RegTable::new("test");

fn entry(addr: usize, len: usize) -> Entry {
    Entry {
        ptr: RegPtr(std::ptr::without_provenance_mut(addr)),
        len,
        access: Access::REMOTE_READ,
        secret: 0,
    }
}

#[test]
fn slots_are_reused_with_a_new_generation() {
    let mut t = Table::new();
    let (a, ga) = t.insert(entry(0x1000, 8)).unwrap();
    let (b, _) = t.insert(entry(0x2000, 8)).unwrap();
    assert_ne!(a, b);
    assert!(t.live(a, ga).is_some());
    assert!(t.live(a, ga + 1).is_none());
    assert!(t.remove(a, ga).is_some());
    assert!(t.remove(a, ga).is_none(), "twice");
    assert!(t.live(a, ga).is_none());
    let (c, gc) = t.insert(entry(0x1000, 8)).unwrap();
    assert_eq!(c, a);
    assert_eq!(gc, ga + 1);
    assert!(t.live(a, ga).is_none(), "stale generation");
    assert!(t.live(99, 0).is_none());
    assert!(t.remove(99, 0).is_none());
}

#[test]
fn a_slot_is_retired_before_its_generation_wraps() {
    let mut t = Table::new();
    let (i, _) = t.insert(entry(0x1000, 8)).unwrap();
    t.slots[i as usize].generation = u32::MAX;
    assert!(t.remove(i, u32::MAX).is_some());
    assert!(t.free.is_empty());
    let (j, g) = t.insert(entry(0x1000, 8)).unwrap();
    assert_ne!(j, i);
    assert_eq!(g, 0);
    assert!(t.live(i, 0).is_none());
}

#[test]
fn ids_split_back() {
    assert_eq!(split_id(handle_id(7, 9)), (7, 9));
    assert_eq!(
        split_id(handle_id(u32::MAX, u32::MAX)),
        (u32::MAX, u32::MAX)
    );
}

#[test]
fn bad_registrations_are_refused() {
    let mut buf = [0u8; 4];
    let p = buf.as_mut_ptr();
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let cases: [(*mut u8, usize, Access); 4] = [
        (std::ptr::null_mut(), 0, rw),
        (std::ptr::without_provenance_mut(usize::MAX - 3), 4, rw),
        (p, isize::MAX as usize + 1, rw),
        (p, 4, Access::from_bits_retain(1 << 9)),
    ];
    for (ptr, len, access) in cases {
        let e = TABLE.register(ptr, len, access).unwrap_err();
        assert_eq!(e.status(), Status::InvalidParam, "{ptr:?} {len} {access:?}");
    }
}

#[test]
fn deregistration_checks_the_handle() {
    let mut buf = [0u8; 16];
    let h = TABLE
        .register(buf.as_mut_ptr(), 16, Access::REMOTE_WRITE)
        .unwrap();
    assert_eq!(h.addr, buf.as_ptr().addr());
    for bad in [
        MemHandle {
            addr: h.addr + 1,
            ..h.clone()
        },
        MemHandle {
            len: 15,
            ..h.clone()
        },
        MemHandle {
            access: Access::REMOTE_READ,
            ..h.clone()
        },
        MemHandle {
            id: h.id ^ (1 << 32),
            ..h.clone()
        },
        MemHandle {
            table: h.table ^ 1,
            ..h.clone()
        },
        MemHandle {
            table: 0,
            ..h.clone()
        },
    ] {
        assert!(TABLE.deregister(&bad).is_err(), "{bad:?}");
        assert!(TABLE.key_fields(&bad).is_err(), "{bad:?}");
    }
    let k = TABLE.key_fields(&h).unwrap();
    assert_eq!((k.addr, k.len), (h.addr as u64, 16));
    TABLE.deregister(&h).unwrap();
    assert_eq!(
        TABLE.deregister(&h).unwrap_err().status(),
        Status::InvalidParam
    );
    assert!(TABLE.key_fields(&h).is_err());
}

#[test]
fn with_range_checks_liveness_range_and_rights() {
    let mut buf = [0u8; 16];
    let h = TABLE
        .register(buf.as_mut_ptr(), 16, Access::REMOTE_WRITE)
        .unwrap();
    let k = TABLE.key_fields(&h).unwrap();
    let base = h.addr as u64;
    let ok = |addr: u64, len: usize| {
        TABLE
            .with_range(&k, addr, len, Access::REMOTE_WRITE, |p| p.addr())
            .is_ok()
    };
    assert_eq!(
        TABLE
            .with_range(&k, base + 3, 5, Access::REMOTE_WRITE, |p| p.addr())
            .unwrap(),
        h.addr + 3
    );
    assert!(ok(base, 16));
    assert!(ok(base + 16, 0));
    assert!(!ok(base + 16, 1));
    assert!(!ok(base + 17, 0));
    assert!(!ok(base - 1, 1));
    assert!(!ok(base, 17));
    assert!(!ok(base + 8, usize::MAX));
    assert!(!ok(u64::MAX, 1));
    let read = TABLE.with_range(&k, base, 1, Access::REMOTE_READ, |_| ());
    assert!(read.unwrap_err().to_string().contains("denied"));
    let stale = KeyFields {
        generation: k.generation.wrapping_add(1),
        ..k
    };
    assert!(TABLE
        .with_range(&stale, base, 1, Access::REMOTE_WRITE, |_| ())
        .is_err());
    TABLE.deregister(&h).unwrap();
    let mut called = false;
    assert!(TABLE
        .with_range(&k, base, 1, Access::REMOTE_WRITE, |_| called = true)
        .is_err());
    assert!(!called);
}

#[test]
fn a_wrong_secret_is_refused_like_a_dead_registration() {
    let mut buf = [7u8; 8];
    let h = TABLE
        .register(buf.as_mut_ptr(), 8, Access::REMOTE_WRITE)
        .unwrap();
    let k = TABLE.key_fields(&h).unwrap();
    let base = h.addr as u64;
    for bit in 0..64 {
        let forged = KeyFields {
            secret: k.secret ^ (1 << bit),
            ..k
        };
        let mut called = false;
        let e = TABLE
            .with_range(&forged, base, 8, Access::REMOTE_WRITE, |_| called = true)
            .unwrap_err();
        assert!(!called, "bit {bit}");
        assert_eq!(e.status(), Status::InvalidParam, "bit {bit}");
        assert!(e.to_string().contains("no live registration"), "{e}");
    }
    // Range and rights are checked only once the secret matched: a
    // forged key learns nothing from a refusal.
    let forged = KeyFields {
        secret: !k.secret,
        ..k
    };
    let outside = TABLE.with_range(&forged, base + 9, 1, Access::REMOTE_READ, |_| ());
    assert_eq!(outside.unwrap_err().status(), Status::InvalidParam);
    assert!(TABLE
        .with_range(&k, base, 8, Access::REMOTE_WRITE, |_| ())
        .is_ok());
    TABLE.deregister(&h).unwrap();
    assert_eq!(buf, [7; 8]);
}

#[test]
fn secrets_differ_between_registrations() {
    let mut buf = [0u8; 8];
    let rw = Access::REMOTE_WRITE;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..64 {
        let h = TABLE.register(buf.as_mut_ptr(), 8, rw).unwrap();
        let k = TABLE.key_fields(&h).unwrap();
        assert!(seen.insert(k.secret), "secret repeated");
        TABLE.deregister(&h).unwrap();
    }
}

#[test]
fn handles_of_another_table_are_refused() {
    let a = RegTable::new("a");
    let b = RegTable::new("b");
    assert_ne!(a.id(), b.id());
    assert_eq!(a.id(), a.id());
    assert_ne!(a.id(), 0);
    let mut buf = [0u8; 8];
    let ha = a
        .register(buf.as_mut_ptr(), 8, Access::REMOTE_WRITE)
        .unwrap();
    let hb = b
        .register(buf.as_mut_ptr(), 8, Access::REMOTE_WRITE)
        .unwrap();
    // Same slot, same generation, same memory: only the table differs.
    assert_eq!(ha.id, hb.id);
    assert_eq!((ha.table, hb.table), (a.id(), b.id()));
    assert_eq!(
        a.key_fields(&hb).unwrap_err().status(),
        Status::InvalidParam
    );
    assert_eq!(
        a.deregister(&hb).unwrap_err().status(),
        Status::InvalidParam
    );
    assert!(b.key_fields(&hb).is_ok(), "still live in its own table");
    b.deregister(&hb).unwrap();
    a.deregister(&ha).unwrap();
}

#[test]
fn the_table_stays_locked_during_the_operation() {
    let mut buf = [0u8; 8];
    let h = TABLE
        .register(buf.as_mut_ptr(), 8, Access::REMOTE_READ)
        .unwrap();
    let k = TABLE.key_fields(&h).unwrap();
    let locked = TABLE.with_range(&k, h.addr as u64, 8, Access::REMOTE_READ, |_| {
        TABLE.locate(k.index).0.try_write().is_none()
    });
    assert!(locked.unwrap(), "a deregistration could run mid-copy");
    TABLE.deregister(&h).unwrap();
}

#[test]
fn registrations_of_other_threads_are_found_in_their_shards() {
    let table = std::sync::Arc::new(RegTable::new("shards"));
    let bufs: Vec<usize> = (0..2 * SHARDS as usize).map(|i| 0x10000 + i * 64).collect();
    // Each thread registers into its own shard.
    let handles: Vec<MemHandle> = bufs
        .iter()
        .map(|&addr| {
            let t = table.clone();
            std::thread::spawn(move || {
                t.register(
                    std::ptr::without_provenance_mut(addr),
                    64,
                    Access::REMOTE_READ,
                )
                .unwrap()
            })
            .join()
            .unwrap()
        })
        .collect();
    let shards: std::collections::HashSet<u32> =
        handles.iter().map(|h| split_id(h.id).0 % SHARDS).collect();
    assert!(shards.len() > 1, "all in one shard: {shards:?}");
    let mut secrets = std::collections::HashSet::new();
    for h in &handles {
        let k = table.key_fields(h).unwrap();
        assert!(secrets.insert(k.secret), "a secret given twice");
        let found = table.with_range(&k, h.addr as u64, 64, Access::REMOTE_READ, |p| p.addr());
        assert_eq!(found.unwrap(), h.addr);
    }
    for h in &handles {
        table.deregister(h).unwrap();
        assert!(table.key_fields(h).is_err());
    }
}
