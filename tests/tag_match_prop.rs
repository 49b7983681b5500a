//! Random operation sequences on the tag matcher, checked step by step
//! against a reference model: two vectors scanned linearly in order.

use proptest::prelude::*;
use rucx::ucp::tag::{PostId, PostOutcome, TagMatcher, UnexpId};

const ALL: u64 = u64::MAX;

/// A small alphabet so that wildcard and exact entries collide a lot:
/// "source" in bits 32.., "user tag" in bits 0.., plus one tag with high
/// bits set.
const TAGS: [u64; 6] = [0, 1, 2, 1 << 32, (1 << 32) | 2, 0xdead_0000_0000_0001];
const MASKS: [u64; 6] = [ALL, ALL, 0, 0xffff_ffff, !0xffff_ffff, 1];

#[derive(Debug, Clone)]
enum Op {
    Post {
        tag: usize,
        mask: usize,
    },
    /// A message arrives; unexpected if no receive matches.
    Arrive {
        tag: usize,
    },
    /// Queue a message without matching first.
    Push {
        tag: usize,
    },
    Probe {
        tag: usize,
        mask: usize,
    },
    ProbeTake {
        tag: usize,
        mask: usize,
    },
    Cancel {
        pick: usize,
    },
    Take {
        pick: usize,
    },
    Mutate {
        pick: usize,
    },
    /// Cancel / take / mutate with an id that is no longer live.
    Stale {
        pick: usize,
    },
    Retain {
        modulus: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let t = 0..TAGS.len();
    let m = 0..MASKS.len();
    prop_oneof![
        6 => (t.clone(), m.clone()).prop_map(|(tag, mask)| Op::Post { tag, mask }),
        6 => t.clone().prop_map(|tag| Op::Arrive { tag }),
        1 => t.clone().prop_map(|tag| Op::Push { tag }),
        2 => (t.clone(), m.clone()).prop_map(|(tag, mask)| Op::Probe { tag, mask }),
        2 => (t, m).prop_map(|(tag, mask)| Op::ProbeTake { tag, mask }),
        2 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Take { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Mutate { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Stale { pick }),
        1 => (2..5u32).prop_map(|modulus| Op::Retain { modulus }),
    ]
}

fn matches(msg_tag: u64, tag: u64, mask: u64) -> bool {
    (msg_tag ^ tag) & mask == 0
}

#[derive(Default)]
struct Model {
    /// (id, tag, mask, req) in post order.
    expected: Vec<(PostId, u64, u64, u32)>,
    /// (id, tag, msg) in arrival order.
    unexpected: Vec<(UnexpId, u64, u32)>,
    dead_posts: Vec<PostId>,
    dead_unexp: Vec<UnexpId>,
}

impl Model {
    fn find_unexp(&self, tag: u64, mask: u64) -> Option<usize> {
        self.unexpected
            .iter()
            .position(|&(_, t, _)| matches(t, tag, mask))
    }
}

fn run(buckets: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut m: TagMatcher<u32, u32> = TagMatcher::with_buckets(buckets);
    let mut model = Model::default();
    let mut counter = 0u32;
    for op in ops {
        counter += 1;
        match *op {
            Op::Post { tag, mask } => {
                let (tag, mask) = (TAGS[tag], MASKS[mask]);
                let got = m.post(tag, mask, counter);
                match model.find_unexp(tag, mask) {
                    Some(k) => {
                        let (id, t, msg) = model.unexpected.remove(k);
                        prop_assert_eq!(
                            got,
                            PostOutcome::Matched {
                                req: counter,
                                id,
                                tag: t,
                                msg
                            }
                        );
                        model.dead_unexp.push(id);
                    }
                    None => match got {
                        PostOutcome::Queued(id) => {
                            prop_assert!(model.expected.iter().all(|e| e.0 != id));
                            model.expected.push((id, tag, mask, counter));
                        }
                        other => prop_assert!(false, "expected Queued, got {:?}", other),
                    },
                }
            }
            Op::Arrive { tag } => {
                let tag = TAGS[tag];
                let got = m.arrive(tag);
                let want = model
                    .expected
                    .iter()
                    .position(|&(_, t, mask, _)| matches(tag, t, mask));
                match want {
                    Some(k) => {
                        let (id, _, _, req) = model.expected.remove(k);
                        prop_assert_eq!(got, Some(req));
                        model.dead_posts.push(id);
                    }
                    None => {
                        prop_assert_eq!(got, None);
                        let id = m.push_unexpected(tag, counter);
                        model.unexpected.push((id, tag, counter));
                    }
                }
            }
            Op::Push { tag } => {
                let tag = TAGS[tag];
                let id = m.push_unexpected(tag, counter);
                prop_assert!(model.unexpected.iter().all(|e| e.0 != id));
                model.unexpected.push((id, tag, counter));
            }
            Op::Probe { tag, mask } => {
                let (tag, mask) = (TAGS[tag], MASKS[mask]);
                let got = m.probe(tag, mask).map(|(id, t, &msg)| (id, t, msg));
                let want = model.find_unexp(tag, mask).map(|k| model.unexpected[k]);
                prop_assert_eq!(got, want);
            }
            Op::ProbeTake { tag, mask } => {
                let (tag, mask) = (TAGS[tag], MASKS[mask]);
                let probed = m.probe(tag, mask).map(|(id, _, _)| id);
                let want = model.find_unexp(tag, mask);
                prop_assert_eq!(probed, want.map(|k| model.unexpected[k].0));
                if let (Some(id), Some(k)) = (probed, want) {
                    let (_, _, msg) = model.unexpected.remove(k);
                    prop_assert_eq!(m.take_unexpected(id), Some(msg));
                    model.dead_unexp.push(id);
                }
            }
            Op::Cancel { pick } => {
                if !model.expected.is_empty() {
                    let (id, _, _, req) = model.expected.remove(pick % model.expected.len());
                    prop_assert_eq!(m.cancel(id), Some(req));
                    model.dead_posts.push(id);
                }
            }
            Op::Take { pick } => {
                if !model.unexpected.is_empty() {
                    let (id, _, msg) = model.unexpected.remove(pick % model.unexpected.len());
                    prop_assert_eq!(m.take_unexpected(id), Some(msg));
                    model.dead_unexp.push(id);
                }
            }
            Op::Mutate { pick } => {
                if !model.unexpected.is_empty() {
                    let k = pick % model.unexpected.len();
                    let (id, tag, msg) = &mut model.unexpected[k];
                    *msg += 1_000_000;
                    prop_assert_eq!(m.unexpected_mut(*id).map(|u| *u), Some(*msg - 1_000_000));
                    if let Some(u) = m.unexpected_mut(*id) {
                        *u += 1_000_000;
                    }
                    prop_assert_eq!(m.unexpected(*id), Some((*tag, &*msg)));
                }
            }
            Op::Stale { pick } => {
                if !model.dead_posts.is_empty() {
                    let id = model.dead_posts[pick % model.dead_posts.len()];
                    prop_assert_eq!(m.cancel(id), None);
                }
                if !model.dead_unexp.is_empty() {
                    let id = model.dead_unexp[pick % model.dead_unexp.len()];
                    prop_assert_eq!(m.unexpected_mut(id), None);
                    prop_assert_eq!(m.take_unexpected(id), None);
                }
            }
            Op::Retain { modulus } => {
                let keep = |msg: u32| msg % modulus != 0;
                let mut seen = Vec::new();
                m.retain_unexpected(|tag, &mut msg| {
                    seen.push((tag, msg));
                    keep(msg)
                });
                let visit: Vec<_> = model.unexpected.iter().map(|e| (e.1, e.2)).collect();
                prop_assert_eq!(seen, visit, "retain visits in arrival order");
                let (kept, dropped): (Vec<(UnexpId, u64, u32)>, Vec<_>) =
                    model.unexpected.drain(..).partition(|e| keep(e.2));
                model.dead_unexp.extend(dropped.iter().map(|e| e.0));
                model.unexpected = kept;
            }
        }
        prop_assert_eq!(m.expected_len(), model.expected.len());
        prop_assert_eq!(m.unexpected_len(), model.unexpected.len());
    }
    let want: Vec<_> = model.expected.iter().map(|e| e.3).collect();
    prop_assert_eq!(m.drain_expected(), want);
    let want: Vec<_> = model.unexpected.iter().map(|e| (e.1, e.2)).collect();
    prop_assert_eq!(m.drain_unexpected(), want);
    prop_assert_eq!(m.expected_len() + m.unexpected_len(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_reference_model(ops in prop::collection::vec(op(), 0..200)) {
        run(1024, &ops)?;
    }

    #[test]
    fn matches_reference_model_all_in_one_bucket(ops in prop::collection::vec(op(), 0..200)) {
        run(1, &ops)?;
    }

    #[test]
    fn matches_reference_model_two_buckets(ops in prop::collection::vec(op(), 0..200)) {
        run(2, &ops)?;
    }
}

/// A long deterministic run that builds deep queues (many posts before
/// arrivals and the reverse), which short random sequences rarely reach.
#[test]
fn deep_queues_match_reference_model() {
    let mut ops = Vec::new();
    for round in 0..20usize {
        for i in 0..50usize {
            ops.push(Op::Post {
                tag: (i * 7 + round) % TAGS.len(),
                mask: (i * 5 + round) % MASKS.len(),
            });
        }
        for i in 0..120usize {
            ops.push(Op::Arrive {
                tag: (i * 3 + round) % TAGS.len(),
            });
        }
        ops.push(Op::Cancel { pick: round * 31 });
        ops.push(Op::Take { pick: round * 17 });
        ops.push(Op::Stale { pick: round });
    }
    for buckets in [1, 2, 1024] {
        run(buckets, &ops).unwrap();
    }
}
