//! Protocol-level tests: cores fed inputs by hand, their posted operations
//! and commands checked, without a worker or a transport.

mod am;
mod credit;
mod ctrl;
mod direct;
mod eager;
mod ep_fail;
mod keepalive;
mod matching;
mod rma_target;
mod rma_zcopy;
mod rndv_am;
mod rndv_get;
mod rndv_misc;
mod rndv_put;
mod rndv_split;
mod stream;
mod stream_rndv;
mod sync;
