//! `cicada selftest --http-rate`: requests per second per core on the mock's
//! non-streamed route, cicada beside the general HTTP load generators.
//!
//! (a) Fixed rates: the mock on `--mock-core` with a configured delay, the
//! client on `--worker-core`, an open loop at each rate for `--seconds`:
//! the rate achieved, the client's CPU per request (its process's user +
//! system time over every request the mock received) and its mean latency
//! minus the mock's delay. oha (`-q`) runs the same rate, request and cores.
//! (b) Closed loop: `--connections` users with no think time, the mock on
//! every core but the client's (so the server is not the limit where the
//! machine has cores to spare): the most requests per second; wrk the same.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::SelftestArgs;
use super::level::num;
use super::procs::{Mock, mock_stats, pinned_run, start_mock_on};
use super::tools::{LoadTools, oha, wrk};

/// Prompt words of the request (cicada's, oha's and wrk's).
const PROMPT_WORDS: usize = 8;

/// One side's figures at a fixed rate.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RateSide {
    /// Requests per second it achieved.
    pub achieved_rps: f64,
    /// Its process's CPU time per request the mock received, µs.
    pub cpu_us_per_request: Option<f64>,
    /// Its mean latency, ms.
    pub mean_latency_ms: f64,
    /// Mean latency minus the mock's configured delay, ms.
    pub latency_error_ms: f64,
    /// The mock's mean lateness behind its own schedule during the run, ms.
    pub mock_late_ms: f64,
}

/// One fixed rate: cicada, and oha when it ran.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RateRow {
    pub rate: u32,
    pub cicada: RateSide,
    pub oha: Option<RateSide>,
}

/// One side's figures in the closed loop.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClosedSide {
    /// Requests per second completed.
    pub rps: f64,
    /// Its process's CPU time per request the mock received, µs.
    pub cpu_us_per_request: Option<f64>,
}

/// The closed loop: cicada, and wrk when it ran.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClosedRow {
    pub connections: u32,
    pub mock_cores: Vec<usize>,
    pub cicada: ClosedSide,
    pub wrk: Option<ClosedSide>,
}

/// Everything `--http-rate` measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HttpRate {
    pub rates: Vec<RateRow>,
    pub closed: ClosedRow,
    /// Why oha and wrk did not run, when they did not.
    pub tools_skipped: Option<String>,
}

/// The request oha and wrk send: the body cicada's chat backend sends for
/// an 8-word prompt and one output token, not streamed (same fields, same size).
pub(super) fn body() -> String {
    let prompt = ["word"; PROMPT_WORDS].join(" ");
    serde_json::json!({
        "model": "cicada-mock",
        "messages": [{"role": "user", "content": prompt}],
        "max_completion_tokens": 1,
        "stream": false,
        "ignore_eos": true,
    })
    .to_string()
}

/// The chat route of `mock`.
pub(super) fn route(mock: &Mock) -> String {
    format!("{}/v1/chat/completions", mock.url)
}

fn scenario(url: &str, load: &str, out: &Path) -> String {
    format!(
        r#"
name = "selftest-http-rate"
seed = 1
[target]
backend = "openai-chat"
base_url = "{url}"
model = "cicada-mock"
ready_timeout = "0s"
stream = false
[dataset]
input_len = {PROMPT_WORDS}
output_len = 1
[load]
{load}
[output]
dir = "{out}"
"#,
        out = out.display(),
    )
}

/// Cores for the closed loop's mock: every core but the client's.
fn mock_cores(a: &SelftestArgs) -> Vec<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..cores).filter(|c| *c != a.worker_core).collect()
}

/// The mock's own lateness and request count after a run.
async fn mock_after(mock: &Mock) -> anyhow::Result<(f64, f64)> {
    let stats = mock_stats(mock).await?;
    Ok((
        num(&stats, "/lateness/mean_us") / 1e3,
        num(&stats, "/requests"),
    ))
}

fn per_request(cpu_us: Option<f64>, requests: f64) -> Option<f64> {
    cpu_us.filter(|_| requests > 0.0).map(|c| c / requests)
}

/// cicada at a fixed `rate` on a fresh mock.
async fn cicada_rate(
    exe: &Path,
    a: &SelftestArgs,
    dir: &Path,
    rate: u32,
) -> anyhow::Result<RateSide> {
    let mock = start_mock_on(exe, a.http_rate_delay_ms, &[a.mock_core])?;
    let out = dir.join(format!("rate-{rate}"));
    let load = format!("request_rate = {rate}\nduration = \"{}s\"", a.seconds);
    let what = format!("cicada at {rate} req/s");
    let r = pinned_run(
        exe,
        a.worker_core,
        &scenario(&mock.url, &load, &out),
        &out,
        &what,
    )
    .await?;
    let (late, requests) = mock_after(&mock).await?;
    let mean = num(&r, "/mean_e2el_ms");
    Ok(RateSide {
        achieved_rps: num(&r, "/cicada/achieved_request_rate"),
        cpu_us_per_request: per_request(
            r.pointer("/cicada/client/cpu_us")
                .and_then(serde_json::Value::as_f64),
            requests,
        ),
        mean_latency_ms: mean,
        latency_error_ms: mean - a.http_rate_delay_ms,
        mock_late_ms: late,
    })
}

/// oha at a fixed `rate` on a fresh mock.
async fn oha_rate(
    exe: &Path,
    a: &SelftestArgs,
    tools: &LoadTools,
    rate: u32,
) -> anyhow::Result<RateSide> {
    let mock = start_mock_on(exe, a.http_rate_delay_ms, &[a.mock_core])?;
    let o = oha(
        tools,
        &route(&mock),
        &body(),
        rate,
        a.connections,
        a.seconds,
        a.worker_core,
    )
    .await?;
    let (late, requests) = mock_after(&mock).await?;
    Ok(RateSide {
        achieved_rps: o.rps,
        cpu_us_per_request: per_request(Some(o.cpu_us), requests),
        mean_latency_ms: o.mean_latency_ms,
        latency_error_ms: o.mean_latency_ms - a.http_rate_delay_ms,
        mock_late_ms: late,
    })
}

/// The closed loop: cicada, then wrk, each on a fresh mock on `cores`.
async fn closed(
    exe: &Path,
    a: &SelftestArgs,
    dir: &Path,
    tools: Option<&LoadTools>,
) -> anyhow::Result<ClosedRow> {
    let cores = mock_cores(a);
    let mock = start_mock_on(exe, a.http_rate_closed_delay_ms, &cores)?;
    let out = dir.join("closed");
    let load = format!("users = {}\nduration = \"{}s\"", a.connections, a.seconds);
    let what = format!("cicada with {} users", a.connections);
    let r = pinned_run(
        exe,
        a.worker_core,
        &scenario(&mock.url, &load, &out),
        &out,
        &what,
    )
    .await?;
    let (_, requests) = mock_after(&mock).await?;
    drop(mock);
    let cicada = ClosedSide {
        rps: num(&r, "/request_throughput"),
        cpu_us_per_request: per_request(
            r.pointer("/cicada/client/cpu_us")
                .and_then(serde_json::Value::as_f64),
            requests,
        ),
    };
    let wrk = match tools {
        Some(t) => {
            let mock = start_mock_on(exe, a.http_rate_closed_delay_ms, &cores)?;
            let w = wrk(
                t,
                &route(&mock),
                &body(),
                a.connections,
                a.seconds,
                a.worker_core,
            )
            .await?;
            let (_, requests) = mock_after(&mock).await?;
            Some(ClosedSide {
                rps: w.rps,
                cpu_us_per_request: per_request(Some(w.cpu_us), requests),
            })
        }
        None => None,
    };
    Ok(ClosedRow {
        connections: a.connections,
        mock_cores: cores,
        cicada,
        wrk,
    })
}

/// The load tools to compare with, or why not (only `--no-load-tools`
/// skips them; missing tools are an error naming the install script).
fn find_tools(a: &SelftestArgs) -> anyhow::Result<Option<LoadTools>> {
    if a.no_load_tools {
        return Ok(None);
    }
    let dir = match &a.load_tools {
        Some(d) => d.clone(),
        None => LoadTools::default_dir().context("no home directory to find the load tools in")?,
    };
    LoadTools::find(&dir).map(Some)
}

/// Run every fixed rate and the closed loop, print the tables.
pub(super) async fn run(exe: &Path, a: &SelftestArgs, dir: &Path) -> anyhow::Result<HttpRate> {
    let tools = find_tools(a)?;
    println!(
        "cicada selftest --http-rate: the mock's non-streamed chat route, {PROMPT_WORDS}-word prompt, 1 output token; {} s per run; client on core {}",
        a.seconds, a.worker_core
    );
    let mut rates = Vec::new();
    for &rate in &a.rates {
        let cicada = cicada_rate(exe, a, dir, rate).await?;
        let oha = match &tools {
            Some(t) => Some(oha_rate(exe, a, t, rate).await?),
            None => None,
        };
        rates.push(RateRow { rate, cicada, oha });
    }
    let closed = closed(exe, a, dir, tools.as_ref()).await?;
    let skipped = tools
        .is_none()
        .then(|| "--no-load-tools: oha and wrk were not run; cicada's figures only".to_string());
    let result = HttpRate {
        rates,
        closed,
        tools_skipped: skipped,
    };
    print(a, &result);
    Ok(result)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    a.zip(b).filter(|(_, b)| *b > 0.0).map(|(a, b)| a / b)
}

fn print(a: &SelftestArgs, r: &HttpRate) {
    println!(
        "fixed rate (open loop): mock on core {} with a {} ms delay; oha -q at the same rate, -c {}",
        a.mock_core, a.http_rate_delay_ms, a.connections
    );
    println!(
        "{:>8} | {:>10} {:>10} {:>6} | {:>10} {:>10} {:>6} | {:>10} {:>10} | {:>9} {:>9}",
        "rate",
        "achieved",
        "oha",
        "ratio",
        "cpu µs/req",
        "oha",
        "ratio",
        "lat err ms",
        "oha",
        "mock late",
        "oha's"
    );
    for row in &r.rates {
        let (c, o) = (&row.cicada, row.oha.as_ref());
        println!(
            "{:>8} | {:>10.1} {:>10} {:>6} | {:>10} {:>10} {:>6} | {:>10.3} {:>10} | {:>9.3} {:>9}",
            row.rate,
            c.achieved_rps,
            opt(o.map(|o| o.achieved_rps), 1),
            opt(ratio(Some(c.achieved_rps), o.map(|o| o.achieved_rps)), 2),
            opt(c.cpu_us_per_request, 2),
            opt(o.and_then(|o| o.cpu_us_per_request), 2),
            opt(
                ratio(c.cpu_us_per_request, o.and_then(|o| o.cpu_us_per_request)),
                2
            ),
            c.latency_error_ms,
            opt(o.map(|o| o.latency_error_ms), 3),
            c.mock_late_ms,
            opt(o.map(|o| o.mock_late_ms), 3),
        );
    }
    let cl = &r.closed;
    let cores: Vec<String> = cl.mock_cores.iter().map(ToString::to_string).collect();
    println!(
        "closed loop: {} connections, no think time; mock on core(s) {} with a {} ms delay; wrk -t1 -c{}",
        cl.connections,
        cores.join(","),
        a.http_rate_closed_delay_ms,
        cl.connections
    );
    println!(
        "{:>8} | {:>10} {:>10} {:>6} | {:>10} {:>10} {:>6}",
        "conns", "req/s", "wrk", "ratio", "cpu µs/req", "wrk", "ratio"
    );
    let w = cl.wrk.as_ref();
    println!(
        "{:>8} | {:>10.0} {:>10} {:>6} | {:>10} {:>10} {:>6}",
        cl.connections,
        cl.cicada.rps,
        opt(w.map(|w| w.rps), 0),
        opt(ratio(Some(cl.cicada.rps), w.map(|w| w.rps)), 2),
        opt(cl.cicada.cpu_us_per_request, 2),
        opt(w.and_then(|w| w.cpu_us_per_request), 2),
        opt(
            ratio(
                cl.cicada.cpu_us_per_request,
                w.and_then(|w| w.cpu_us_per_request)
            ),
            2
        ),
    );
    println!(
        "achieved: requests per second over the run. cpu µs/req: the client process's user+system CPU time over every request the mock received (cicada: its worker, from /proc; oha and wrk: their rusage). lat err: mean latency minus the mock's configured delay. mock late: the mock's own mean lateness (the server's error, not the client's). ratio: cicada over the other tool."
    );
    if let Some(why) = &r.tools_skipped {
        println!("{why}");
    }
}

/// Write the figures as JSON when asked.
pub(super) fn write_json(path: Option<&PathBuf>, r: &HttpRate) -> anyhow::Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_vec_pretty(r)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
