//! `cicada compare`'s output: the console table and `--json`.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{Comparison, FigureDiff, Method};

/// A figure as printed: fewer decimals for larger numbers, `-` for none.
pub(crate) fn num(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x.abs() >= 1000.0 {
        format!("{x:.1}")
    } else if x.abs() >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn signed(x: f64) -> String {
    let s = num(x);
    if x >= 0.0 { format!("+{s}") } else { s }
}

/// B − A relative to A, when A is not 0.
fn change(f: &FigureDiff) -> Option<f64> {
    match (f.a, f.diff) {
        (Some(a), Some(d)) if a != 0.0 => Some(d.estimate / a),
        (Some(a), None) if a != 0.0 => f.b.map(|b| (b - a) / a),
        _ => None,
    }
}

/// The verdict column: better, worse, or no significant difference.
fn verdict(f: &FigureDiff) -> &'static str {
    match f.diff {
        None => "not enough data",
        Some(d) if !d.significant() => "no significant difference",
        Some(d) if (d.estimate > 0.0) == f.figure.higher_is_better => "better",
        Some(_) => "worse",
    }
}

/// How many runs a side holds, in words.
fn runs(n: usize) -> String {
    if n == 1 {
        "1 run".into()
    } else {
        format!("{n} runs")
    }
}

/// The console table.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {} ({})", c.a.label, runs(c.a.runs.len()));
    let _ = writeln!(out, "B: {} ({})", c.b.label, runs(c.b.runs.len()));
    let level = format!("{}% CI of B − A", c.level * 100.0);
    let _ = writeln!(
        out,
        "{:<28} {:>10} {:>10} {:>10} {:>23} {:>8} {:>7}  {:<26} method",
        "figure", "A", "B", "B − A", level, "change", "p", "verdict"
    );
    for f in &c.figures {
        let name = format!("{} ({})", f.figure.name, f.figure.unit);
        let opt = |x: Option<f64>| x.map_or("-".into(), num);
        let (diff, ci, p) = match f.diff {
            Some(d) => (
                signed(d.estimate),
                format!("[{}, {}]", signed(d.low), signed(d.high)),
                format!("{:.3}", d.p_value),
            ),
            None => (
                match (f.a, f.b) {
                    (Some(a), Some(b)) => signed(b - a),
                    _ => "-".into(),
                },
                "-".into(),
                "-".into(),
            ),
        };
        let pct = change(f).map_or("-".into(), |x| format!("{:+.1}%", x * 100.0));
        let _ = writeln!(
            out,
            "{name:<28} {:>10} {:>10} {diff:>10} {ci:>23} {pct:>8} {p:>7}  {:<26} {}",
            opt(f.a),
            opt(f.b),
            verdict(f),
            f.method.name()
        );
    }
    let methods: Vec<&str> = [Method::Welch, Method::Bootstrap]
        .into_iter()
        .filter(|m| c.figures.iter().any(|f| f.method == *m))
        .map(|m| match m {
            Method::Welch => "welch: Welch's t on the runs' figures (A and B: their runs' mean)",
            _ => "bootstrap: percentile bootstrap over per-request samples (requests.jsonl)",
        })
        .collect();
    for m in methods {
        let _ = writeln!(out, "{m}");
    }
    for v in &c.verdicts {
        let word = if v.failed { "FAILED" } else { "passed" };
        let _ = writeln!(out, "fail-if {word}: {} ({})", v.expr, v.detail);
    }
    out
}

/// `--json`.
pub fn json(c: &Comparison) -> String {
    let opt = |x: Option<f64>| x.filter(|v| v.is_finite()).map_or(Value::Null, Value::from);
    let side = |s: &super::Side| {
        json!({
            "path": s.label,
            "runs": s.runs.len(),
            "files": s.runs.iter().map(|r| r.file.path.display().to_string()).collect::<Vec<_>>(),
            "per_request_samples": s.runs.iter().all(|r| r.samples.is_some()),
        })
    };
    let figures: Vec<Value> = c
        .figures
        .iter()
        .map(|f| {
            json!({
                "name": f.figure.name,
                "unit": f.figure.unit,
                "a": opt(f.a),
                "b": opt(f.b),
                "diff": opt(f.diff.map(|d| d.estimate).or(f.a.zip(f.b).map(|(a, b)| b - a))),
                "ci_low": opt(f.diff.map(|d| d.low)),
                "ci_high": opt(f.diff.map(|d| d.high)),
                "relative_change": opt(change(f)),
                "p_value": opt(f.diff.map(|d| d.p_value)),
                "significant": f.diff.map(|d| d.significant()),
                "verdict": verdict(f),
                "method": f.method.name(),
            })
        })
        .collect();
    let gates: Vec<Value> = c
        .verdicts
        .iter()
        .map(|v| json!({"expr": v.expr, "failed": v.failed, "detail": v.detail}))
        .collect();
    let doc = json!({
        "a": side(&c.a),
        "b": side(&c.b),
        "level": c.level,
        "figures": figures,
        "fail_if": gates,
        "warnings": c.warnings,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
