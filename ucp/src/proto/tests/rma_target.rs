//! The target of emulated one-sided operations: `RMA_PUT`, `RMA_GET` and
//! `RMA_ATOMIC` arriving as active messages are carried out against the
//! process's registrations, and answered with `RMA_REPLY`; accesses
//! outside a registration, without its right, with a wrong secret or
//! misaligned touch nothing and are refused in the reply.

use crate::proto::testing::{context_on, le, pattern, virt_attr, Node};
use crate::rma::wire::{
    encode_put, AtomicReq, GetReq, KeyRef, Reply, AM_RMA_ATOMIC, AM_RMA_GET, AM_RMA_PUT,
    AM_RMA_REPLY, GET_LEN,
};
use crate::rma::{AtomicOp, AtomicValue, MemMap};
use crate::ucs::Status;
use crate::uct::Access;
use crate::UcpConfig;

/// `len` bytes of memory registered with `access`, and their key.
fn region(len: usize, access: Access) -> (MemMap, KeyRef) {
    let net = crate::uct::virt::VirtNet::with_seed(2);
    let ctx = context_on(&net, &UcpConfig::default());
    let m = ctx.mem_alloc(len, access).expect("memory");
    // The key reference is bytes 8..32 of a packed key (rma/mem.rs).
    let p = m.rkey_pack().expect("key");
    let u64_at = |at: usize| u64::from_le_bytes(p[at..at + 8].try_into().unwrap());
    let key = KeyRef {
        owner: u64_at(8),
        index: u32::from_le_bytes(p[16..20].try_into().unwrap()),
        generation: u32::from_le_bytes(p[20..24].try_into().unwrap()),
        secret: u64_at(24),
    };
    (m, key)
}

/// The one reply `n` sent, and its data.
fn reply(n: &mut Node) -> (Reply, Vec<u8>) {
    let r = n.tx.ams_of(AM_RMA_REPLY);
    assert_eq!(r.len(), 1, "one reply");
    n.tx.sent.clear();
    let (h, d) = Reply::decode(&r[0]).expect("a well-formed reply");
    (h, d.to_vec())
}

fn status(s: Status) -> i32 {
    i32::from(s.code())
}

const ALL: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

#[test]
fn a_put_writes_the_registered_memory_and_is_answered() {
    let mut t = Node::new(virt_attr(|_| {}));
    let (m, key) = region(4096, ALL);
    let mut msg = encode_put(77, &key, m.addr() + 100);
    msg.extend_from_slice(b"written");
    t.arrive(AM_RMA_PUT, &msg);
    let (r, d) = reply(&mut t);
    assert_eq!((r.req, r.status), (77, 0));
    assert!(d.is_empty());
    let mut out = [0u8; 7];
    m.read(100, &mut out).unwrap();
    assert_eq!(&out, b"written");
}

#[test]
fn refused_puts_touch_nothing() {
    let mut t = Node::new(virt_attr(|_| {}));
    let (m, key) = region(4096, ALL);
    let (ro, ro_key) = region(4096, Access::REMOTE_READ);
    let forged = KeyRef {
        secret: key.secret ^ 1,
        ..key
    };
    let cases = [
        (key, m.addr() + 4090, "past the end"),
        (forged, m.addr(), "a wrong secret"),
        (ro_key, ro.addr(), "no right to write"),
    ];
    for (k, addr, what) in cases {
        let mut msg = encode_put(5, &k, addr);
        msg.extend_from_slice(&[0xaa; 8]);
        t.arrive(AM_RMA_PUT, &msg);
        let (r, _) = reply(&mut t);
        assert_eq!(r.req, 5);
        assert_ne!(r.status, 0, "{what} was accepted");
    }
    for map in [&m, &ro] {
        let mut out = vec![1u8; 4096];
        map.read(0, &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0), "memory changed");
    }
}

#[test]
fn a_get_answers_the_bytes_at_the_offset_asked() {
    let mut t = Node::new(virt_attr(|_| {}));
    let (m, key) = region(4096, ALL);
    let data = pattern(300);
    m.write(1000, &data).unwrap();
    let g = GetReq {
        req: 9,
        key,
        addr: m.addr() + 1000,
        len: 300,
        offset: 64,
    };
    assert_eq!(g.encode().len(), GET_LEN);
    t.arrive(AM_RMA_GET, &g.encode());
    let (r, d) = reply(&mut t);
    assert_eq!((r.req, r.offset, r.status), (9, 64, 0));
    assert_eq!(d, data);
    // Too long for one reply, and past the registration: no data.
    for len in [(1 << 20) + 1, 4000] {
        t.arrive(AM_RMA_GET, &GetReq { len, ..g }.encode());
        let (r, d) = reply(&mut t);
        assert_ne!(r.status, 0);
        assert!(d.is_empty());
    }
}

#[test]
fn atomics_return_the_old_value_and_update_the_word() {
    let mut t = Node::new(virt_attr(|_| {}));
    let (m, key) = region(4096, ALL);
    m.write(0, &le(&[40])).unwrap();
    let add = AtomicReq {
        req: 1,
        key,
        addr: m.addr(),
        op: AtomicOp::Add,
        value: AtomicValue::U64(2),
        compare: 0,
    };
    t.arrive(AM_RMA_ATOMIC, &add.encode());
    let (r, _) = reply(&mut t);
    assert_eq!((r.req, r.value, r.status), (1, 40, 0));
    assert_eq!(m.load_u64(0).unwrap(), 42);
    // A compare-and-swap on a 32-bit word: a miss, then a hit.
    m.write(8, &7u32.to_le_bytes()).unwrap();
    let cswap = AtomicReq {
        addr: m.addr() + 8,
        op: AtomicOp::Cswap,
        value: AtomicValue::U32(9),
        compare: 6,
        ..add
    };
    t.arrive(AM_RMA_ATOMIC, &cswap.encode());
    assert_eq!(reply(&mut t).0.value, 7);
    t.arrive(
        AM_RMA_ATOMIC,
        &AtomicReq {
            compare: 7,
            ..cswap
        }
        .encode(),
    );
    assert_eq!(reply(&mut t).0.value, 7);
    let mut w = [0u8; 4];
    m.read(8, &mut w).unwrap();
    assert_eq!(u32::from_le_bytes(w), 9);
}

#[test]
fn misaligned_or_unauthorised_atomics_are_refused() {
    let mut t = Node::new(virt_attr(|_| {}));
    let (m, key) = region(4096, ALL);
    let (rw, rw_key) = region(4096, Access::REMOTE_READ | Access::REMOTE_WRITE);
    let swap = AtomicReq {
        req: 3,
        key,
        addr: m.addr() + 4,
        op: AtomicOp::Swap,
        value: AtomicValue::U64(u64::MAX),
        compare: 0,
    };
    t.arrive(AM_RMA_ATOMIC, &swap.encode());
    assert_eq!(reply(&mut t).0.status, status(Status::InvalidAddr));
    let no_right = AtomicReq {
        key: rw_key,
        addr: rw.addr(),
        ..swap
    };
    t.arrive(AM_RMA_ATOMIC, &no_right.encode());
    assert_ne!(reply(&mut t).0.status, 0);
    assert_eq!((m.load_u64(0).unwrap(), rw.load_u64(0).unwrap()), (0, 0));
}

#[test]
fn malformed_requests_and_stray_replies_are_dropped() {
    let mut t = Node::new(virt_attr(|_| {}));
    let (m, key) = region(4096, ALL);
    let g = GetReq {
        req: 1,
        key,
        addr: m.addr(),
        len: 8,
        offset: 0,
    }
    .encode();
    t.arrive(AM_RMA_GET, &g[..GET_LEN - 1]);
    t.arrive(AM_RMA_PUT, &encode_put(1, &key, m.addr())[..20]);
    let r = Reply {
        req: 0x1234_5678,
        offset: 0,
        value: 0,
        status: 0,
    };
    t.arrive(AM_RMA_REPLY, &r.encode());
    assert!(t.tx.sent.is_empty(), "{:?}", t.tx.am_ids());
}
