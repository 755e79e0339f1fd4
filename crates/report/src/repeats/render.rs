//! The repeated runs' summary as printed (a table per result file) and as
//! written (`repeats.json`, `repeats.csv`).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{FigureSummary, Summary};
use crate::compare::render::num;

fn opt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), num)
}

fn percent(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{:.1} %", x * 100.0))
}

/// One table per result file: each figure's mean, interval, spread and
/// pooled value.
pub fn table(s: &Summary) -> String {
    let mut out = String::new();
    let level = format!("{}% CI of the mean", s.level * 100.0);
    for p in &s.points {
        let _ = writeln!(out, "\n{} over {} runs", p.file, p.paths.len());
        let _ = writeln!(
            out,
            "{:<28} {:>10} {:>23} {:>10} {:>8} {:>10}",
            "figure", "mean", level, "sd", "CV", "pooled"
        );
        for f in &p.figures {
            let ci = f.ci.map_or_else(
                || "-".into(),
                |(lo, hi)| format!("[{}, {}]", num(lo), num(hi)),
            );
            let _ = writeln!(
                out,
                "{:<28} {:>10} {:>23} {:>10} {:>8} {:>10}",
                format!("{} ({})", f.figure.name, f.figure.unit),
                opt(f.mean),
                ci,
                opt(f.sd),
                percent(f.cv),
                opt(f.pooled)
            );
        }
    }
    out
}

fn figure_json(f: &FigureSummary) -> Value {
    json!({
        "figure": f.figure.name,
        "unit": f.figure.unit,
        "runs": f.values,
        "mean": f.mean,
        "sd": f.sd,
        "cv": f.cv,
        "ci_low": f.ci.map(|c| c.0),
        "ci_high": f.ci.map(|c| c.1),
        "pooled": f.pooled,
    })
}

/// `repeats.json`: the level, the runs, and each file's figures.
pub fn json(s: &Summary) -> Value {
    json!({
        "level": s.level,
        "runs": s.runs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "files": s.points.iter().map(|p| json!({
            "file": p.file,
            "paths": p.paths.iter().map(|x| x.display().to_string()).collect::<Vec<_>>(),
            "figures": p.figures.iter().map(figure_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// `repeats.csv`: one row per file and figure, numbers unrounded.
pub fn csv(s: &Summary) -> String {
    let cell = |x: Option<f64>| x.map_or_else(String::new, |x| x.to_string());
    let mut out = String::from("file,figure,unit,runs,level,mean,sd,cv,ci_low,ci_high,pooled\n");
    for p in &s.points {
        for f in &p.figures {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{}",
                p.file,
                f.figure.name,
                f.figure.unit,
                f.values.len(),
                s.level,
                cell(f.mean),
                cell(f.sd),
                cell(f.cv),
                cell(f.ci.map(|c| c.0)),
                cell(f.ci.map(|c| c.1)),
                cell(f.pooled)
            );
        }
    }
    out
}
