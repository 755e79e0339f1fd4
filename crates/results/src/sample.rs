//! A finished step with something in every field, for tests of the writers
//! (and, with the `sample` feature, of the crates that read what they
//! write); and the byte-exact check of what the writers make of it against
//! files committed before the writers were rebuilt on typed documents.

use std::path::Path;

use cicada_metrics::{Counter, Metric, MetricSet, Outcome};
use cicada_scenarios::Scenario;

use super::RunResult;
use super::client_health::{ClientHealth, WorkerHealth};
use crate::server::{ServerFigures, ServerView};
use crate::{LostWorker, StartBasis, WorkerClock, WorkerShare};

/// A worker clock 1.5 s ahead of the coordinator's, measured on a LAN.
const SKEWED_CLOCK: WorkerClock = WorkerClock {
    offset_ms: -1500.25,
    uncertainty_ms: 0.35,
    min_rtt_ms: 0.69,
    samples: 16,
};

/// A result with `ok` successes (of which `good` met the SLO) and `failed` failures.
pub fn result(scenario: Scenario, ok: u64, good: u64, failed: u64) -> RunResult {
    let mut total = MetricSet::default();
    total.outcomes.add_n(Outcome::Ok, ok, None);
    if failed > 0 {
        total
            .outcomes
            .add_n(Outcome::Http(500), failed, Some("boom"));
    }
    total.counters.add(Counter::Goodput, good);
    RunResult {
        scenario,
        scenario_origin: "test".into(),
        scenario_hash: "h".into(),
        stage: 0,
        stage_name: String::new(),
        proxy_routes: Vec::new(),
        target: cicada_plan::ResolvedTarget {
            api: cicada_plan::WireApi::Chat,
            family: cicada_plan::ServerFamily::Mock,
            urls: vec!["http://t".into()],
            model: "m".into(),
            models: Vec::new(),
            model_assignment: Default::default(),
            headers: Default::default(),
            api_key_env: None,
            timeout_ms: 1,
            stream: true,
            routing: Default::default(),
            tls: Default::default(),
            keep_alive: true,
            http: cicada_plan::HttpVersion::Auto,
            addresses: cicada_plan::AddressChoice::First,
            proxy: cicada_plan::ProxySetting::Env,
            no_proxy: Vec::new(),
            max_event_bytes: 16 << 20,
        },
        workers: 1,
        per_target: vec![total.clone()],
        per_model: Vec::new(),
        per_workload: Vec::new(),
        total,
        warmup: MetricSet::default(),
        window_start_us: 0,
        rows: Vec::new(),
        lost: Vec::new(),
        worker_shares: Vec::new(),
        interrupted: None,
        planned: 0,
        started_unix: 0.0,
        dataset: Default::default(),
        server: Default::default(),
        client: None,
        hooks: Vec::new(),
        steady: None,
        saturated: None,
        aborted: None,
        skipped: Vec::new(),
    }
}

/// Samples of every latency metric, spread over a few decades (a
/// generation run: no pooling batch sizes).
fn measured(set: &mut MetricSet, n: u64, scale: u64) {
    for k in 0..n {
        let v = 1_000 + (k * scale * 7919) % 900_000;
        for (i, m) in Metric::ALL.iter().enumerate() {
            if *m == Metric::BatchSize {
                continue;
            }
            set.histogram_mut(*m).record(v + i as u64 * 17);
        }
        set.span.include(k * 1_000, k * 1_000 + v);
        set.seconds.bucket(k / 100).output_tokens += 10;
        set.seconds.bucket(k / 100).completed += 1;
        set.concurrency.add_span(1, k * 1_000, k * 1_000 + v);
    }
    set.counters.add(Counter::OutputTokens, n * 10);
    set.counters.add(Counter::InputTokens, n * 32);
    set.counters.add(Counter::ClientInputTokens, n * 31);
    set.counters.add(Counter::ServerInputTokens, n * 32);
    set.counters.add(Counter::ServerInputRequests, n);
    set.counters.add(Counter::TokensFromUsage, n);
    set.counters.add(Counter::RequestedOutputTokens, n * 12);
    set.counters.add(Counter::Resends, 2);
    set.counters.add(Counter::ResendsUnsent, 2);
    // every request reasoned (the reasoning metrics have a sample each)
    set.counters.add(Counter::ReasoningRequests, n);
    set.counters.add(Counter::ReasoningTokens, n * 4);
    set.counters.add(Counter::ReasoningTokensFromUsage, n);
}

/// A two-replica step of a sweep with a lost worker, a warm-up, gates,
/// client health, server figures and a secret header: every branch of the writers.
pub fn rich() -> RunResult {
    let mut s = Scenario {
        name: "rich".into(),
        ..Scenario::default()
    };
    s.load.max_concurrency = Some(8);
    s.load.burstiness = 0.5;
    s.output.metric_percentiles = vec![50.0, 99.0, 99.99];
    s.output.max_failure_ratio = Some(0.2);
    s.slo.ttft_ms = Some(100.0);
    s.slo.min_attainment = Some(0.5);
    s.sampling.temperature = Some(0.5);
    s.target.headers.insert("X-Api-Key".into(), "secret".into());
    s.target.headers.insert("X-Team".into(), "perf".into());
    s.tokenizer = Some(cicada_scenarios::scenario::TokenizerSpec {
        source: "tok/tokenizer.json".into(),
        verify_every: 16,
    });
    let mut r = result(s, 300, 200, 7);
    r.total.outcomes.add_n(Outcome::Timeout, 2, Some("slow"));
    r.total.outcomes.add_n(Outcome::Http(429), 1, Some("busy"));
    measured(&mut r.total, 300, 7);
    let mut a = r.total.clone();
    let mut b = MetricSet::default();
    a.outcomes = Default::default();
    a.outcomes.add_n(Outcome::Ok, 200, None);
    b.outcomes.add_n(Outcome::Ok, 100, None);
    b.outcomes.add_n(Outcome::Http(500), 7, Some("boom"));
    measured(&mut b, 100, 131);
    with_models(&mut r, [b.clone(), a.clone()]);
    r.per_target = vec![a, b];
    r.target.urls = vec![
        "http://a:1/v1/chat/completions".into(),
        "http://b:2/v1/chat/completions".into(),
    ];
    r.stage = 2;
    r.stage_name = "max_concurrency=8".into();
    r.scenario_hash = "0123456789ab".into();
    r.scenario_origin = "examples/rich.toml".into();
    r.workers = 2;
    r.planned = 320;
    r.started_unix = 1_700_000_000.25;
    r.window_start_us = 100_000;
    r.warmup.outcomes.add_n(Outcome::Ok, 4, None);
    r.warmup.counters.add(Counter::OutputTokens, 40);
    r.lost = vec![LostWorker {
        index: 1,
        host: "node-b".into(),
        at_s: 12.5,
        reason: "no heartbeat for 10s".into(),
        planned: 160,
        reported: 150,
        planned_sessions: 0,
        started_sessions: 0,
    }];
    r.worker_shares = vec![
        WorkerShare {
            index: 0,
            host: "node-a".into(),
            planned: 160,
            reported: 160,
            not_sent_at_end: 0,
            lost: false,
            threads: 2,
            version: "0.1.0".into(),
            clock: None,
            start_basis: None,
        },
        WorkerShare {
            index: 1,
            host: "node-b".into(),
            planned: 160,
            reported: 150,
            not_sent_at_end: 0,
            lost: true,
            threads: 2,
            version: "0.1.0".into(),
            clock: None,
            start_basis: None,
        },
    ];
    r.interrupted = Some("SIGINT");
    r.dataset = cicada_scenarios::dataset::DatasetReport {
        kind: "random".into(),
        read: 320,
        kept: 320,
        counted_with: "words".into(),
        ..Default::default()
    };
    let figures = ServerFigures {
        source: "vllm".into(),
        scrapes: 3,
        requests_finished: Some(300.0),
        prefix_cache_hit_rate: Some(0.25),
        spec_decode_per_position_acceptance_rates: Some(vec![0.9, 0.5]),
        ..Default::default()
    };
    r.server = ServerView {
        targets: vec![Some(figures.clone()), None],
        total: Some(figures),
    };
    r.client = Some(ClientHealth {
        cpu_us: 1_234_567,
        peak_rss_bytes: 45_000_000,
        stall_p50_ms: 0.25,
        stall_p99_ms: 1.5,
        stall_max_ms: 3.0,
        workers: vec![WorkerHealth {
            index: 0,
            threads: 2,
            cpu_us: 1_234_567,
            cpu_utilization: 0.125,
            peak_rss_bytes: 45_000_000,
            clock: Some(SKEWED_CLOCK),
            start_basis: Some(StartBasis::Offset),
        }],
        client_bound: true,
        reasons: vec!["worker 0 used 95 % of its 2 thread(s)' CPU".into()],
    });
    r
}

/// Two models sharing the run as `shares` say (the targets' shares, swapped).
fn with_models(r: &mut RunResult, shares: [MetricSet; 2]) {
    r.per_model = shares.to_vec();
    r.target.models = vec![
        cicada_plan::WeightedModel {
            name: "llama-lora-sql".into(),
            weight: 1.0,
            lora_id: None,
        },
        cicada_plan::WeightedModel {
            name: "llama-lora-chat".into(),
            weight: 2.0,
            lora_id: None,
        },
    ];
}

/// Committed output of the writers for [`rich`].
#[cfg(test)]
fn fixture(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Compare `actual` with the committed file at `path`, or write it there
/// with `CICADA_BLESS=1`; panics (for tests) naming the first line that differs.
pub fn check(path: &Path, actual: &str) {
    if std::env::var_os("CICADA_BLESS").is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create the fixture's directory");
        }
        std::fs::write(path, actual).expect("write the fixture");
        return;
    }
    let expected =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .map_or(expected.lines().count().min(actual.lines().count()), |l| l);
        panic!(
            "{} differs from line {}:\n expected: {:?}\n actual:   {:?}",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

#[test]
fn result_json_is_byte_for_byte_the_committed_one() {
    let doc = serde_json::to_string_pretty(&super::json::document(&rich())).unwrap();
    check(&fixture("result.json"), &format!("{doc}\n"));
    let plain = result(Scenario::default(), 3, 0, 0);
    let doc = serde_json::to_string_pretty(&super::json::document(&plain)).unwrap();
    check(&fixture("result-plain.json"), &format!("{doc}\n"));
}

#[test]
fn summary_csv_is_byte_for_byte_the_committed_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("summary.csv");
    for r in [rich(), result(Scenario::default(), 3, 0, 0)] {
        super::csv::append(&path, &super::csv::rows(&r)).unwrap();
    }
    check(
        &fixture("summary.csv"),
        &std::fs::read_to_string(&path).unwrap(),
    );
}

#[test]
fn the_console_block_is_byte_for_byte_the_committed_one() {
    let text = format!(
        "{}{}",
        super::console::render(&rich()),
        super::console::render(&result(Scenario::default(), 3, 0, 0))
    );
    check(&fixture("console.txt"), &text);
}
