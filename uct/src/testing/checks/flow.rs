//! Ordering, back-pressure, flush and many endpoints.

use super::{assert_one_source, expect_delivered, kinds, send, skip, Kind, Sent};
use crate::testing::{Fixture, Pair, TIMEOUT};
use crate::{AmId, Caps, EpId, Posted, SrcId, Token};
use std::collections::HashMap;
use std::time::Instant;

/// 1000 messages of mixed operations and sizes on one endpoint arrive in
/// order and intact, from one source.
pub fn ordering(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let name = p.name().to_owned();
    let kinds = kinds(p.a().attr().caps);
    let ep = p.ep_ab();
    let mut sent = Sent::default();
    for i in 0..1000u64 {
        let kind = kinds[i as usize % kinds.len()];
        let len = 8 + (i as usize * 37) % 1500;
        let (posted, data) = send(&mut p, ep, kind, i, len, false);
        let (id, data) = data.expect("posted");
        sent.record(posted, Token(i), id, data);
    }
    let srcs = expect_delivered(&mut p, &sent, "1000 mixed messages");
    assert_one_source(&name, &srcs, "ordering");
}

/// Posting without progress runs into `NoResource`; pending tokens then
/// come back in order, posting works again, and everything arrives in
/// order. A transport that takes 64 MiB without refusing passes the first
/// half; a token added to a free endpoint must come back on the next
/// `progress`.
pub fn pending(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let name = p.name().to_owned();
    let caps = p.a().attr().caps;
    if !caps.contains(Caps::PENDING) {
        return skip(&p, "no PENDING");
    }
    let kind = [Kind::Bcopy, Kind::Short, Kind::Zcopy]
        .into_iter()
        .find(|k| kinds(caps).contains(k))
        .expect("an active message operation");
    const LEN: usize = 16 << 10;
    let ep = p.ep_ab();
    let mut sent = Sent::default();
    let (mut seq, mut bytes, mut refused) = (0u64, 0usize, false);
    while bytes < 64 << 20 && seq < 100_000 {
        match send(&mut p, ep, kind, seq, LEN, true) {
            (posted, Some((id, data))) => {
                bytes += data.len();
                sent.record(posted, Token(seq), id, data);
                seq += 1;
            }
            (_, None) => {
                refused = true;
                break;
            }
        }
    }
    if !refused {
        eprintln!("{name}: never refused within {bytes} bytes; checking a free endpoint");
        expect_delivered(&mut p, &sent, "unrefused messages");
        p.a().pending_add(ep, Token(7)).expect("pending_add");
        p.progress_a();
        assert_eq!(
            p.sink_a.pending_tokens(ep),
            [Token(7)],
            "{name}: token added to a free endpoint did not come back on the next progress"
        );
        return;
    }

    let first = [Token(1), Token(2), Token(3)];
    for t in first {
        p.a()
            .pending_add(ep, t)
            .unwrap_or_else(|e| panic!("{name}: pending_add failed: {e}"));
    }
    p.drive_until("pending tokens", |p| p.sink_a.pending_tokens(ep).len() >= 3);
    assert_eq!(
        p.sink_a.pending_tokens(ep),
        first,
        "{name}: pending tokens out of order"
    );

    // Post the refused message; if refused again, wait once more.
    let start = Instant::now();
    let mut added = first.len();
    loop {
        if let (posted, Some((id, data))) = send(&mut p, ep, kind, seq, LEN, true) {
            sent.record(posted, Token(seq), id, data);
            seq += 1;
            break;
        }
        assert!(
            start.elapsed() < TIMEOUT,
            "{name}: still refused after pending_ready"
        );
        let t = Token(100 + added as u64);
        p.a().pending_add(ep, t).expect("pending_add");
        added += 1;
        p.drive_until("pending token after another refusal", |p| {
            p.sink_a.pending_tokens(ep).contains(&t)
        });
    }
    for _ in 0..100 {
        let (posted, data) = send(&mut p, ep, kind, seq, LEN, false);
        let (id, data) = data.expect("posted");
        sent.record(posted, Token(seq), id, data);
        seq += 1;
    }
    let srcs = expect_delivered(&mut p, &sent, "messages around back-pressure");
    assert_one_source(&name, &srcs, "pending");
    assert_eq!(
        p.sink_a.pending_tokens(ep).len(),
        added,
        "{name}: each pending token must come back exactly once"
    );
}

/// `flush` of an endpoint and of the iface completes, at once or through
/// `completed`, on a fresh endpoint and after sends.
pub fn flush(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let kind = kinds(p.a().attr().caps)[0];
    let ep = p.ep_ab();
    do_flush(&mut p, Some(ep), Token(900));
    let mut sent = Sent::default();
    for i in 0..10u64 {
        let (posted, data) = send(&mut p, ep, kind, i, 100 * i as usize, false);
        let (id, data) = data.expect("posted");
        sent.record(posted, Token(i), id, data);
    }
    do_flush(&mut p, Some(ep), Token(901));
    do_flush(&mut p, None, Token(902));
    expect_delivered(&mut p, &sent, "messages around flush");
}

fn do_flush(p: &mut Pair, ep: Option<EpId>, token: Token) {
    let name = p.name().to_owned();
    let posted = p
        .retry(
            "flush",
            |a| a.flush(ep, token),
            |r| *r == Posted::NoResource,
        )
        .unwrap_or_else(|e| panic!("{name}: flush({ep:?}) failed: {e}"));
    if posted == Posted::InFlight {
        p.drive_until("flush completion", |p| p.sink_a.completion(token).is_some());
        if let Some(Err(e)) = p.sink_a.completion(token) {
            panic!("{name}: flush({ep:?}) completed with {e}");
        }
    }
}

/// Eight endpoints from `a` to `b`, sends interleaved: each endpoint's
/// messages arrive in order, each under one source id.
pub fn many_endpoints(f: &dyn Fixture) {
    const EPS: usize = 8;
    const ROUNDS: u64 = 50;
    let mut p = Pair::open(f);
    let name = p.name().to_owned();
    let kinds = kinds(p.a().attr().caps);
    let eps: Vec<EpId> = (0..EPS).map(|_| p.ep_ab()).collect();
    let mut sent = Sent::default();
    let mut owner: HashMap<Vec<u8>, (usize, u64, AmId)> = HashMap::new();
    for round in 0..ROUNDS {
        for (k, &ep) in eps.iter().enumerate() {
            let seq = (k as u64) << 32 | round;
            let kind = kinds[(k + round as usize) % kinds.len()];
            let (posted, data) = send(&mut p, ep, kind, seq, 24 + k, false);
            let (id, data) = data.expect("posted");
            owner.insert(data.clone(), (k, round, id));
            sent.record(posted, Token(seq), id, data);
        }
    }
    let total = sent.expected.len();
    p.drive_until("messages of 8 endpoints", |p| {
        p.sink_b.ams.len() >= total
            && sent
                .in_flight
                .iter()
                .all(|&t| p.sink_a.completion(t).is_some())
    });
    assert_eq!(p.sink_b.ams.len(), total, "{name}: message count");
    let mut rounds: Vec<Vec<u64>> = vec![Vec::new(); EPS];
    let mut srcs: Vec<Option<SrcId>> = vec![None; EPS];
    for m in &p.sink_b.ams {
        let &(k, round, id) = owner
            .get(&m.data)
            .unwrap_or_else(|| panic!("{name}: a message that was not sent arrived"));
        assert_eq!(m.id, id, "{name}: id of endpoint {k}'s message {round}");
        rounds[k].push(round);
        let src = *srcs[k].get_or_insert(m.src);
        assert_eq!(
            m.src, src,
            "{name}: endpoint {k}'s messages carry different sources"
        );
    }
    for (k, r) in rounds.iter().enumerate() {
        let want: Vec<u64> = (0..ROUNDS).collect();
        assert_eq!(*r, want, "{name}: endpoint {k}'s messages out of order");
    }
}
