//! Active messages of shared workers received as futures
//! (`SharedWorker::am_receiver`): eager messages with a header and a reply
//! endpoint, rendezvous messages whose data a task fetches with
//! `am_recv_data`, two tasks taking from one receiver, a reply sent from
//! the task that took the message (it runs outside the worker's lock: a
//! handler's code that used the worker this way would deadlock), and a
//! dropped receiver that leaves its senders' sends to complete.

mod async_common;
mod common;

use async_common::{connected, current, err, multi, within};
use common::{context_vars, pattern};
use rucx::ucp::{AmParams, SharedWorker};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Messages the client sends; every fifth is a rendezvous one.
const MESSAGES: u64 = 40;
/// Header of the message that ends a server task.
const STOP: u64 = u64::MAX;

fn size_of(i: u64) -> usize {
    match i % 5 {
        0 => 300_000,
        _ => 100 + 37 * i as usize,
    }
}

/// Takes messages of `rx` until a `STOP`: fetches each one's data, checks
/// it, and answers on its reply endpoint with the header and whether it
/// came by rendezvous. Returns the messages it took.
async fn serve(s: SharedWorker, rx: Arc<rucx::ucp::AmReceiver>) -> Vec<u64> {
    let mut took = Vec::new();
    loop {
        let msg = rx.recv().await;
        let i = u64::from_le_bytes(msg.header().try_into().expect("8-byte header"));
        if i == STOP {
            return took;
        }
        let ep = msg.reply_ep().expect("asked for a reply endpoint");
        let (len, rndv) = (msg.data_len(), msg.is_rndv());
        assert_eq!(len, size_of(i), "message {i}: length");
        let (info, data) = s
            .am_recv_data(msg, vec![0u8; len])
            .expect("post the data's receive")
            .await
            .map_err(err)
            .expect("the data");
        assert_eq!(info.length, len);
        assert!(data == pattern(len, i), "message {i}: wrong data");
        s.am_send(ep, 8, &i.to_le_bytes(), vec![rndv as u8], AmParams::new())
            .expect("post the answer")
            .await
            .map_err(err)
            .expect("the answer");
        took.push(i);
    }
}

async fn receivers(tls: &str) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let (s, c, cep, _sep) = connected(&ctx).await;
    let rx = Arc::new(s.am_receiver(7));
    assert_eq!(rx.id(), 7);
    let answers = c.am_receiver(8);
    let tasks: Vec<_> = (0..2)
        .map(|_| tokio::spawn(serve(s.clone(), Arc::clone(&rx))))
        .collect();
    for i in 0..MESSAGES {
        let p = match i % 5 {
            0 => AmParams::new().rndv().reply(),
            _ => AmParams::new().eager().reply(),
        };
        within(30, async {
            c.am_send(cep, 7, &i.to_le_bytes(), pattern(size_of(i), i), p)
                .expect("post")
                .await
        })
        .await
        .map_err(err)
        .expect("send");
    }
    let mut answered = BTreeSet::new();
    for _ in 0..MESSAGES {
        let a = within(30, answers.recv()).await;
        let i = u64::from_le_bytes(a.header().try_into().expect("8-byte header"));
        assert_eq!(
            a.data(),
            [(i % 5 == 0) as u8],
            "answer {i}: rendezvous or not"
        );
        assert!(answered.insert(i), "answer {i} twice");
    }
    assert!(
        answers.try_recv().is_none(),
        "no answer beyond one per message"
    );
    for _ in 0..2 {
        c.am_send(
            cep,
            7,
            &STOP.to_le_bytes(),
            vec![0u8; 1],
            AmParams::new().eager().reply(),
        )
        .expect("post")
        .await
        .map_err(err)
        .expect("stop");
    }
    let mut took = BTreeSet::new();
    for t in tasks {
        for i in within(30, t).await.expect("server task") {
            assert!(took.insert(i), "message {i} taken twice");
        }
    }
    assert_eq!(took, (0..MESSAGES).collect(), "every message taken once");
    // Without a receiver, messages of its id are dropped, a rendezvous
    // one's data discarded: the sends still complete.
    drop(rx);
    for (n, p) in [
        (64, AmParams::new().eager()),
        (300_000, AmParams::new().rndv()),
    ] {
        within(30, async {
            c.am_send(cep, 7, &[], vec![1u8; n], p).expect("post").await
        })
        .await
        .map_err(err)
        .expect("send to a dropped receiver");
    }
}

#[test]
fn am_receivers_tcp() {
    current().block_on(receivers("tcp"));
}

#[test]
fn am_receivers_shm() {
    multi().block_on(receivers("shm,tcp"));
}

/// Without an executor: a thread blocks in `AmNext::wait` while another
/// sends; the messages come in order.
#[test]
fn am_receiver_wait_blocks_until_a_message() {
    let ctx = context_vars(&[("RUCX_TLS", "shm")]);
    let s = ctx.create_worker().expect("worker").into_shared();
    let c = ctx.create_worker().expect("worker").into_shared();
    let ep = c.connect(&s.address()).expect("connect");
    let rx = s.am_receiver(3);
    let sender = std::thread::spawn(move || {
        for i in 0..100u64 {
            c.am_send(ep, 3, &[], i.to_le_bytes().to_vec(), AmParams::new())
                .expect("post")
                .wait()
                .map_err(err)
                .expect("send");
        }
        c.flush().wait().expect("flush");
        c
    });
    for i in 0..100u64 {
        let m = rx.recv().wait();
        assert_eq!(m.data(), i.to_le_bytes(), "message {i}");
    }
    let c = sender.join().expect("sender");
    drop(c);
}
