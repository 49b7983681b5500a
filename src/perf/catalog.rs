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
];

/// Tests of UCX's `ucx_perftest` that rucx does not run yet; `-t` with one
/// of these names says so instead of calling the name unknown.
pub const NOT_YET: &[&str] = &[
    "ucp_put_lat",
    "ucp_put_bw",
    "ucp_get",
    "ucp_add",
    "ucp_fadd",
    "ucp_swap",
    "ucp_cswap",
    "stream_bw",
    "stream_lat",
    "ucp_am_lat",
    "ucp_am_bw",
    "am_lat",
    "am_bw",
    "put_lat",
    "put_bw",
    "add_lat",
    "add_mr",
    "get",
    "fadd",
    "swap",
    "cswap",
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

    #[test]
    fn every_kind_has_one_row() {
        for kind in [TestKind::TagLat, TestKind::TagBw] {
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
        assert_eq!(TestKind::from_name("ucp_put_lat"), None);
        assert_eq!(TestKind::from_wire_id(4), Some(TestKind::TagSyncBw));
        assert_eq!(TestKind::from_wire_id(2), Some(TestKind::TagBw));
        assert_eq!(TestKind::from_wire_id(0), None);
        assert_eq!(TestKind::TagBw.info().window, 32);
        assert_eq!(TestKind::TagLat.info().test_type, TestType::PingPong);
    }
}
