//! `cicada selftest --fleet K,...`: what the coordinator costs per worker.
//!
//! For each fleet size K, a real `cicada run` pinned to one core waits for K
//! workers on loopback; a second process pinned to the other core joins it
//! as K simulated workers (`fleet::sim`) that send realistic reports once a
//! second and no load. The coordinator's CPU and memory are read from
//! `/proc` over the steady part of the run; its result must equal the merge
//! of every report sent, figure for figure. Beside it, decoding and merging
//! one report is timed in this process.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use cicada_metrics::{Metric, MetricSet, Summary};
use serde::{Deserialize, Serialize};

use super::SelftestArgs;
use super::procs::pin;
use crate::sim::{self, SampleReports};
use cicada_coordinator::ReportMerge;

/// Distinct sample reports the simulated workers take turns sending.
const VARIANTS: usize = 16;
/// Requests in each report (one second of one worker: 100 req/s).
const REQUESTS_PER_REPORT: u32 = 100;
/// Seed of the sample reports (the simulator and the check build the same).
const SEED: u64 = 42;
/// Seconds after the first barrier before CPU is counted (joining, plans).
const SETTLE_S: u64 = 2;

fn samples() -> SampleReports {
    SampleReports::new(VARIANTS, REQUESTS_PER_REPORT, SEED)
}

/// What the simulated fleet prints when it is done.
#[derive(Debug, Serialize, Deserialize)]
struct SimOutput {
    by_variant: Vec<u64>,
    bytes: u64,
}

/// Be the simulated fleet (the selftest runs itself so): join `url` as
/// `--fleet` workers, print `started` at the barrier and the figures as JSON.
pub(super) async fn sim_process(a: &SelftestArgs, url: &str) -> anyhow::Result<()> {
    let count = *a
        .fleet
        .first()
        .context("--fleet-sim needs one --fleet size")?;
    let token = std::env::var("CICADA_TOKEN").context("CICADA_TOKEN for the simulated fleet")?;
    let samples = Arc::new(samples());
    let sent = sim::run(url, &token, count, a.seconds, samples, || {
        println!("started");
    })
    .await?;
    let out = SimOutput {
        by_variant: sent.by_variant,
        bytes: sent.bytes,
    };
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}

/// One fleet size's figures.
#[derive(Debug, Clone, Serialize)]
pub struct FleetRow {
    pub workers: u32,
    /// Reports the coordinator received per second.
    pub reports_per_s: f64,
    /// Mean protobuf bytes per report.
    pub report_bytes: f64,
    /// The coordinator's CPU (user + system) in the steady window, % of one core.
    pub cpu_percent: f64,
    /// Its CPU per report received, µs (gRPC, decode, merge, pings, files).
    pub cpu_us_per_report: f64,
    /// Decoding and merging one report in this process, µs.
    pub merge_us_per_report: f64,
    /// Its resident memory a quarter into the window and at its end, MB.
    pub rss_mb_early: f64,
    pub rss_mb_late: f64,
    /// Its result equals the merge of every report sent.
    pub exact: bool,
}

/// Run every fleet size and print the table.
pub(super) async fn run(exe: &Path, a: &SelftestArgs, dir: &Path) -> anyhow::Result<()> {
    if a.seconds < SETTLE_S + 3 {
        bail!("--fleet needs --seconds of at least {}", SETTLE_S + 3);
    }
    println!(
        "cicada selftest --fleet: cicada run on core {}, simulated workers on core {}; each worker reports once a second ({} requests over 2 replicas, every histogram), {} s",
        a.worker_core, a.mock_core, REQUESTS_PER_REPORT, a.seconds
    );
    println!(
        "{:>8} {:>10} {:>10} {:>9} {:>12} {:>12} {:>10} {:>10} {:>6}",
        "workers",
        "reports/s",
        "report KB",
        "CPU %",
        "CPU µs/rep",
        "merge µs",
        "RSS MB 1/4",
        "RSS MB end",
        "exact"
    );
    let mut rows = Vec::new();
    for &k in &a.fleet {
        let row = one_size(exe, a, dir, k).await?;
        println!(
            "{:>8} {:>10.0} {:>10.1} {:>9.2} {:>12.1} {:>12.1} {:>10.1} {:>10.1} {:>6}",
            row.workers,
            row.reports_per_s,
            row.report_bytes / 1024.0,
            row.cpu_percent,
            row.cpu_us_per_report,
            row.merge_us_per_report,
            row.rss_mb_early,
            row.rss_mb_late,
            if row.exact { "yes" } else { "NO" }
        );
        rows.push(row);
    }
    println!(
        "CPU %: the coordinator's user+system time over the steady window (from {SETTLE_S} s after the barrier to 1 s before the end), per cent of one core. CPU µs/rep: that time per report received. merge µs: decoding and merging one report, timed alone. exact: result.json equals the merge of every report sent."
    );
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_vec_pretty(&rows)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if rows.iter().any(|r| !r.exact) {
        bail!("the coordinator's merged figures differ from the reports sent");
    }
    Ok(())
}

/// Kill a child when dropped (a failed size leaves nothing running).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn one_size(exe: &Path, a: &SelftestArgs, dir: &Path, k: u32) -> anyhow::Result<FleetRow> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("finding a free port")?
        .port();
    let token = format!("selftest-{:016x}", rand::random::<u64>());
    let out = dir.join(format!("fleet-{k}"));
    let sc = dir.join(format!("fleet-{k}.toml"));
    std::fs::write(&sc, scenario(k, a.seconds)).context("writing the scenario")?;
    let mut coord = Command::new(exe);
    coord
        .arg("run")
        .arg(&sc)
        .args(["--expect-workers", &k.to_string()])
        .args(["--listen", &format!("127.0.0.1:{port}"), "--quiet"])
        .arg("--output-dir")
        .arg(&out)
        .env("CICADA_TOKEN", &token)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    pin(&mut coord, a.worker_core);
    let mut coord = Reaped(coord.spawn().context("starting cicada run")?);
    let pid = coord.0.id();
    let mut sim = Command::new(exe);
    sim.args([
        "selftest",
        "--fleet-sim",
        &format!("http://127.0.0.1:{port}"),
    ])
    .args([
        "--fleet",
        &k.to_string(),
        "--seconds",
        &a.seconds.to_string(),
    ])
    .env("CICADA_TOKEN", &token)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    pin(&mut sim, a.mock_core);
    let mut sim = Reaped(sim.spawn().context("starting the simulated fleet")?);
    let lines = BufReader::new(sim.0.stdout.take().context("the fleet's stdout")?);
    let seconds = a.seconds;
    let watch = tokio::task::spawn_blocking(move || watch(pid, lines, seconds));
    let watched = watch.await.context("watching the coordinator")??;
    let coord_status = wait(&mut coord.0, "cicada run")?;
    let sim_status = wait(&mut sim.0, "the simulated fleet")?;
    if !sim_status.success() {
        bail!("the simulated fleet failed: {}", stderr_of(&mut sim.0));
    }
    if !coord_status.success() {
        bail!("cicada run failed: {}", stderr_of(&mut coord.0));
    }
    let sent: SimOutput = serde_json::from_str(&watched.last_line)
        .with_context(|| format!("reading the fleet's figures from {:?}", watched.last_line))?;
    let samples = samples();
    let exact = matches_result(
        &samples.expected(&sent.by_variant)?,
        &out.join("result.json"),
    )?;
    let reports: u64 = sent.by_variant.iter().sum();
    let window_s = watched.window.as_secs_f64();
    let per_s = f64::from(k);
    let merge_us = merge_cost(&samples, k)?;
    Ok(FleetRow {
        workers: k,
        reports_per_s: per_s,
        report_bytes: sent.bytes as f64 / reports.max(1) as f64,
        cpu_percent: watched.cpu_us as f64 / (window_s * 1e6) * 100.0,
        cpu_us_per_report: watched.cpu_us as f64 / (window_s * per_s),
        merge_us_per_report: merge_us,
        rss_mb_early: watched.rss_kb_early as f64 / 1024.0,
        rss_mb_late: watched.rss_kb_late as f64 / 1024.0,
        exact,
    })
}

fn wait(child: &mut Child, what: &str) -> anyhow::Result<std::process::ExitStatus> {
    child.wait().with_context(|| format!("waiting for {what}"))
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut s);
    }
    s.trim().to_string()
}

/// The scenario the coordinator runs: open-ended (closed-loop users for a
/// duration: no planned count for the coordinator to hold the simulated
/// reports to), a target nobody calls.
fn scenario(k: u32, seconds: u64) -> String {
    format!(
        r#"name = "fleet-{k}"
seed = 1
[target]
backend = "openai-chat"
base_url = "http://127.0.0.1:9"
model = "simulated"
ready_timeout = "0s"
[dataset]
kind = "random"
input_len = 8
output_len = 8
[load]
duration = "{seconds}s"
users = {k}
"#
    )
}

/// What was seen of the coordinator while the simulated fleet reported.
struct Watched {
    cpu_us: u64,
    window: Duration,
    rss_kb_early: u64,
    rss_kb_late: u64,
    last_line: String,
}

/// Follow the fleet's output; sample the coordinator's CPU and memory over
/// the steady window of a `seconds`-long run.
fn watch(pid: u32, lines: impl BufRead, seconds: u64) -> anyhow::Result<Watched> {
    let mut lines = lines.lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.trim() == "started" => break,
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e).context("reading the fleet's output"),
            None => bail!("the simulated fleet ended before its start barrier"),
        }
    }
    let barrier = Instant::now();
    let window_end = barrier + Duration::from_secs(seconds) - Duration::from_secs(1);
    std::thread::sleep(Duration::from_secs(SETTLE_S));
    let (t0, cpu0) = (Instant::now(), proc_cpu_us(pid)?);
    let quarter = t0 + window_end.saturating_duration_since(t0) / 4;
    std::thread::sleep(quarter.saturating_duration_since(Instant::now()));
    let rss_kb_early = proc_rss_kb(pid)?;
    std::thread::sleep(window_end.saturating_duration_since(Instant::now()));
    let (t1, cpu1, rss_kb_late) = (Instant::now(), proc_cpu_us(pid)?, proc_rss_kb(pid)?);
    let mut last_line = String::new();
    for l in lines {
        let l = l.context("reading the fleet's output")?;
        if !l.trim().is_empty() {
            last_line = l;
        }
    }
    Ok(Watched {
        cpu_us: cpu1.saturating_sub(cpu0),
        window: t1 - t0,
        rss_kb_early,
        rss_kb_late,
        last_line,
    })
}

/// User + system CPU time of process `pid`, µs (`/proc/PID/stat`).
fn proc_cpu_us(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // fields after the command name, which ends at the last ')': utime and
    // stime are fields 14 and 15 of the line, 12th and 13th after it
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let (Some(u), Some(s)) = (ticks(11), ticks(12)) else {
        bail!("unexpected /proc/{pid}/stat: {stat}");
    };
    let hz = cicada_sys::process::clock_ticks_per_second();
    Ok((u + s) * 1_000_000 / hz)
}

/// Resident memory of process `pid`, kB (`VmRSS` of `/proc/PID/status`).
fn proc_rss_kb(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no VmRSS in /proc/{pid}/status"))
}

/// Whether `result.json` shows exactly the figures of `expected`.
fn matches_result(expected: &MetricSet, result: &Path) -> anyhow::Result<bool> {
    let j: serde_json::Value = serde_json::from_slice(
        &std::fs::read(result).with_context(|| format!("reading {}", result.display()))?,
    )
    .with_context(|| format!("parsing {}", result.display()))?;
    let s = Summary::of(expected, false, &[99.0], 0);
    let figure = |m: Metric, pick: fn(&cicada_metrics::DistributionStats) -> Option<f64>| {
        s.metric(m).and_then(pick)
    };
    let want = [
        ("completed", Some(s.completed as f64)),
        ("failed", Some(s.failed as f64)),
        ("total_output_tokens", Some(s.total_output_tokens as f64)),
        ("mean_ttft_ms", figure(Metric::Ttft, |d| Some(d.mean))),
        ("median_ttft_ms", figure(Metric::Ttft, |d| Some(d.median))),
        ("p99_ttft_ms", figure(Metric::Ttft, |d| d.percentile(99.0))),
        ("median_itl_ms", figure(Metric::Itl, |d| Some(d.median))),
        ("p99_itl_ms", figure(Metric::Itl, |d| d.percentile(99.0))),
        ("p99_e2el_ms", figure(Metric::E2el, |d| d.percentile(99.0))),
    ];
    let mut same = true;
    for (key, want) in want {
        let got = j[key].as_f64();
        let equal = match (got, want) {
            (Some(g), Some(w)) => (g - w).abs() <= 1e-9 * w.abs().max(1.0),
            (None, None) => true,
            _ => false,
        };
        if !equal {
            tracing::error!(
                key,
                ?got,
                ?want,
                "the coordinator's figure differs from the merge of the reports sent"
            );
            same = false;
        }
    }
    Ok(same)
}

/// Mean µs to decode and merge one report, for a fleet of `k` workers
/// (every worker's report of an interval, then the next interval).
fn merge_cost(samples: &SampleReports, k: u32) -> anyhow::Result<f64> {
    let intervals = (4096 / k.max(1)).clamp(2, 64) as u64;
    let mut merge = ReportMerge::new(1.0, k);
    let started = Instant::now();
    for seq in 0..intervals {
        for w in 0..k {
            let bytes = samples.encoded((w as u64 + seq) as usize, seq);
            merge
                .add_encoded(w, &bytes)
                .context("merging a sample report")?;
        }
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / (intervals * u64::from(k)) as f64)
}
