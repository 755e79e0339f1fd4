//! `coord selftest`: how much load can this machine's client generate, and how
//! exactly does it measure it?
//!
//! For each concurrency level it starts the built-in mock pinned to one core
//! and a one-worker closed-loop run pinned to another, then prints what the
//! client achieved (streamed tokens/s, streams the mock really held), what it
//! cost (worker CPU µs per token, peak RSS) and how far its measurements were
//! from the mock's truth (reported TTFT and ITL minus configured timing and
//! the mock's own measured lateness).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;

/// `coord selftest` options.
#[derive(Debug, Clone, Args)]
pub struct SelftestArgs {
    /// Concurrent streams (closed-loop users) to try, in order.
    #[arg(long, value_delimiter = ',', default_value = "1,64,512,2048,8192")]
    pub levels: Vec<u32>,
    /// Measured seconds per level (after a ramp of up to 2 s).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Output tokens per request.
    #[arg(long, default_value_t = 128)]
    pub output_tokens: u32,
    /// The mock's time to first token, ms.
    #[arg(long, default_value_t = 50.0)]
    pub ttft_ms: f64,
    /// The mock's gap between tokens, ms.
    #[arg(long, default_value_t = 10.0)]
    pub itl_ms: f64,
    /// Core the mock is pinned to.
    #[arg(long, default_value_t = 0)]
    pub mock_core: usize,
    /// Core the coordinator and its worker are pinned to.
    #[arg(long, default_value_t = 1)]
    pub worker_core: usize,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Instead of the levels: run the same load for each of these request
    /// counts and compare the worker's peak RSS (memory must not grow with run length).
    #[arg(long, value_delimiter = ',')]
    pub rss_requests: Vec<u64>,
}

/// Figures of one level.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Level {
    /// Closed-loop users asked for.
    pub streams: u32,
    /// Most streams the mock really had open at once (did the client hold them?).
    pub held: u64,
    /// Output tokens per second over the measured window.
    pub tokens_per_s: f64,
    /// Worker user+sys CPU per streamed token, µs (the client's cost).
    pub cpu_us_per_token: Option<f64>,
    /// Worker peak resident memory, MB.
    pub peak_rss_mb: Option<f64>,
    /// Reported mean TTFT minus the mock's delivered TTFT, ms.
    pub mean_ttft_error_ms: f64,
    /// Reported mean ITL minus the configured gap, ms.
    pub mean_itl_error_ms: f64,
    /// Reported p99 ITL, ms.
    pub p99_itl_ms: f64,
    /// The mock's mean lateness behind its schedule, ms.
    pub mock_mean_late_ms: f64,
    /// The mock's p99 lateness: how much of the client's ITL p99 is the server's.
    pub mock_p99_late_ms: f64,
    /// The run flagged itself client-bound.
    pub client_bound: bool,
}

/// Limit a child to one core (Linux), so the client and the mock never share one.
fn pin(cmd: &mut Command, core: usize) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(core, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

struct Mock {
    child: Child,
    url: String,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_mock(exe: &Path, a: &SelftestArgs) -> anyhow::Result<Mock> {
    let mut cmd = Command::new(exe);
    cmd.args(["mock", "--listen", "127.0.0.1:0"])
        .args([
            "--ttft-ms",
            &a.ttft_ms.to_string(),
            "--itl-ms",
            &a.itl_ms.to_string(),
        ])
        .args(["--output-tokens", &a.output_tokens.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    pin(&mut cmd, a.mock_core);
    let mut child = cmd.spawn().context("starting the mock")?;
    let stdout = child.stdout.take().context("the mock's stdout")?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading the mock's address")?;
    let url = line
        .split_whitespace()
        .last()
        .filter(|u| u.starts_with("http://"))
        .with_context(|| format!("unexpected mock banner {line:?}"))?
        .to_string();
    Ok(Mock { child, url })
}

async fn mock_stats(url: &str) -> anyhow::Result<serde_json::Value> {
    reqwest::get(format!("{url}/mock/stats"))
        .await
        .context("asking the mock for its stats")?
        .json()
        .await
        .context("reading the mock's stats")
}

fn scenario(a: &SelftestArgs, streams: u32, url: &str, out: &Path) -> String {
    let ramp_s = (f64::from(streams) / 4096.0).clamp(0.0, 2.0);
    let spawn = if ramp_s > 0.0 {
        f64::from(streams) / ramp_s
    } else {
        f64::from(streams)
    };
    format!(
        r#"
name = "selftest-{streams}"
seed = 1
[target]
backend = "openai-chat"
base_url = "{url}"
model = "cicada-mock"
ready_timeout = "0s"
timeout = "10m"
[dataset]
input_len = 32
output_len = {tokens}
[load]
users = {streams}
spawn_rate = {spawn}
duration = "{total}ms"
warmup = "{warm}ms"
[output]
dir = "{out}"
percentile_metrics = ["ttft", "itl"]
"#,
        tokens = a.output_tokens,
        total = ((a.seconds as f64 + ramp_s + 1.0) * 1000.0).round() as u64,
        warm = ((ramp_s + 1.0) * 1000.0).round() as u64,
        out = out.display(),
    )
}

fn num(v: &serde_json::Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0)
}

/// Run `scenario` (whose results go to `out`) with one worker pinned to `core`; its result.json.
async fn pinned_run(
    exe: &Path,
    core: usize,
    scenario: &str,
    out: &Path,
    what: &str,
) -> anyhow::Result<serde_json::Value> {
    let sc = out.with_extension("toml");
    std::fs::write(&sc, scenario).context("writing the scenario")?;
    let mut cmd = Command::new(exe);
    cmd.arg("run").arg(&sc).args(["--workers", "1", "--quiet"]);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    pin(&mut cmd, core);
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .context("waiting for the run")?
        .context("running coord")?;
    if !output.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let r = serde_json::from_slice(
        &std::fs::read(out.join("result.json")).context("reading result.json")?,
    )
    .context("parsing result.json")?;
    Ok(r)
}

async fn run_level(
    exe: &Path,
    a: &SelftestArgs,
    streams: u32,
    dir: &Path,
) -> anyhow::Result<Level> {
    let mock = start_mock(exe, a)?;
    let out = dir.join(format!("level-{streams}"));
    let text = scenario(a, streams, &mock.url, &out);
    let r = pinned_run(
        exe,
        a.worker_core,
        &text,
        &out,
        &format!("the run at {streams} streams"),
    )
    .await?;
    let stats = mock_stats(&mock.url).await?;
    let first_late_ms = num(&stats, "/lateness/first_event_mean_us") / 1e3;
    let late_ms = num(&stats, "/lateness/mean_us") / 1e3;
    let tokens = num(&r, "/total_output_tokens") + num(&r, "/cicada/warmup/output_tokens");
    let cpu_us = r
        .pointer("/cicada/client/cpu_us")
        .and_then(serde_json::Value::as_f64);
    let all_tokens = num(&stats, "/output_tokens");
    Ok(Level {
        streams,
        held: stats["max_in_flight"].as_u64().unwrap_or(0),
        tokens_per_s: num(&r, "/output_throughput"),
        cpu_us_per_token: cpu_us
            .filter(|_| all_tokens > 0.0)
            .map(|c| c / all_tokens.max(tokens)),
        peak_rss_mb: r
            .pointer("/cicada/client/peak_rss_bytes")
            .and_then(serde_json::Value::as_f64)
            .map(|b| b / 1e6),
        mean_ttft_error_ms: num(&r, "/mean_ttft_ms") - (a.ttft_ms + first_late_ms),
        mean_itl_error_ms: num(&r, "/mean_itl_ms") - a.itl_ms,
        p99_itl_ms: num(&r, "/p99_itl_ms"),
        mock_mean_late_ms: late_ms,
        mock_p99_late_ms: num(&stats, "/lateness/p99_us") / 1e3,
        client_bound: r.pointer("/cicada/client/client_bound")
            == Some(&serde_json::Value::Bool(true)),
    })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
}

fn rss_scenario(requests: u64, url: &str, out: &Path) -> String {
    format!(
        r#"
name = "selftest-rss-{requests}"
[target]
backend = "openai-chat"
base_url = "{url}"
model = "cicada-mock"
ready_timeout = "0s"
[dataset]
input_len = 16
output_len = 4
[load]
users = 64
num_prompts = {requests}
pool_size = 1000
[output]
dir = "{out}"
"#,
        out = out.display(),
    )
}

/// Same load, different run lengths: peak RSS of the worker for each.
async fn rss_check(exe: &Path, a: &SelftestArgs, dir: &Path) -> anyhow::Result<()> {
    println!(
        "{:>12} {:>10} {:>12} {:>14}",
        "requests", "seconds", "req/s", "worker RSS MB"
    );
    for &requests in &a.rss_requests {
        let args = SelftestArgs {
            ttft_ms: 0.0,
            itl_ms: 0.0,
            output_tokens: 4,
            ..a.clone()
        };
        let mock = start_mock(exe, &args)?;
        let out = dir.join(format!("rss-{requests}"));
        let text = rss_scenario(requests, &mock.url, &out);
        let what = format!("the {requests}-request run");
        let r = pinned_run(exe, a.worker_core, &text, &out, &what).await?;
        println!(
            "{:>12} {:>10.1} {:>12.0} {:>14.1}",
            requests,
            num(&r, "/duration"),
            num(&r, "/request_throughput"),
            num(&r, "/cicada/client/peak_rss_bytes") / 1e6
        );
    }
    Ok(())
}

/// Run every level and print the table; returns the exit code.
pub async fn selftest(a: SelftestArgs) -> anyhow::Result<i32> {
    let exe = std::env::current_exe().context("locating coord")?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if a.mock_core >= cores || a.worker_core >= cores || a.mock_core == a.worker_core {
        bail!(
            "pick two different cores below {cores} with --mock-core and --worker-core (got {} and {})",
            a.mock_core,
            a.worker_core
        );
    }
    let dir = std::env::temp_dir().join(format!("cicada-selftest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if !a.rss_requests.is_empty() {
        println!(
            "cicada selftest: peak worker RSS for runs of different lengths (64 users, 4-token answers, mock on core {}, worker on core {})",
            a.mock_core, a.worker_core
        );
        rss_check(&exe, &a, &dir).await?;
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(0);
    }
    println!(
        "cicada selftest: mock on core {}, one worker on core {}; closed loop, {} output tokens, TTFT {} ms, gap {} ms",
        a.mock_core, a.worker_core, a.output_tokens, a.ttft_ms, a.itl_ms
    );
    println!(
        "{:>8} {:>8} {:>11} {:>10} {:>8} {:>13} {:>12} {:>9} {:>10} {:>9} {:>6}",
        "streams",
        "held",
        "tok/s",
        "cpu µs/tok",
        "RSS MB",
        "TTFT err ms",
        "ITL err ms",
        "ITL p99",
        "mock late",
        "mock p99",
        "bound"
    );
    let mut levels = Vec::new();
    for &streams in &a.levels {
        let l = run_level(&exe, &a, streams, &dir).await?;
        println!(
            "{:>8} {:>8} {:>11.0} {:>10} {:>8} {:>13.2} {:>12.2} {:>9.2} {:>10.2} {:>9.2} {:>6}",
            l.streams,
            l.held,
            l.tokens_per_s,
            opt(l.cpu_us_per_token, 2),
            opt(l.peak_rss_mb, 1),
            l.mean_ttft_error_ms,
            l.mean_itl_error_ms,
            l.p99_itl_ms,
            l.mock_mean_late_ms,
            l.mock_p99_late_ms,
            if l.client_bound { "client" } else { "-" },
        );
        levels.push(l);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "held: most streams the mock had open at once. TTFT err: reported mean TTFT minus (configured TTFT + the mock's own mean first-token lateness). mock late / mock p99: the mock's mean and p99 lateness behind its token schedule (its own error, not the client's; ITL p99 can be no better than gap + mock p99)."
    );
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_vec_pretty(&levels)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(0)
}
