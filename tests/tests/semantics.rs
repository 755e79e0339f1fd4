//! Figures mean what their names say, for any worker count (issue: one fleet,
//! one meaning). Each test here failed on the code before its fix.

use std::path::Path;
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

fn scenario(mock_url: &str, body: &str) -> String {
    format!(
        r#"
name = "semantics"
seed = 5
[target]
backend = "openai-chat"
base_url = "{mock_url}"
model = "cicada-mock"
{body}
"#
    )
}

/// `cicada run` on a scenario text, results in `out-<workers>`; returns the
/// run and result.json (Null if none).
fn run(dir: &Path, text: &str, workers: &str, extra: &[&str]) -> (Run, Value) {
    run_scenario(dir, workers, text, workers, extra, LIMIT)
}

/// The lines of `requests.jsonl` in `dir/out-<workers>`.
fn requests(dir: &Path, workers: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join(format!("out-{workers}/requests.jsonl")))
        .expect("requests.jsonl");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn us(v: &Value, key: &str) -> i64 {
    v[key].as_i64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// A closed-loop user means to send its next request when its previous one
/// ended plus its think time: that is its `t_sched`, so a user woken late
/// shows schedule lag (it used to be stamped at the send, lag always ~0).
#[test]
fn closed_loop_users_are_scheduled_at_previous_end_plus_think_time() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "3", "--itl-ms", "1"]);
    let dir = scratch();
    let body = r#"
[dataset]
input_len = 8
output_len = 4
[load]
users = 4
spawn_rate = 1000
think_time = "20ms"
num_prompts = 80
[output]
save_detailed = true
"#;
    let (r, j) = run(dir.path(), &scenario(&mock.url, body), "2", &[]);
    assert_ok(&r);
    // a closed loop intends its send times: its figures from the schedule stay
    for m in ["ttft_co", "e2el_co", "schedule_lag"] {
        assert_eq!(j["cicada"]["metrics"][m]["count"].as_u64(), Some(80), "{m}");
    }
    let mut lines = requests(dir.path(), "2");
    assert_eq!(lines.len(), 80);
    lines.sort_by_key(|l| us(l, "index"));
    let mut checked = 0;
    for user in 0..4i64 {
        let mine: Vec<&Value> = lines
            .iter()
            .filter(|l| us(l, "index") % 4 == user)
            .collect();
        for pair in mine.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            let after_end = us(next, "scheduled_us") - us(prev, "ended_us");
            // the think time exactly, never the sleep's lateness
            assert_eq!(
                after_end,
                20_000,
                "user {user}: request {} scheduled {after_end} µs after the previous end",
                us(next, "index")
            );
            assert!(us(next, "sent_us") >= us(next, "scheduled_us"));
            checked += 1;
        }
    }
    assert_eq!(checked, 76);
}

/// `max_concurrent_requests` is vLLM's: the most successful requests active
/// within one second (every whole second a request touches from its send to
/// its last content event), computed here from `requests.jsonl`, for one and
/// for three workers. It used to be a 100 ms average of requests in flight.
#[test]
fn max_concurrent_requests_is_vllms_per_second_count() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "40", "--itl-ms", "15"]);
    let body = r#"
[dataset]
input_len = 8
output_len = 40
range_ratio = 0.5
[load]
num_prompts = 90
request_rate = 40
max_concurrency = 16
[output]
save_detailed = true
"#;
    for workers in ["1", "3"] {
        let dir = scratch();
        let (r, j) = run(dir.path(), &scenario(&mock.url, body), workers, &[]);
        assert_ok(&r);
        let mut active = std::collections::BTreeMap::<i64, u64>::new();
        for l in requests(dir.path(), workers) {
            if l["outcome"] != "ok" {
                continue;
            }
            let sent = us(&l, "sent_us");
            let last = l["events"]
                .as_array()
                .and_then(|e| e.last())
                .map_or(us(&l, "ended_us"), |e| us(e, "at_us"));
            for second in sent / 1_000_000..=last / 1_000_000 {
                *active.entry(second).or_default() += 1;
            }
        }
        let want = active.values().copied().max().unwrap();
        assert_eq!(
            j["max_concurrent_requests"].as_u64(),
            Some(want),
            "{workers} workers: {}",
            j["max_concurrent_requests"]
        );
        // above the cap when requests straddle a second, as vLLM's can be
        assert!(want >= 16, "{workers} workers: {want}");
        let fine = j["cicada"]["peak_concurrent_requests_100ms"]
            .as_f64()
            .unwrap();
        assert!(fine <= 16.0 + 1e-9, "{workers} workers: {fine}");
    }
}

/// Warm-up requests never count in the measured concurrency, whatever kind
/// of warm-up marked them: 50 warm-up requests of ~0.5 s at 100/s are still
/// in flight while the 10 measured ones run, and used to raise the measured
/// peak to ~50.
#[test]
fn a_count_based_warmup_stays_out_of_the_measured_concurrency() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "100", "--itl-ms", "10"]);
    let dir = scratch();
    let body = r#"
[dataset]
input_len = 8
output_len = 40
[load]
num_prompts = 60
request_rate = 100
warmup = { requests = 50 }
"#;
    let (r, j) = run(dir.path(), &scenario(&mock.url, body), "2", &[]);
    assert_ok(&r);
    let c = &j["cicada"];
    assert_eq!(c["warmup"]["sent"].as_u64(), Some(50), "{}", c["warmup"]);
    assert_eq!(j["completed"].as_u64(), Some(10));
    let peak = c["peak_concurrent_requests_100ms"].as_f64().unwrap();
    let mean = c["mean_concurrent_requests"].as_f64().unwrap();
    assert!(peak <= 10.0 + 1e-9, "peak {peak}");
    assert!(mean <= 10.0 + 1e-9, "mean {mean}");
    assert!(j["max_concurrent_requests"].as_u64().unwrap() <= 10);
}

/// The value of column `name` in a summary.csv row.
fn cell<'a>(header: &[String], row: &'a [String], name: &str) -> &'a str {
    let i = header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    &row[i]
}

/// A figure with no samples is absent, never 0: a non-streamed run sees no
/// first token and no gaps, so vLLM's TTFT, TPOT and ITL keys stay in
/// result.json with `null` (they used to say 0.0), cicada's per-metric
/// statistics leave them out (run and per target), summary.csv leaves their
/// cells blank and the console says n/a.
#[test]
fn figures_without_samples_are_absent_never_zero() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let body = r#"
stream = false
[dataset]
input_len = 8
output_len = 4
[load]
num_prompts = 6
max_concurrency = 2
"#;
    let (r, j) = run(dir.path(), &scenario(&mock.url, body), "2", &[]);
    assert_ok(&r);
    assert_eq!(j["completed"].as_u64(), Some(6));
    for m in ["ttft", "tpot", "itl"] {
        for stat in ["mean", "median", "std", "p50", "p90", "p99", "p99.9"] {
            let key = format!("{stat}_{m}_ms");
            let obj = j.as_object().unwrap();
            assert!(obj.contains_key(&key), "{key} is missing");
            assert!(obj[&key].is_null(), "{key} = {}", obj[&key]);
        }
        assert!(j["cicada"]["metrics"].get(m).is_none(), "{m}");
        assert!(j["cicada"]["targets"][0]["metrics"].get(m).is_none(), "{m}");
    }
    assert!(j["mean_e2el_ms"].as_f64().unwrap() > 0.0);
    assert!(j["p99_e2el_ms"].as_f64().unwrap() > 0.0);
    let (h, rows) = read_csv(&dir.path().join("out-2/summary.csv"));
    for col in [
        "Time To First Token",
        "Latency Per Token",
        "P99 Time To First Token",
        "ttft_mean_ms",
        "tpot_p50_ms",
        "itl_p99_ms",
        "icl_mean_ms",
    ] {
        assert_eq!(cell(&h, &rows[0], col), "", "{col}");
    }
    assert_ne!(cell(&h, &rows[0], "Total Latency"), "");
    for label in ["Mean TTFT (ms):", "Median TPOT (ms):", "P99 ITL (ms):"] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line in\n{}", r.stdout));
        assert_eq!(line.trim_end(), format!("{label:<40} n/a"), "{}", r.stdout);
    }
}

/// With `request_rate = "inf"` (open loop, no rate asked) every request is
/// due at the barrier, so "from schedule" figures and schedule lag would
/// count the wait behind `max_concurrency` as lateness: they are left out of
/// result.json (statistics and histograms), summary.csv, timeseries.csv and
/// the console. A finite rate keeps them.
#[test]
fn schedule_figures_are_absent_when_no_rate_was_asked() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "2"]);
    let load = |rate: &str| {
        format!(
            "[dataset]\ninput_len = 8\noutput_len = 4\n[load]\nnum_prompts = 12\nmax_concurrency = 2\n{rate}"
        )
    };
    let schedule = ["ttft_co", "e2el_co", "schedule_lag"];
    let dir = scratch();
    let (r, j) = run(dir.path(), &scenario(&mock.url, &load("")), "2", &[]);
    assert_ok(&r);
    for m in schedule {
        assert!(j["cicada"]["metrics"].get(m).is_none(), "{m}");
        assert!(j["cicada"]["histograms"].get(m).is_none(), "{m}");
        assert!(j["cicada"]["targets"][0]["metrics"].get(m).is_none(), "{m}");
    }
    assert!(j["cicada"]["metrics"].get("ttft").is_some());
    let (h, rows) = read_csv(&dir.path().join("out-2/summary.csv"));
    for col in ["ttft_co_mean_ms", "e2el_co_p99_ms", "schedule_lag_p50_ms"] {
        assert_eq!(cell(&h, &rows[0], col), "", "{col}");
    }
    let ts = std::fs::read_to_string(dir.path().join("out-2/timeseries.csv")).unwrap();
    assert!(ts.contains(",ttft,"));
    for m in schedule {
        assert!(!ts.contains(&format!(",{m},")), "{m} in timeseries.csv");
    }
    assert!(!r.stdout.contains("from Schedule"), "{}", r.stdout);
    assert!(!r.stdout.contains("Schedule Lag"), "{}", r.stdout);

    let dir = scratch();
    let (r, j) = run(
        dir.path(),
        &scenario(&mock.url, &load("request_rate = 200\n")),
        "2",
        &[],
    );
    assert_ok(&r);
    for m in schedule {
        assert!(
            j["cicada"]["metrics"][m]["count"].as_u64() == Some(12),
            "{m}"
        );
    }
    assert!(r.stdout.contains("TTFT from Schedule"), "{}", r.stdout);
}
/// summary.csv's `Concurrency` (fw-ai/benchmark's column) is the users
/// count of a closed-loop run (it said "unbounded"), and `Logprobs` shows
/// the logprobs the requests asked for (it was always empty).
#[test]
fn summary_csv_concurrency_counts_users_and_logprobs_show_what_was_asked() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let body = r#"
[dataset]
input_len = 8
output_len = 4
[load]
users = 3
num_prompts = 9
[sampling]
extra_body = { logprobs = true, top_logprobs = 2 }
"#;
    let (r, _) = run(dir.path(), &scenario(&mock.url, body), "2", &[]);
    assert_ok(&r);
    let (h, rows) = read_csv(&dir.path().join("out-2/summary.csv"));
    assert_eq!(cell(&h, &rows[0], "Concurrency"), "3");
    assert_eq!(cell(&h, &rows[0], "Logprobs"), "2");
}
