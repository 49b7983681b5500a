//! Keys and handles that name someone else's registration: a key with
//! another secret, a handle of another domain.

use super::*;
use crate::virt::rkey;

fn rw() -> Access {
    Access::REMOTE_READ | Access::REMOTE_WRITE
}

/// The status of operation `t`, driven to its completion.
fn status(net: &VirtNet, a: &mut Node, posted: PostResult, t: Token) -> Option<Status> {
    assert_eq!(posted.expect("posted"), Posted::InFlight);
    drive(net, &mut [a]);
    let mut done = a.log.0.iter().filter_map(|e| match e {
        Ev::Done(x, s) if *x == t => Some(*s),
        _ => None,
    });
    let s = done.next().expect("completed");
    assert!(done.next().is_none(), "completed twice");
    s
}

#[test]
fn a_key_with_another_secret_is_refused_like_a_dead_one() {
    let net = net_with(LinkConfig::IDEAL, |_| {});
    let md = net.memory_domain();
    let target = Mem::new(&[3; 16]);
    let local = Mem::new(&[8; 16]);
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (h, key) = target.register(&md, rw());
    let genuine = rkey::decode(&key.packed).unwrap();
    let mut t = 0;
    for bit in [0, 7, 32, 63] {
        let mut forged = genuine;
        forged.fields.secret ^= 1 << bit;
        let k = md.rkey_unpack(&rkey::pack(&forged)).unwrap();
        t += 1;
        let r = a.put(ep, &[local.iov(0, 16)], target.addr(0), &k, Token(t));
        // The same verdict as for a registration that ended.
        assert_eq!(
            status(&net, &mut a, r, Token(t)),
            Some(Status::InvalidParam),
            "put, bit {bit}"
        );
        t += 1;
        let r = a.get(ep, &[local.iov(0, 16)], target.addr(0), &k, Token(t));
        assert_eq!(
            status(&net, &mut a, r, Token(t)),
            Some(Status::InvalidParam),
            "get, bit {bit}"
        );
    }
    assert_eq!(target.read(), [3; 16], "a forged key wrote");
    assert_eq!(local.read(), [8; 16], "a forged key read");
    t += 1;
    let r = a.put(ep, &[local.iov(0, 16)], target.addr(0), &key, Token(t));
    assert_eq!(status(&net, &mut a, r, Token(t)), None);
    assert_eq!(target.read(), [8; 16]);
    md.mem_dereg(&h).unwrap();
}

#[test]
fn the_key_of_one_registration_does_not_lead_to_another() {
    let net = net_with(LinkConfig::IDEAL, |_| {});
    let md = net.memory_domain();
    let known = Mem::new(&[0; 8]);
    let hidden = Mem::new(&[4; 8]);
    let local = Mem::new(&[9; 8]);
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (hk, kk) = known.register(&md, rw());
    let (hh, kh) = hidden.register(&md, rw());
    let k = rkey::decode(&kk.packed).unwrap();
    let h = rkey::decode(&kh.packed).unwrap();
    // Everything of the hidden key but its secret, guessed from the known.
    let mut guess = k;
    guess.fields.index = h.fields.index;
    guess.fields.generation = h.fields.generation;
    guess.fields.addr = hidden.addr(0);
    assert_ne!(guess, h, "two registrations with one secret");
    let forged = md.rkey_unpack(&rkey::pack(&guess)).unwrap();
    let r = a.put(ep, &[local.iov(0, 8)], hidden.addr(0), &forged, Token(1));
    assert_eq!(
        status(&net, &mut a, r, Token(1)),
        Some(Status::InvalidParam)
    );
    assert_eq!(hidden.read(), [4; 8]);
    md.mem_dereg(&hh).unwrap();
    md.mem_dereg(&hk).unwrap();
}

#[test]
fn handles_of_another_domain_are_refused() {
    let net = net_with(LinkConfig::IDEAL, |_| {});
    let (p, q) = (
        net.new_memory_domain().unwrap(),
        net.new_memory_domain().unwrap(),
    );
    let (mp, mq) = (Mem::new(&[0; 8]), Mem::new(&[0; 8]));
    let (hp, _) = mp.register(&p, rw());
    let (hq, _) = mq.register(&q, rw());
    // Fresh tables: both first registrations have slot 0, generation 0.
    assert_eq!(hp.id, hq.id);
    assert_ne!(hp.table, hq.table);
    assert_eq!(q.mkey_pack(&hp).unwrap_err().status(), Status::InvalidParam);
    assert_eq!(q.mem_dereg(&hp).unwrap_err().status(), Status::InvalidParam);
    assert!(q.mkey_pack(&hq).is_ok(), "q's own registration survived");
    q.mem_dereg(&hq).unwrap();
    p.mem_dereg(&hp).unwrap();
}
