//! The pool's table of distinct output shapes that entries point into, so
//! one shape asked by many requests is held and shipped once.

use std::collections::HashMap;

use cicada_request::OutputShape;

use super::PoolEntry;
use crate::scenario::Scenario;

/// The pool's distinct shapes, each once, for entries to point into.
#[derive(Debug, Default)]
pub(crate) struct ShapeTable {
    shapes: Vec<OutputShape>,
    /// Each shape's JSON, to find it again.
    index: HashMap<String, u32>,
}

impl ShapeTable {
    /// The index of `shape`, added if new.
    pub fn intern(&mut self, shape: OutputShape) -> u32 {
        self.intern_new(shape).0
    }

    /// The index of `shape`, and whether it was added now.
    pub fn intern_new(&mut self, shape: OutputShape) -> (u32, bool) {
        let key = serde_json::to_string(&shape).unwrap_or_default();
        if let Some(i) = self.index.get(&key) {
            return (*i, false);
        }
        let i = self.shapes.len() as u32;
        self.shapes.push(shape);
        self.index.insert(key, i);
        (i, true)
    }

    /// The shapes, in index order.
    pub fn into_shapes(self) -> Vec<OutputShape> {
        self.shapes
    }
}

/// Give entries without a shape of their own the scenario's, drop shapes no
/// entry uses (a JSONL line read but not kept), and apply `check_only`.
pub(crate) fn settle(
    s: &Scenario,
    entries: &mut [PoolEntry],
    shapes: Vec<OutputShape>,
) -> Vec<OutputShape> {
    let mut table = ShapeTable::default();
    let base = s.structured.shape().ok().flatten().map(|b| table.intern(b));
    let mut shapes: Vec<Option<OutputShape>> = shapes.into_iter().map(Some).collect();
    let mut renumbered: HashMap<u32, u32> = HashMap::new();
    for e in entries.iter_mut() {
        e.shape = match e.shape {
            None => base,
            Some(old) => Some(*renumbered.entry(old).or_insert_with(|| {
                let mut shape = shapes
                    .get_mut(old as usize)
                    .and_then(Option::take)
                    .unwrap_or_default();
                shape.check_only = s.structured.check_only;
                table.intern(shape)
            })),
        };
    }
    table.into_shapes()
}
