//! Length distributions (issue 37, item 4): lengths drawn per request from
//! a distribution are drawn once, by the coordinator, per request index, so
//! 1, 2 and 4 workers send the server the same lengths; a bad length table
//! stops the run before anything is sent.

use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

/// A lognormal input and a mix of a short constant answer and long uniform ones.
const LENGTHS: &str = r#"[dataset]
kind = "random"
[dataset.input_len]
dist = "lognormal"
mean = 120
sigma = 0.6
min = 8
max = 600
[[dataset.output_len.mix]]
weight = 0.7
dist = "constant"
value = 4
[[dataset.output_len.mix]]
weight = 0.3
dist = "uniform"
min = 16
max = 48
[load]
num_prompts = 240
request_rate = "inf"
max_concurrency = 24
"#;

/// (prompt tokens, max_tokens) of every request the mock saw, sorted.
fn lengths_seen(mock: &Mock) -> Vec<(u64, u64)> {
    let mut seen: Vec<(u64, u64)> = mock
        .requests()
        .iter()
        .map(|r| {
            (
                r["prompt_tokens"].as_u64().unwrap(),
                r["max_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    seen.sort_unstable();
    seen
}

#[test]
fn one_two_and_four_workers_send_the_same_drawn_lengths() {
    let _g = serial();
    let mut runs = Vec::new();
    for workers in ["1", "2", "4"] {
        let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
        let dir = scratch();
        let text = mock_chat_scenario("lengths", 11, &mock.url, LENGTHS);
        let (run, result) = run_scenario(dir.path(), "s", &text, workers, &[], LIMIT);
        assert_ok(&run);
        assert_eq!(result["completed"].as_u64(), Some(240), "{workers} workers");
        // the run says what it drew, on its dataset line and in result.json
        assert!(
            run.stderr
                .contains("input_len lognormal(mean 120, sigma 0.6) in [8, 600]: pool min ")
                && run.stderr.contains(
                    "output_len mix[70% constant 4, 30% uniform in [16, 48]]: pool min 4"
                ),
            "{}",
            run.stderr
        );
        // and its figures are the mock's: every pool entry is sent once
        let seen = lengths_seen(&mock);
        let drawn = &result["cicada"]["dataset"]["lengths"];
        assert_eq!(drawn[0]["key"], "input_len", "{drawn}");
        assert_eq!(drawn[1]["key"], "output_len", "{drawn}");
        let (inputs, outputs): (Vec<u64>, Vec<u64>) = seen.iter().copied().unzip();
        for (figures, sent) in [(&drawn[0], inputs), (&drawn[1], outputs)] {
            let mean = sent.iter().sum::<u64>() as f64 / sent.len() as f64;
            assert_eq!(
                figures["min"].as_u64(),
                sent.iter().min().copied(),
                "{figures}"
            );
            assert_eq!(
                figures["max"].as_u64(),
                sent.iter().max().copied(),
                "{figures}"
            );
            assert!(
                (figures["mean"].as_f64().unwrap() - mean).abs() < 1e-9,
                "{figures}"
            );
        }
        runs.push((workers, seen));
    }
    let (_, one) = &runs[0];
    assert_eq!(one.len(), 240);
    for (workers, seen) in &runs[1..] {
        assert_eq!(
            seen, one,
            "{workers} workers sent other (input, max_tokens) pairs than 1 worker"
        );
    }
    // the lengths are the asked distributions, not one repeated value
    let inputs: std::collections::BTreeSet<u64> = one.iter().map(|p| p.0).collect();
    assert!(inputs.len() > 60, "{} distinct input lengths", inputs.len());
    assert!(one.iter().all(|(i, _)| (8..=600).contains(i)), "{one:?}");
    let short = one.iter().filter(|p| p.1 == 4).count();
    // 240 draws at 0.7: mean 168, sd 7.1
    assert!(
        (140..=196).contains(&short),
        "{short} of 240 at the 0.7 component"
    );
    assert!(
        one.iter().all(|(_, o)| *o == 4 || (16..=48).contains(o)),
        "{one:?}"
    );
}

#[test]
fn a_bad_length_table_names_file_line_and_key_and_sends_nothing() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
    let dir = scratch();
    let cases = [
        (
            LENGTHS.replace("sigma = 0.6", "sigma = -0.6"),
            ":12: `dataset.input_len.sigma`: must be ≥ 0, got -0.6",
        ),
        (
            LENGTHS.replace("min = 8", "min = 0"),
            ":13: `dataset.input_len.min`: must be at least 1, got 0",
        ),
        (
            LENGTHS.replace("min = 16", "min = 64"),
            ":22: `dataset.output_len.mix[1].min`: must not exceed max (48), got 64",
        ),
        (
            LENGTHS
                .replace("weight = 0.7", "weight = 0")
                .replace("weight = 0.3", "weight = 0"),
            ":15: `dataset.output_len.mix`: the weights sum to zero",
        ),
        (
            LENGTHS.replace("\"lognormal\"", "\"gamma\""),
            ":10: `dataset.input_len.dist`: unknown value \"gamma\"",
        ),
    ];
    for (i, (dataset, expect)) in cases.iter().enumerate() {
        let text = mock_chat_scenario("bad", 1, &mock.url, dataset);
        let (run, result) = run_scenario(dir.path(), &format!("bad{i}"), &text, "2", &[], LIMIT);
        assert_ne!(run.code, Some(0), "{expect}: the run did not fail");
        assert!(result.is_null(), "{expect}: a result was written");
        let file = dir.path().join(format!("bad{i}.toml"));
        let want = format!("{}{expect}", file.display());
        assert!(run.stderr.contains(&want), "want {want}\n{}", run.stderr);
    }
    assert_eq!(
        mock.stats()["requests"].as_u64(),
        Some(0),
        "a request was sent"
    );
}
