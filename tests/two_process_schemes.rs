//! Every protocol family between two processes over TCP, forced by the
//! same settings on both sides: eager copy, eager zero-copy and the three
//! rendezvous schemes, plus small rendezvous fragments.
//!
//! For each, the parent and its child echo messages of many sizes, send a
//! message in each direction that the receiver only asks for after it
//! arrived, and keep 16 messages of mixed sizes in flight at once, taken
//! in reverse order. Both check the contents with a pattern per message.
//! The parent configures itself with a `UcpConfig`, the child from the
//! `RUCX_*` environment; both must end up with the same settings and the
//! same selection tables, and the table must show the forced protocol.
//!
//! The test binary starts itself again as the child (see `common`).

mod common;

use common::*;
use rucx::ucp::proto::select::{Note, ProtoClass, ProtocolId, RndvScheme, SelectionTable};
use rucx::ucp::UcpConfig;
use rucx::Context;
use rucx::{Ep, Op, Posted, ReqId, Worker, TAG_MASK_ALL};
use std::time::{Duration, Instant};

/// Sizes every family echoes.
const SIZES: [usize; 6] = [0, 1, 4095, 65536, (1 << 20) + 7, 8 << 20];
/// Sizes of the messages in flight at once, by index modulo 8.
const MIXED: [usize; 8] = [0, 1, 4095, 8193, 65536, 200_003, (1 << 20) + 7, 33];
/// Messages in flight at once.
const IN_FLIGHT: u64 = 16;
/// Size of the messages whose receive is posted after they arrived.
const LATE: usize = 300_001;
/// Longest wait for any one thing.
const TIMEOUT: Duration = Duration::from_secs(60);

// Tags of the conversation. Echo: ECHO + i there, ECHO + 100 + i back.
const ADDRESS: u64 = 0;
const ECHO: u64 = 100;
const LATE_DOWN: u64 = 300;
const LATE_UP: u64 = 310;
const MANY_DOWN: u64 = 400;
const MANY_UP: u64 = 500;
const BYE: u64 = 999;

/// Prefixes of the child's report lines.
const TABLE_LINE: &str = "table|";
const CONFIG_LINE: &str = "config|";

/// A forced protocol family: the `RUCX_*` settings (without the prefix)
/// both processes get on top of `TLS=tcp`, sizes to echo besides
/// [`SIZES`], and what the parent's tag send table must show.
struct Family {
    vars: &'static [(&'static str, &'static str)],
    extra_sizes: &'static [usize],
    check: fn(&SelectionTable),
}

/// The other process, watched while waiting so that no wait outlives it.
enum Other {
    Child(ChildGuard),
    Parent(u32),
}

impl Other {
    /// Why the other process is gone, if it is.
    fn gone(&mut self) -> Option<String> {
        match self {
            Other::Child(c) => match c.try_wait() {
                Ok(Some(status)) => Some(format!("child exited: {status}")),
                Ok(None) => None,
                Err(e) => Some(format!("child lost: {e}")),
            },
            Other::Parent(ppid) => {
                (std::os::unix::process::parent_id() != *ppid).then(|| "parent died".to_string())
            }
        }
    }
}

/// One process's end of the connection.
struct Side {
    w: Worker,
    /// Set once the peer's address is known.
    ep: Option<Ep>,
    other: Other,
}

impl Side {
    fn ep(&self) -> Ep {
        self.ep.expect("connected")
    }

    /// Progresses while `busy` holds; fails after [`TIMEOUT`] or when the
    /// other process is gone.
    fn progress_while(&mut self, what: &str, mut busy: impl FnMut(&mut Worker) -> bool) {
        let deadline = Instant::now() + TIMEOUT;
        let mut spins = 0u32;
        while busy(&mut self.w) {
            self.w.progress();
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                if let Some(why) = self.other.gone() {
                    panic!("{what}: {why}");
                }
                assert!(Instant::now() < deadline, "{what}: timed out");
            }
        }
    }

    /// Whether this side's table sends `size` bytes by rendezvous.
    fn rndv_at(&self, size: usize) -> bool {
        let tables = self.w.ep_protocols(self.ep()).expect("tables");
        tables[0].lookup(size).proto.class() == ProtoClass::Rndv
    }

    fn post_send(&mut self, data: Vec<u8>, tag: u64) -> Option<ReqId> {
        match self.w.tag_send(self.ep(), data, tag, Op::new()) {
            Ok(Posted::Done(..)) => None,
            Ok(Posted::InFlight(id)) => Some(id),
            Err(e) => panic!("send tag {tag}: {e}"),
        }
    }

    fn finish_send(&mut self, id: Option<ReqId>, tag: u64) {
        let Some(id) = id else { return };
        self.progress_while(&format!("send tag {tag}"), |w| w.request_is_active(id));
        match self.w.take::<Vec<u8>>(id) {
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("send tag {tag}: {}", e.error),
            None => panic!("send tag {tag}: no result"),
        }
    }

    fn send(&mut self, data: Vec<u8>, tag: u64) {
        let id = self.post_send(data, tag);
        self.finish_send(id, tag);
    }

    fn post_recv(&mut self, capacity: usize, tag: u64) -> Posted<Vec<u8>> {
        let buf = vec![0u8; capacity];
        match self.w.tag_recv(buf, tag, TAG_MASK_ALL, Op::new()) {
            Ok(p) => p,
            Err(e) => panic!("receive tag {tag}: {e}"),
        }
    }

    /// The received message, cut to its length.
    fn finish_recv(&mut self, posted: Posted<Vec<u8>>, tag: u64) -> Vec<u8> {
        let (info, mut buf) = match posted {
            Posted::Done(info, buf) => (info, buf),
            Posted::InFlight(id) => {
                self.progress_while(&format!("receive tag {tag}"), |w| w.request_is_active(id));
                match self.w.take::<Vec<u8>>(id) {
                    Some(Ok(done)) => done,
                    Some(Err(e)) => panic!("receive tag {tag}: {}", e.error),
                    None => panic!("receive tag {tag}: no result"),
                }
            }
        };
        assert_eq!(info.tag, tag, "receive tag {tag}: wrong tag");
        assert!(info.length <= buf.len(), "receive tag {tag}: length");
        buf.truncate(info.length);
        buf
    }

    fn recv(&mut self, capacity: usize, tag: u64) -> Vec<u8> {
        let p = self.post_recv(capacity, tag);
        self.finish_recv(p, tag)
    }

    /// Sends a message the peer asks for only after it arrived (see
    /// [`Side::late_recv`]); a rendezvous send must still be waiting then.
    fn late_send(&mut self, size: usize, tag: u64) {
        let id = self.post_send(pattern(size, tag), tag);
        self.recv(1, tag + 1);
        if self.rndv_at(size) {
            assert!(
                id.is_some_and(|id| self.w.request_is_active(id)),
                "rendezvous send of {size} B finished before the receive was posted"
            );
        }
        self.send(vec![1], tag + 2);
        self.finish_send(id, tag);
    }

    /// Waits until the peer's message is here, unexpected, tells the peer,
    /// waits for its answer, and only then posts the receive.
    fn late_recv(&mut self, size: usize, tag: u64) {
        self.progress_while(&format!("probe tag {tag}"), |w| {
            w.tag_probe(tag, TAG_MASK_ALL).is_none()
        });
        let seen = self.w.tag_probe(tag, TAG_MASK_ALL).map(|i| i.length);
        assert_eq!(seen, Some(size), "probe tag {tag}");
        self.send(vec![1], tag + 1);
        self.recv(1, tag + 2);
        let got = self.recv(size, tag);
        verify(&got, size, tag);
    }

    /// Sends [`IN_FLIGHT`] messages of mixed sizes at once, tags `base..`.
    fn send_many(&mut self, base: u64) {
        let ids: Vec<_> = (0..IN_FLIGHT)
            .map(|k| {
                (
                    self.post_send(pattern(mixed(k), base + k), base + k),
                    base + k,
                )
            })
            .collect();
        for (id, tag) in ids {
            self.finish_send(id, tag);
        }
    }

    /// Receives the messages of [`Side::send_many`] in reverse order, each
    /// posted only when the one after it was received. When the last has
    /// arrived, all others must have arrived too (they were sent first).
    fn recv_reverse(&mut self, base: u64) {
        let last = base + IN_FLIGHT - 1;
        self.progress_while(&format!("probe tag {last}"), |w| {
            w.tag_probe(last, TAG_MASK_ALL).is_none()
        });
        for k in 0..IN_FLIGHT {
            let seen = self.w.tag_probe(base + k, TAG_MASK_ALL).map(|i| i.length);
            assert_eq!(seen, Some(mixed(k)), "message {k} overtaken by the last");
        }
        for k in (0..IN_FLIGHT).rev() {
            let got = self.recv(mixed(k) + 3, base + k);
            verify(&got, mixed(k), base + k);
        }
    }
}

fn mixed(k: u64) -> usize {
    MIXED[k as usize % MIXED.len()]
}

/// Checks a message against its pattern without printing megabytes.
fn verify(got: &[u8], size: usize, tag: u64) {
    assert_eq!(got.len(), size, "tag {tag}: length");
    if let Some(at) = got
        .iter()
        .zip(pattern(size, tag))
        .position(|(a, b)| *a != b)
    {
        panic!("tag {tag}: {size} B message differs from byte {at} on");
    }
}

/// Child side of every family: configured from the environment only.
#[test]
fn scheme_peer() {
    if !is_child() {
        return;
    }
    let ppid = std::os::unix::process::parent_id();
    let ctx = Context::new().expect("context from the environment");
    let mut w = ctx.create_worker().expect("worker");
    let parent = unhex(&std::env::var("RUCX_TEST_PEER").expect("peer address"));
    let sizes: Vec<usize> = std::env::var("RUCX_TEST_SIZES")
        .expect("sizes")
        .split(',')
        .map(|s| s.parse().expect("size"))
        .collect();
    let ep = w.connect(&parent).expect("connect");
    println!("{CONFIG_LINE}{:?}", ctx.config().select_config());
    for table in w.ep_protocols(ep).expect("tables") {
        for line in table.to_string().lines() {
            println!("{TABLE_LINE}{line}");
        }
    }
    let mut s = Side {
        w,
        ep: Some(ep),
        other: Other::Parent(ppid),
    };
    let address = s.w.address();
    s.send(address, ADDRESS);
    for (i, &size) in sizes.iter().enumerate() {
        let tag = ECHO + i as u64;
        let got = s.recv(size, tag);
        verify(&got, size, tag);
        s.send(got, tag + 100);
    }
    s.late_recv(LATE, LATE_DOWN);
    s.late_send(LATE, LATE_UP);
    s.recv_reverse(MANY_DOWN);
    s.send_many(MANY_UP);
    s.recv(1, BYE);
    assert_eq!(s.w.requests_outstanding(), 0, "child: requests leaked");
}

/// The parent's side of one family.
fn run(family: &Family) {
    let lookup = |k: &str| {
        if k == "RUCX_TLS" {
            return Some("tcp".to_string());
        }
        match family.vars.iter().find(|(n, _)| format!("RUCX_{n}") == k) {
            Some((_, v)) => Some(v.to_string()),
            // Whatever else is set reaches the child too.
            None => std::env::var(k).ok(),
        }
    };
    let cfg = UcpConfig::from_lookup(lookup).expect("config");
    let ctx = Context::with_config(cfg).expect("context");
    let w = ctx.create_worker().expect("worker");
    let sizes: Vec<usize> = SIZES.iter().chain(family.extra_sizes).copied().collect();
    let size_list: Vec<String> = sizes.iter().map(usize::to_string).collect();
    let names: Vec<String> = family
        .vars
        .iter()
        .map(|(n, _)| format!("RUCX_{n}"))
        .collect();
    let mut env = vec![
        ("RUCX_TEST_PEER", hex(&w.address())),
        ("RUCX_TEST_SIZES", size_list.join(",")),
        ("RUCX_TLS", "tcp".to_string()),
        ("RUCX_WARN_UNUSED_ENV_VARS", "n".to_string()),
    ];
    for ((_, v), n) in family.vars.iter().zip(&names) {
        env.push((n.as_str(), v.to_string()));
    }
    let mut child = spawn_child("scheme_peer", &env);
    let stdout = child.stdout.take().expect("child stdout is piped");
    let report = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = Vec::new();
        for l in std::io::BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            println!("child: {l}");
            lines.push(l);
        }
        lines
    });

    // The child's address comes first; then the endpoint is whole.
    let mut s = Side {
        w,
        ep: None,
        other: Other::Child(child),
    };
    let addr = s.recv(4096, ADDRESS);
    s.ep = Some(s.w.connect(&addr).expect("connect back"));
    let tables = s.w.ep_protocols(s.ep()).expect("tables");
    for t in &tables {
        println!("{t}");
        for n in t.notes() {
            println!("note: {n}");
        }
    }

    for (i, &size) in sizes.iter().enumerate() {
        let tag = ECHO + i as u64;
        let back = s.post_recv(size, tag + 100);
        s.send(pattern(size, tag), tag);
        let back = s.finish_recv(back, tag + 100);
        verify(&back, size, tag);
    }
    s.late_send(LATE, LATE_DOWN);
    s.late_recv(LATE, LATE_UP);
    s.send_many(MANY_DOWN);
    s.recv_reverse(MANY_UP);
    s.send(vec![1], BYE);
    assert_eq!(s.w.requests_outstanding(), 0, "parent: requests leaked");

    let Other::Child(mut child) = s.other else {
        unreachable!("the parent watches its child")
    };
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait child") {
            break st;
        }
        assert!(Instant::now() < deadline, "child did not exit");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "child failed: {status}");
    let lines = report.join().expect("child output");
    let pick = |prefix: &str| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| l.find(prefix).map(|at| l[at + prefix.len()..].to_string()))
            .collect()
    };
    let ours = format!("{:?}", ctx.config().select_config());
    assert_eq!(pick(CONFIG_LINE), [ours], "child configured differently");
    let our_tables: Vec<String> = tables
        .iter()
        .flat_map(|t| {
            t.to_string()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(pick(TABLE_LINE), our_tables, "child selected differently");
    // Checked last, so that a wrong choice still shows whether the data
    // arrived.
    (family.check)(&tables[0]);
}

/// Asserts `want` for every size of [`SIZES`] from `from` on.
fn expect_from(t: &SelectionTable, from: usize, want: ProtocolId) {
    for &size in SIZES.iter().filter(|&&s| s >= from) {
        assert_eq!(t.lookup(size).proto, want, "size {size}\n{t}");
    }
}

/// Asserts that no size at all goes by a protocol of the `never` classes.
fn expect_never(t: &SelectionTable, never: &[ProtoClass]) {
    for c in t.choices() {
        assert!(!never.contains(&c.proto.class()), "{c:?}\n{t}");
    }
}

#[test]
fn eager_bcopy_only() {
    if is_child() {
        return;
    }
    run(&Family {
        vars: &[
            ("ZCOPY_THRESH", "inf"),
            ("RNDV_THRESH", "inf"),
            ("BCOPY_THRESH", "1"),
        ],
        extra_sizes: &[],
        check: |t| {
            assert_eq!(t.lookup(1).proto, ProtocolId::EagerBcopySingle, "{t}");
            assert_eq!(t.lookup(8 << 20).proto, ProtocolId::EagerBcopyMulti, "{t}");
            for &size in SIZES.iter().filter(|&&s| s > 0) {
                assert_eq!(
                    t.lookup(size).proto.class(),
                    ProtoClass::Bcopy,
                    "{size}\n{t}"
                );
            }
            expect_never(t, &[ProtoClass::Zcopy, ProtoClass::Rndv]);
        },
    });
}

#[test]
fn eager_zcopy_from_one_byte() {
    if is_child() {
        return;
    }
    run(&Family {
        vars: &[("ZCOPY_THRESH", "1"), ("RNDV_THRESH", "inf")],
        extra_sizes: &[],
        check: |t| {
            assert_eq!(t.lookup(1).proto, ProtocolId::EagerZcopySingle, "{t}");
            for &size in SIZES.iter().filter(|&&s| s > 0) {
                assert_eq!(
                    t.lookup(size).proto.class(),
                    ProtoClass::Zcopy,
                    "{size}\n{t}"
                );
            }
            expect_from(t, 2 << 20, ProtocolId::EagerZcopyMulti);
            expect_never(t, &[ProtoClass::Rndv]);
        },
    });
}

#[test]
fn rndv_am() {
    if is_child() {
        return;
    }
    run(&Family {
        vars: &[("RNDV_SCHEME", "am"), ("RNDV_THRESH", "1k")],
        extra_sizes: &[],
        check: |t| {
            assert_ne!(t.lookup(1023).proto.class(), ProtoClass::Rndv, "{t}");
            expect_from(t, 1024, ProtocolId::RndvAm);
            assert!(t.notes().is_empty(), "{:?}\n{t}", t.notes());
        },
    });
}

#[test]
fn rndv_put_zcopy() {
    if is_child() {
        return;
    }
    run(&Family {
        vars: &[("RNDV_SCHEME", "put_zcopy"), ("RNDV_THRESH", "1k")],
        extra_sizes: &[],
        check: |t| {
            expect_from(t, 1024, ProtocolId::RndvPutZcopy);
            let desc = ProtocolId::RndvPutZcopy.description();
            assert!(t.to_string().contains(desc), "{t}");
            assert!(t.notes().is_empty(), "{:?}\n{t}", t.notes());
        },
    });
}

#[test]
fn rndv_get_zcopy_falls_back_over_tcp() {
    if is_child() {
        return;
    }
    run(&Family {
        vars: &[("RNDV_SCHEME", "get_zcopy"), ("RNDV_THRESH", "4k")],
        extra_sizes: &[],
        check: |t| {
            // TCP cannot read the peer's memory: another scheme, told so.
            for c in t.choices() {
                assert_ne!(c.proto, ProtocolId::RndvGetZcopy, "{t}");
            }
            let desc = ProtocolId::RndvGetZcopy.description();
            assert!(!t.to_string().contains(desc), "{t}");
            for &size in SIZES.iter().filter(|&&s| s >= 4096) {
                assert_eq!(
                    t.lookup(size).proto.class(),
                    ProtoClass::Rndv,
                    "{size}\n{t}"
                );
            }
            assert!(
                t.notes().contains(&Note::SchemeUnavailable {
                    requested: RndvScheme::GetZcopy
                }),
                "{:?}",
                t.notes()
            );
        },
    });
}

#[test]
fn rndv_small_fragments() {
    if is_child() {
        return;
    }
    run(&Family {
        vars: &[
            ("RNDV_SCHEME", "put_zcopy"),
            ("RNDV_THRESH", "16k"),
            ("RNDV_FRAG_SIZE", "64k"),
        ],
        extra_sizes: &[4 << 20],
        check: |t| {
            for size in [65536, 4 << 20, 8 << 20] {
                let p = t.lookup(size).proto;
                assert_eq!(p.class(), ProtoClass::Rndv, "{size}\n{t}");
                assert_ne!(p, ProtocolId::RndvGetZcopy, "{size}\n{t}");
            }
        },
    });
}
