//! Issue: results people can read, compare and feed to other tools — the
//! files `cicada run` writes, `cicada report` and the HTML report in a real
//! browser (live metrics, progress and exit codes: `results_live`). Real
//! `cicada`, `worker` and the embedded mock over loopback.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use cicada_tests::browser::{dump_dom, pixels_like, screenshot};
use cicada_tests::mock_run::{run_in, scenario};
use cicada_tests::*;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

const LIMIT: Duration = Duration::from_secs(180);

fn coord_cmd(args: &[&str]) -> Run {
    coord_run(args, LIMIT)
}

/// TTFT and E2EL samples (µs) of successful requests in a `requests.jsonl`.
fn samples(path: &Path) -> (Vec<u64>, Vec<u64>) {
    let text = std::fs::read_to_string(path).unwrap();
    let (mut ttft, mut e2el) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["outcome"] != "ok" || v["warmup"] == true {
            continue;
        }
        let sent = v["sent_us"].as_u64().unwrap();
        let events = v["events"].as_array().unwrap();
        ttft.push(events[0]["at_us"].as_u64().unwrap() - sent);
        e2el.push(events.last().unwrap()["at_us"].as_u64().unwrap() - sent);
    }
    (ttft, e2el)
}

fn hdr(values: &[u64]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(3).unwrap();
    h.auto(true);
    for v in values {
        h.record(*v).unwrap();
    }
    h
}

fn decode_b64_hist(b64: &str) -> Histogram<u64> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    Deserializer::new().deserialize(&mut &raw[..]).unwrap()
}

/// Three runs append three rows that a standard CSV reader parses; a file
/// with other columns is refused with a message naming it, and left alone.
#[test]
fn summary_csv_from_three_runs_parses_and_a_foreign_header_is_refused() {
    let _g = serial();
    let dir = scratch();
    let out = dir.path().join("out");
    for (i, rate) in ["20", "40", "inf"].iter().enumerate() {
        let text = scenario(
            "csv",
            i as u64,
            &format!("[load]\nnum_prompts = 12\nrequest_rate = \"{rate}\"\n"),
        );
        assert_ok(&run_in(dir.path(), "s.toml", &text, &out, &[]));
    }
    let (header, rows) = read_csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.len() == header.len()));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rates: Vec<&str> = rows
        .iter()
        .map(|r| r[col("request_rate_configured")].as_str())
        .collect();
    assert_eq!(rates, ["20", "40", "inf"]);
    assert!(rows.iter().all(|r| r[col("completed")] == "12"));

    let foreign = dir.path().join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    let theirs = "Provider,Model,Qps\nvllm,llama,1.0\n";
    std::fs::write(foreign.join("summary.csv"), theirs).unwrap();
    let text = scenario("csv", 9, "[load]\nnum_prompts = 4\n");
    let r = run_in(dir.path(), "s.toml", &text, &foreign, &[]);
    assert_ne!(r.code, Some(0), "appending to a foreign CSV must fail");
    assert!(
        r.stderr.contains("refusing to append") && r.stderr.contains("summary.csv"),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read_to_string(foreign.join("summary.csv")).unwrap(),
        theirs
    );
}

/// `cicada report a.json b.json` prints a Markdown table with one row per run;
/// `--merge` re-merges the histograms exactly: its percentiles equal those of
/// one histogram of every request both runs made (from `requests.jsonl`).
#[test]
fn report_compares_runs_and_merges_them_exactly() {
    let _g = serial();
    let dir = scratch();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let text_a = scenario("run-a", 1, "[load]\nnum_prompts = 40\nrequest_rate = 40\n");
    let text_b = scenario(
        "run-b",
        2,
        "[load]\nnum_prompts = 30\nmax_concurrency = 4\n[mock.faults]\nhttp_500 = 0.1\n",
    );
    assert_ok(&run_in(
        dir.path(),
        "a.toml",
        &text_a,
        &a,
        &["--save-detailed"],
    ));
    assert_ok(&run_in(
        dir.path(),
        "b.toml",
        &text_b,
        &b,
        &["--save-detailed"],
    ));
    let (ja, jb) = (a.join("result.json"), b.join("result.json"));
    let (pa, pb) = (ja.to_str().unwrap(), jb.to_str().unwrap());

    let md = coord_cmd(&["report", pa, pb, "--format", "markdown"]);
    assert_ok(&md);
    let lines: Vec<&str> = md.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "header, alignment and one row per run:\n{}",
        md.stdout
    );
    let cols = lines[0].matches('|').count();
    assert!(
        lines[0].starts_with("| Run | Model | Concurrency |"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("Mean TTFT (ms)") && lines[0].contains("Mean TPOT (ms)"));
    assert!(lines[1].chars().all(|c| "|-: ".contains(c)), "{}", lines[1]);
    for l in &lines {
        assert!(l.starts_with('|') && l.ends_with('|'), "{l}");
        assert_eq!(l.matches('|').count(), cols, "{l}");
    }
    assert!(lines[2].contains(pa) && lines[3].contains(pb));
    assert!(
        lines[3].contains("| 4 |"),
        "concurrency of run b: {}",
        lines[3]
    );

    let csv_out = coord_cmd(&["report", pa, pb, "--format", "csv"]);
    assert_ok(&csv_out);
    let mut rdr = csv::Reader::from_reader(csv_out.stdout.as_bytes());
    assert_eq!(rdr.records().count(), 2);

    let merged = coord_cmd(&["report", pa, pb, "--merge", "--format", "json"]);
    assert_ok(&merged);
    let m: serde_json::Value = serde_json::from_str(&merged.stdout).unwrap();
    let m = &m[0];
    let (ra, rb) = (read_json(&ja), read_json(&jb));
    assert_eq!(
        m["completed"].as_u64().unwrap(),
        ra["completed"].as_u64().unwrap() + rb["completed"].as_u64().unwrap()
    );
    assert_eq!(
        m["failed"].as_u64().unwrap(),
        ra["failed"].as_u64().unwrap() + rb["failed"].as_u64().unwrap()
    );
    assert!(rb["failed"].as_u64().unwrap() > 0, "run b injects failures");
    // one histogram of every sample of both runs
    let (mut ttft, mut e2el) = samples(&a.join("requests.jsonl"));
    let (t2, e2) = samples(&b.join("requests.jsonl"));
    ttft.extend(t2);
    e2el.extend(e2);
    assert_eq!(ttft.len() as u64, m["completed"].as_u64().unwrap());
    for (metric, values) in [("ttft", &ttft), ("e2el", &e2el)] {
        let h = hdr(values);
        for (p, q) in [("50", 0.5), ("90", 0.9), ("99", 0.99), ("99.9", 0.999)] {
            let want = h.value_at_quantile(q) as f64 * 1e-3;
            let got = m[format!("p{p}_{metric}_ms")].as_f64().unwrap();
            assert!(
                (got - want).abs() < 1e-9,
                "{metric} p{p}: merged {got}, one histogram {want}"
            );
        }
        let mean = values.iter().sum::<u64>() as f64 / values.len() as f64 * 1e-3;
        let got = m[format!("mean_{metric}_ms")].as_f64().unwrap();
        assert!((got - mean).abs() < 1e-9, "{metric} mean: {got} vs {mean}");
    }

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"duration\": 1}").unwrap();
    let r = coord_cmd(&["report", pa, bad.to_str().unwrap(), "--merge"]);
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr.contains("bad.json") && r.stderr.contains("cicada.histograms"),
        "{}",
        r.stderr
    );
}

/// `timeseries.csv`, the `.hlog` and `requests.jsonl` cover the whole run:
/// interval rows add up to the totals, the interval log reads back with the
/// hdrhistogram crate and its TTFT histograms add up to result.json's exactly.
#[test]
fn streamed_files_cover_the_run() {
    let _g = serial();
    let dir = scratch();
    let out = dir.path().join("out");
    let text = scenario(
        "streams",
        5,
        "[load]\nnum_prompts = 60\nrequest_rate = 25\nreport_interval = \"500ms\"\n",
    );
    assert_ok(&run_in(
        dir.path(),
        "s.toml",
        &text,
        &out,
        &["--save-detailed"],
    ));
    let result = read_json(&out.join("result.json"));
    let sent = result["cicada"]["sent"].as_u64().unwrap();
    assert_eq!(sent, 60);

    let (header, rows) = read_csv(&out.join("timeseries.csv"));
    assert_eq!(
        header,
        [
            "stage", "interval", "start_s", "end_s", "metric", "unit", "stat", "value"
        ]
    );
    let total = |metric: &str, stat: &str| -> f64 {
        rows.iter()
            .filter(|r| r[4] == metric && r[6] == stat)
            .map(|r| r[7].parse::<f64>().unwrap())
            .sum()
    };
    assert_eq!(total("requests", "ended"), 60.0);
    assert_eq!(
        total("ttft", "count"),
        result["completed"].as_f64().unwrap()
    );
    assert_eq!(
        total("output_tokens", "total"),
        result["total_output_tokens"].as_f64().unwrap()
    );
    let intervals: BTreeSet<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert!(
        intervals.len() >= 4,
        "a 2.4 s run in 0.5 s intervals: {intervals:?}"
    );
    assert!(rows.iter().any(|r| r[2] == "0.5" && r[3] == "1"));

    let bytes = std::fs::read(out.join("intervals.hlog")).unwrap();
    let mut ttft = hdr(&[]);
    let mut base_time = None;
    for entry in IntervalLogIterator::new(&bytes) {
        match entry.unwrap() {
            LogEntry::BaseTime(t) => base_time = Some(t),
            LogEntry::Interval(h) if h.tag().map(|t| t.as_str()) == Some("ttft") => {
                ttft.add(decode_b64_hist(h.encoded_histogram())).unwrap();
            }
            _ => {}
        }
    }
    let started = result["cicada"]["started_unix"].as_f64().unwrap();
    let base = base_time.expect("the log has a BaseTime").as_secs_f64();
    assert!(
        (base - started).abs() < 0.01,
        "BaseTime {base} vs barrier {started}"
    );
    let whole = decode_b64_hist(
        result["cicada"]["histograms"]["ttft"]["data"]
            .as_str()
            .unwrap(),
    );
    assert_eq!(ttft, whole, "interval histograms add up to the run's");

    let jsonl = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let indices: BTreeSet<u64> = jsonl
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["index"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        indices,
        (0..60).collect::<BTreeSet<u64>>(),
        "one line per request"
    );
    let workers: BTreeSet<u64> = jsonl
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["worker"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(workers, BTreeSet::from([0, 1]));
    // versions and the measured window for re-merging
    assert_eq!(
        result["cicada"]["worker_shares"][0]["version"],
        result["cicada"]["version"]
    );
    assert!(result["cicada"]["window_start_s"].is_number());
}

/// The report of a two-stage sweep loads in headless Chromium without script
/// errors, its script runs to the end, and a screenshot shows the charts'
/// coloured lines.
#[test]
fn html_report_renders_in_headless_chromium() {
    let _g = serial();
    let dir = scratch();
    let out = dir.path().join("out");
    let text = scenario(
        "html",
        3,
        "[load]\nnum_prompts = 40\nrequest_rate = 40\n[mock.faults]\nhttp_500 = 0.1\n[sweep]\nmax_concurrency = [2, 8]\n",
    );
    assert_ok(&run_in(dir.path(), "s.toml", &text, &out, &[]));
    let page = out.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    for external in ["src=\"http", "href=\"http", "@import", "url("] {
        assert!(
            !html.contains(external),
            "the page must not fetch anything: {external}"
        );
    }
    let charts = html.matches("<svg class=\"chart").count();
    assert_eq!(
        charts, 11,
        "sweep, percentile, over-time and outcome charts"
    );

    let dom = dump_dom(&page);
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "the page's script did not finish:\n{dom}"
    );
    assert!(
        dom.contains(&format!("data-charts=\"{charts}\"")),
        "the script saw a different number of charts"
    );
    let errors = dom
        .split("id=\"render-errors\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .expect("the error box is in the page");
    assert!(errors.trim().is_empty(), "script errors: {errors}");
    assert!(dom.matches("<polyline").count() > 20, "lines were drawn");
    assert!(dom.contains("TTFT vs output throughput"));

    let png_path = dir.path().join("report.png");
    screenshot(&page, &png_path, 1280, 2600);
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let img = &buf[..info.buffer_size()];
    assert_eq!((info.width, info.height), (1280, 2600));
    let blue = pixels_like(img, channels, (0x00, 0x72, 0xb2));
    let orange = pixels_like(img, channels, (0xd5, 0x5e, 0x00));
    let green = pixels_like(img, channels, (0x00, 0x9e, 0x73));
    assert!(
        blue > 2_000 && orange > 1_000 && green > 200,
        "the screenshot shows too little chart ink: blue {blue}, orange {orange}, green {green}"
    );
}
