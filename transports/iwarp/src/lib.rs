//! Userspace iWARP for rucx: the iWARP wire protocol (MPA, DDP, RDMAP) over
//! ordinary TCP sockets, as an RDMA provider.

pub mod wire;
