//! The lengths of the synthetic workloads (`input_len`, `output_len`):
//! each one's values, and the keys that take plain lengths only.

use crate::scenario::{Dataset, Sampler};

/// The lengths of a synthetic `[dataset]`, checked: each length's values,
/// and the keys that take plain lengths only.
pub(crate) fn length_problems(d: &Dataset) -> Vec<(String, String)> {
    let lengths = d.lengths();
    let mut out: Vec<(String, String)> = lengths
        .iter()
        .flat_map(|(key, l)| l.problems(&format!("dataset.{key}")))
        .collect();
    let drawn: Vec<&str> = lengths
        .iter()
        .filter(|(_, l)| l.fixed().is_none())
        .map(|(k, _)| *k)
        .collect();
    if drawn.is_empty() {
        return out;
    }
    let range_ratio = match d {
        Dataset::Random(r) => r.range_ratio,
        Dataset::RandomMm(r) => r.range_ratio,
        _ => 0.0,
    };
    if range_ratio != 0.0 && drawn.len() == lengths.len() {
        out.push((
            "dataset.range_ratio".into(),
            "applies to lengths given as whole numbers; input_len and output_len are both distributions (clip them with min and max)".into(),
        ));
    }
    if d.sampler() == Sampler::Vllm {
        out.push((
            "dataset.sampler".into(),
            format!(
                "vLLM's sample draws uniform lengths only; {} is a distribution (give whole numbers with range_ratio, or sampler = \"cicada\")",
                drawn.join(" and ")
            ),
        ));
    }
    out
}
