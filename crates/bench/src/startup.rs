//! `cicada selftest --startup`: what a big dataset costs before the first
//! request. For each worker count it runs `cicada run` with `--prompts`
//! random prompts of `--input-len` tokens (counted with the repository's
//! fixture tokenizer, or `--tokenizer`) against the mock, and prints the
//! time from the process's start to the dataset being built (the
//! coordinator's `dataset:` line on stderr), to the first request reaching
//! the mock (the mock's own arrival stamp), and the peak RSS of the
//! coordinator (its `VmHWM`, polled; also as it printed the `dataset:` line,
//! the build's own peak) and of its workers (their own `peak_rss_bytes` in
//! result.json).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;

use super::SelftestArgs;
use super::floor::unix_now_us;
use super::procs::{Mock, load_1m, start_mock_on};

/// The repository's small BPE tokenizer (2,000 ids, byte-level), so the
/// measurement needs nothing downloaded.
const FIXTURE_TOKENIZER: &str = include_str!("../../../examples/data/tokenizer.json");

/// One worker count's start-up.
#[derive(Debug, Clone, Serialize)]
pub struct Startup {
    pub workers: u32,
    pub prompts: u64,
    pub input_len: u32,
    /// From spawning `cicada run` to its `dataset:` line, s.
    pub dataset_built_s: Option<f64>,
    /// From spawning `cicada run` to the mock's first arrival, s.
    pub first_request_s: Option<f64>,
    /// The coordinator's peak resident memory (its own `VmHWM`), MB.
    pub coordinator_peak_rss_mb: f64,
    /// Its `VmHWM` as it printed the `dataset:` line (the dataset build's
    /// peak, before any plan was sent), MB.
    pub coordinator_built_rss_mb: Option<f64>,
    /// The largest of its workers' peak resident memory, MB.
    pub worker_peak_rss_mb: Option<f64>,
    /// The whole run's wall time, s.
    pub total_s: f64,
    /// The 1-minute load average when the run began.
    pub load_1m: Option<f64>,
}

/// Run the start-up measurement for every worker count and print the table.
pub(super) async fn run(exe: &Path, a: &SelftestArgs, dir: &Path) -> anyhow::Result<Vec<Startup>> {
    let tokenizer = match &a.tokenizer {
        Some(p) => p.clone(),
        None => {
            let p = dir.join("tokenizer.json");
            std::fs::write(&p, FIXTURE_TOKENIZER).context("writing the fixture tokenizer")?;
            p
        }
    };
    println!(
        "cicada selftest --startup: cicada run with {} random prompts of {} tokens (tokenizer {}), against the mock; every core used",
        a.prompts,
        a.input_len,
        a.tokenizer.as_ref().map_or_else(
            || "examples/data/tokenizer.json".to_string(),
            |p| p.display().to_string()
        )
    );
    println!(
        "{:>8} {:>11} {:>15} {:>15} {:>15} {:>14} {:>9} {:>7}",
        "workers",
        "dataset s",
        "first request s",
        "coord. built MB",
        "coord. RSS MB",
        "worker RSS MB",
        "total s",
        "load"
    );
    let mut out = Vec::new();
    for &workers in &a.startup_workers {
        let mock = start_mock_on(exe, 0.0, &all_cores())?;
        let run_dir = dir.join(format!("startup-{workers}"));
        let s = one(exe, a, &mock, &tokenizer, workers, &run_dir).await?;
        println!(
            "{:>8} {:>11} {:>15} {:>15} {:>15.0} {:>14} {:>9.1} {:>7}",
            s.workers,
            opt(s.dataset_built_s, 2),
            opt(s.first_request_s, 2),
            opt(s.coordinator_built_rss_mb, 0),
            s.coordinator_peak_rss_mb,
            opt(s.worker_peak_rss_mb, 0),
            s.total_s,
            opt(s.load_1m, 2),
        );
        out.push(s);
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    println!(
        "dataset s: from starting cicada run to its dataset line (tokenizer loaded, every prompt built). first request s: to the mock's first arrival (pool sent to each worker, workers ready, start barrier). RSS: the coordinator's own peak at its dataset line (the build's) and over the run (pool deflated and sent), and the largest worker's. load: the 1-minute load average as the run began."
    );
    Ok(out)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
}

fn all_cores() -> Vec<usize> {
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

fn scenario(a: &SelftestArgs, url: &str, tokenizer: &Path, out: &Path) -> String {
    // a duration-bound run cycles through a pool of `prompts`: every prompt
    // is built and shipped, but only a few requests are sent
    format!(
        r#"
name = "selftest-startup"
seed = 1
[target]
backend = "openai"
base_url = "{url}"
model = "cicada-mock"
ready_timeout = "0s"
[tokenizer]
source = "{tok}"
[dataset]
kind = "random"
input_len = {len}
output_len = 1
[load]
duration = "1s"
pool_size = {prompts}
request_rate = 4
[output]
dir = "{out}"
"#,
        tok = tokenizer.display(),
        len = a.input_len,
        prompts = a.prompts,
        out = out.display(),
    )
}

/// A process's own peak resident memory so far (`VmHWM`), bytes.
fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// One `cicada run` with `workers` local workers.
async fn one(
    exe: &Path,
    a: &SelftestArgs,
    mock: &Mock,
    tokenizer: &Path,
    workers: u32,
    out: &Path,
) -> anyhow::Result<Startup> {
    let sc = out.with_extension("toml");
    std::fs::write(&sc, scenario(a, &mock.url, tokenizer, out)).context("writing the scenario")?;
    let load = load_1m();
    let exe = exe.to_path_buf();
    let workers_arg = workers.to_string();
    let Watched {
        start_us,
        built_us,
        built_rss,
        end_us,
        peak,
    } = tokio::task::spawn_blocking(move || spawn_and_watch(&exe, &sc, &workers_arg))
        .await
        .context("waiting for the run")??;
    let first_us = first_arrival_us(mock).await?;
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("result.json")).context("reading result.json")?,
    )
    .context("parsing result.json")?;
    let worker_peak = r
        .pointer("/cicada/client/workers")
        .and_then(serde_json::Value::as_array)
        .and_then(|ws| {
            ws.iter()
                .filter_map(|w| w["peak_rss_bytes"].as_f64())
                .reduce(f64::max)
        });
    let s = |us: f64| (us - start_us) / 1e6;
    Ok(Startup {
        workers,
        prompts: a.prompts,
        input_len: a.input_len,
        dataset_built_s: built_us.map(s),
        first_request_s: first_us.map(s),
        coordinator_peak_rss_mb: peak as f64 / 1e6,
        coordinator_built_rss_mb: built_rss.map(|b| b as f64 / 1e6),
        worker_peak_rss_mb: worker_peak.map(|b| b / 1e6),
        total_s: s(end_us),
        load_1m: load,
    })
}

/// What [`spawn_and_watch`] saw of one `cicada run`.
struct Watched {
    /// When it was started, its `dataset:` line came and it exited, unix µs.
    start_us: f64,
    built_us: Option<f64>,
    end_us: f64,
    /// Its peak RSS as the `dataset:` line came, and over its life, bytes.
    built_rss: Option<u64>,
    peak: u64,
}

/// Start `cicada run`, stamp its `dataset:` line (and its peak RSS then),
/// poll its peak RSS until it exits.
fn spawn_and_watch(exe: &Path, sc: &Path, workers: &str) -> anyhow::Result<Watched> {
    let mut cmd = Command::new(exe);
    cmd.arg("run")
        .arg(sc)
        .args(["--workers", workers, "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let start = unix_now_us();
    let mut child = cmd.spawn().context("starting cicada run")?;
    let pid = child.id();
    let stderr = child.stderr.take().context("the run's stderr")?;
    let built = Arc::new(Mutex::new(None::<(f64, Option<u64>)>));
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let (built, lines) = (built.clone(), lines.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.starts_with("dataset:") {
                    let mut b = built
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    b.get_or_insert_with(|| (unix_now_us(), vm_hwm(pid)));
                }
                lines
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(line);
            }
        })
    };
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let poller = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Some(b) = vm_hwm(pid) {
                    peak.fetch_max(b, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let status = child.wait().context("waiting for cicada run")?;
    let end = unix_now_us();
    done.store(true, Ordering::Relaxed);
    let _ = poller.join();
    let _ = reader.join();
    if !status.success() {
        let lines = lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        bail!("cicada run failed ({status}): {}", lines.join("\n"));
    }
    let built = *built
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(Watched {
        start_us: start,
        built_us: built.map(|(t, _)| t),
        end_us: end,
        built_rss: built.and_then(|(_, rss)| rss),
        peak: peak.load(Ordering::Relaxed),
    })
}

/// One request as the mock logged it.
#[derive(serde::Deserialize)]
struct Arrival {
    unix_us: u64,
}

/// The mock's first arrival, unix µs.
async fn first_arrival_us(mock: &Mock) -> anyhow::Result<Option<f64>> {
    let log: Vec<Arrival> = mock
        .http
        .get(format!("{}/mock/requests", mock.url))
        .send()
        .await
        .context("asking the mock for its request log")?
        .json()
        .await
        .context("reading the mock's request log")?;
    Ok(log.iter().map(|r| r.unix_us).min().map(|us| us as f64))
}
