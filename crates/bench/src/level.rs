//! One selftest level: the same closed-loop load from cicada's worker and
//! from the floor client, each against a fresh mock, and their figures.

use std::path::Path;
use std::time::Duration;

use super::SelftestArgs;
use super::floor::FloorFigures;
use super::procs::{Mock, first_wave_ms, mock_stats, pinned_floor, pinned_run, start_mock};

/// Levels up to this many streams start every stream at t=0 and count from
/// there (the start burst is part of what is measured); larger ones ramp up
/// at [`RAMP_RATE`] and count after a warm-up, since a burst of them would
/// overflow the kernel's accept queue (`net.core.somaxconn`).
pub(super) const BURST_UP_TO: u32 = 2048;
/// Streams started per second on larger levels.
const RAMP_RATE: f64 = 4096.0;

/// How a level starts its streams and which of its requests count.
#[derive(Debug, Clone, Copy)]
pub(super) struct Start {
    /// Streams started per second (`None`: all at t=0).
    pub spawn_rate: Option<f64>,
    /// Requests sent before this are warm-up.
    pub warmup: Duration,
    /// How long requests keep starting.
    pub duration: Duration,
}

/// How a level of `streams` starts, measured for `seconds`.
pub(super) fn start(streams: u32, seconds: u64) -> Start {
    if streams <= BURST_UP_TO {
        return Start {
            spawn_rate: None,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(seconds),
        };
    }
    let ramp = Duration::from_secs_f64(f64::from(streams) / RAMP_RATE).min(Duration::from_secs(2));
    let warmup = ramp + Duration::from_secs(1);
    Start {
        spawn_rate: Some(RAMP_RATE),
        warmup,
        duration: warmup + Duration::from_secs(seconds),
    }
}

/// The floor client's figures at one level, and cicada's against them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FloorLevel {
    /// Most streams the mock had open at once during the floor's run.
    pub held: u64,
    /// The floor's CPU per streamed token, µs.
    pub cpu_us_per_token: Option<f64>,
    /// The floor's mean TTFT minus the mock's delivered TTFT, ms.
    pub mean_ttft_error_ms: f64,
    /// The floor's mean ITL minus the configured gap, ms.
    pub mean_itl_error_ms: f64,
    /// The floor's p99 ITL, ms.
    pub p99_itl_ms: f64,
    /// The floor's p99 TTFT, ms.
    pub p99_ttft_ms: f64,
    /// cicada's p99 TTFT minus the floor's, ms (target: at most 3).
    pub p99_ttft_excess_ms: f64,
    /// The mock's mean and p99 lateness during the floor's run, ms.
    pub mock_mean_late_ms: f64,
    pub mock_p99_late_ms: f64,
    /// cicada's TTFT error minus the floor's, ms (target: at most 1.5).
    pub ttft_error_excess_ms: f64,
    /// cicada's TTFT error over the floor's.
    pub ttft_error_ratio: Option<f64>,
    /// cicada's p99 ITL over the floor's.
    pub p99_itl_ratio: Option<f64>,
    /// cicada's CPU per token over the floor's (target: at most 1.3).
    pub cpu_ratio: Option<f64>,
    /// The floor's first wave: from its start to the mock's `streams`-th arrival, ms.
    pub burst_ms: Option<f64>,
    /// cicada's first wave over the floor's.
    pub burst_ratio: Option<f64>,
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
    /// Reported p99 TTFT, ms (the tail the mean hides).
    pub p99_ttft_ms: f64,
    /// The mock's mean lateness behind its schedule, ms.
    pub mock_mean_late_ms: f64,
    /// The mock's p99 lateness: how much of the client's ITL p99 is the server's.
    pub mock_p99_late_ms: f64,
    /// The run flagged itself client-bound.
    pub client_bound: bool,
    /// How long the first wave (every stream's first request, all due at
    /// t=0) took to reach the mock, from the start barrier to the mock's last
    /// arrival of it, ms: what a start burst costs, seen from the server.
    /// Levels that ramp up have none.
    pub burst_ms: Option<f64>,
    /// The floor client at the same level (absent with `--no-floor`).
    pub floor: Option<FloorLevel>,
}

/// Whether the level also runs the floor client (plain HTTP/1.1 only).
pub(super) fn with_floor(a: &SelftestArgs) -> bool {
    !a.no_floor && !a.tls && a.http != "2"
}

fn scenario(a: &SelftestArgs, streams: u32, mock: &Mock, out: &Path) -> String {
    let url = &mock.url;
    let tls_ca = mock.ca.as_ref().map_or(String::new(), |ca| {
        format!("tls_ca = {:?}\n", ca.display().to_string())
    });
    let s = start(streams, a.seconds);
    let spawn = s
        .spawn_rate
        .map_or(String::new(), |r| format!("spawn_rate = {r}\n"));
    let warmup = if s.warmup.is_zero() {
        String::new()
    } else {
        format!("warmup = \"{}ms\"\n", s.warmup.as_millis())
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
http = "{http}"
{tls_ca}[dataset]
input_len = {input}
output_len = {tokens}
[load]
users = {streams}
duration = "{total}ms"
{spawn}{warmup}
[output]
dir = "{out}"
percentile_metrics = ["ttft", "itl"]
"#,
        input = super::INPUT_LEN,
        tokens = a.output_tokens,
        http = a.http,
        total = s.duration.as_millis(),
        out = out.display(),
    )
}

pub(super) fn num(v: &serde_json::Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0)
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

/// Run the level with cicada's worker (and the floor client, unless skipped).
pub(super) async fn run_level(
    exe: &Path,
    a: &SelftestArgs,
    streams: u32,
    dir: &Path,
) -> anyhow::Result<Level> {
    let floor = if with_floor(a) {
        let mock = start_mock(exe, a, dir)?;
        let f = pinned_floor(exe, a, streams, &mock.url).await?;
        let stats = mock_stats(&mock).await?;
        let burst = burst_ms(&mock, streams, f.start_unix_us).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        Some((f, stats, burst))
    } else {
        None
    };
    let mock = start_mock(exe, a, dir)?;
    let out = dir.join(format!("level-{streams}"));
    let text = scenario(a, streams, &mock, &out);
    let what = format!("the run at {streams} streams");
    let r = pinned_run(exe, a.worker_core, &text, &out, &what).await?;
    let stats = mock_stats(&mock).await?;
    let burst = burst_ms(&mock, streams, num(&r, "/cicada/started_unix") * 1e6).await?;
    let first_late_ms = num(&stats, "/lateness/first_event_mean_us") / 1e3;
    let tokens = num(&r, "/total_output_tokens") + num(&r, "/cicada/warmup/output_tokens");
    let cpu_us = r
        .pointer("/cicada/client/cpu_us")
        .and_then(serde_json::Value::as_f64);
    let all_tokens = num(&stats, "/output_tokens");
    let mut level = Level {
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
        p99_ttft_ms: num(&r, "/p99_ttft_ms"),
        mock_mean_late_ms: num(&stats, "/lateness/mean_us") / 1e3,
        mock_p99_late_ms: num(&stats, "/lateness/p99_us") / 1e3,
        client_bound: r.pointer("/cicada/client/client_bound")
            == Some(&serde_json::Value::Bool(true)),
        burst_ms: burst,
        floor: None,
    };
    level.floor = floor.map(|(f, stats, burst)| compare(a, &level, &f, &stats, burst));
    Ok(level)
}

/// The first wave's time onto the wire at a level that starts every stream
/// at once, from the client's start instant (Unix µs).
async fn burst_ms(mock: &Mock, streams: u32, start_unix_us: f64) -> anyhow::Result<Option<f64>> {
    if start(streams, 0).spawn_rate.is_some() {
        return Ok(None);
    }
    first_wave_ms(&mock.http, &mock.url, streams, start_unix_us).await
}

/// The floor's figures in the selftest's terms, and cicada's against them.
fn compare(
    a: &SelftestArgs,
    cicada: &Level,
    f: &FloorFigures,
    stats: &serde_json::Value,
    burst_ms: Option<f64>,
) -> FloorLevel {
    let first_late_ms = num(stats, "/lateness/first_event_mean_us") / 1e3;
    let tokens = num(stats, "/output_tokens");
    let ttft_err = f.mean_ttft_ms - (a.ttft_ms + first_late_ms);
    let cpu = (tokens > 0.0).then(|| f.cpu_us / tokens);
    FloorLevel {
        held: stats["max_in_flight"].as_u64().unwrap_or(0),
        cpu_us_per_token: cpu,
        mean_ttft_error_ms: ttft_err,
        mean_itl_error_ms: f.mean_itl_ms - a.itl_ms,
        p99_itl_ms: f.p99_itl_ms,
        p99_ttft_ms: f.p99_ttft_ms,
        p99_ttft_excess_ms: cicada.p99_ttft_ms - f.p99_ttft_ms,
        mock_mean_late_ms: num(stats, "/lateness/mean_us") / 1e3,
        mock_p99_late_ms: num(stats, "/lateness/p99_us") / 1e3,
        ttft_error_excess_ms: cicada.mean_ttft_error_ms - ttft_err,
        ttft_error_ratio: ratio(cicada.mean_ttft_error_ms, ttft_err),
        p99_itl_ratio: ratio(cicada.p99_itl_ms, f.p99_itl_ms),
        cpu_ratio: cicada
            .cpu_us_per_token
            .zip(cpu)
            .and_then(|(c, f)| ratio(c, f)),
        burst_ms,
        burst_ratio: cicada.burst_ms.zip(burst_ms).and_then(|(c, f)| ratio(c, f)),
    }
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
pub(super) async fn rss_check(exe: &Path, a: &SelftestArgs, dir: &Path) -> anyhow::Result<()> {
    println!(
        "{:>12} {:>10} {:>12} {:>14}",
        "requests", "seconds", "req/s", "worker RSS MB"
    );
    for &requests in &a.rss_requests {
        let args = SelftestArgs {
            ttft_ms: 0.0,
            itl_ms: 0.0,
            output_tokens: 4,
            tls: false,
            ..a.clone()
        };
        let mock = start_mock(exe, &args, dir)?;
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
