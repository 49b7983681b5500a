//! Selection tables computed once per lane configuration and operation.

use super::config::SelectConfig;
use super::lanes::{EpLanes, LanesFingerprint};
use super::protocols::Op;
use super::table::{select, SelectError, SelectionTable};
use std::collections::HashMap;
use std::sync::Arc;

/// Tables by (lane configuration, operation), all under one
/// [`SelectConfig`]. Endpoints with the same lanes share a table. Failures
/// are not cached.
#[derive(Debug)]
pub struct SelectCache {
    cfg: SelectConfig,
    tables: HashMap<(LanesFingerprint, Op), Arc<SelectionTable>>,
}

impl SelectCache {
    /// An empty cache selecting with `cfg`.
    pub fn new(cfg: SelectConfig) -> SelectCache {
        SelectCache {
            cfg,
            tables: HashMap::new(),
        }
    }

    /// The settings tables are selected with.
    pub fn config(&self) -> &SelectConfig {
        &self.cfg
    }

    /// The table for `op` on `lanes`, selected on first use.
    pub fn get(&mut self, lanes: &EpLanes, op: Op) -> Result<Arc<SelectionTable>, SelectError> {
        let key = (lanes.fingerprint(), op);
        if let Some(t) = self.tables.get(&key) {
            return Ok(Arc::clone(t));
        }
        let t = Arc::new(select(lanes, &self.cfg, op)?);
        self.tables.insert(key, Arc::clone(&t));
        Ok(t)
    }

    /// Number of tables held.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// Whether no table is held.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::lanes::tests::lane;
    use super::*;

    #[test]
    fn computed_once_per_key() {
        let mut cache = SelectCache::new(SelectConfig::default());
        let a = EpLanes::new(vec![lane("a", 1e-6, 1e-7, 1e9)]);
        let t1 = cache.get(&a, Op::TagSend).unwrap();
        let t2 = cache.get(&a.clone(), Op::TagSend).unwrap();
        assert!(Arc::ptr_eq(&t1, &t2));
        let t3 = cache.get(&a, Op::TagSendSync).unwrap();
        assert!(!Arc::ptr_eq(&t1, &t3));
        let mut b = a.clone();
        b.lanes[0].model.bandwidth = 2e9;
        let t4 = cache.get(&b, Op::TagSend).unwrap();
        assert!(!Arc::ptr_eq(&t1, &t4));
        assert_eq!(cache.len(), 3);
        let none = EpLanes::new(Vec::new());
        assert!(cache.get(&none, Op::TagSend).is_err());
        assert_eq!(cache.len(), 3);
    }
}
