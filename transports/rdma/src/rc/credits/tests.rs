use super::*;

/// xorshift64: a fixed schedule per seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn header_fields_round_trip_and_refusals() {
    let mut c = Credits::new(2, 64, 2);
    c.to_return = 5;
    c.owe_ack = true;
    let f = c.outgoing(false);
    assert_eq!(f & COUNT, 5);
    assert_ne!(f & ACK, 0);
    assert_eq!(f & LAST, 0);
    c.unsent(f);
    assert_eq!((c.to_return, c.owe_ack), (5, true));
    c.credits = 1;
    assert_ne!(c.outgoing(true) & LAST, 0);

    let mut r = Credits::new(2, 4, 2);
    assert!(r.arrived(false, 0).is_ok());
    assert!(r.arrived(false, 0).is_ok());
    assert_eq!(
        r.arrived(false, 0),
        Err(Violation::OverWindow {
            unreturned: 3,
            window: 2
        })
    );
    let mut r = Credits::new(2, 4, 2);
    assert!(matches!(
        r.arrived(false, 3),
        Err(Violation::TooManyCredits { have: 5, max: 4 })
    ));
    let mut r = Credits::new(2, 4, 2);
    assert_eq!(r.arrived(false, ACK), Err(Violation::StrayAck));
    let mut r = Credits::new(2, 4, 2);
    assert!(r.arrived(true, 1).is_ok());
    assert_eq!(r.arrived(true, 0), Err(Violation::GrantUnacknowledged));
}

#[test]
fn a_dry_sender_doubles_its_window_up_to_the_limit() {
    let mut r = Credits::new(2, 64, 2);
    let mut windows = vec![r.window];
    while r.window < 64 {
        let g = r.growth(64);
        assert!(g > 0);
        r.grow(g);
        windows.push(r.window);
    }
    assert_eq!(windows, [2, 4, 8, 16, 32, 64]);
    assert_eq!(r.growth(64), 0);
    r.peer_dry = true;
    assert!(r.wants_grant());
}

#[test]
fn pool_commits_only_what_it_holds() {
    let mut p = RxPool::default();
    assert!(!p.commit(1));
    p.in_srq = 8;
    assert!(p.commit(3));
    assert!(p.commit(5));
    assert!(!p.commit(1));
    p.release(5);
    assert_eq!(p.room(), 5);
}

/// A message on a link.
#[derive(Clone, Copy)]
struct Msg {
    grant: bool,
    field: u16,
}

/// One sender's connection to the receiver.
struct Link {
    /// The sender's side.
    tx: Credits,
    /// The receiver's side.
    rx: Credits,
    /// Sender to receiver, oldest first.
    up: std::collections::VecDeque<Msg>,
    /// Receiver to sender (grants).
    down: std::collections::VecDeque<Msg>,
    /// The receiver's buffers of this link not reposted yet.
    held: u32,
    /// The sender ran dry on a message not reposted yet.
    dry: bool,
    sent: u64,
}

/// Many senders burst at one receiver whose receive pool starts small
/// and grows in chunks up to a maximum; messages arrive in any order
/// across links and buffers are reposted late. Every arrival must find a
/// posted receive, and the credits of each link always add up to its
/// window: granted never exceeds posted.
#[test]
fn burst_from_many_senders_never_outruns_the_posted_receives() {
    const SENDERS: usize = 300;
    const INIT: u32 = 2;
    const LIMIT: u32 = 64;
    const CHUNK: u32 = 64;
    const MAX_POOL: u32 = 2048;
    for seed in 1..=4u64 {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let mut pool = RxPool::default();
        let mut posted: u32 = 0;
        let mut links: Vec<Link> = Vec::new();
        for _ in 0..SENDERS {
            while pool.room() < INIT + GRANT_SLOT {
                pool.in_srq += CHUNK;
                posted += CHUNK;
            }
            assert!(pool.commit(INIT + GRANT_SLOT));
            links.push(Link {
                tx: Credits::new(INIT, LIMIT, INIT),
                rx: Credits::new(INIT, LIMIT, INIT),
                up: Default::default(),
                down: Default::default(),
                held: 0,
                dry: false,
                sent: 0,
            });
        }
        let (mut arrivals, mut grown, mut min_posted) = (0u64, 0u32, u32::MAX);
        for _ in 0..200_000 {
            let l = rng.below(SENDERS);
            let link = &mut links[l];
            match rng.below(4) {
                0 if link.tx.credits > 0 => {
                    let field = link.tx.outgoing(true);
                    link.tx.credits -= 1;
                    link.up.push_back(Msg {
                        grant: false,
                        field,
                    });
                    link.sent += 1;
                }
                1 => {
                    if let Some(m) = link.up.pop_front() {
                        // The receive the message needs is there.
                        assert!(posted > 0, "seed {seed}: a SEND found no receive");
                        posted -= 1;
                        min_posted = min_posted.min(posted);
                        arrivals += 1;
                        let a = link.rx.arrived(m.grant, m.field).unwrap();
                        link.held += 1;
                        link.dry |= a.last;
                        assert!(!a.last || link.rx.peer_dry);
                    }
                }
                2 if link.held > 0 => {
                    link.held -= 1;
                    posted += 1;
                    link.rx.reposted();
                    let dry = std::mem::take(&mut link.dry);
                    if dry {
                        let mut g = link.rx.growth(LIMIT);
                        while g > 0 && !pool.commit(g) {
                            if pool.in_srq + CHUNK <= MAX_POOL {
                                pool.in_srq += CHUNK;
                                posted += CHUNK;
                            } else {
                                g = pool.room().min(g);
                            }
                        }
                        link.rx.grow(g);
                        grown += g;
                    }
                    if link.rx.wants_grant() {
                        let field = link.rx.grant().unwrap();
                        link.down.push_back(Msg { grant: true, field });
                    }
                }
                3 => {
                    if let Some(m) = link.down.pop_front() {
                        link.tx.arrived(m.grant, m.field).unwrap();
                    }
                }
                _ => {}
            }
            // Conservation on the link just touched: what the sender can
            // still send, has in flight and is owed adds up to the window.
            let link = &links[l];
            let in_flight_up = link.up.len() as u32;
            let returning: u32 = link.down.iter().map(|m| u32::from(m.field & COUNT)).sum();
            assert_eq!(
                link.tx.credits + in_flight_up + returning + link.rx.to_return + link.rx.held,
                link.rx.window,
                "seed {seed}: link {l}"
            );
            assert!(link.down.len() <= GRANT_SLOT as usize);
            assert!(pool.committed <= pool.in_srq);
            assert!(pool.in_srq <= MAX_POOL);
        }
        let windows: u32 = links.iter().map(|l| l.rx.committed()).sum();
        assert_eq!(windows, pool.committed);
        assert!(arrivals > 10_000, "seed {seed}: only {arrivals} arrivals");
        assert!(grown > 0, "seed {seed}: no window grew");
        assert!(links.iter().all(|l| l.sent > 0));
        // The pool grew on demand, and stayed within its maximum.
        assert!(pool.in_srq > 1024 && pool.in_srq <= MAX_POOL);
        assert!(min_posted < u32::MAX);
    }
}
