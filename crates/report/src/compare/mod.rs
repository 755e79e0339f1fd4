//! `cicada compare A B`: is B different from A, figure by figure? Each
//! headline figure's difference B − A with its confidence interval and
//! whether it is significant: Welch's t on the run figures when each side
//! holds at least two runs, else a percentile bootstrap over the
//! per-request samples of `requests.jsonl` where both sides saved them,
//! else "not enough data". `--fail-if` thresholds make it a CI gate.

pub mod figures;
pub mod gate;
pub(crate) mod render;
pub mod sides;

use std::path::PathBuf;

use crate::read::{ItlDefinition, Row};
use crate::stats::{Difference, bootstrap, welch};
use figures::{FIGURES, Figure};
use gate::{Gate, Verdict};
use sides::{Side, SideError};

/// `cicada compare`'s settings (the binary reads them from its flags).
#[derive(Debug, Clone)]
pub struct CompareArgs {
    /// The baseline: a result file (cicada's or `vllm bench serve
    /// --save-result`'s), a directory of one run or of repeated runs
    /// (`run-1/`, `run-2/`, ...), or a glob of result files.
    pub a: PathBuf,
    /// The candidate, as A.
    pub b: PathBuf,
    /// Exit 6 when a figure crosses a threshold: "p99_ttft_ms > +10%"
    /// (relative change), "mean_tpot_ms > +2ms" (change in the figure's
    /// unit), "p99_e2el_ms > 900ms" (B's own value); repeatable.
    pub fail_if: Vec<String>,
    /// Print JSON instead of the table.
    pub json: bool,
    /// Confidence level of the intervals, between 0 and 1.
    pub level: f64,
    /// Bootstrap draws for single runs.
    pub resamples: usize,
    /// Seed of the bootstrap's draws (the same inputs give the same output).
    pub seed: u64,
}

/// How a figure's difference was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Welch's t on the runs' figures.
    Welch,
    /// Percentile bootstrap over per-request samples.
    Bootstrap,
    /// Neither side had what a test needs.
    NotEnoughData,
}

impl Method {
    /// Its name in the table and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Method::Welch => "welch",
            Method::Bootstrap => "bootstrap",
            Method::NotEnoughData => "not enough data",
        }
    }
}

/// One figure compared.
#[derive(Debug, Clone)]
pub struct FigureDiff {
    pub figure: &'static Figure,
    /// The side's figure: its runs' mean.
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub diff: Option<Difference>,
    pub method: Method,
}

/// A whole comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub level: f64,
    pub figures: Vec<FigureDiff>,
    pub warnings: Vec<String>,
    pub verdicts: Vec<Verdict>,
}

/// Each run's value of `figure`, or `None` when a run lacks it.
fn run_values(rows: &[Row], figure: &Figure) -> Option<Vec<f64>> {
    rows.iter().map(|r| (figure.read)(r)).collect()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Compare one figure.
fn compare_figure(
    figure: &'static Figure,
    sides: [(&Side, &[Row]); 2],
    args: &CompareArgs,
    seed: u64,
) -> FigureDiff {
    let [(sa, ra), (sb, rb)] = sides;
    let (va, vb) = (run_values(ra, figure), run_values(rb, figure));
    let (a, b) = (va.as_deref().map(mean), vb.as_deref().map(mean));
    let mut out = FigureDiff {
        figure,
        a,
        b,
        diff: None,
        method: Method::NotEnoughData,
    };
    if let (Some(va), Some(vb)) = (&va, &vb)
        && let Some(d) = welch(va, vb, args.level)
    {
        out.diff = Some(d);
        out.method = Method::Welch;
        return out;
    }
    if let Some((field, stat)) = figure.sample
        && let (Some(pa), Some(pb)) = (sa.samples(), sb.samples())
        && let Some(d) = bootstrap(
            pa.of(field),
            pb.of(field),
            stat,
            args.level,
            args.resamples,
            seed,
        )
    {
        out.diff = Some(d);
        out.method = Method::Bootstrap;
    }
    out
}

/// The scenario keys that differ between two scenarios (flattened to
/// dotted paths), leaving out what differs between repeats by design: the
/// output settings and the seeds (`seed`, `mock.seed`, ...).
fn scenario_differences(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&key, v, out);
                }
            }
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    flatten("", a, &mut fa);
    flatten("", b, &mut fb);
    let skip =
        |k: &str| k == "seed" || k.ends_with(".seed") || k == "output" || k.starts_with("output.");
    let mut keys: Vec<&String> = fa.iter().chain(&fb).map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    let get = |f: &[(String, String)], k: &str| {
        f.iter()
            .find(|(x, _)| x == k)
            .map_or("(unset)".to_string(), |(_, v)| v.clone())
    };
    keys.into_iter()
        .filter(|k| !skip(k))
        .filter_map(|k| {
            let (x, y) = (get(&fa, k), get(&fb, k));
            (x != y).then(|| format!("{k}: {x} vs {y}"))
        })
        .collect()
}

/// The warnings a comparison carries: scenarios that differ between A and
/// B, or between one side's runs.
fn warnings(a: &Side, b: &Side) -> Vec<String> {
    let scenario = |s: &Side, i: usize| {
        s.runs
            .get(i)
            .and_then(|r| r.file.document().cicada.as_ref())
            .map(|c| c.scenario.clone())
    };
    let mut out = Vec::new();
    for side in [a, b] {
        let Some(first) = scenario(side, 0) else {
            continue;
        };
        for i in 1..side.runs.len() {
            if let Some(other) = scenario(side, i) {
                let d = scenario_differences(&first, &other);
                if !d.is_empty() {
                    out.push(format!(
                        "{}: run {} is not run 1's scenario ({})",
                        side.label,
                        i + 1,
                        d.join("; ")
                    ));
                }
            }
        }
    }
    if let (Some(x), Some(y)) = (scenario(a, 0), scenario(b, 0)) {
        let d = scenario_differences(&x, &y);
        if !d.is_empty() {
            out.push(format!(
                "A and B ran different scenarios ({})",
                d.join("; ")
            ));
        }
    }
    out
}

/// Read both sides and compare every figure.
pub fn compare(args: &CompareArgs, gates: &[Gate]) -> Result<Comparison, CompareError> {
    let a = Side::read(&args.a)?;
    let b = Side::read(&args.b)?;
    let all: Vec<crate::read::ResultFile> = a
        .runs
        .iter()
        .chain(&b.runs)
        .map(|r| r.file.clone())
        .collect();
    let itl = ItlDefinition::for_files(&all);
    let rows = |s: &Side| -> Result<Vec<Row>, crate::read::FileError> {
        s.runs.iter().map(|r| r.file.row(itl)).collect()
    };
    let (ra, rb) = (rows(&a)?, rows(&b)?);
    let figures: Vec<FigureDiff> = FIGURES
        .iter()
        .enumerate()
        .map(|(i, f)| compare_figure(f, [(&a, &ra), (&b, &rb)], args, args.seed + i as u64))
        .collect();
    let verdicts = gates
        .iter()
        .map(|g| {
            let f = figures.iter().find(|f| f.figure.name == g.figure.name);
            g.judge(f.and_then(|f| f.a), f.and_then(|f| f.b))
        })
        .collect();
    Ok(Comparison {
        warnings: warnings(&a, &b),
        a,
        b,
        level: args.level,
        figures,
        verdicts,
    })
}

/// Why `cicada compare` could not compare: unusable files, a malformed
/// threshold or a confidence level outside (0, 1) (the binary exits with 2).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// `--level` is not strictly between 0 and 1.
    #[error("--level {0}: a confidence level lies strictly between 0 and 1 (e.g. 0.95)")]
    Level(f64),
    /// A `--fail-if` expression cannot be read.
    #[error(transparent)]
    Gate(#[from] gate::GateError),
    /// A side names no usable files.
    #[error(transparent)]
    Side(#[from] SideError),
    /// A result file cannot be used.
    #[error(transparent)]
    File(#[from] crate::read::FileError),
}

/// How a comparison ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareEnd {
    /// Every `--fail-if` threshold held (or none was given).
    Passed,
    /// A `--fail-if` threshold was crossed.
    GateFailed,
}

/// Run `cicada compare`: print the table (or JSON) and say whether a
/// `--fail-if` threshold was crossed.
pub fn run(args: &CompareArgs) -> Result<CompareEnd, CompareError> {
    if !(args.level > 0.0 && args.level < 1.0) {
        return Err(CompareError::Level(args.level));
    }
    let gates: Vec<Gate> = args
        .fail_if
        .iter()
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let c = compare(args, &gates)?;
    for w in &c.warnings {
        eprintln!("warning: {w}");
    }
    let text = if args.json {
        format!("{}\n", render::json(&c))
    } else {
        render::table(&c)
    };
    // a closed pipe (`| head`) is the reader's choice, not an error
    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
    Ok(if c.verdicts.iter().any(|v| v.failed) {
        CompareEnd::GateFailed
    } else {
        CompareEnd::Passed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_differences_leave_out_seed_and_output() {
        let a = serde_json::json!({"seed": 1, "mock": {"ttft_ms": 20, "seed": 3}, "output": {"dir": "a"}});
        let b = serde_json::json!({"seed": 2, "mock": {"ttft_ms": 25, "jitter_ms": 1}, "output": {"dir": "b"}});
        assert_eq!(
            scenario_differences(&a, &b),
            ["mock.jitter_ms: (unset) vs 1", "mock.ttft_ms: 20 vs 25"]
        );
        assert!(scenario_differences(&a, &a).is_empty());
    }

    /// A `vllm bench serve --save-result` file with `ttft` as its mean TTFT.
    fn vllm_file(path: &std::path::Path, ttft: f64) {
        let doc = serde_json::json!({
            "backend": "openai-chat", "model_id": "m", "num_prompts": 100,
            "request_rate": "inf", "max_concurrency": 8, "duration": 12.5,
            "completed": 100, "request_throughput": 8.0, "output_throughput": 1024.0,
            "total_token_throughput": 5120.0, "mean_ttft_ms": ttft,
            "median_ttft_ms": ttft - 10.0, "p99_ttft_ms": ttft * 2.0,
            "mean_tpot_ms": 12.0, "p99_tpot_ms": 20.0, "mean_itl_ms": 12.0,
            "p99_itl_ms": 25.0, "mean_e2el_ms": 1700.0, "median_e2el_ms": 1650.0,
            "p99_e2el_ms": 2100.0, "ttfts": [0.1, 0.2]
        });
        std::fs::write(path, doc.to_string()).unwrap();
    }

    /// vLLM's files compare as runs (globs of them as sides): Welch's t on
    /// their figures, a gate on one, and "not enough data" for one file a
    /// side (vLLM writes no requests.jsonl).
    #[test]
    fn vllm_files_compare_as_runs() {
        let dir = tempfile::tempdir().unwrap();
        for (side, ttfts) in [("a", [100.0, 102.0, 98.0]), ("b", [120.0, 119.0, 121.0])] {
            std::fs::create_dir(dir.path().join(side)).unwrap();
            for (i, t) in ttfts.into_iter().enumerate() {
                vllm_file(&dir.path().join(format!("{side}/run{i}.json")), t);
            }
        }
        let args = |a: &str, b: &str| CompareArgs {
            a: dir.path().join(a),
            b: dir.path().join(b),
            fail_if: vec![],
            json: true,
            level: 0.95,
            resamples: 100,
            seed: 0,
        };
        let gates: Vec<Gate> = vec!["mean_ttft_ms > +10%".parse().unwrap()];
        let c = compare(&args("a/*.json", "b/*.json"), &gates).unwrap();
        assert_eq!((c.a.runs.len(), c.b.runs.len()), (3, 3));
        let ttft = &c.figures[2];
        assert_eq!(ttft.figure.name, "mean_ttft_ms");
        assert_eq!((ttft.a, ttft.b), (Some(100.0), Some(120.0)));
        assert_eq!(ttft.method, Method::Welch);
        let d = ttft.diff.unwrap();
        assert!(d.significant() && d.estimate == 20.0, "{d:?}");
        // equal throughputs on both sides: no spread, no difference
        assert!(!c.figures[0].diff.unwrap().significant());
        assert!(c.verdicts[0].failed, "{:?}", c.verdicts);
        assert!(c.warnings.is_empty(), "vLLM files carry no scenario");
        let one = compare(&args("a/run0.json", "b/run0.json"), &[]).unwrap();
        assert!(
            one.figures
                .iter()
                .all(|f| f.method == Method::NotEnoughData)
        );
    }
}
