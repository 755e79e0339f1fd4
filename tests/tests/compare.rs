//! Issue 27, comparison pictures: `cicada report --html` draws the curves
//! of several configurations from real `cicada run` sweeps against the
//! built-in mock (two mock delays, one of them a reasoning model), and the
//! page renders in headless Chromium.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cicada_tests::browser::{dump_dom, pixels_like, screenshot};
use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);
/// The two configurations: the mock's time to first token, ms, and its
/// thinking tokens per answer (the slow one reasons).
const FAST: (&str, u32, u32) = ("mock-fast", 15, 0);
const SLOW: (&str, u32, u32) = ("mock-slow", 60, 2);

/// A `max_concurrency` sweep of 1 and 4 against the embedded mock.
fn scenario((name, ttft_ms, thinking): (&str, u32, u32)) -> String {
    format!(
        r#"
name = "{name}"
seed = 11
[target]
backend = "mock"
[mock]
ttft_ms = {ttft_ms}
itl_ms = 2
reasoning_tokens = {thinking}
[dataset]
kind = "random"
input_len = 16
output_len = 8
[load]
num_prompts = 16
[sweep]
max_concurrency = [1, 4]
"#
    )
}

/// Run one configuration's sweep into `dir/<name>`; its stage files.
fn sweep(dir: &Path, config: (&str, u32, u32)) -> Vec<PathBuf> {
    let sc = write(dir, &format!("{}.toml", config.0), &scenario(config));
    let out = dir.join(config.0);
    let r = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    assert_ok(&r);
    let stages: Vec<PathBuf> = (1..=2)
        .map(|n| out.join(format!("result-stage{n}.json")))
        .collect();
    for s in &stages {
        assert!(s.is_file(), "{} missing", s.display());
    }
    stages
}

fn report(args: &[&str]) -> Run {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    coord_run(&all, LIMIT)
}

/// The page's table row of `label` at x `x` (its cells' text).
fn row(html: &str, label: &str, x: &str) -> Vec<String> {
    let table = html
        .split("<table id=\"points\">")
        .nth(1)
        .expect("the points table");
    table
        .split("<tr>")
        .skip(2)
        .map(|r| {
            r.split("<td")
                .skip(1)
                .map(|c| {
                    let c = c.split_once('>').map_or("", |(_, rest)| rest);
                    c.split("</td>").next().unwrap_or("").to_string()
                })
                .collect::<Vec<String>>()
        })
        .find(|cells| cells[0] == label && cells[2] == x)
        .unwrap_or_else(|| panic!("no row for {label} at {x}:\n{table}"))
}

fn ms(v: &Value) -> String {
    format!("{:.2}", v.as_f64().expect("a number"))
}

/// Two sweeps, one line each: every stage is a point at its configured
/// concurrency, the table carries each stage file's own figures, the
/// reasoning configuration adds the TTFA chart and columns, and the slow
/// mock's TTFT sits above the fast one's as the mock was told. Labels and
/// the axis can be set; bad arguments exit 2.
#[test]
fn report_html_draws_two_sweeps_as_two_lines() {
    let _g = serial();
    let dir = scratch();
    let d = dir.path();
    let fast = sweep(d, FAST);
    let slow = sweep(d, SLOW);
    let page = d.join("cmp.html");
    // a glob left for cicada to expand, and a directory
    let glob = d.join("mock-fast/result-stage*.json");
    let r = report(&[
        "--html",
        page.to_str().unwrap(),
        glob.to_str().unwrap(),
        d.join("mock-slow").to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("4 points, 2 configuration(s): mock-fast, mock-slow; x axis: concurrency"),
        "{}",
        r.stderr
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for external in ["src=\"http", "href=\"http", "@import", "url("] {
        assert!(!html.contains(external), "the page fetches: {external}");
    }
    assert!(!html.contains("<script"), "the page needs no script");
    // throughput, TTFT, TPOT, TTFA against concurrency; two against throughput
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 6);
    for (config, stages) in [(FAST, &fast), (SLOW, &slow)] {
        assert!(html.contains(&format!("data-label=\"{}\"", config.0)));
        for (n, path) in stages.iter().enumerate() {
            let j = read_json(path);
            let x = if n == 0 { "1.00" } else { "4.00" };
            let cells = row(&html, config.0, x);
            assert_eq!(cells[1], format!("stage {}", n + 1));
            assert_eq!(cells[3], j["completed"].to_string());
            assert_eq!(cells[6], ms(&j["output_throughput"]));
            assert_eq!(cells[7], ms(&j["median_ttft_ms"]));
            assert_eq!(cells[8], ms(&j["p99_ttft_ms"]));
            assert_eq!(cells[12], ms(&j["p99_e2el_ms"]));
        }
    }
    // the mock's ground truth
    for x in ["1.00", "4.00"] {
        let f = row(&html, FAST.0, x);
        let s = row(&html, SLOW.0, x);
        let num = |c: &str| c.parse::<f64>().unwrap();
        assert!(num(&f[7]) >= f64::from(FAST.1), "fast TTFT p50 {}", f[7]);
        assert!(num(&s[7]) >= f64::from(SLOW.1), "slow TTFT p50 {}", s[7]);
        assert!(num(&s[7]) > num(&f[7]), "slow above fast at {x}");
        // only the slow one reasoned: its TTFA comes after its TTFT; the
        // fast one's reasoning figures are absent, not 0
        assert_eq!((f[13].as_str(), f[14].as_str()), ("–", "–"), "{f:?}");
        assert_eq!(s[13], "16", "{s:?}");
        assert!(num(&s[14]) > num(&s[7]), "TTFA after TTFT: {s:?}");
    }
    let slow2 = read_json(&slow[1]);
    let s = row(&html, SLOW.0, "4.00");
    assert_eq!(s[14], ms(&slow2["cicada"]["metrics"]["ttfa"]["median"]));

    // labels by glob, and the rate axis (unbounded rates: achieved ones stand in)
    let r = report(&[
        "--html",
        page.to_str().unwrap(),
        "--label",
        &format!("quick={}", d.join("mock-fast").display()),
        "--label",
        "thinking=*slow*",
        "--x-axis",
        "rate",
        d.join("mock-fast").to_str().unwrap(),
        d.join("mock-slow").to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("configuration(s): quick, thinking; x axis: rate"),
        "{}",
        r.stderr
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("(measured)</td>") && html.contains("as asked"));
    assert!(html.contains("TTFT p50 (solid) and p99 (dashed) vs rate (req/s)"));

    for bad in [
        vec![
            "--html",
            page.to_str().unwrap(),
            "--label",
            "nameless",
            "x.json",
        ],
        vec!["--html", page.to_str().unwrap(), "no-such-dir/*.json"],
        vec!["--label", "a=b", fast[0].to_str().unwrap()],
    ] {
        let r = report(&bad);
        assert_eq!(r.code, Some(2), "{bad:?}: {}", r.stderr);
    }
}

/// The comparison of two sweeps renders in headless Chromium: the DOM names
/// both configurations and holds their lines, and a screenshot shows both
/// colours' ink in the plot areas (far more than the legends' swatches).
#[test]
fn comparison_renders_in_headless_chromium() {
    let _g = serial();
    let dir = scratch();
    let d = dir.path();
    sweep(d, FAST);
    sweep(d, SLOW);
    let page = d.join("cmp.html");
    let r = report(&[
        "--html",
        page.to_str().unwrap(),
        d.join("mock-fast").to_str().unwrap(),
        d.join("mock-slow").to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);

    let dom = dump_dom(&page);
    let legend = dom
        .split("id=\"labels\">")
        .nth(1)
        .and_then(|s| s.split("</div>").next())
        .expect("the legend is in the page");
    for label in [FAST.0, SLOW.0] {
        assert!(
            legend.contains(label),
            "{label} not in the legend: {legend}"
        );
    }
    // p50 lines in 6 charts and p99 lines in 3, per configuration (the
    // fast one has no TTFA): 2 * 6 + 2 * 3 - 2
    assert_eq!(dom.matches("<polyline").count(), 16, "{dom}");

    let png_path = d.join("cmp.png");
    screenshot(&page, &png_path, 1280, 1800);
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let img = &buf[..info.buffer_size()];
    assert_eq!((info.width, info.height), (1280, 1800));
    // label 0 is blue, label 1 orange (svg::PALETTE)
    let blue = pixels_like(img, channels, (0x00, 0x72, 0xb2));
    let orange = pixels_like(img, channels, (0xd5, 0x5e, 0x00));
    assert!(
        blue > 2_000 && orange > 2_000,
        "the screenshot shows too little of the curves: blue {blue}, orange {orange}"
    );
}
