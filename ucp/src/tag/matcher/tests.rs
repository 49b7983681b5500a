//! MPI-order cases for the tag matcher.

use super::*;

const ALL: u64 = u64::MAX;
/// Tags as an MPI layer builds them: source rank in the high 32 bits, user
/// tag in the low 32.
const USER: u64 = 0xffff_ffff;
const SRC: u64 = !USER;

fn t(src: u64, user: u64) -> u64 {
    (src << 32) | user
}

type M = TagMatcher<&'static str, u32>;

fn queued<R, U: fmt::Debug>(o: PostOutcome<R, U>) -> PostId {
    match o {
        PostOutcome::Queued(id) => id,
        PostOutcome::Matched { tag, msg, .. } => panic!("unexpected match of {tag:#x} {msg:?}"),
    }
}

fn matched<R: fmt::Debug, U>(o: PostOutcome<R, U>) -> (R, UnexpId, u64, U) {
    match o {
        PostOutcome::Matched { req, id, tag, msg } => (req, id, tag, msg),
        PostOutcome::Queued(_) => panic!("receive was queued, expected a match"),
    }
}

#[test]
fn exact_receives_match_in_post_order() {
    for buckets in [1, 1024] {
        let mut m = M::with_buckets(buckets);
        queued(m.post(7, ALL, "a"));
        queued(m.post(8, ALL, "x"));
        queued(m.post(7, ALL, "b"));
        assert_eq!(m.arrive(7), Some("a"));
        assert_eq!(m.arrive(7), Some("b"));
        assert_eq!(m.arrive(7), None);
        assert_eq!(m.arrive(8), Some("x"));
        assert_eq!(m.expected_len(), 0);
    }
}

#[test]
fn older_wildcard_beats_newer_exact_and_vice_versa() {
    let mut m = M::new();
    queued(m.post(0, 0, "any"));
    queued(m.post(5, ALL, "five"));
    assert_eq!(m.arrive(5), Some("any"), "wildcard was posted first");
    assert_eq!(m.arrive(5), Some("five"));

    queued(m.post(5, ALL, "five"));
    queued(m.post(0, 0, "any"));
    assert_eq!(m.arrive(5), Some("five"), "exact was posted first");
    assert_eq!(m.arrive(9), Some("any"));
    assert_eq!(m.arrive(5), None);
}

#[test]
fn non_matching_wildcard_does_not_block_exact() {
    let mut m = M::new();
    queued(m.post(t(1, 0), SRC, "from 1"));
    queued(m.post(t(2, 3), ALL, "2:3"));
    assert_eq!(m.arrive(t(2, 3)), Some("2:3"));
    assert_eq!(m.arrive(t(2, 4)), None);
    assert_eq!(m.arrive(t(1, 4)), Some("from 1"));
}

#[test]
fn unexpected_taken_oldest_first() {
    let mut m = M::new();
    m.push_unexpected(t(1, 7), 10);
    m.push_unexpected(t(2, 7), 20);
    m.push_unexpected(t(1, 7), 11);
    // Exact receive: oldest with this tag.
    let (req, _, tag, msg) = matched(m.post(t(1, 7), ALL, "r"));
    assert_eq!((req, tag, msg), ("r", t(1, 7), 10));
    // Any source, tag 7: oldest overall.
    let (_, _, tag, msg) = matched(m.post(7, USER, "r"));
    assert_eq!((tag, msg), (t(2, 7), 20));
    let (_, _, tag, msg) = matched(m.post(0, 0, "r"));
    assert_eq!((tag, msg), (t(1, 7), 11));
    queued(m.post(0, 0, "r"));
    assert_eq!(m.unexpected_len(), 0);
}

#[test]
fn per_sender_order_with_any_tag_receives() {
    // Sender 3 sends user tags 9 then 4; receives for "source 3, any tag"
    // get them in send order whether they were posted before or after.
    let mut m = M::new();
    queued(m.post(t(3, 0), SRC, "first"));
    queued(m.post(t(3, 4), ALL, "tag4"));
    assert_eq!(m.arrive(t(3, 9)), Some("first"));
    assert_eq!(m.arrive(t(3, 4)), Some("tag4"));

    m.push_unexpected(t(3, 9), 9);
    m.push_unexpected(t(3, 4), 4);
    let (_, _, _, msg) = matched(m.post(t(3, 0), SRC, "a"));
    assert_eq!(msg, 9);
    let (_, _, _, msg) = matched(m.post(t(3, 0), SRC, "b"));
    assert_eq!(msg, 4);
}

#[test]
fn colliding_tags_share_a_bucket() {
    let mut m = M::with_buckets(1);
    queued(m.post(1, ALL, "1a"));
    queued(m.post(2, ALL, "2a"));
    queued(m.post(1, ALL, "1b"));
    assert_eq!(m.arrive(2), Some("2a"));
    assert_eq!(m.arrive(1), Some("1a"));
    m.push_unexpected(3, 30);
    m.push_unexpected(4, 40);
    let (_, _, tag, msg) = matched(m.post(4, ALL, "r"));
    assert_eq!((tag, msg), (4, 40));
    assert_eq!(m.arrive(1), Some("1b"));
}

#[test]
fn probe_take_and_mutate() {
    let mut m = M::new();
    let a = m.push_unexpected(5, 1);
    let b = m.push_unexpected(6, 2);
    let (id, tag, msg) = m.probe(6, ALL).unwrap();
    assert_eq!((id, tag, *msg), (b, 6, 2));
    assert_eq!(m.unexpected_len(), 2, "probe does not remove");
    *m.unexpected_mut(b).unwrap() += 100;
    assert_eq!(m.unexpected(b), Some((6, &102)));
    assert_eq!(m.take_unexpected(b), Some(102));
    assert_eq!(m.take_unexpected(b), None, "stale id");
    assert_eq!(m.unexpected_mut(b), None);
    assert_eq!(m.probe(6, ALL), None);
    let (id, tag, _) = m.probe(0, 0).unwrap();
    assert_eq!((id, tag), (a, 5));
    // The freed slot is reused under a new generation.
    let c = m.push_unexpected(7, 3);
    assert_ne!(c, b);
    assert_eq!(m.take_unexpected(b), None);
    assert_eq!(UnexpId::from_u64(c.to_u64()), c);
    assert_eq!(m.take_unexpected(UnexpId::from_u64(u64::MAX)), None);
}

#[test]
fn matched_post_reports_the_message_id() {
    let mut m = M::new();
    let a = m.push_unexpected(5, 1);
    let (_, id, _, _) = matched(m.post(5, ALL, "r"));
    assert_eq!(id, a);
    assert_eq!(m.unexpected(a), None);
}

#[test]
fn cancel_removes_only_that_receive() {
    let mut m = M::new();
    let a = queued(m.post(1, ALL, "a"));
    let w = queued(m.post(0, 0, "w"));
    let b = queued(m.post(1, ALL, "b"));
    assert_eq!(m.cancel(a), Some("a"));
    assert_eq!(m.cancel(a), None);
    assert_eq!(m.cancel(w), Some("w"));
    assert_eq!(m.arrive(1), Some("b"));
    assert_eq!(m.cancel(b), None, "already matched");
    assert_eq!(m.cancel(PostId::from_u64(12345)), None);
    let c = queued(m.post(1, ALL, "c"));
    assert_ne!(c, a);
    assert_eq!(PostId::from_u64(c.to_u64()), c);
    assert_eq!(m.cancel(a), None, "stale id of a reused slot");
    assert_eq!(m.expected_len(), 1);
}

#[test]
fn retain_and_drain() {
    let mut m = M::new();
    for (i, tag) in [t(1, 0), t(2, 0), t(1, 1), t(3, 0)].into_iter().enumerate() {
        m.push_unexpected(tag, i as u32);
    }
    m.retain_unexpected(|tag, _| tag & SRC != t(1, 0));
    assert_eq!(m.unexpected_len(), 2);
    assert_eq!(m.probe(t(1, 0), SRC), None);
    assert_eq!(m.drain_unexpected(), vec![(t(2, 0), 1), (t(3, 0), 3)]);
    assert_eq!(m.unexpected_len(), 0);

    queued(m.post(9, ALL, "a"));
    queued(m.post(0, 0, "b"));
    queued(m.post(4, ALL, "c"));
    queued(m.post(9, ALL, "d"));
    assert_eq!(m.drain_expected(), vec!["a", "b", "c", "d"]);
    assert_eq!(m.expected_len(), 0);
    assert_eq!(m.arrive(9), None);
    queued(m.post(9, ALL, "e"));
    assert_eq!(m.arrive(9), Some("e"));
}

#[test]
fn bucket_count_is_rounded_and_capped() {
    for n in [0, 1, 3, 1000, usize::MAX] {
        let mut m = M::with_buckets(n);
        queued(m.post(42, ALL, "x"));
        assert_eq!(m.arrive(42), Some("x"));
    }
    assert!(format!("{:?}", M::new()).contains("expected: 0"));
}
