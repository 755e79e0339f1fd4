//! The table of stages printed at the end of a sweep or a `[[stages]]` run,
//! and where an `slo` sweep's search ended.

use std::fmt::Write as _;

use cicada_metrics::{Counter, Metric};

use super::RunResult;

/// The SLO search's bracket and answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// Highest rate that met the SLO (None: none did).
    pub passed: Option<f64>,
    /// Lowest rate that missed it (None: the top of the range passed).
    pub failed: Option<f64>,
    pub resolution: f64,
    pub fraction: f64,
}

fn ms(r: &RunResult, m: Metric, pick: fn(&cicada_metrics::DistributionStats) -> f64) -> String {
    r.summary()
        .metric(m)
        .map_or_else(|| "-".to_string(), |d| format!("{:.1}", pick(d)))
}

/// One line per step: load, completions, throughput and latency.
pub fn render(title: &str, stages: &[RunResult], search: Option<Search>) -> String {
    let mut out = String::new();
    let width = 128;
    let head = format!(" {title} ");
    let pad = width - head.len().min(width);
    let _ = writeln!(
        out,
        "{}{}{}",
        "=".repeat(pad / 2),
        head,
        "=".repeat(pad - pad / 2)
    );
    let _ = writeln!(
        out,
        "{:<5} {:<22} {:>9} {:>9} {:>6} {:>9} {:>7} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "stage",
        "name",
        "rate cfg",
        "rate ach",
        "conc",
        "completed",
        "failed",
        "req/s",
        "out tok/s",
        "TTFT mean",
        "TTFT p99",
        "TPOT mean",
        "ITL p99",
        "goodput"
    );
    for r in stages {
        let s = r.summary();
        let load = &r.scenario.load;
        let conc = match (load.users, load.max_concurrency) {
            (Some(u), _) => format!("{u}u"),
            (None, Some(c)) => c.to_string(),
            (None, None) => "-".into(),
        };
        let goodput = if r.scenario.any_slo_set() && s.sent > 0 {
            format!(
                "{:.0}%",
                100.0 * r.total.counter(Counter::Goodput) as f64 / s.sent as f64
            )
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "{:<5} {:<22} {:>9} {:>9} {:>6} {:>9} {:>7} {:>8.2} {:>10.1} {:>9} {:>9} {:>9} {:>8} {:>8}",
            r.stage,
            truncate(&r.stage_name, 22),
            load.request_rate.to_string(),
            s.achieved_request_rate
                .map_or_else(|| "-".into(), |a| format!("{a:.2}")),
            conc,
            s.completed,
            s.failed,
            s.request_throughput,
            s.output_throughput,
            ms(r, Metric::Ttft, |d| d.mean),
            ms(r, Metric::Ttft, |d| d.percentile(99.0).unwrap_or(0.0)),
            ms(r, Metric::Tpot, |d| d.mean),
            ms(r, Metric::Itl, |d| d.percentile(99.0).unwrap_or(0.0)),
            goodput,
        );
    }
    for r in stages.iter().filter(|r| !r.skipped.is_empty()) {
        let _ = writeln!(out, "{}", skipped_line(r));
    }
    if let Some(search) = search {
        let _ = writeln!(out, "{}", search_line(search));
    }
    let _ = writeln!(out, "{}", "=".repeat(width));
    out
}

/// The sweep points a step's early stop left unrun, and why it stopped.
pub fn skipped_line(r: &RunResult) -> String {
    let why = if let Some(a) = &r.aborted {
        format!("abort.{} tripped", a.condition)
    } else if r.saturated.as_ref().is_some_and(|s| s.stopped) {
        "saturated".to_string()
    } else if let Some(sig) = r.interrupted {
        format!("interrupted by {sig}")
    } else {
        "stopped".to_string()
    };
    format!(
        "skipped after stage {} ({why}): {}",
        r.stage,
        r.skipped.join(", ")
    )
}

/// The SLO capacity search's answer in one sentence.
pub fn search_line(s: Search) -> String {
    let pct = s.fraction * 100.0;
    match (s.passed, s.failed) {
        (Some(p), Some(f)) => format!(
            "SLO capacity: {p:.2} req/s (the SLO held for ≥ {pct:.0}% of requests at {p:.2} and failed at {f:.2}; resolution {:.2} req/s)",
            s.resolution
        ),
        (Some(p), None) => format!(
            "SLO capacity: at least {p:.2} req/s (the SLO held for ≥ {pct:.0}% of requests even at the highest rate tried)"
        ),
        (None, Some(f)) => format!(
            "SLO capacity: below every rate tried (the SLO failed for more than {:.0}% of requests even at {f:.2} req/s)",
            100.0 - pct
        ),
        (None, None) => "SLO capacity: not determined (no stage completed)".to_string(),
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}
