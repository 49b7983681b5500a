//! The name the component, its memory domain and its transport share. A
//! leaf: `component` and `mem` both use it, and `component` alone uses
//! `mem`.

/// Transport and memory domain name.
pub(crate) const NAME: &str = "tcp";
