//! The headline figures `cicada compare` weighs: vLLM's `--save-result`
//! names, read from each file's own figures (so vLLM's files compare too),
//! and which per-request samples in `requests.jsonl` stand behind each.

use crate::read::Row;
use crate::stats::Statistic;

/// A per-request field of `requests.jsonl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleField {
    Ttft,
    Tpot,
    E2el,
}

impl SampleField {
    /// Its key in `requests.jsonl`.
    pub fn key(self) -> &'static str {
        match self {
            SampleField::Ttft => "ttft_ms",
            SampleField::Tpot => "tpot_ms",
            SampleField::E2el => "e2el_ms",
        }
    }

    /// Every field read.
    pub const ALL: [SampleField; 3] = [SampleField::Ttft, SampleField::Tpot, SampleField::E2el];
}

/// One headline figure.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// Its name, as in vLLM's result files (`p99_ttft_ms`).
    pub name: &'static str,
    /// Its unit as printed and as a `--fail-if` suffix.
    pub unit: &'static str,
    /// Whether a rise is an improvement (throughputs) rather than a regression.
    pub higher_is_better: bool,
    /// The figure in a file's row.
    pub read: fn(&Row) -> Option<f64>,
    /// The per-request samples and statistic it is, when it is one.
    pub sample: Option<(SampleField, Statistic)>,
}

/// Latency column `i` of a row ([`crate::read::TABLE_METRICS`] order) at `p`
/// (`None`: the mean).
fn latency(row: &Row, i: usize, p: Option<f64>) -> Option<f64> {
    let l = &row.latencies[i];
    match p {
        None => l.mean,
        Some(p) => l.at(p),
    }
}

/// A latency figure: its name, column, percentile (`None`: the mean) and
/// the per-request field behind it (`None`: none is saved per request).
macro_rules! lat {
    ($name:literal, $i:literal, $p:expr, $field:expr) => {
        Figure {
            name: $name,
            unit: "ms",
            higher_is_better: false,
            read: |r| latency(r, $i, $p),
            sample: match ($field, $p) {
                (Some(f), Some(p)) => Some((f, Statistic::Percentile(p))),
                (Some(f), None) => Some((f, Statistic::Mean)),
                (None, _) => None,
            },
        }
    };
}

/// The figures compared, in the order printed.
pub const FIGURES: [Figure; 12] = [
    Figure {
        name: "request_throughput",
        unit: "req/s",
        higher_is_better: true,
        read: |r| Some(r.request_throughput),
        sample: None,
    },
    Figure {
        name: "output_throughput",
        unit: "tok/s",
        higher_is_better: true,
        read: |r| r.output_throughput,
        sample: None,
    },
    lat!("mean_ttft_ms", 0, None, Some(SampleField::Ttft)),
    lat!("median_ttft_ms", 0, Some(50.0), Some(SampleField::Ttft)),
    lat!("p99_ttft_ms", 0, Some(99.0), Some(SampleField::Ttft)),
    lat!("mean_tpot_ms", 1, None, Some(SampleField::Tpot)),
    lat!("p99_tpot_ms", 1, Some(99.0), Some(SampleField::Tpot)),
    lat!("mean_itl_ms", 2, None, None::<SampleField>),
    lat!("p99_itl_ms", 2, Some(99.0), None::<SampleField>),
    lat!("mean_e2el_ms", 3, None, Some(SampleField::E2el)),
    lat!("median_e2el_ms", 3, Some(50.0), Some(SampleField::E2el)),
    lat!("p99_e2el_ms", 3, Some(99.0), Some(SampleField::E2el)),
];

/// The figure called `name`.
pub fn by_name(name: &str) -> Option<&'static Figure> {
    FIGURES.iter().find(|f| f.name == name)
}
