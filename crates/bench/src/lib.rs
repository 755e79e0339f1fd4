//! `cicada selftest`: how much load can this machine's client generate, and how
//! exactly does it measure it?
//!
//! For each concurrency level it starts the built-in mock pinned to one core
//! and a one-worker closed-loop run pinned to another, then prints what the
//! client achieved (streamed tokens/s, streams the mock really held), what it
//! cost (worker CPU µs per token, peak RSS) and how far its measurements were
//! from the mock's truth (reported TTFT and ITL minus configured timing and
//! the mock's own measured lateness).
//!
//! Beside it, the same level runs once more with the floor client (`floor`):
//! a bare hyper client on the same mock and cores, the least any client can
//! do, so cicada's error and cost are shown against what is reachable here.

mod fleet;
mod floor;
mod level;
mod memory;
mod procs;
mod rate;
mod sim;
mod startup;
mod tools;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

pub use level::Level;

/// Prompt words per request (cicada's and the floor's).
const INPUT_LEN: u32 = 32;

/// `cicada selftest` options.
#[derive(Debug, Clone)]
pub struct SelftestArgs {
    /// Concurrent streams (closed-loop users) to try, in order.
    pub levels: Vec<u32>,
    /// Measured seconds per level (after a ramp of up to 2 s).
    pub seconds: u64,
    /// Output tokens per request.
    pub output_tokens: u32,
    /// The mock's time to first token, ms.
    pub ttft_ms: f64,
    /// The mock's gap between tokens, ms.
    pub itl_ms: f64,
    /// Core the mock is pinned to.
    pub mock_core: usize,
    /// Core the coordinator and its worker are pinned to.
    pub worker_core: usize,
    /// Also write the figures as JSON to this file.
    pub json: Option<PathBuf>,
    /// Instead of the levels: run the same load for each of these request
    /// counts and compare the worker's peak RSS (memory must not grow with run length).
    pub rss_requests: Vec<u64>,
    /// Instead of the levels: this many multi-turn sessions all in flight
    /// at once, for each count; the worker's peak RSS and its share per session.
    pub sessions: Vec<u64>,
    /// Instead of the levels: prompts of these many tokens, each at every
    /// level of streams; peak worker RSS and TTFT error per length.
    pub prompt_tokens: Vec<u32>,
    /// Skip the floor client (cicada's figures only).
    pub no_floor: bool,
    /// Serve the mock over TLS (a CA and a certificate made for the run)
    /// and run cicada over https: what TLS costs the client, and that its
    /// receive stamps stay the kernel's. The floor client speaks plain
    /// HTTP/1.1 only, so its table is left out.
    pub tls: bool,
    /// The HTTP version cicada speaks (`target.http`): "1.1", "2" (over
    /// plain TCP: h2c) or "auto".
    pub http: String,
    /// Instead of the levels: measure the coordinator's cost per worker with
    /// this many simulated workers (e.g. 64,256,1024), each sending a
    /// realistic report once a second for --seconds.
    pub fleet: Vec<u32>,
    /// Internal: be the simulated fleet of the first --fleet size for the
    /// coordinator at this URL (the selftest runs itself so).
    pub fleet_sim: Option<String>,
    /// Instead of the levels: requests per second per core on the mock's
    /// non-streamed route, at fixed rates (--rates) and in a closed loop
    /// (--connections), beside oha and wrk (scripts/load-tools.sh installs them).
    pub http_rate: bool,
    /// --http-rate: the fixed rates, requests per second.
    pub rates: Vec<u32>,
    /// --http-rate: closed-loop users (wrk's and oha's connections).
    pub connections: u32,
    /// --http-rate: the mock's delay before each answer at the fixed rates, ms.
    pub http_rate_delay_ms: f64,
    /// --http-rate: the mock's delay in the closed loop, ms.
    pub http_rate_closed_delay_ms: f64,
    /// --http-rate: where scripts/load-tools.sh installed oha and wrk
    /// (default: its directory under ~/.cache/cicada).
    pub load_tools: Option<PathBuf>,
    /// --http-rate: measure cicada alone, without oha and wrk (the output says so).
    pub no_load_tools: bool,
    /// Internal: be the floor client for the first level against this mock
    /// and print its figures as one JSON line (the selftest runs itself so).
    pub floor_url: Option<String>,
    /// Instead of the levels: the start-up of a run with a big random
    /// dataset (--prompts of --input-len tokens) for each of --startup-workers:
    /// time to the dataset, to the first request, peak RSS.
    pub startup: bool,
    /// --startup: prompts in the pool.
    pub prompts: u64,
    /// --startup: tokens per prompt.
    pub input_len: u32,
    /// --startup: local worker counts to try, in order.
    pub startup_workers: Vec<u32>,
    /// --startup: the tokenizer (default: the repository's fixture).
    pub tokenizer: Option<PathBuf>,
}

/// Be the floor client for one level (the selftest runs itself so) and
/// print its figures as one JSON line.
async fn floor_process(a: &SelftestArgs, url: &str) -> anyhow::Result<()> {
    let streams = *a
        .levels
        .first()
        .context("the floor client needs one level")?;
    let s = level::start(streams, a.seconds);
    let figures = floor::run(floor::FloorLevel {
        url: url.to_string(),
        streams,
        spawn_rate: s.spawn_rate,
        duration: s.duration,
        warmup: s.warmup,
        output_tokens: a.output_tokens,
        input_len: INPUT_LEN,
    })
    .await?;
    println!("{}", serde_json::to_string(&figures)?);
    Ok(())
}

/// `cicada selftest`: run every level and print the tables.
pub async fn selftest(a: SelftestArgs) -> anyhow::Result<()> {
    if let Some(url) = &a.floor_url {
        return floor_process(&a, url).await;
    }
    if let Some(url) = &a.fleet_sim {
        return fleet::sim_process(&a, url).await;
    }
    let exe = std::env::current_exe().context("locating the cicada executable")?;
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
    if !a.fleet.is_empty() {
        let result = fleet::run(&exe, &a, &dir).await;
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    if a.startup {
        let result = startup::run(&exe, &a, &dir).await;
        let _ = std::fs::remove_dir_all(&dir);
        let figures = result?;
        if let Some(path) = &a.json {
            std::fs::write(path, serde_json::to_vec_pretty(&figures)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        return Ok(());
    }
    if a.http_rate {
        let result = rate::run(&exe, &a, &dir).await;
        let _ = std::fs::remove_dir_all(&dir);
        rate::write_json(a.json.as_ref(), &result?)?;
        return Ok(());
    }
    if !a.sessions.is_empty() || !a.prompt_tokens.is_empty() {
        let result = if a.sessions.is_empty() {
            memory::prompts_check(&exe, &a, &dir).await
        } else {
            memory::sessions_check(&exe, &a, &dir).await
        };
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    if !a.rss_requests.is_empty() {
        println!(
            "cicada selftest: peak worker RSS for runs of different lengths (64 users, 4-token answers, mock on core {}, worker on core {})",
            a.mock_core, a.worker_core
        );
        level::rss_check(&exe, &a, &dir).await?;
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    println!(
        "cicada selftest: mock on core {}, one worker on core {}; {}, HTTP {}; closed loop, {} output tokens, TTFT {} ms, gap {} ms; up to {} streams all start at t=0 and every request counts",
        a.mock_core,
        a.worker_core,
        if a.tls { "https" } else { "plain http" },
        a.http,
        a.output_tokens,
        a.ttft_ms,
        a.itl_ms,
        level::BURST_UP_TO
    );
    println!(
        "{:>8} {:>8} {:>11} {:>10} {:>8} {:>13} {:>9} {:>12} {:>9} {:>10} {:>9} {:>9} {:>6}",
        "streams",
        "held",
        "tok/s",
        "cpu µs/tok",
        "RSS MB",
        "TTFT err ms",
        "TTFT p99",
        "ITL err ms",
        "ITL p99",
        "mock late",
        "mock p99",
        "burst ms",
        "bound"
    );
    let mut levels = Vec::new();
    for &streams in &a.levels {
        let l = level::run_level(&exe, &a, streams, &dir).await?;
        println!(
            "{:>8} {:>8} {:>11.0} {:>10} {:>8} {:>13.2} {:>9.2} {:>12.2} {:>9.2} {:>10.2} {:>9.2} {:>9} {:>6}",
            l.streams,
            l.held,
            l.tokens_per_s,
            opt(l.cpu_us_per_token, 2),
            opt(l.peak_rss_mb, 1),
            l.mean_ttft_error_ms,
            l.p99_ttft_ms,
            l.mean_itl_error_ms,
            l.p99_itl_ms,
            l.mock_mean_late_ms,
            l.mock_p99_late_ms,
            opt(l.burst_ms, 1),
            if l.client_bound { "client" } else { "-" },
        );
        levels.push(l);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "held: most streams the mock had open at once. TTFT err: reported mean TTFT minus (configured TTFT + the mock's own mean first-token lateness). TTFT p99: reported p99 TTFT, ms (configured TTFT included). mock late / mock p99: the mock's mean and p99 lateness behind its token schedule (its own error, not the client's; ITL p99 can be no better than gap + mock p99). burst ms: from the start to the mock's last arrival of the first wave (every stream's first request, all due at t=0)."
    );
    if level::with_floor(&a) {
        print_floor_table(&levels);
    }
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_vec_pretty(&levels)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// cicada beside the floor client, level by level, with the ratios the targets are set on.
fn print_floor_table(levels: &[Level]) {
    println!();
    println!("against the floor client (bare hyper, one task per stream, same mock and cores):");
    println!(
        "{:>8} | {:>9} {:>9} {:>7} | {:>9} {:>9} {:>7} | {:>9} {:>9} {:>6} | {:>9} {:>9} {:>6} | {:>8} {:>7} {:>6} | {:>10}",
        "streams",
        "TTFT err",
        "floor",
        "excess",
        "TTFT p99",
        "floor",
        "excess",
        "ITL p99",
        "floor",
        "ratio",
        "cpu µs/tk",
        "floor",
        "ratio",
        "burst ms",
        "floor",
        "ratio",
        "floor late"
    );
    for l in levels {
        let Some(f) = &l.floor else { continue };
        println!(
            "{:>8} | {:>9.2} {:>9.2} {:>7.2} | {:>9.2} {:>9.2} {:>7.2} | {:>9.2} {:>9.2} {:>6} | {:>9} {:>9} {:>6} | {:>8} {:>7} {:>6} | {:>10.2}",
            l.streams,
            l.mean_ttft_error_ms,
            f.mean_ttft_error_ms,
            f.ttft_error_excess_ms,
            l.p99_ttft_ms,
            f.p99_ttft_ms,
            f.p99_ttft_excess_ms,
            l.p99_itl_ms,
            f.p99_itl_ms,
            opt(f.p99_itl_ratio, 2),
            opt(l.cpu_us_per_token, 2),
            opt(f.cpu_us_per_token, 2),
            opt(f.cpu_ratio, 2),
            opt(l.burst_ms, 1),
            opt(f.burst_ms, 1),
            opt(f.burst_ratio, 2),
            f.mock_mean_late_ms,
        );
    }
    println!(
        "TTFT err in ms as above, excess = cicada's minus the floor's (target: at most 1.5 ms; at 2,048 streams at most 1.5x the floor's). TTFT p99: cicada's and the floor's p99 TTFT, excess = the difference (target: at most 3 ms). ratio = cicada over the floor (CPU target: at most 1.3). burst ms: the first wave onto the wire as above, cicada's and the floor's. floor late: the mock's mean lateness during the floor's run."
    );
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
}
