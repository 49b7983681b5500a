//! The tests perftest knows: names, descriptions and shapes, as UCX's
//! `ucx_perftest` lists them.
//!
//! A test is a [`Command`] (which operation is measured) run in a
//! [`TestType`] (ping-pong or one-way stream). Adding a test means adding a
//! variant to [`TestKind`], a row to [`TESTS`], and the operation to the
//! runner; the wire id of an existing test never changes.

/// Which operation a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Tag-matched send and receive.
    Tag,
    /// Synchronous tag-matched send (completes once matched) and receive.
    TagSync,
    /// Put into the peer's exposed buffer.
    Put,
    /// Get from the peer's exposed buffer.
    Get,
    /// Atomic add on the peer's word, without fetching the old value.
    Add,
    /// Atomic fetch-and-add.
    Fadd,
    /// Atomic swap (fetching).
    Swap,
    /// Atomic compare-and-swap (fetching).
    Cswap,
    /// Stream send and a receive of the whole message.
    Stream,
    /// Active message send; the receiver's handler takes it.
    Am,
}

impl Command {
    /// Whether the operation is one-sided: it reaches the peer's exposed
    /// buffer, which the peer does not post anything for.
    pub fn is_one_sided(self) -> bool {
        !matches!(
            self,
            Command::Tag | Command::TagSync | Command::Stream | Command::Am
        )
    }

    /// Whether the operation is an atomic on a 4- or 8-byte word.
    pub fn is_atomic(self) -> bool {
        matches!(
            self,
            Command::Add | Command::Fadd | Command::Swap | Command::Cswap
        )
    }

    /// Whether each operation writes into a local buffer of its own (a get
    /// or the result of a fetching atomic).
    pub fn fetches(self) -> bool {
        matches!(
            self,
            Command::Get | Command::Fadd | Command::Swap | Command::Cswap
        )
    }
}

/// How the two sides exchange messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestType {
    /// One side sends, the other answers; latency is half the round trip.
    PingPong,
    /// One side sends a stream of messages, the other receives them.
    StreamUni,
}

/// A test that perftest can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TestKind {
    /// `tag_lat`: tag-matching ping-pong latency.
    TagLat,
    /// `tag_bw`: tag-matching bandwidth and message rate.
    TagBw,
    /// `tag_sync_lat`: synchronous tag-matching ping-pong latency.
    TagSyncLat,
    /// `tag_sync_bw`: synchronous tag-matching bandwidth and message rate.
    TagSyncBw,
    /// `ucp_put_lat`: put ping-pong latency.
    PutLat,
    /// `ucp_put_bw`: put bandwidth and message rate.
    PutBw,
    /// `ucp_get`: get latency, bandwidth and message rate.
    Get,
    /// `ucp_add`: atomic add message rate.
    Add,
    /// `ucp_fadd`: atomic fetch-and-add latency and rate.
    Fadd,
    /// `ucp_swap`: atomic swap latency and rate.
    Swap,
    /// `ucp_cswap`: atomic compare-and-swap latency and rate.
    Cswap,
    /// `stream_bw`: stream bandwidth.
    StreamBw,
    /// `stream_lat`: stream ping-pong latency.
    StreamLat,
    /// `ucp_am_lat`: active message ping-pong latency.
    AmLat,
    /// `ucp_am_bw`: active message bandwidth and message rate.
    AmBw,
}

/// Static description of a test.
#[derive(Debug, Clone, Copy)]
pub struct TestInfo {
    /// The test.
    pub kind: TestKind,
    /// Name given to `-t`.
    pub name: &'static str,
    /// One-line description (usage text and the test header).
    pub desc: &'static str,
    /// Label of the time columns: `"latency"` or `"overhead"`.
    pub time_label: &'static str,
    /// Default of `-O` (most uncompleted operations in flight).
    pub window: u32,
    /// Operation measured.
    pub command: Command,
    /// Exchange shape.
    pub test_type: TestType,
    /// Number in the bootstrap parameter block. Never reused.
    pub wire_id: u16,
}

/// Every test perftest runs, in the order the usage text lists them.
pub const TESTS: &[TestInfo] = &[
    TestInfo {
        kind: TestKind::TagLat,
        name: "tag_lat",
        desc: "tag match latency",
        time_label: "latency",
        window: 1,
        command: Command::Tag,
        test_type: TestType::PingPong,
        wire_id: 1,
    },
    TestInfo {
        kind: TestKind::TagBw,
        name: "tag_bw",
        desc: "tag match bandwidth",
        time_label: "overhead",
        window: 32,
        command: Command::Tag,
        test_type: TestType::StreamUni,
        wire_id: 2,
    },
    TestInfo {
        kind: TestKind::TagSyncLat,
        name: "tag_sync_lat",
        desc: "tag sync match latency",
        time_label: "latency",
        window: 1,
        command: Command::TagSync,
        test_type: TestType::PingPong,
        wire_id: 3,
    },
    TestInfo {
        kind: TestKind::TagSyncBw,
        name: "tag_sync_bw",
        desc: "tag sync match bandwidth",
        time_label: "overhead",
        window: 32,
        command: Command::TagSync,
        test_type: TestType::StreamUni,
        wire_id: 4,
    },
    TestInfo {
        kind: TestKind::PutLat,
        name: "ucp_put_lat",
        desc: "put latency",
        time_label: "latency",
        window: 1,
        command: Command::Put,
        test_type: TestType::PingPong,
        wire_id: 5,
    },
    TestInfo {
        kind: TestKind::PutBw,
        name: "ucp_put_bw",
        desc: "put bandwidth",
        time_label: "overhead",
        window: 32,
        command: Command::Put,
        test_type: TestType::StreamUni,
        wire_id: 6,
    },
    TestInfo {
        kind: TestKind::Get,
        name: "ucp_get",
        desc: "get latency / bandwidth / message rate",
        time_label: "latency",
        window: 1,
        command: Command::Get,
        test_type: TestType::StreamUni,
        wire_id: 7,
    },
    TestInfo {
        kind: TestKind::Add,
        name: "ucp_add",
        desc: "atomic add bandwidth / message rate",
        time_label: "overhead",
        window: 1,
        command: Command::Add,
        test_type: TestType::StreamUni,
        wire_id: 8,
    },
    TestInfo {
        kind: TestKind::Fadd,
        name: "ucp_fadd",
        desc: "atomic fetch-and-add latency / bandwidth / rate",
        time_label: "latency",
        window: 1,
        command: Command::Fadd,
        test_type: TestType::StreamUni,
        wire_id: 9,
    },
    TestInfo {
        kind: TestKind::Swap,
        name: "ucp_swap",
        desc: "atomic swap latency / bandwidth / rate",
        time_label: "latency",
        window: 1,
        command: Command::Swap,
        test_type: TestType::StreamUni,
        wire_id: 10,
    },
    TestInfo {
        kind: TestKind::Cswap,
        name: "ucp_cswap",
        desc: "atomic compare-and-swap latency / bandwidth / rate",
        time_label: "latency",
        window: 1,
        command: Command::Cswap,
        test_type: TestType::StreamUni,
        wire_id: 11,
    },
    TestInfo {
        kind: TestKind::StreamBw,
        name: "stream_bw",
        desc: "stream bandwidth",
        time_label: "overhead",
        window: 32,
        command: Command::Stream,
        test_type: TestType::StreamUni,
        wire_id: 12,
    },
    TestInfo {
        kind: TestKind::StreamLat,
        name: "stream_lat",
        desc: "stream latency",
        time_label: "latency",
        window: 1,
        command: Command::Stream,
        test_type: TestType::PingPong,
        wire_id: 13,
    },
    TestInfo {
        kind: TestKind::AmLat,
        name: "ucp_am_lat",
        desc: "am latency",
        time_label: "latency",
        window: 1,
        command: Command::Am,
        test_type: TestType::PingPong,
        wire_id: 14,
    },
    TestInfo {
        kind: TestKind::AmBw,
        name: "ucp_am_bw",
        desc: "am bandwidth / message rate",
        time_label: "overhead",
        window: 32,
        command: Command::Am,
        test_type: TestType::StreamUni,
        wire_id: 15,
    },
];

/// Tests of UCX's `ucx_perftest` that rucx does not run yet; `-t` with one
/// of these names says so instead of calling the name unknown.
pub const NOT_YET: &[&str] = &[
    "am_lat", "am_bw", "put_lat", "put_bw", "add_lat", "add_mr", "get", "fadd", "swap", "cswap",
];

impl TestKind {
    /// The static description of this test.
    pub fn info(self) -> &'static TestInfo {
        // Every variant has exactly one row; the tests below check it.
        match TESTS.iter().find(|t| t.kind == self) {
            Some(info) => info,
            None => &TESTS[0],
        }
    }

    /// The test called `name` (as given to `-t`).
    pub fn from_name(name: &str) -> Option<TestKind> {
        TESTS.iter().find(|t| t.name == name).map(|t| t.kind)
    }

    /// The test with bootstrap wire id `id`.
    pub fn from_wire_id(id: u16) -> Option<TestKind> {
        TESTS.iter().find(|t| t.wire_id == id).map(|t| t.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_KINDS: [TestKind; 15] = [
        TestKind::TagLat,
        TestKind::TagBw,
        TestKind::TagSyncLat,
        TestKind::TagSyncBw,
        TestKind::PutLat,
        TestKind::PutBw,
        TestKind::Get,
        TestKind::Add,
        TestKind::Fadd,
        TestKind::Swap,
        TestKind::Cswap,
        TestKind::StreamBw,
        TestKind::StreamLat,
        TestKind::AmLat,
        TestKind::AmBw,
    ];

    #[test]
    fn every_kind_has_one_row() {
        assert_eq!(TESTS.len(), ALL_KINDS.len());
        for kind in ALL_KINDS {
            assert_eq!(TESTS.iter().filter(|t| t.kind == kind).count(), 1);
            assert_eq!(kind.info().kind, kind);
        }
    }

    #[test]
    fn names_and_wire_ids_are_unique() {
        for (i, a) in TESTS.iter().enumerate() {
            for b in &TESTS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.wire_id, b.wire_id);
            }
            assert!(!NOT_YET.contains(&a.name));
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(TestKind::from_name("tag_lat"), Some(TestKind::TagLat));
        assert_eq!(TestKind::from_name("tag_bw"), Some(TestKind::TagBw));
        assert_eq!(
            TestKind::from_name("tag_sync_lat"),
            Some(TestKind::TagSyncLat)
        );
        assert_eq!(TestKind::from_name("ucp_put_lat"), Some(TestKind::PutLat));
        assert_eq!(TestKind::from_name("ucp_am_lat"), Some(TestKind::AmLat));
        assert_eq!(TestKind::from_name("am_lat"), None);
        assert_eq!(TestKind::from_wire_id(12), Some(TestKind::StreamBw));
        assert!(!TestKind::StreamLat.info().command.is_one_sided());
        assert_eq!(TestKind::from_wire_id(11), Some(TestKind::Cswap));
        assert!(TestKind::Get.info().command.fetches());
        assert!(!TestKind::Add.info().command.fetches());
        assert!(TestKind::Add.info().command.is_atomic());
        assert!(TestKind::PutBw.info().command.is_one_sided());
        assert!(!TestKind::TagSyncBw.info().command.is_one_sided());
        assert_eq!(TestKind::from_wire_id(4), Some(TestKind::TagSyncBw));
        assert_eq!(TestKind::from_wire_id(2), Some(TestKind::TagBw));
        assert_eq!(TestKind::from_wire_id(0), None);
        assert_eq!(TestKind::TagBw.info().window, 32);
        assert_eq!(TestKind::TagLat.info().test_type, TestType::PingPong);
    }
}
