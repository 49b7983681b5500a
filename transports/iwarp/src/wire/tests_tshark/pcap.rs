//! A minimal pcap writer: Ethernet, IPv4 (with its checksum) and TCP
//! headers (checksum 0, which tshark does not check by default) with
//! consistent lengths and sequence numbers, enough for tshark to follow a
//! connection and reassemble what it carries.

/// A pcap file (microsecond timestamps, Ethernet link type) in memory.
pub(super) struct Pcap {
    pub(super) bytes: Vec<u8>,
    usec: u32,
}

impl Pcap {
    pub(super) fn new() -> Self {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic
        bytes.extend_from_slice(&2u16.to_le_bytes()); // version 2.4
        bytes.extend_from_slice(&4u16.to_le_bytes());
        bytes.extend_from_slice(&0i32.to_le_bytes()); // GMT offset
        bytes.extend_from_slice(&0u32.to_le_bytes()); // accuracy
        bytes.extend_from_slice(&65535u32.to_le_bytes()); // snap length
        bytes.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
        Self { bytes, usec: 0 }
    }

    pub(super) fn packet(&mut self, frame: &[u8]) {
        self.usec += 100;
        self.bytes
            .extend_from_slice(&1_700_000_000u32.to_le_bytes());
        self.bytes.extend_from_slice(&self.usec.to_le_bytes());
        self.bytes
            .extend_from_slice(&(frame.len() as u32).to_le_bytes());
        self.bytes
            .extend_from_slice(&(frame.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(frame);
    }
}

const SYN: u8 = 0x02;
const PSH_ACK: u8 = 0x18;
const ACK: u8 = 0x10;

/// One end of a TCP connection.
#[derive(Clone, Copy)]
pub(super) struct End {
    mac: [u8; 6],
    ip: [u8; 4],
    pub(super) port: u16,
    seq: u32,
}

/// Ethernet + IPv4 + TCP headers (TCP checksum left 0) and `payload`.
fn frame(from: &End, to: &End, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(54 + payload.len());
    f.extend_from_slice(&to.mac);
    f.extend_from_slice(&from.mac);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_start = f.len();
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&((40 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]); // id, DF, TTL, TCP
    f.extend_from_slice(&from.ip);
    f.extend_from_slice(&to.ip);
    let mut sum: u32 = f[ip_start..]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[ip_start + 10..ip_start + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&from.port.to_be_bytes());
    f.extend_from_slice(&to.port.to_be_bytes());
    f.extend_from_slice(&from.seq.to_be_bytes());
    let ack = if flags & ACK != 0 { to.seq } else { 0 };
    f.extend_from_slice(&ack.to_be_bytes());
    f.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

/// A TCP connection between a client and a server, recorded into a pcap.
pub(super) struct Conn {
    pub(super) client: End,
    pub(super) server: End,
}

impl Conn {
    pub(super) fn open(pcap: &mut Pcap, n: u8) -> Self {
        let mut client = End {
            mac: [2, 0, 0, 0, 0, 1],
            ip: [10, 0, 0, 1],
            port: 40000 + u16::from(n),
            seq: 1000,
        };
        let mut server = End {
            mac: [2, 0, 0, 0, 0, 2],
            ip: [10, 0, 0, 2],
            port: 50000 + u16::from(n),
            seq: 9000,
        };
        pcap.packet(&frame(&client, &server, SYN, &[]));
        client.seq += 1;
        pcap.packet(&frame(&server, &client, SYN | ACK, &[]));
        server.seq += 1;
        pcap.packet(&frame(&client, &server, ACK, &[]));
        Self { client, server }
    }

    /// One segment carrying `payload`, from the client if `from_client`.
    pub(super) fn send(&mut self, pcap: &mut Pcap, from_client: bool, payload: &[u8]) {
        let (from, to) = if from_client {
            (&mut self.client, &self.server)
        } else {
            (&mut self.server, &self.client)
        };
        pcap.packet(&frame(from, to, PSH_ACK, payload));
        from.seq = from.seq.wrapping_add(payload.len() as u32);
    }
}
