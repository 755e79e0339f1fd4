//! The pool of a mixed run (`[[workloads]]`): each workload's pool, built
//! as its own scenario would build it, laid end to end, each workload's
//! entries in one run of ids.

use std::ops::Range;

use super::{DatasetError, DatasetReport, Pool, Progress, build_pool_with};
use crate::Scenario;
use crate::tokenizer::Tokenizer;

/// Every workload's pool, one after another: ids renumbered to their place,
/// shape indices moved past the earlier workloads' shapes, the reports
/// summed (lengths named by workload).
pub(super) fn build(
    s: &Scenario,
    tokenizer: Option<&Tokenizer>,
    progress: &dyn Progress,
) -> Result<Pool, DatasetError> {
    let mut out = Pool {
        entries: Vec::new(),
        report: DatasetReport::default(),
        arrivals_us: None,
        shapes: Vec::new(),
        workloads: Vec::new(),
    };
    let mut kinds = Vec::new();
    for (w, own) in s.workloads.iter().zip(s.workload_scenarios()) {
        let pool = build_pool_with(&own, tokenizer, progress)?;
        let start = out.entries.len() as u64;
        let shift = out.shapes.len() as u32;
        for (k, mut e) in pool.entries.into_iter().enumerate() {
            e.id = start + k as u64;
            e.shape = e.shape.map(|x| x + shift);
            out.entries.push(e);
        }
        out.shapes.extend(pool.shapes);
        out.workloads.push(Range {
            start,
            end: out.entries.len() as u64,
        });
        let r = pool.report;
        kinds.push(format!("{}: {}", w.name, r.kind));
        let total = &mut out.report;
        total.read += r.read;
        total.filtered += r.filtered;
        total.kept += r.kept;
        total.unused += r.unused;
        total.inexact += r.inexact;
        for (reason, n) in r.filter_reasons {
            *total.filter_reasons.entry(reason).or_default() += n;
        }
        total.counted_with = r.counted_with;
        total.lengths.extend(r.lengths.into_iter().map(|mut l| {
            l.key = format!("{}: {}", w.name, l.key);
            l
        }));
    }
    out.report.kind = format!("mixed [{}]", kinds.join(", "));
    Ok(out)
}
