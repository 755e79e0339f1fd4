//! Judging arrival timing on a busy machine.
//!
//! A test that compares when the mock saw requests against a fixed bound in
//! milliseconds fails whenever the machine is busy. These helpers take every
//! request's timing apart instead, from what each side measured:
//!
//! - the schedule: `scheduled_us` in `requests.jsonl`, exact and the same for
//!   any worker count;
//! - the dispatch: `sent_us − scheduled_us`, cicada's own schedule lag, which
//!   it reports whatever it is;
//! - the path to the server: the mock's arrival minus `sent_us`, less a
//!   constant per worker (where that worker's start barrier falls on the
//!   mock's clock), which is what a busy machine disturbs and is judged
//!   against the mock's own measured lateness: the mock's runtime picks up a
//!   request as late as it writes a token.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// One request as the worker scheduled and sent it and the mock saw it arrive.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// Global request index.
    pub index: u64,
    pub worker: u64,
    /// Intended send, µs after the worker's barrier.
    pub scheduled_us: u64,
    /// Actual send, µs after the worker's barrier.
    pub sent_us: u64,
    /// Output tokens asked for (identifies trace records).
    pub requested_output_tokens: Option<u64>,
    /// The prompt's fingerprint, as the mock logged it.
    pub fingerprint: u64,
    /// Arrival at the mock minus `sent_us`, less the worker's median of the
    /// same (its barrier on the mock's clock), µs; see [`raw_arrivals`].
    pub path_us: f64,
}

impl Arrival {
    /// cicada's schedule lag for this request, µs.
    pub fn lag_us(&self) -> f64 {
        self.sent_us as f64 - self.scheduled_us as f64
    }
}

/// The request index in an `x-request-id` of `cicada-<run>-<index>`.
fn index_of(logged: &Value) -> u64 {
    logged["request_id"]
        .as_str()
        .and_then(|id| id.rsplit('-').next())
        .and_then(|i| i.parse().ok())
        .unwrap_or_else(|| panic!("a logged request without a cicada request id: {logged}"))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Join the worker's records (`requests.jsonl`) with the mock's log, by
/// index, each worker's barrier offset removed from `path_us`.
pub fn arrivals(mock_log: &[Value], requests_jsonl: &Path) -> Vec<Arrival> {
    let mut out = raw_arrivals(mock_log, requests_jsonl);
    let offsets = barrier_offsets(&out);
    for a in &mut out {
        a.path_us -= offsets[&a.worker];
    }
    out
}

/// Where each worker's start barrier fell on the mock's clock (plus the
/// loopback path, the same for every worker): the median over its requests
/// of arrival minus `sent_us`, µs, from [`raw_arrivals`].
pub fn barrier_offsets(raw: &[Arrival]) -> BTreeMap<u64, f64> {
    let mut by_worker: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for a in raw {
        by_worker.entry(a.worker).or_default().push(a.path_us);
    }
    by_worker
        .into_iter()
        .map(|(w, mut v)| (w, median(&mut v)))
        .collect()
}

/// [`arrivals`] with `path_us` the mock's arrival minus `sent_us` as is
/// (the worker's barrier offset still in it), sorted by index.
pub fn raw_arrivals(mock_log: &[Value], requests_jsonl: &Path) -> Vec<Arrival> {
    let arrived: BTreeMap<u64, &Value> = mock_log.iter().map(|r| (index_of(r), r)).collect();
    let text = std::fs::read_to_string(requests_jsonl)
        .unwrap_or_else(|e| panic!("{}: {e}", requests_jsonl.display()));
    let mut out: Vec<Arrival> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["warmup"] != Value::Bool(true))
        .map(|r| {
            let index = r["index"].as_u64().unwrap();
            let seen = arrived
                .get(&index)
                .unwrap_or_else(|| panic!("request {index} never reached the mock"));
            let sent_us = r["sent_us"].as_u64().unwrap();
            Arrival {
                index,
                worker: r["worker"].as_u64().unwrap(),
                scheduled_us: r["scheduled_us"].as_u64().unwrap(),
                sent_us,
                requested_output_tokens: r["requested_output_tokens"].as_u64(),
                fingerprint: seen["prompt_fingerprint"].as_u64().unwrap(),
                path_us: seen["offset_us"].as_f64().unwrap() - sent_us as f64,
            }
        })
        .collect();
    out.sort_by_key(|a| a.index);
    out
}

/// How late the mock was behind its own token schedule (`/mock/stats`), µs.
#[derive(Debug, Clone, Copy)]
pub struct MockLateness {
    pub mean_us: f64,
    pub p99_us: f64,
}

impl MockLateness {
    /// From the mock's `/mock/stats`.
    pub fn of(stats: &Value) -> Self {
        let l = &stats["lateness"];
        Self {
            mean_us: l["mean_us"].as_f64().unwrap_or(0.0),
            p99_us: l["p99_us"].as_f64().unwrap_or(0.0),
        }
    }
}

/// Check that requests went out on schedule and reached the mock when cicada
/// says it sent them; `what` names the run in messages.
///
/// - Dispatch: the median schedule lag is within 1 ms plus the mock's mean
///   lateness (on a machine too busy for the mock to keep time, the dispatcher
///   cannot either).
/// - Path: the median |path| is within 0.5 ms plus the mock's mean lateness,
///   and at most 1 % of requests are further off than 5 ms plus the mock's
///   p99 lateness.
pub fn assert_on_schedule(arrivals: &[Arrival], mock: MockLateness, what: &str) {
    assert!(!arrivals.is_empty(), "{what}: no requests");
    let mut lags: Vec<f64> = arrivals.iter().map(Arrival::lag_us).collect();
    let lag = median(&mut lags);
    let lag_bound = 1_000.0 + mock.mean_us;
    assert!(
        lag <= lag_bound,
        "{what}: median schedule lag {lag:.0} µs, over {lag_bound:.0} µs (mock mean lateness {:.0} µs)",
        mock.mean_us
    );
    let mut paths: Vec<f64> = arrivals.iter().map(|a| a.path_us.abs()).collect();
    let path = median(&mut paths);
    let path_bound = 500.0 + mock.mean_us;
    assert!(
        path <= path_bound,
        "{what}: median |arrival − send| off its worker's usual by {path:.0} µs, over {path_bound:.0} µs"
    );
    eprintln!(
        "{what}: median schedule lag {lag:.0} µs (bound {lag_bound:.0}), median |path| {path:.0} µs (bound {path_bound:.0}); mock lateness mean {:.0} µs, p99 {:.0} µs",
        mock.mean_us, mock.p99_us
    );
    let far_bound = 5_000.0 + mock.p99_us;
    let far: Vec<&Arrival> = arrivals
        .iter()
        .filter(|a| a.path_us.abs() > far_bound)
        .collect();
    assert!(
        far.len() * 100 <= arrivals.len(),
        "{what}: {} of {} requests reached the mock more than {far_bound:.0} µs off their send: {far:?}",
        far.len(),
        arrivals.len()
    );
}
