//! The three active message operations and their limits.

use super::{assert_one_source, expect_delivered, kinds, pattern, send, skip, Sent};
use crate::testing::{Fixture, Pair};
use crate::{AmId, Caps, EpId, Iov, Posted, Result, Status, Token, AM_ID_MAX};

/// Sizes `0, 1, 7, ...` and the maximum, deduplicated, at most `max`.
fn sizes(extra: &[usize], max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = [0, 1, 7]
        .iter()
        .chain(extra)
        .copied()
        .chain([max.saturating_sub(1), max])
        .filter(|&s| s <= max)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn id_of(i: usize) -> AmId {
    (i * 5 % usize::from(AM_ID_MAX)) as AmId
}

/// `am_short` delivers header and payload exactly for payloads of 0, 1, 7
/// and `max_short` bytes, with the id, from one source.
pub fn am_short(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let attr = p.a().attr().clone();
    if !attr.caps.contains(Caps::AM_SHORT) {
        return skip(&p, "no AM_SHORT");
    }
    let name = p.name().to_owned();
    let ep = p.ep_ab();
    let mut sent = Sent::default();
    for (i, len) in sizes(&[8], attr.max_short).into_iter().enumerate() {
        let header = 0x0123_4567_89ab_cdef_u64.rotate_left(i as u32 * 8);
        let payload = pattern(i as u64, len);
        let posted = p.short(ep, id_of(i), header, &payload);
        assert_eq!(posted, Posted::Done, "{name}: am_short of {len} bytes");
        let mut data = header.to_le_bytes().to_vec();
        data.extend_from_slice(&payload);
        sent.record(posted, Token(0), id_of(i), data);
    }
    let srcs = expect_delivered(&mut p, &sent, "am_short messages");
    assert_one_source(&name, &srcs, "am_short");
}

/// `am_bcopy` delivers the concatenated parts for sizes up to `max_bcopy`
/// and splits into one, two or three parts (one empty), and returns the
/// byte count.
pub fn am_bcopy(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let attr = p.a().attr().clone();
    if !attr.caps.contains(Caps::AM_BCOPY) {
        return skip(&p, "no AM_BCOPY");
    }
    let name = p.name().to_owned();
    let ep = p.ep_ab();
    let mut sent = Sent::default();
    let mut i = 0;
    for len in sizes(&[8, 100, 4096], attr.max_bcopy) {
        for split in 0..3 {
            let data = pattern(i as u64, len);
            let (x, y) = data.split_at(len / 3);
            let parts: Vec<&[u8]> = match split {
                0 => vec![&data],
                1 => vec![x, y],
                _ => vec![x, &[], y],
            };
            let (posted, n) = p.bcopy(ep, id_of(i), &parts);
            assert_eq!(posted, Posted::Done, "{name}: am_bcopy of {len} bytes");
            assert_eq!(n, len, "{name}: am_bcopy byte count");
            sent.record(posted, Token(0), id_of(i), data);
            i += 1;
        }
    }
    let srcs = expect_delivered(&mut p, &sent, "am_bcopy messages");
    assert_one_source(&name, &srcs, "am_bcopy");
}

/// `am_zcopy` with headers up to `max_hdr` and 1, 2 and `max_iov` entries
/// of up to `max_zcopy` bytes delivers header then data; `InFlight`
/// operations complete once with `Ok`, `Done` ones not at all.
pub fn am_zcopy(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let attr = p.a().attr().clone();
    if !attr.caps.contains(Caps::AM_ZCOPY) {
        return skip(&p, "no AM_ZCOPY");
    }
    let name = p.name().to_owned();
    let ep = p.ep_ab();
    let max_total = attr.max_zcopy.min(4 << 20);
    let mut counts = vec![1, 2.min(attr.max_iov), attr.max_iov];
    counts.dedup();
    let hdrs = [0, attr.max_hdr.min(8), attr.max_hdr];
    let mut sent = Sent::default();
    let mut done = Vec::new();
    let mut i = 0u64;
    for &count in &counts {
        for total in [1, 1000, max_total] {
            let header = pattern(i + 500, hdrs[i as usize % hdrs.len()]);
            let body = pattern(i, total);
            let mut parts: Vec<Vec<u8>> =
                body.chunks(total / count + 1).map(<[u8]>::to_vec).collect();
            parts.resize(count, Vec::new());
            let token = Token(100 + i);
            let id = id_of(i as usize);
            let posted = p
                .zcopy(ep, id, &header, parts, token)
                .unwrap_or_else(|e| panic!("{name}: am_zcopy of {total} bytes in {count}: {e}"));
            if posted == Posted::Done {
                done.push(token);
            }
            let mut data = header;
            data.extend_from_slice(&body);
            sent.record(posted, token, id, data);
            i += 1;
        }
    }
    let srcs = expect_delivered(&mut p, &sent, "am_zcopy messages");
    assert_one_source(&name, &srcs, "am_zcopy");
    for t in &sent.in_flight {
        assert_eq!(
            p.sink_a.completions(*t),
            1,
            "{name}: {t:?} completed more than once"
        );
    }
    for t in &done {
        assert_eq!(
            p.sink_a.completions(*t),
            0,
            "{name}: {t:?} returned Done but completed"
        );
    }
}

fn expect_invalid<T: std::fmt::Debug>(name: &str, what: &str, r: Result<T>) {
    match r {
        Err(e) => assert_eq!(e.status(), Status::InvalidParam, "{name}: {what}: {e}"),
        Ok(x) => panic!("{name}: {what} was accepted: {x:?}"),
    }
}

/// Sizes beyond each limit are `InvalidParam` errors, unknown endpoints are
/// errors, and the endpoint keeps working.
pub fn limits(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let attr = p.a().attr().clone();
    let caps = attr.caps;
    let name = p.name().to_owned();
    let ep = p.ep_ab();
    if caps.contains(Caps::AM_SHORT) {
        let payload = vec![1u8; attr.max_short + 1];
        expect_invalid(
            &name,
            "am_short over max_short",
            p.a().am().unwrap().am_short(ep, 1, 0, &payload),
        );
    }
    if caps.contains(Caps::AM_BCOPY) && attr.max_bcopy < 1 << 30 {
        let data = vec![2u8; attr.max_bcopy + 1];
        let (x, y) = data.split_at(data.len() / 2);
        expect_invalid(
            &name,
            "am_bcopy over max_bcopy",
            p.a().am().unwrap().am_bcopy(ep, 1, &[x, y]),
        );
    }
    if caps.contains(Caps::AM_ZCOPY) {
        let one = vec![vec![3u8; 1]];
        if attr.max_zcopy < 1 << 28 {
            let big = vec![vec![3u8; attr.max_zcopy + 1]];
            let r = p.zcopy_once(ep, 1, &[], big, Token(1));
            expect_invalid(&name, "am_zcopy over max_zcopy", r);
        }
        if attr.max_iov < 4096 {
            let many = vec![vec![4u8; 1]; attr.max_iov + 1];
            let r = p.zcopy_once(ep, 1, &[], many, Token(2));
            expect_invalid(&name, "am_zcopy over max_iov", r);
        }
        if attr.max_hdr < 1 << 20 {
            let hdr = vec![5u8; attr.max_hdr + 1];
            let r = p.zcopy_once(ep, 1, &hdr, one, Token(3));
            expect_invalid(&name, "am_zcopy over max_hdr", r);
        }
    }

    let nobody = EpId(u32::MAX - 7);
    if let Some(am) = p.a().am() {
        assert!(
            am.am_short(nobody, 1, 0, &[]).is_err(),
            "{name}: am_short on no endpoint"
        );
        assert!(
            am.am_bcopy(nobody, 1, &[]).is_err(),
            "{name}: am_bcopy on no endpoint"
        );
    }
    let buf = [0u8; 4];
    let iov = [Iov::from_slice(&buf)];
    if let Some(zc) = p.a().zcopy() {
        // SAFETY: `buf` outlives the call, which must fail without keeping
        // it.
        let r = unsafe { zc.am_zcopy(nobody, 1, &[], &iov, Token(4)) };
        assert!(r.is_err(), "{name}: am_zcopy on no endpoint");
    }
    assert!(
        p.a().flush(Some(nobody), Token(5)).is_err(),
        "{name}: flush of no endpoint"
    );
    assert!(
        p.a().pending_add(nobody, Token(6)).is_err(),
        "{name}: pending_add to no endpoint"
    );
    p.a().ep_destroy(nobody);

    // The endpoint still works, with every operation.
    let mut sent = Sent::default();
    for (i, kind) in kinds(caps).into_iter().enumerate() {
        let (posted, data) = send(&mut p, ep, kind, 50 + i as u64, 33, false);
        let (id, data) = data.expect("posted");
        sent.record(posted, Token(50 + i as u64), id, data);
    }
    expect_delivered(&mut p, &sent, "messages after refused ones");
}
