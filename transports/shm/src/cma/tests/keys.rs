//! Key checks at the initiator: range, rights, owner, form. Every refusal
//! leaves both sides' memory as it was.

use uct::testing::checks::pattern;
use uct::ucs::{AccessDenied, Error, Status};
use uct::{Access, KeyFields, RemoteKey};

use super::super::ops::check_key;
use super::{available, ep_to_self, open_seg, rma, Region};
use crate::md_keys;
use crate::proc_id::ProcessId;

fn fields(addr: u64, len: u64, access: Access) -> KeyFields {
    KeyFields {
        index: 3,
        generation: 1,
        secret: 0xfeed,
        addr,
        len,
        access,
    }
}

fn key_of(owner: &ProcessId, f: &KeyFields) -> RemoteKey {
    md_keys::unpack(&md_keys::pack_as(owner, f)).unwrap()
}

const PEER: ProcessId = ProcessId {
    pid: 4242,
    start_time: 77,
};

/// The checks alone, for a peer that is not this process (where only the
/// key can be checked).
#[test]
fn range_rights_and_owner() {
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let k = key_of(&PEER, &fields(0x1000, 0x100, rw));
    let ok = |addr, len, need| check_key(&k, &PEER, addr, len, need);
    assert_eq!(
        ok(0x1000, 0x100, Access::REMOTE_READ).unwrap().secret,
        0xfeed
    );
    assert!(ok(0x10ff, 1, Access::REMOTE_WRITE).is_ok());
    assert!(ok(0x1100, 0, Access::REMOTE_WRITE).is_ok());
    for (addr, len) in [
        (0xfff, 1),
        (0xfff, 2),
        (0x1100, 1),
        (0x10f0, 0x11),
        (0x1000, 0x101),
        (u64::MAX, 1),
        (u64::MAX - 3, 8),
        (0, 0),
    ] {
        let e = ok(addr, len, Access::REMOTE_READ).unwrap_err();
        assert_eq!(e.status(), Status::Rejected, "{addr:#x}+{len}: {e}");
        assert!(e.to_string().contains("outside"), "{e}");
        assert!(
            matches!(
                e,
                Error::RemoteAccess {
                    reason: AccessDenied::OutOfRange {
                        reg_addr: 0x1000,
                        reg_len: 0x100,
                        ..
                    },
                    ..
                }
            ),
            "{e:?}"
        );
    }
    let ro = key_of(&PEER, &fields(0x1000, 0x100, Access::REMOTE_READ));
    let e = check_key(&ro, &PEER, 0x1000, 1, Access::REMOTE_WRITE).unwrap_err();
    assert_eq!(e.status(), Status::Rejected);
    assert!(
        matches!(
            e,
            Error::RemoteAccess {
                reason: AccessDenied::Rights { .. },
                ..
            }
        ),
        "{e:?}"
    );
    let wo = key_of(&PEER, &fields(0x1000, 0x100, Access::REMOTE_WRITE));
    assert!(check_key(&wo, &PEER, 0x1000, 1, Access::REMOTE_READ).is_err());
    let local = key_of(&PEER, &fields(0x1000, 0x100, Access::LOCAL_WRITE));
    assert!(check_key(&local, &PEER, 0x1000, 1, Access::REMOTE_READ).is_err());
    for other in [
        ProcessId {
            pid: PEER.pid + 1,
            ..PEER
        },
        ProcessId {
            start_time: PEER.start_time + 1,
            ..PEER
        },
    ] {
        let e = check_key(&k, &other, 0x1000, 1, Access::REMOTE_READ).unwrap_err();
        assert_eq!(e.status(), Status::Rejected);
        assert!(e.to_string().contains("not to the endpoint's peer"), "{e}");
        assert!(
            matches!(
                e,
                Error::RemoteAccess {
                    reason: AccessDenied::InvalidKey(_),
                    ..
                }
            ),
            "{e:?}"
        );
    }
}

/// The struct's declared fields are copies: widening them gains nothing,
/// as the packed bytes are what is checked.
#[test]
fn declared_fields_of_the_struct_are_ignored() {
    let k = key_of(&PEER, &fields(0x1000, 0x10, Access::REMOTE_READ));
    let mut lying = k.clone();
    lying.addr = 0;
    lying.len = u64::MAX;
    lying.access = Access::all();
    assert!(check_key(&lying, &PEER, 0x2000, 1, Access::REMOTE_READ).is_err());
    assert!(check_key(&lying, &PEER, 0x1000, 1, Access::REMOTE_WRITE).is_err());
    assert!(check_key(&lying, &PEER, 0x1000, 1, Access::REMOTE_READ).is_ok());
}

/// Keys that do not decode, or of another memory domain, are
/// `InvalidParam`.
#[test]
fn garbled_and_foreign_keys() {
    let k = key_of(&PEER, &fields(0x1000, 0x10, Access::REMOTE_READ));
    let bad = |packed: &[u8], md: &str| RemoteKey {
        md_name: md.into(),
        packed: packed.into(),
        ..k.clone()
    };
    let mut cases = vec![bad(&k.packed, "tcp"), bad(&k.packed, ""), bad(&[], "shm")];
    for n in [1, 8, 19, k.packed.len() - 1] {
        cases.push(bad(&k.packed[..n], "shm"));
    }
    for at in [0, 4, 6] {
        let mut b = k.packed.to_vec();
        b[at] ^= 0x10;
        cases.push(bad(&b, "shm"));
    }
    cases.push(bad(&pattern(5, k.packed.len()), "shm"));
    for c in cases {
        let e = check_key(&c, &PEER, 0x1000, 1, Access::REMOTE_READ).unwrap_err();
        assert_eq!(e.status(), Status::InvalidParam, "{c:?}: {e}");
    }
}

/// Through the iface, on this process: refused operations move nothing,
/// on either side; the same-process path also checks the live
/// registration (a key whose registration ended, or with a wrong secret).
#[test]
fn refusals_move_nothing() {
    if !available() {
        return;
    }
    let mut a = open_seg("auto");
    let ep = ep_to_self(&mut *a);
    let me = ProcessId::current().unwrap();
    let ro = Region::new(&pattern(1, 64), Access::REMOTE_READ);
    let wo = Region::new(&pattern(2, 64), Access::REMOTE_WRITE);
    let local = Region::new(&pattern(3, 64), Access::empty());
    let (ro0, wo0, l0) = (ro.read(), wo.read(), local.read());
    let iov = [local.iov(0, 64)];
    let refused = |a: &mut dyn uct::Iface, put: bool, at: u64, key: &RemoteKey| {
        let e = rma(a, ep, put, &iov, at, key).unwrap_err();
        assert!(
            matches!(e.status(), Status::Rejected | Status::InvalidParam),
            "{e}"
        );
        assert!(ro.read() == ro0 && wo.read() == wo0 && local.read() == l0);
    };
    refused(&mut *a, true, ro.addr(0), &ro.key); // no write right
    refused(&mut *a, false, wo.addr(0), &wo.key); // no read right
    refused(&mut *a, false, ro.addr(1), &ro.key); // one byte past the end
                                                  // A key of another process (same pid, another start) on this endpoint.
    let (_, f) = md_keys::key_owner(&ro.key).unwrap();
    let older = ProcessId {
        start_time: me.start_time.wrapping_sub(1),
        ..me
    };
    refused(&mut *a, false, ro.addr(0), &key_of(&older, &f));
    // Right owner and range, wrong secret: only this process can tell.
    let guessed = KeyFields {
        secret: f.secret ^ 1,
        ..f
    };
    refused(&mut *a, false, ro.addr(0), &key_of(&me, &guessed));
    // Widened in the packed bytes: the live registration still says no.
    let widened = KeyFields {
        len: 4096,
        access: Access::REMOTE_READ | Access::REMOTE_WRITE,
        ..f
    };
    refused(&mut *a, true, ro.addr(0), &key_of(&me, &widened));
    // Deregistered: refused, though the key is well formed.
    let gone = Region::new(&pattern(4, 64), Access::REMOTE_READ);
    let key = gone.key.clone();
    let addr = gone.addr(0);
    drop(gone);
    let e = rma(&mut *a, ep, false, &iov, addr, &key).unwrap_err();
    assert_eq!(e.status(), Status::InvalidParam);
    assert!(local.read() == l0);
    // And the genuine key works.
    rma(&mut *a, ep, false, &iov, ro.addr(0), &ro.key).unwrap();
    assert!(local.read() == ro0);
    // No refusal failed the endpoint.
    assert_eq!(a.progress(&mut uct::testing::TestSink::new()), 0);
}
