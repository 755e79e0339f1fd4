//! `cicada run --num-runs N` (`[run] repeats`): N independent runs under
//! `run-<i>/`, then each headline figure's mean, spread, Student's t
//! interval and pooled value (issue 38 item 1). Judged against the mock's
//! truth: its TTFT is drawn uniformly around a known mean, so the intervals
//! must cover that mean in at least 90 % of trials, and the pooled p99 must
//! be the p99 of every request of every run in one histogram.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use cicada_tests::{assert_ok, coord_run, read_json, scratch, write};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);

/// A closed loop against the embedded mock whose TTFT is uniform on
/// [ttft − jitter, ttft + jitter] ms.
fn scenario(ttft_ms: u32, jitter_ms: u32, prompts: u32, seed: u64) -> String {
    format!(
        r#"
name = "repeats"
seed = {seed}
[target]
backend = "mock"
[mock]
ttft_ms = {ttft_ms}
itl_ms = 1
jitter_ms = {jitter_ms}
seed = {seed}
[dataset]
kind = "random"
input_len = 16
output_len = 2
range_ratio = 0.5
[load]
num_prompts = {prompts}
max_concurrency = {prompts}
[output]
save_detailed = true
"#
    )
}

/// `cicada run <scenario> --num-runs <n> --output-dir <out> <extra>`.
fn repeat(dir: &Path, text: &str, n: u32, out: &Path, extra: &[&str]) -> cicada_tests::Run {
    let sc = write(dir, "scenario.toml", text);
    let n = n.to_string();
    let mut args = vec![
        "run",
        sc.to_str().unwrap(),
        "--num-runs",
        &n,
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend(extra);
    coord_run(&args, LIMIT)
}

/// `repeats.json`'s entry for `figure` of result file `file`.
fn figure<'a>(doc: &'a Value, file: &str, figure: &str) -> &'a Value {
    doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"] == file)
        .unwrap_or_else(|| panic!("no {file} in {doc}"))["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == figure)
        .unwrap_or_else(|| panic!("no {figure} in {doc}"))
}

/// 40 trials of 3 runs of 16 requests whose TTFT is uniform on [0, 400] ms
/// (mean 200 ms): the 95 % interval of mean TTFT covers 200 ms in at least
/// 36. The half-width is ~70 ms; loopback and the client add well under
/// 1 ms, so a busy machine does not move the truth out of the interval.
#[test]
fn intervals_cover_the_mocks_truth() {
    let dir = scratch();
    let mut covered = 0;
    let mut seen = Vec::new();
    for trial in 0..40u64 {
        let out = dir.path().join(format!("t{trial}"));
        let r = repeat(
            dir.path(),
            &scenario(200, 200, 16, 1000 * trial),
            3,
            &out,
            &[],
        );
        assert_ok(&r);
        let doc = read_json(&out.join("repeats.json"));
        let f = figure(&doc, "result.json", "mean_ttft_ms");
        let (lo, hi) = (
            f["ci_low"].as_f64().unwrap(),
            f["ci_high"].as_f64().unwrap(),
        );
        assert_eq!(f["runs"].as_array().unwrap().len(), 3, "{f}");
        if (lo..=hi).contains(&200.0) {
            covered += 1;
        }
        seen.push(format!("{trial}: [{lo:.1}, {hi:.1}]"));
    }
    eprintln!("the 95 % interval covered the truth in {covered} of 40 trials");
    assert!(
        covered >= 36,
        "the 95 % interval covered the truth in {covered} of 40 trials:\n{}",
        seen.join("\n")
    );
}

/// Each run's requests' TTFT (µs, from requests.jsonl).
fn ttfts_us(run_dir: &Path) -> Vec<u64> {
    std::fs::read_to_string(run_dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["warmup"] != true)
        .map(|v| (v["ttft_ms"].as_f64().unwrap() * 1000.0).round() as u64)
        .collect()
}

/// The p99 of `samples` in one HdrHistogram of 3 significant digits, as
/// docs/METRICS.md defines a percentile: the sample of rank ceil(0.99·n),
/// reported as the highest value of its bucket.
fn p99_of_one_histogram(mut samples: Vec<u64>) -> f64 {
    samples.sort_unstable();
    let rank = ((0.99 * samples.len() as f64).ceil() as usize).max(1);
    let h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    h.highest_equivalent(samples[rank - 1]) as f64 / 1000.0
}

/// Three runs: the pooled p99 TTFT and E2EL are the p99 of every request of
/// every run in one histogram (not a mean of the runs' p99s), the runs sit
/// under run-<i>/ with the seeds stepped, and the summary files hold one
/// value per run.
#[test]
fn pooled_p99_is_the_p99_of_every_request() {
    let dir = scratch();
    let out = dir.path().join("out");
    let r = repeat(dir.path(), &scenario(40, 30, 48, 7), 3, &out, &[]);
    assert_ok(&r);
    for (i, seed) in [(1, 7), (2, 8), (3, 9)] {
        assert!(
            r.stderr
                .contains(&format!("run {i} of 3 (seed {seed}, mock.seed {seed})")),
            "{}",
            r.stderr
        );
    }
    let doc = read_json(&out.join("repeats.json"));
    let all: Vec<u64> = (1..=3)
        .flat_map(|i| ttfts_us(&out.join(format!("run-{i}"))))
        .collect();
    assert_eq!(all.len(), 3 * 48);
    let f = figure(&doc, "result.json", "p99_ttft_ms");
    let pooled = f["pooled"].as_f64().unwrap();
    assert!(
        (pooled - p99_of_one_histogram(all)).abs() < 1e-9,
        "pooled {pooled} {f}"
    );
    // not the mean of the runs' p99s (they differ: the jitter is drawn anew)
    let runs: Vec<f64> = f["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(runs.len(), 3);
    for (i, v) in runs.iter().enumerate() {
        let own = read_json(&out.join(format!("run-{}/result.json", i + 1)));
        assert_eq!(own["p99_ttft_ms"].as_f64(), Some(*v));
    }
    assert!(runs.iter().any(|v| (v - runs[0]).abs() > 1e-9), "{runs:?}");
    // the table and the CSV say the same
    assert!(r.stdout.contains("result.json over 3 runs"), "{}", r.stdout);
    let csv = std::fs::read_to_string(out.join("repeats.csv")).unwrap();
    let line = csv
        .lines()
        .find(|l| l.starts_with("result.json,p99_ttft_ms,"))
        .unwrap();
    assert!(line.ends_with(&format!(",{pooled}")), "{line}");
}

/// Input lengths the runs sent, per run (range_ratio draws them per seed).
fn input_lengths(out: &Path, runs: u32) -> Vec<BTreeMap<u64, u32>> {
    (1..=runs)
        .map(|i| {
            let mut m = BTreeMap::new();
            let text =
                std::fs::read_to_string(out.join(format!("run-{i}/requests.jsonl"))).unwrap();
            for l in text.lines().filter(|l| !l.trim().is_empty()) {
                let v: Value = serde_json::from_str(l).unwrap();
                *m.entry(v["input_tokens"].as_u64().unwrap()).or_insert(0) += 1;
            }
            m
        })
        .collect()
}

/// Varied seeds draw other prompts each run; `--same-seed` sends the same
/// ones every run.
#[test]
fn seeds_vary_per_run_unless_kept() {
    let dir = scratch();
    let text = scenario(5, 0, 24, 3);
    let varied = dir.path().join("varied");
    assert_ok(&repeat(dir.path(), &text, 2, &varied, &[]));
    let v = input_lengths(&varied, 2);
    assert_ne!(v[0], v[1], "seeds 3 and 4 drew the same lengths");
    let same = dir.path().join("same");
    let r = repeat(dir.path(), &text, 2, &same, &["--same-seed"]);
    assert_ok(&r);
    assert!(
        r.stderr.contains("run 2 of 2 (seed 3, mock.seed 3)"),
        "{}",
        r.stderr
    );
    let s = input_lengths(&same, 2);
    assert_eq!(s[0], s[1]);
}

/// A sweep over two concurrencies on two workers, repeated twice: every
/// stage is summarised over both runs.
#[test]
fn a_sweep_repeats_every_point() {
    let dir = scratch();
    let text = format!(
        "{}[sweep]\nmax_concurrency = [2, 4]\n",
        scenario(5, 2, 16, 1)
    );
    let out = dir.path().join("out");
    let r = repeat(dir.path(), &text, 2, &out, &["--workers", "2"]);
    assert_ok(&r);
    let doc = read_json(&out.join("repeats.json"));
    for stage in ["result-stage1.json", "result-stage2.json"] {
        let f = figure(&doc, stage, "request_throughput");
        assert_eq!(f["runs"].as_array().unwrap().len(), 2, "{f}");
        assert!(f["ci_low"].is_f64() && f["pooled"].is_f64(), "{f}");
    }
}

/// Zero runs, a level outside (0, 1) and a repeated web UI are refused
/// before anything runs, naming the flag or the file, line and key.
#[test]
fn bad_repeats_are_refused() {
    let dir = scratch();
    let out = dir.path().join("out");
    let r = repeat(dir.path(), &scenario(5, 0, 4, 1), 0, &out, &[]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--num-runs"), "{}", r.stderr);
    let text = format!("{}[run]\nrepeats = 2\nlevel = 1.5\n", scenario(5, 0, 4, 1));
    let sc = write(dir.path(), "bad.toml", &text);
    let r = coord_run(&["run", sc.to_str().unwrap(), "--quiet"], LIMIT);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("bad.toml") && r.stderr.contains("run.level"),
        "{}",
        r.stderr
    );
    let r = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--set",
            "run.level=0.9",
            "--web",
            "127.0.0.1:0",
            "--quiet",
        ],
        LIMIT,
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("web UI"), "{}", r.stderr);
    assert!(!out.exists() && !dir.path().join("results").exists());
}

/// Ctrl-C (SIGINT to the whole process group) during the second of three
/// runs: the second run writes what it has, the first is summarised, and
/// the exit code says a signal stopped it.
#[test]
fn ctrl_c_mid_series_keeps_the_runs_so_far() {
    use std::os::unix::process::CommandExt as _;
    use std::process::{Command, Stdio};
    let dir = scratch();
    // 48 requests, 4 at a time, TTFT 250 ms: about 3 s a run
    let text = scenario(250, 0, 48, 1).replace("max_concurrency = 48", "max_concurrency = 4");
    let sc = write(dir.path(), "scenario.toml", &text);
    let out = dir.path().join("out");
    let err_path = dir.path().join("coord.err");
    let mut child = Command::new(cicada_tests::cicada())
        .args(["run", sc.to_str().unwrap(), "--num-runs", "3", "--quiet"])
        .arg("--output-dir")
        .arg(&out)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.path().join("coord.out")).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&err_path)
        .unwrap_or_default()
        .contains("run 2 of 3")
    {
        assert!(started.elapsed() < LIMIT, "run 2 never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: a plain FFI call signalling this test's own child group
    assert_eq!(unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) }, 0);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        assert!(started.elapsed() < LIMIT, "cicada did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(!stderr.contains("run 3 of 3"), "{stderr}");
    let partial = read_json(&out.join("run-2/result.json"));
    assert!(partial["completed"].as_u64().unwrap() < 48, "{partial}");
    let doc = read_json(&out.join("repeats.json"));
    assert_eq!(doc["runs"].as_array().unwrap().len(), 1, "{doc}");
    let f = figure(&doc, "result.json", "mean_ttft_ms");
    assert_eq!(f["runs"].as_array().unwrap().len(), 1, "{f}");
}
