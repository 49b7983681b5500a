//! The transport conformance suite.
