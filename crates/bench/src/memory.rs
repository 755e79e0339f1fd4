//! What the client holds: peak worker RSS with thousands of sessions in
//! flight (`--sessions`: their histories must be shared, not copied per
//! turn) and with long prompts at many streams (`--prompt-tokens`: prompts
//! shared with the pool, never copied per request), beside the TTFT error
//! that shows no long-context cliff.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cicada_client::backend::{ApiCodec, Ask, SharedBody};
use cicada_client::clock::Clock;
use cicada_client::exchange::{Conduit, perform};
use cicada_client::http::{Client, Headers};
use cicada_request::{Prompt, ResolvedSampling, ServerFamily, TlsSettings, WireApi};

use super::SelftestArgs;
use super::level::num;
use super::procs::{load_1m, mock_stats, pinned_run, start_mock};

/// Turns of every session of `--sessions`.
const SESSION_TURNS: u32 = 5;
/// Tokens of a session's first user message.
const FIRST_TURN_TOKENS: u32 = 1024;
/// Tokens each later user message adds.
const PER_TURN_TOKENS: u32 = 128;
/// Output tokens per turn.
const SESSION_OUTPUT: u32 = 8;
/// Pause between a turn's answer and the next turn, s.
const THINK_S: u32 = 5;
/// Distinct prompts of `--prompt-tokens` at most (a pool of 1,400 8k-token
/// prompts takes a debug coordinator over the worker's 10 s silence limit
/// to ship on a busy machine).
const PROMPT_POOL: u32 = 200;
/// The mock's TTFT and gap for `--sessions`, ms.
const SESSION_MOCK_MS: f64 = 100.0;

/// The machine's 1-minute load average as printed ("-" when unknown).
fn load() -> String {
    load_1m().map_or_else(|| "-".into(), |l| format!("{l:.2}"))
}

fn sessions_scenario(sessions: u64, url: &str, out: &Path) -> String {
    format!(
        r#"
name = "selftest-sessions-{sessions}"
seed = 1
[target]
backend = "openai-chat"
base_url = "{url}"
model = "cicada-mock"
ready_timeout = "0s"
timeout = "10m"
[dataset]
kind = "multi_turn"
turns = {SESSION_TURNS}
input_len = {FIRST_TURN_TOKENS}
per_turn_input_len = {PER_TURN_TOKENS}
output_len = {SESSION_OUTPUT}
think_time = "{THINK_S}s"
[load]
num_prompts = {sessions}
max_concurrency = {sessions}
[output]
dir = "{out}"
"#,
        out = out.display(),
    )
}

/// `--sessions`: every session in flight at once, each of
/// [`SESSION_TURNS`] turns; the worker's peak RSS, per session.
pub(super) async fn sessions_check(exe: &Path, a: &SelftestArgs, dir: &Path) -> anyhow::Result<()> {
    println!(
        "cicada selftest: peak worker RSS with every session in flight (one worker on core {}, mock on core {}: TTFT {SESSION_MOCK_MS} ms, gap {SESSION_MOCK_MS} ms); {SESSION_TURNS} turns of {FIRST_TURN_TOKENS} + {}x{PER_TURN_TOKENS} input tokens, {SESSION_OUTPUT} output tokens, think time {THINK_S} s",
        a.worker_core,
        a.mock_core,
        SESSION_TURNS - 1,
    );
    println!(
        "{:>9} {:>7} {:>7} {:>9} {:>14} {:>13} {:>6}",
        "sessions", "turns", "failed", "seconds", "worker RSS MB", "KB/session", "load"
    );
    for &sessions in &a.sessions {
        let args = SelftestArgs {
            ttft_ms: SESSION_MOCK_MS,
            itl_ms: SESSION_MOCK_MS,
            output_tokens: SESSION_OUTPUT,
            tls: false,
            ..a.clone()
        };
        let mock = start_mock(exe, &args, dir)?;
        let out = dir.join(format!("sessions-{sessions}"));
        let text = sessions_scenario(sessions, &mock.url, &out);
        let what = format!("the run of {sessions} sessions");
        let r = pinned_run(exe, a.worker_core, &text, &out, &what).await?;
        let rss = num(&r, "/cicada/client/peak_rss_bytes");
        println!(
            "{:>9} {:>7} {:>7} {:>9.1} {:>14.1} {:>13.1} {:>6}",
            sessions,
            num(&r, "/completed") + num(&r, "/failed"),
            num(&r, "/failed"),
            num(&r, "/duration"),
            rss / 1e6,
            rss / 1e3 / sessions.max(1) as f64,
            load(),
        );
    }
    println!(
        "turns: requests sent (every turn of every session when none failed). KB/session: peak worker RSS over the sessions (the worker's fixed cost included). load: the 1-minute load average after the run."
    );
    Ok(())
}

fn prompt_scenario(a: &SelftestArgs, tokens: u32, streams: u32, url: &str, out: &Path) -> String {
    format!(
        r#"
name = "selftest-prompt-{tokens}"
seed = 1
[target]
backend = "openai"
base_url = "{url}"
model = "cicada-mock"
ready_timeout = "0s"
timeout = "10m"
http = "{http}"
[dataset]
input_len = {tokens}
output_len = {output}
[load]
users = {streams}
duration = "{seconds}s"
pool_size = {pool}
[output]
dir = "{out}"
percentile_metrics = ["ttft", "itl"]
"#,
        http = a.http,
        pool = streams.min(PROMPT_POOL),
        output = a.output_tokens,
        seconds = a.seconds,
        out = out.display(),
    )
}

/// `--prompt-tokens`: for each prompt length, every level of streams in a
/// closed loop (as many distinct prompts as streams, up to [`PROMPT_POOL`]); peak worker RSS and
/// the TTFT error against the mock's truth.
pub(super) async fn prompts_check(exe: &Path, a: &SelftestArgs, dir: &Path) -> anyhow::Result<()> {
    println!(
        "cicada selftest: long prompts (openai completions, closed loop, {} output tokens, mock TTFT {} ms, gap {} ms; at most {PROMPT_POOL} distinct prompts; mock on core {}, one worker on core {})",
        a.output_tokens, a.ttft_ms, a.itl_ms, a.mock_core, a.worker_core
    );
    println!(
        "{:>8} {:>8} {:>9} {:>13} {:>13} {:>10} {:>14} {:>9} {:>9} {:>6}",
        "tokens",
        "streams",
        "requests",
        "input tok/req",
        "TTFT err ms",
        "TTFT p99",
        "worker RSS MB",
        "send ms",
        "send p99",
        "load"
    );
    for &tokens in &a.prompt_tokens {
        for &streams in &a.levels {
            let mock = start_mock(exe, a, dir)?;
            let out = dir.join(format!("prompt-{tokens}-{streams}"));
            let text = prompt_scenario(a, tokens, streams, &mock.url, &out);
            let what = format!("the run of {tokens}-token prompts at {streams} streams");
            let r = pinned_run(exe, a.worker_core, &text, &out, &what).await?;
            let stats = mock_stats(&mock).await?;
            let first_late_ms = num(&stats, "/lateness/first_event_mean_us") / 1e3;
            let requests = num(&r, "/completed");
            drop(mock);
            let mock = start_mock(exe, a, dir)?;
            let send = send_cost(a, &mock.url, tokens, streams).await?;
            println!(
                "{:>8} {:>8} {:>9} {:>13.0} {:>13.2} {:>10.2} {:>14.1} {:>9.3} {:>9.3} {:>6}",
                tokens,
                streams,
                requests,
                num(&r, "/total_input_tokens") / requests.max(1.0),
                num(&r, "/mean_ttft_ms") - (a.ttft_ms + first_late_ms),
                num(&r, "/p99_ttft_ms"),
                num(&r, "/cicada/client/peak_rss_bytes") / 1e6,
                send.mean_ms,
                send.p99_ms,
                load(),
            );
        }
    }
    println!(
        "input tok/req: prompt tokens per request as the server counted them. send ms / send p99: the client's cost to send a request, from the start of its attempt to the body's last byte handed to the socket (cicada's HTTP/1.1 writer in this process, the same streams and prompts on a fresh mock, mean and p99). TTFT err: reported mean TTFT minus (configured TTFT + the mock's own mean first-token lateness). load: the 1-minute load average after the run."
    );
    Ok(())
}

/// The send cost of one prompt length: mean and p99 over every request.
struct SendCost {
    mean_ms: f64,
    p99_ms: f64,
}

/// Send cost measured around cicada's writer in this process: `streams`
/// closed-loop streams of `tokens`-token prompts (the bodies prebuilt and
/// shared as a worker's are) for `--seconds`; each request's time from the
/// start of its attempt to its last byte handed to the socket.
async fn send_cost(
    a: &SelftestArgs,
    url: &str,
    tokens: u32,
    streams: u32,
) -> anyhow::Result<SendCost> {
    let http = Client::new(&TlsSettings::default(), true)?;
    let endpoint = Arc::new(http.endpoint(&format!("{url}/v1/completions"))?);
    let codec = Arc::new(ApiCodec::new(
        WireApi::Completions,
        ServerFamily::Mock,
        "cicada-mock".into(),
        ResolvedSampling::default(),
        true,
    ));
    let bodies: Arc<Vec<SharedBody>> = Arc::new(
        (0..streams.min(PROMPT_POOL))
            .map(|i| {
                let text: String = (0..tokens).map(|k| format!("w{} ", (k + i) % 97)).collect();
                codec.shared_body(&Ask {
                    prompt: Prompt::Text(text.into()),
                    media: Default::default(),
                    output_tokens: Some(a.output_tokens),
                    structured: None,
                })
            })
            .collect(),
    );
    let clock = Clock::new(tokio::time::Instant::now());
    let until = Duration::from_secs(a.seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for stream in 0..streams {
        let (http, endpoint, codec, bodies) = (
            http.clone(),
            endpoint.clone(),
            codec.clone(),
            bodies.clone(),
        );
        tasks.spawn(async move {
            let headers = Headers::default();
            let mut costs = Vec::new();
            let mut k = stream as usize;
            while clock.now_us() < until.as_micros() as u64 {
                let conduit = Conduit {
                    http: &http,
                    headers: &headers,
                    codec: &codec,
                    clock: &clock,
                    timeout: Duration::from_secs(600),
                    keep_text: false,
                    keep_output: false,
                };
                let body = &bodies[k % bodies.len()];
                let ex = perform(conduit, &endpoint, "cicada-send-cost", body.parts()).await;
                if let Some(w) = ex.written_us.filter(|_| ex.failure.is_none()) {
                    costs.push(w.saturating_sub(ex.sent_us));
                }
                k += streams as usize;
            }
            costs
        });
    }
    let mut all = Vec::new();
    while let Some(costs) = tasks.join_next().await {
        all.extend(costs.context("a send-cost stream")?);
    }
    all.sort_unstable();
    anyhow::ensure!(!all.is_empty(), "no request of {tokens} tokens completed");
    let mean_us = all.iter().sum::<u64>() as f64 / all.len() as f64;
    let p99_us = all[(all.len() * 99 / 100).min(all.len() - 1)] as f64;
    Ok(SendCost {
        mean_ms: mean_us / 1e3,
        p99_ms: p99_us / 1e3,
    })
}
