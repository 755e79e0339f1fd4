//! The board in Locust's shapes: `/stats/requests` (its JSON, with cicada's
//! LLM figures under the `cicada` key), `/stats/requests/csv`,
//! `/stats/failures/csv`, and the chart points of `/stats/history`.
//! Locust's "response time" is cicada's E2EL (send to last byte), in ms.

use cicada_metrics::{Metric, MetricSet};
use cicada_results::RunResult;
use cicada_scenarios::sharding;
use serde_json::{Value, json};

use super::client_verdict::client_block;
use super::figures::{ms, round2};
use super::load;
use super::server_side::server_block;
use super::state::{Board, Point, RunState};

/// Latencies with percentiles in the `cicada` block and the charts.
pub const LATENCIES: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

/// Locust's `PERCENTILES_TO_CHART`: the keys of `current_response_time_percentiles`.
pub const PERCENTILES_TO_CHART: [f64; 2] = [0.5, 0.95];

/// Locust's `PERCENTILES_TO_STATISTICS`: the extra columns of each stats row.
pub const PERCENTILES_TO_STATISTICS: [f64; 2] = [0.95, 0.99];

/// Locust's columns of `/stats/requests/csv` after the counts.
const CSV_PERCENTILES: [f64; 11] = [
    0.5, 0.66, 0.75, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999, 0.9999, 1.0,
];

/// Seconds of the step's measured window so far: from its start (the
/// barrier, the warm-up's end or a reset) to the latest request's end, as
/// the results' duration runs.
fn window_s(r: &RunResult) -> f64 {
    r.total
        .span
        .last_end_us
        .map_or(0, |e| e.saturating_sub(r.window_start_us)) as f64
        / 1e6
}

/// `n` per second of `secs` (0 before anything ended).
fn per_s(n: u64, secs: f64) -> f64 {
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

/// One row of Locust's `stats` (its `StatsEntry.to_dict()` keys, plus
/// cicada's `ninetieth_`/`ninety_ninth_response_time` for its page): a
/// replica, a model or the aggregate. `current` is its (requests/s,
/// failures/s) in the last interval; `window_s` the step's window so far.
fn stat_row(name: &str, set: &MetricSet, current: (f64, f64), window_s: f64) -> Value {
    let e2el = set.histogram(Metric::E2el);
    let mut row = json!({
        "method": if name == "Aggregated" { "" } else { "POST" },
        "name": name,
        "num_requests": set.outcomes.sent(),
        "num_failures": set.outcomes.failed(),
        "avg_response_time": round2(e2el.mean() / 1e3),
        "min_response_time": round2(if e2el.is_empty() { 0.0 } else { e2el.min() as f64 / 1e3 }),
        "max_response_time": round2(if e2el.is_empty() { 0.0 } else { e2el.max() as f64 / 1e3 }),
        "median_response_time": round2(ms(e2el, 0.5)),
        "ninetieth_response_time": round2(ms(e2el, 0.9)),
        "ninety_ninth_response_time": round2(ms(e2el, 0.99)),
        "current_rps": round2(current.0),
        "current_fail_per_sec": round2(current.1),
        "total_rps": round2(per_s(set.outcomes.sent(), window_s)),
        "total_fail_per_sec": round2(per_s(set.outcomes.failed(), window_s)),
        "avg_content_length": 0,
    });
    for q in PERCENTILES_TO_STATISTICS {
        row[format!("response_time_percentile_{q}")] = json!(round2(ms(e2el, q)));
    }
    row
}

/// The last interval's rates: (ok requests/s, failures/s, output tokens/s).
fn current_rates(b: &Board) -> (f64, f64, f64) {
    if b.state != RunState::Running {
        return (0.0, 0.0, 0.0);
    }
    b.history
        .last()
        .map_or((0.0, 0.0, 0.0), |p| (p.rps + p.fail_s, p.fail_s, p.tok_s))
}

/// The parts a step's figures split into: each replica (when there are
/// several), each model of a `target.models` list (named `model:<name>`
/// as in summary.csv), each workload of `[[workloads]]` (`workload:<name>`),
/// then "Aggregated".
fn parts(r: &RunResult) -> Vec<(String, &MetricSet)> {
    let mut parts: Vec<(String, &MetricSet)> = Vec::new();
    if r.target.urls.len() > 1 {
        parts.extend(r.targets().map(|(url, set)| (url.to_string(), set)));
    }
    parts.extend(r.models().map(|(m, set)| (format!("model:{m}"), set)));
    parts.extend(r.workloads().map(|(w, set)| (format!("workload:{w}"), set)));
    parts.push(("Aggregated".into(), &r.total));
    parts
}

/// Locust's `stats` rows: each part's, the aggregate last (always there,
/// zeros before the first step, as Locust's total row is).
fn stats_rows(b: &Board) -> Vec<Value> {
    let (rps, fail_s, _) = current_rates(b);
    let Some(r) = b.latest() else {
        return vec![stat_row(
            "Aggregated",
            &MetricSet::default(),
            (0.0, 0.0),
            0.0,
        )];
    };
    let window = window_s(r);
    let total = r.total.outcomes.sent().max(1) as f64;
    parts(r)
        .into_iter()
        .map(|(name, set)| {
            // a part's share of the current rate, by its share of requests
            let share = set.outcomes.sent() as f64 / total;
            stat_row(&name, set, (rps * share, fail_s * share), window)
        })
        .collect()
}

fn latency_block(set: &MetricSet) -> Value {
    let mut out = serde_json::Map::new();
    for m in LATENCIES {
        let h = set.histogram(m);
        let v = if h.is_empty() {
            Value::Null
        } else {
            json!({
                "count": h.count(),
                "mean": round2(h.mean() / 1e3),
                "p50": round2(ms(h, 0.5)),
                "p90": round2(ms(h, 0.9)),
                "p99": round2(ms(h, 0.99)),
            })
        };
        out.insert(format!("{}_ms", m.name()), v);
    }
    Value::Object(out)
}

/// The start form's defaults and what the run was set to.
fn scenario_block(b: &Board) -> Value {
    let s = &b.scenario;
    let l = &s.load;
    json!({
        "name": s.name,
        "closed_loop": sharding::is_closed_loop(s),
        "users": l.users,
        "spawn_rate": l.spawn_rate,
        "rate": l.request_rate.to_string(),
        "max_concurrency": l.max_concurrency,
        "host": s.target.base_url.clone().or_else(|| s.target.urls.first().cloned()),
        "duration": l.duration.map(|d| d.to_string()),
        "num_prompts": l.num_prompts,
    })
}

/// Locust's `user_count`, the users running: while a closed loop runs,
/// its users in force (the scenario's, its `[[stages]]` window's, or the
/// latest change's); while an open loop runs or a stop drains, the
/// requests in flight; before the start and after the end, 0.
pub fn user_count(b: &Board) -> u64 {
    match b.state {
        RunState::Ready | RunState::Stopped => 0,
        RunState::Stopping => b.in_flight,
        RunState::Running => match b.load_now().0 {
            load if load.rate.is_none() => load.users.map_or(b.in_flight, u64::from),
            _ => b.in_flight,
        },
    }
}

/// Locust's `errors`: one per failure class, with its first message
/// (cicada keeps no time per failure: `first_seen`/`last_seen` are null).
fn errors(total: &MetricSet) -> Vec<Value> {
    total
        .outcomes
        .failures()
        .map(|(class, c)| {
            json!({
                "method": "POST",
                "name": class.to_string(),
                "error": c.first_error.clone().unwrap_or_else(|| class.to_string()),
                "occurrences": c.count,
                "first_seen": null,
                "last_seen": null,
            })
        })
        .collect()
}

/// Locust's `workers`, each with cicada's own figures under `cicada`.
fn workers(b: &Board) -> Vec<Value> {
    b.workers
        .values()
        .map(|w| {
            json!({
                "id": format!("{}#{}", w.host, w.index),
                "state": if !w.active { "missing" } else { b.state.word() },
                "user_count": w.in_flight,
                "cpu_usage": if b.elapsed_s > 0.0 { round2(100.0 * w.cpu_s / b.elapsed_s) } else { 0.0 },
                "memory_usage": w.rss_bytes,
                "cicada": {"index": w.index, "host": w.host, "in_flight": w.in_flight,
                           "cpu_s": round2(w.cpu_s), "peak_rss_bytes": w.rss_bytes,
                           "worst_stall_ms": w.worst_stall_ms.map(round2),
                           "clock_offset_ms": w.clock_offset_ms.map(round2),
                           "report_age_s": w.report_age_s.map(round2)},
            })
        })
        .collect()
}

/// `/stats/requests`: Locust's JSON, plus `cicada`.
pub fn requests(b: &Board) -> Value {
    let empty = MetricSet::default();
    let total = b.latest().map_or(&empty, |r| &r.total);
    let (rps, fail_s, tok_s) = current_rates(b);
    let window = b.latest().map_or(0.0, window_s);
    let sent = total.outcomes.sent();
    let e2el = total.histogram(Metric::E2el);
    let (load, stage) = b.load_now();
    let failures: serde_json::Map<String, Value> = total
        .outcomes
        .failures()
        .map(|(class, c)| (class.to_string(), json!(c.count)))
        .collect();
    let percentiles: serde_json::Map<String, Value> = PERCENTILES_TO_CHART
        .iter()
        .map(|q| {
            (
                format!("response_time_percentile_{q}"),
                json!(round2(ms(e2el, *q))),
            )
        })
        .collect();
    json!({
        "stats": stats_rows(b),
        "errors": errors(total),
        "current_rps": round2(rps),
        "current_fail_per_sec": round2(fail_s),
        "total_rps": round2(per_s(sent, window)),
        "total_fail_per_sec": round2(per_s(total.outcomes.failed(), window)),
        "fail_ratio": if sent > 0 { total.outcomes.failed() as f64 / sent as f64 } else { 0.0 },
        "current_response_time_percentiles": percentiles,
        "total_avg_response_time": round2(e2el.mean() / 1e3),
        "state": b.state.word(),
        "user_count": user_count(b),
        "workers": workers(b),
        "worker_count": b.active_workers(),
        "cicada": {
            "step": b.latest().map_or(0, |r| r.stage),
            "steps_finished": b.finished.len(),
            "elapsed_s": round2(b.elapsed_s),
            "in_flight": b.in_flight,
            "requests": sent,
            "ok": total.outcomes.ok(),
            "failed": total.outcomes.failed(),
            "output_tokens_per_s": round2(tok_s),
            "output_tokens": total.counter(cicada_metrics::Counter::OutputTokens),
            "latency": latency_block(total),
            "failures_by_class": failures,
            "points": b.history.len(),
            "scenario": scenario_block(b),
            "load": load::block(&load, &stage),
            "server": server_block(b),
            "client": b.latest().map_or(Value::Null, client_block),
        },
    })
}

/// One CSV line, quoting fields that need it.
pub fn csv_line(fields: &[String]) -> String {
    let quoted: Vec<String> = fields
        .iter()
        .map(|f| {
            if f.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.clone()
            }
        })
        .collect();
    quoted.join(",") + "\n"
}

/// `/stats/requests/csv`: Locust's columns (`StatsCSV.requests_csv`), a
/// row per part as `/stats/requests` has them; response times are E2EL
/// ms, `Requests/s` and `Failures/s` over the step's window so far, the
/// percentiles `N/A` where no request succeeded (Locust: where none ended).
pub fn requests_csv(b: &Board) -> String {
    let mut head: Vec<String> = [
        "Type",
        "Name",
        "Request Count",
        "Failure Count",
        "Median Response Time",
        "Average Response Time",
        "Min Response Time",
        "Max Response Time",
        "Average Content Size",
        "Requests/s",
        "Failures/s",
    ]
    .map(String::from)
    .to_vec();
    head.extend(
        [
            "50%", "66%", "75%", "80%", "90%", "95%", "98%", "99%", "99.9%", "99.99%", "100%",
        ]
        .map(String::from),
    );
    let mut out = csv_line(&head);
    let Some(r) = b.latest() else {
        let mut row = vec![String::new(), "Aggregated".into()];
        row.extend(["0", "0", "0", "0", "0", "0", "0", "0", "0"].map(String::from));
        row.extend(CSV_PERCENTILES.iter().map(|_| "N/A".to_string()));
        out.push_str(&csv_line(&row));
        return out;
    };
    let window = window_s(r);
    for (name, set) in parts(r) {
        let e = set.histogram(Metric::E2el);
        let f = |v: f64| format!("{v:.2}");
        let mut row = vec![
            if name == "Aggregated" {
                String::new()
            } else {
                "POST".into()
            },
            name.clone(),
            set.outcomes.sent().to_string(),
            set.outcomes.failed().to_string(),
            f(ms(e, 0.5)),
            f(e.mean() / 1e3),
            f(if e.is_empty() {
                0.0
            } else {
                e.min() as f64 / 1e3
            }),
            f(if e.is_empty() {
                0.0
            } else {
                e.max() as f64 / 1e3
            }),
            "0".into(),
            f(per_s(set.outcomes.sent(), window)),
            f(per_s(set.outcomes.failed(), window)),
        ];
        row.extend(CSV_PERCENTILES.iter().map(|q| {
            if e.is_empty() {
                "N/A".to_string()
            } else {
                f(ms(e, *q))
            }
        }));
        out.push_str(&csv_line(&row));
    }
    out
}

/// `/stats/failures/csv`: Locust's columns, one line per failure class
/// with its first message; `First Seen` and `Last Seen` are empty (Locust
/// leaves them so when it has no time; cicada keeps none per failure).
pub fn failures_csv(b: &Board) -> String {
    let head = [
        "Method",
        "Name",
        "Error",
        "Occurrences",
        "First Seen",
        "Last Seen",
    ];
    let mut out = csv_line(&head.map(String::from));
    let Some(r) = b.latest() else { return out };
    for (class, c) in r.total.outcomes.failures() {
        out.push_str(&csv_line(&[
            "POST".into(),
            class.to_string(),
            c.first_error.clone().unwrap_or_default(),
            c.count.to_string(),
            String::new(),
            String::new(),
        ]));
    }
    out
}

fn point(p: &Point) -> Value {
    let mut lat = serde_json::Map::new();
    for (m, p50, p99) in p.latency.iter().filter(|(m, ..)| LATENCIES.contains(m)) {
        lat.insert(m.name().to_string(), json!([round2(*p50), round2(*p99)]));
    }
    json!({"t": round2(p.t), "step": p.step, "rps": round2(p.rps), "fail_s": round2(p.fail_s),
           "tok_s": round2(p.tok_s), "in_flight": p.in_flight, "ms": lat})
}

/// `/stats/history?from=N`: chart points from the N-th on, and how many there are.
pub fn history(b: &Board, from: usize) -> Value {
    let points: Vec<Value> = b.history.iter().skip(from).map(point).collect();
    let marks: Vec<Value> = b
        .marks
        .iter()
        .map(|m| json!({"t": round2(m.t), "name": m.name}))
        .collect();
    json!({"from": from.min(b.history.len()), "next": b.history.len(), "points": points, "marks": marks})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::result;
    use crate::state::Feed;
    use cicada_metrics::Outcome;
    use cicada_scenarios::Scenario;

    #[test]
    fn locust_shape_with_cicada_figures() {
        let feed = Feed::new(Scenario::default(), RunState::Ready);
        let empty = requests(&feed.lock());
        assert_eq!(empty["state"], "ready");
        assert_eq!(empty["stats"].as_array().map(Vec::len), Some(1));
        assert_eq!(empty["stats"][0]["name"], "Aggregated");
        assert_eq!(empty["stats"][0]["num_requests"], 0);
        let mut r = result();
        for v in 1..=100u64 {
            r.total.count_outcome(Outcome::Ok, None);
            r.total.histogram_mut(Metric::E2el).record(v * 1_000);
        }
        r.total
            .outcomes
            .add_n(Outcome::Http(503), 5, Some("busy, \"later\""));
        feed.step_finished(&[r]);
        let b = feed.lock();
        let j = requests(&b);
        let agg = &j["stats"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(agg["name"], "Aggregated");
        assert_eq!(agg["num_requests"], 105);
        assert_eq!(agg["num_failures"], 5);
        let near = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 0.1;
        assert!(near(&agg["median_response_time"], 50.0), "{agg}");
        // Locust's `StatsEntry.to_dict()` keys, and the top level's
        assert!(near(&agg["response_time_percentile_0.95"], 95.0), "{agg}");
        assert!(near(&agg["response_time_percentile_0.99"], 99.0), "{agg}");
        assert_eq!(agg["method"], "");
        for key in ["total_rps", "total_fail_per_sec", "avg_content_length"] {
            assert!(agg[key].is_number(), "{key}: {agg}");
        }
        for key in [
            "current_rps",
            "current_fail_per_sec",
            "total_rps",
            "total_fail_per_sec",
        ] {
            assert!(j[key].is_number(), "{key}: {j}");
        }
        let pct = &j["current_response_time_percentiles"];
        assert!(near(&pct["response_time_percentile_0.95"], 95.0), "{pct}");
        assert_eq!(j["errors"][0]["first_seen"], Value::Null);
        assert_eq!(j["errors"][0]["occurrences"], 5);
        assert_eq!(j["errors"][0]["name"], "http_503");
        assert!((j["fail_ratio"].as_f64().unwrap() - 5.0 / 105.0).abs() < 1e-9);
        assert_eq!(j["cicada"]["failures_by_class"]["http_503"], 5);
        assert!(near(&j["cicada"]["latency"]["e2el_ms"]["p99"], 99.0), "{j}");
        assert_eq!(j["cicada"]["latency"]["ttft_ms"], Value::Null);
        let fail = failures_csv(&b);
        assert_eq!(
            fail,
            "Method,Name,Error,Occurrences,First Seen,Last Seen\n\
             POST,http_503,\"busy, \"\"later\"\"\",5,,\n"
        );
        let req = requests_csv(&b);
        let last = req.lines().last().unwrap();
        assert!(last.starts_with(",Aggregated,105,5,50.0"), "{last}");
        assert_eq!(req.lines().next().unwrap().split(',').count(), 22);
    }

    #[test]
    fn each_model_has_a_row() {
        use cicada_plan::models::WeightedModel;
        let feed = Feed::new(Scenario::default(), RunState::Ready);
        let mut r = result();
        r.target.models = ["a", "b"]
            .map(|n| WeightedModel {
                name: n.into(),
                weight: 1.0,
                lora_id: None,
            })
            .to_vec();
        let mut per_model = vec![MetricSet::default(), MetricSet::default()];
        for (m, n) in [(0, 1), (1, 2)] {
            for _ in 0..n {
                per_model[m].count_outcome(Outcome::Ok, None);
                r.total.count_outcome(Outcome::Ok, None);
            }
        }
        r.per_model = per_model;
        feed.step_finished(&[r]);
        let j = requests(&feed.lock());
        let rows: Vec<(&str, u64)> = j["stats"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap(),
                    r["num_requests"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(rows, [("model:a", 1), ("model:b", 2), ("Aggregated", 3)]);
        // the CSV has the same rows; no success measured: no percentiles
        let csv = requests_csv(&feed.lock());
        let names: Vec<&str> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(1).unwrap())
            .collect();
        assert_eq!(names, ["model:a", "model:b", "Aggregated"]);
        assert!(csv.lines().nth(1).unwrap().ends_with(",N/A,N/A"), "{csv}");
    }

    #[test]
    fn the_header_shows_the_users_of_the_stage_in_force_then_of_a_change() {
        use crate::state::SteeredLoad;
        let mut r = result();
        r.scenario.load.users = Some(8);
        r.scenario.stages = serde_json::from_value(json!([
            {"duration": "10s", "users": 8},
            {"name": "high", "duration": "10s", "users": 16}
        ]))
        .expect("two stages");
        let feed = Feed::new(r.scenario.clone(), RunState::Ready);
        feed.step_began(r, false, &[]);
        feed.barrier(0.0);
        let users = |elapsed_s: f64| {
            feed.lock().elapsed_s = elapsed_s;
            let j = requests(&feed.lock());
            (j["user_count"].clone(), j["cicada"]["load"].clone())
        };
        assert_eq!(users(3.0).0, 8);
        let (count, load) = users(12.0);
        assert_eq!(count, 16, "{load}");
        assert_eq!(load["stage"], "high");
        let change = SteeredLoad {
            users: Some(3),
            spawn_rate: Some(1.5),
            ..SteeredLoad::default()
        };
        feed.steered(std::time::Duration::from_secs(13), "edit-1", change);
        let (count, load) = users(14.0);
        assert_eq!(count, 3, "{load}");
        assert_eq!(load["spawn_rate"], 1.5);
        assert_eq!(load["stage"], "edit-1");
    }

    #[test]
    fn an_open_loop_shows_the_rate_a_change_set() {
        use crate::state::SteeredLoad;
        let mut r = result();
        r.scenario.load.request_rate = cicada_plan::units::Rate::Finite(2.0);
        r.scenario.load.max_concurrency = Some(6);
        let feed = Feed::new(r.scenario.clone(), RunState::Ready);
        feed.step_began(r, false, &[]);
        feed.barrier(0.0);
        let load = || requests(&feed.lock())["cicada"]["load"].clone();
        assert_eq!(load()["rate"], "2", "{}", load());
        let change = SteeredLoad {
            rate: Some(f64::INFINITY),
            ..SteeredLoad::default()
        };
        feed.steered(std::time::Duration::from_secs(1), "edit-1", change);
        assert_eq!(load()["rate"], "inf", "{}", load());
        assert_eq!(load()["max_concurrency"], 6);
        assert_eq!(load()["users"], Value::Null);
    }

    #[test]
    fn stages_and_sweep_steps_are_marked_on_the_charts() {
        let feed = Feed::new(Scenario::default(), RunState::Ready);
        let mut first = result();
        first.scenario.stages = serde_json::from_value(json!([
            {"duration": "2s"},
            {"name": "high", "duration": "3s"}
        ]))
        .expect("two stages");
        feed.step_began(first, true, &[]);
        feed.barrier(0.0);
        let mut second = result();
        second.stage = 2;
        second.stage_name = "c=8".into();
        feed.step_began(second, true, &[]);
        feed.barrier(0.0);
        let b = feed.lock();
        let names: Vec<&str> = b.marks.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["stage-1", "high", "c=8"]);
        assert_eq!(b.marks[0].t, 0.0);
        assert_eq!(b.marks[1].t, 2.0);
    }
}
