//! Registration, keys, `put_zcopy` and `get_zcopy` of `self`, path by path.

use super::*;
use crate::{EpId, Iov, Posted, Status, Token};

struct Setup {
    md: Box<dyn MemoryDomain>,
    a: Box<dyn Iface>,
    /// Kept open: the endpoint's target.
    b: Option<Box<dyn Iface>>,
    ep: EpId,
}

fn setup() -> Setup {
    let md = COMPONENT.md_open().unwrap().pop().unwrap();
    let r = md.resources().unwrap().pop().unwrap();
    let mut a = md.iface_open(&r, &IfaceParams::default()).unwrap();
    let b = md.iface_open(&r, &IfaceParams::default()).unwrap();
    let ep = a.ep_create(b.device_addr(), b.iface_addr()).unwrap();
    Setup {
        md,
        a,
        b: Some(b),
        ep,
    }
}

/// Registers `buf` and returns its handle and unpacked key.
fn register(md: &dyn MemoryDomain, buf: &mut [u8], access: Access) -> (MemHandle, RemoteKey) {
    // SAFETY: every test keeps `buf` alive, and reads it only between
    // operations, until it deregisters or ends (a registration left behind
    // by a failing test is never used again).
    let h = unsafe { md.mem_reg(buf.as_mut_ptr(), buf.len(), access) }.unwrap();
    let key = md.rkey_unpack(&md.mkey_pack(&h).unwrap()).unwrap();
    (h, key)
}

fn put(s: &mut Setup, iov: &[Iov], addr: u64, key: &RemoteKey) -> crate::Result<Posted> {
    // SAFETY: the ranges come from buffers the caller holds across the
    // call, and `self` completes before returning.
    unsafe { s.a.put().unwrap().put_zcopy(s.ep, iov, addr, key, Token(1)) }
}

fn get(s: &mut Setup, iov: &[Iov], addr: u64, key: &RemoteKey) -> crate::Result<Posted> {
    // SAFETY: as for `put`; the ranges are writable and unshared.
    unsafe {
        s.a.get()
            .unwrap()
            .get_zcopy(s.ep, &crate::testing::writable(iov), addr, key, Token(2))
    }
}

fn iov_mut(buf: &mut [u8]) -> Iov {
    Iov {
        ptr: buf.as_mut_ptr(),
        len: buf.len(),
    }
}

#[test]
fn attributes_offer_put_and_get() {
    let s = setup();
    let attr = s.a.attr();
    assert!(attr.caps.contains(Caps::PUT_ZCOPY | Caps::GET_ZCOPY));
    assert_eq!(attr.max_put_zcopy, MAX_RMA);
    assert_eq!(attr.max_get_zcopy, MAX_RMA);
    assert!(s.md.can_register());
    assert_eq!(s.md.reg_cost(), REG_COST);
}

#[test]
fn keys_round_trip_and_garbage_is_refused() {
    let s = setup();
    let mut buf = [0u8; 100];
    let access = Access::REMOTE_READ | Access::LOCAL_WRITE;
    let (h, key) = register(&*s.md, &mut buf, access);
    assert_eq!(
        (h.addr, h.len, h.access),
        (buf.as_ptr().addr(), 100, access)
    );
    let packed = s.md.mkey_pack(&h).unwrap();
    assert_eq!(key.md_name, "self");
    assert_eq!(&key.packed[..], &packed[..]);
    assert_eq!(
        (key.addr, key.len, key.access),
        (h.addr as u64, 100, access)
    );
    assert_eq!(
        s.md.rkey_unpack(&packed[1..]).unwrap_err().status(),
        Status::InvalidParam
    );
    assert!(s.md.rkey_unpack(&[0xAB; rkey::KEY_LEN]).is_err());
    s.md.mem_dereg(&h).unwrap();
    assert!(s.md.mkey_pack(&h).is_err(), "pack of a dead handle");
    assert!(s.md.mem_dereg(&h).is_err(), "dereg twice");
    // The key still unpacks (it is well formed) but names nothing.
    assert!(s.md.rkey_unpack(&packed).is_ok());
}

#[test]
fn empty_registration_and_empty_operations() {
    let mut s = setup();
    let mut buf = [7u8; 4];
    let (h, key) = register(&*s.md, &mut buf[..0], Access::REMOTE_WRITE);
    assert_eq!(key.len, 0);
    assert_eq!(put(&mut s, &[], key.addr, &key).unwrap(), Posted::Done);
    let one = [1u8];
    let empty = Iov::from_slice(&one[..0]);
    assert_eq!(put(&mut s, &[empty], key.addr, &key).unwrap(), Posted::Done);
    assert!(put(&mut s, &[Iov::from_slice(&one)], key.addr, &key).is_err());
    assert!(get(&mut s, &[], key.addr, &key).is_err(), "no read right");
    s.md.mem_dereg(&h).unwrap();
    assert_eq!(buf, [7; 4]);
}

#[test]
fn put_and_get_copy_scattered_ranges() {
    let mut s = setup();
    let mut target = [0u8; 32];
    let (h, key) = register(
        &*s.md,
        &mut target,
        Access::REMOTE_READ | Access::REMOTE_WRITE,
    );
    let (x, y) = (*b"abc", *b"defgh");
    let iov = [
        Iov::from_slice(&x),
        Iov::from_slice(&[]),
        Iov::from_slice(&y),
    ];
    assert_eq!(put(&mut s, &iov, key.addr + 4, &key).unwrap(), Posted::Done);
    let mut back = [0u8; 10];
    let (l, r) = back.split_at_mut(3);
    let iov = [iov_mut(&mut l[1..3]), iov_mut(&mut r[..6])];
    assert_eq!(get(&mut s, &iov, key.addr + 3, &key).unwrap(), Posted::Done);
    s.md.mem_dereg(&h).unwrap();
    assert_eq!(&target[..13], b"\0\0\0\0abcdefgh\0");
    assert_eq!(back, *b"\0\0abcdefg\0");
}

#[test]
fn a_put_may_overlap_its_own_registration() {
    let mut s = setup();
    let mut buf: Vec<u8> = (0..16).collect();
    let (h, key) = register(&*s.md, &mut buf, Access::REMOTE_WRITE);
    let base = buf.as_mut_ptr();
    let src = Iov { ptr: base, len: 8 };
    assert_eq!(
        put(&mut s, &[src], key.addr + 4, &key).unwrap(),
        Posted::Done
    );
    s.md.mem_dereg(&h).unwrap();
    assert_eq!(buf, [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15]);
}

#[test]
fn refused_operations_copy_nothing() {
    let mut s = setup();
    let mut target = [9u8; 20];
    let (h, key) = register(&*s.md, &mut target, Access::REMOTE_WRITE);
    let data = [1u8; 21];
    let base = key.addr;
    let cases: [(&str, u64, usize); 5] = [
        ("past the end", base + 20, 1),
        ("across the end", base + 16, 5),
        ("before the start", base - 1, 2),
        ("longer than the registration", base, 21),
        ("wrapping", u64::MAX - 3, 8),
    ];
    for (what, addr, len) in cases {
        let e = put(&mut s, &[Iov::from_slice(&data[..len])], addr, &key).unwrap_err();
        assert_eq!(e.status(), Status::Rejected, "{what}");
        assert!(e.to_string().contains("denied"), "{what}: {e}");
    }
    let many = [Iov::from_slice(&data[..1]); MAX_IOV + 1];
    assert!(put(&mut s, &many, base, &key).is_err(), "too many entries");
    assert!(put(&mut s, &many[..MAX_IOV], base, &key).is_ok());
    let mut read = [0u8; 4];
    let e = get(&mut s, &[iov_mut(&mut read)], base, &key).unwrap_err();
    assert!(e.to_string().contains("denied"), "{e}");
    assert_eq!(read, [0; 4]);

    let mut other_md = key.clone();
    other_md.md_name = "tcp".into();
    assert!(put(&mut s, &[Iov::from_slice(&data[..1])], base, &other_md).is_err());
    let mut garbage = key.clone();
    garbage.packed = Arc::from(&key.packed[..rkey::KEY_LEN - 1]);
    assert!(put(&mut s, &[Iov::from_slice(&data[..1])], base, &garbage).is_err());
    s.md.mem_dereg(&h).unwrap();
    assert_eq!(target[..MAX_IOV], [1; MAX_IOV]);
    assert_eq!(target[MAX_IOV..], [9; 20 - MAX_IOV]);
}

#[test]
fn declared_key_fields_are_not_trusted() {
    let mut s = setup();
    let mut target = [5u8; 8];
    let (h, key) = register(&*s.md, &mut target, Access::REMOTE_READ);
    let mut lying = key.clone();
    lying.len = 1 << 20;
    lying.access = Access::all();
    let data = [1u8; 4];
    assert!(put(&mut s, &[Iov::from_slice(&data)], key.addr, &lying).is_err());
    let mut read = [0u8; 4];
    assert!(get(&mut s, &[iov_mut(&mut read)], key.addr + 6, &lying).is_err());
    assert_eq!(read, [0; 4]);
    s.md.mem_dereg(&h).unwrap();
    assert_eq!(target, [5; 8]);
}

#[test]
fn old_keys_fail_after_deregistration_even_of_the_same_memory() {
    let mut s = setup();
    let mut target = [0u8; 8];
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let (h, old) = register(&*s.md, &mut target, rw);
    s.md.mem_dereg(&h).unwrap();
    let data = [3u8; 8];
    let e = put(&mut s, &[Iov::from_slice(&data)], old.addr, &old).unwrap_err();
    assert_eq!(e.status(), Status::InvalidParam);
    let (h2, new) = register(&*s.md, &mut target, rw);
    assert!(put(&mut s, &[Iov::from_slice(&data)], old.addr, &old).is_err());
    assert_eq!(target, [0; 8]);
    assert_eq!(
        put(&mut s, &[Iov::from_slice(&data)], new.addr, &new).unwrap(),
        Posted::Done
    );
    s.md.mem_dereg(&h2).unwrap();
    assert_eq!(target, [3; 8]);
}

#[test]
fn operations_fail_with_their_endpoint() {
    let mut s = setup();
    let mut target = [0u8; 8];
    let (h, key) = register(&*s.md, &mut target, Access::REMOTE_WRITE);
    let data = [1u8; 8];
    let iov = [Iov::from_slice(&data)];
    let ep = s.ep;
    s.ep = EpId(ep.0 + 100);
    assert_eq!(
        put(&mut s, &iov, key.addr, &key).unwrap_err().status(),
        Status::InvalidParam
    );
    s.ep = ep;
    s.b = None;
    assert_eq!(
        put(&mut s, &iov, key.addr, &key).unwrap_err().status(),
        Status::ConnectionReset
    );
    assert!(get(&mut s, &[], key.addr, &key).is_err());
    s.md.mem_dereg(&h).unwrap();
    assert_eq!(target, [0; 8]);
}

/// Registrations from several threads at once, each thread writing and
/// reading its own memory through another iface's keys.
#[test]
fn threads_register_and_copy_concurrently() {
    let workers: Vec<_> = (0..4u8)
        .map(|t| {
            std::thread::spawn(move || {
                let mut s = setup();
                for round in 0..200u32 {
                    let mut mem = vec![0u8; 64];
                    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
                    let (h, key) = register(&*s.md, &mut mem, rw);
                    let data = [t ^ round as u8; 64];
                    let posted = put(&mut s, &[Iov::from_slice(&data)], key.addr, &key);
                    assert_eq!(posted.unwrap(), Posted::Done);
                    let mut back = [0u8; 64];
                    let posted = get(&mut s, &[iov_mut(&mut back)], key.addr, &key);
                    assert_eq!(posted.unwrap(), Posted::Done);
                    s.md.mem_dereg(&h).unwrap();
                    assert_eq!(back, data);
                    assert!(put(&mut s, &[Iov::from_slice(&data)], key.addr, &key).is_err());
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn a_key_with_another_secret_names_nothing() {
    let mut s = setup();
    let mut target = [4u8; 16];
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let (h, key) = register(&*s.md, &mut target, rw);
    let genuine = rkey::decode(&key.packed).unwrap();
    let data = [1u8; 16];
    for bit in [0, 1, 31, 32, 63] {
        let forged = rkey::KeyFields {
            secret: genuine.secret ^ (1 << bit),
            ..genuine
        };
        let k = s.md.rkey_unpack(&rkey::pack(&forged)).unwrap();
        let e = put(&mut s, &[Iov::from_slice(&data)], key.addr, &k).unwrap_err();
        // As for a registration that ended: nothing tells the slot is live.
        assert_eq!(e.status(), Status::InvalidParam, "bit {bit}");
        let mut read = [0u8; 16];
        assert!(get(&mut s, &[iov_mut(&mut read)], key.addr, &k).is_err());
        assert_eq!(read, [0; 16]);
    }
    assert_eq!(target, [4; 16], "the forged keys wrote");
    assert_eq!(
        put(&mut s, &[Iov::from_slice(&data)], key.addr, &key).unwrap(),
        Posted::Done
    );
    s.md.mem_dereg(&h).unwrap();
    assert_eq!(target, [1; 16]);
}

#[test]
fn the_key_of_one_registration_does_not_lead_to_another() {
    // A peer holding the key of `a` knows every field of a key of `b` but
    // its secret: slot and generation are small numbers.
    let mut s = setup();
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let mut a = [0u8; 8];
    let mut b = [6u8; 8];
    let (ha, ka) = register(&*s.md, &mut a, rw);
    let (hb, kb) = register(&*s.md, &mut b, rw);
    let known = rkey::decode(&ka.packed).unwrap();
    let real = rkey::decode(&kb.packed).unwrap();
    let guess = rkey::KeyFields {
        addr: kb.addr,
        len: 8,
        ..real
    };
    assert_eq!(guess.secret, real.secret);
    let forged = rkey::KeyFields {
        secret: known.secret,
        ..guess
    };
    assert_ne!(forged, real, "two registrations with one secret");
    let k = s.md.rkey_unpack(&rkey::pack(&forged)).unwrap();
    let data = [1u8; 8];
    assert!(put(&mut s, &[Iov::from_slice(&data)], kb.addr, &k).is_err());
    s.md.mem_dereg(&hb).unwrap();
    s.md.mem_dereg(&ha).unwrap();
    assert_eq!(b, [6; 8]);
    assert_eq!(a, [0; 8]);
}

#[test]
fn handles_of_another_domain_are_refused() {
    let s = setup();
    let other = crate::virt::VirtNet::new(crate::virt::VirtConfig::default())
        .unwrap()
        .memory_domain();
    let mut buf = [0u8; 8];
    // SAFETY: `buf` outlives the registration, which is never used for
    // an access.
    let foreign = unsafe { other.mem_reg(buf.as_mut_ptr(), 8, Access::REMOTE_WRITE) }.unwrap();
    assert_eq!(
        s.md.mem_dereg(&foreign).unwrap_err().status(),
        Status::InvalidParam
    );
    assert_eq!(
        s.md.mkey_pack(&foreign).unwrap_err().status(),
        Status::InvalidParam
    );
    other.mem_dereg(&foreign).unwrap();
}
