//! `cicada compare`'s flags, turned into the comparison's plain settings.

use std::path::PathBuf;

/// `cicada compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// The baseline: a result file (cicada's or `vllm bench serve
    /// --save-result`'s), a directory of one run or of repeated runs
    /// (`run-1/`, `run-2/`, ...), or a glob of result files.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The candidate, as A.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Exit 6 when a figure crosses a threshold: "p99_ttft_ms > +10%"
    /// (relative change), "mean_tpot_ms > +2ms" (change in the figure's
    /// unit), "p99_e2el_ms > 900ms" (B's own value); repeatable.
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Confidence level of the intervals, between 0 and 1.
    #[arg(long, default_value_t = 0.95)]
    pub level: f64,
    /// Bootstrap draws for single runs.
    #[arg(long, default_value_t = 2_000)]
    pub resamples: usize,
    /// Seed of the bootstrap's draws (the same inputs give the same output).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl From<CompareArgs> for cicada_report::compare::CompareArgs {
    fn from(a: CompareArgs) -> Self {
        let CompareArgs {
            a,
            b,
            fail_if,
            json,
            level,
            resamples,
            seed,
        } = a;
        Self {
            a,
            b,
            fail_if,
            json,
            level,
            resamples,
            seed,
        }
    }
}
