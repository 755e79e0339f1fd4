//! What the flags make of a fixed set of command lines, byte for byte
//! (`tests/fixtures/flags.txt`; `CICADA_BLESS=1` rewrites it).
#![cfg(test)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::vllm::{VllmFlags, describe};

struct Case {
    name: &'static str,
    file: Option<&'static str>,
    flags: VllmFlags,
    sets: Vec<&'static str>,
    goodput: Vec<&'static str>,
    gates: (Option<f64>, Option<f64>),
}

fn case(name: &'static str, flags: VllmFlags) -> Case {
    Case {
        name,
        file: None,
        flags,
        sets: Vec::new(),
        goodput: Vec::new(),
        gates: (None, None),
    }
}

/// `cicada run`'s reading of the scenario, flags and overrides.
fn resolve(root: &Path, c: &Case) -> Result<crate::Scenario, String> {
    let sets: Vec<String> = c.sets.iter().map(|s| s.to_string()).collect();
    let goodput: Vec<String> = c.goodput.iter().map(|s| s.to_string()).collect();
    let file = c.file.map(|f| root.join(f));
    describe(file.as_deref(), &c.flags, &sets, &goodput, c.gates)
        .map(|l| l.scenario)
        .map_err(|e| e.to_string())
}

fn cases() -> Vec<Case> {
    let f = VllmFlags::default;
    vec![
        case("defaults", f()),
        case(
            "everyday",
            VllmFlags {
                backend: Some("openai-chat".into()),
                port: Some(9000),
                model: Some("true".into()),
                tokenizer: Some("org/tok".into()),
                dataset_name: Some("random".into()),
                num_prompts: Some(32),
                request_rate: Some("inf".into()),
                burstiness: Some(0.5),
                max_concurrency: Some(8),
                seed: Some(3),
                ignore_eos: true,
                save_detailed: true,
                percentile_metrics: Some("ttft, e2el".into()),
                metric_percentiles: Some("25,50,99.9".into()),
                result_dir: Some("out dir".into()),
                result_filename: Some("r.json".into()),
                random_input_len: Some(16),
                random_output_len: Some(4),
                random_range_ratio: Some(0.25),
                random_prefix_len: Some(2),
                temperature: Some(0.0),
                top_p: Some(0.9),
                top_k: Some(5),
                headers: vec!["X-Team=perf".into(), "X-B = two words ".into()],
                ready_check_timeout_sec: Some(0),
                ..f()
            },
        ),
        Case {
            file: Some("examples/quickstart.toml"),
            sets: vec!["load.burstiness=2", "target.model=my-model"],
            goodput: vec!["ttft:500", "TPOT:50.5"],
            gates: (Some(0.01), Some(0.9)),
            ..case(
                "file-flags-sets-goodput-gates",
                VllmFlags {
                    model: Some("flag-model".into()),
                    request_rate: Some("4".into()),
                    max_concurrency: Some(2),
                    base_url: None,
                    endpoint: Some("/v1/x".into()),
                    ..f()
                },
            )
        },
        Case {
            file: Some("examples/sharegpt.toml"),
            ..case(
                "file-with-host-port",
                VllmFlags {
                    backend: Some("vllm".into()),
                    host: Some("10.0.0.1".into()),
                    dataset_path: Some("other.json".into()),
                    ..f()
                },
            )
        },
        case(
            "mock",
            VllmFlags {
                backend: Some("mock".into()),
                ..f()
            },
        ),
        case(
            "llama.cpp",
            VllmFlags {
                backend: Some("llama.cpp".into()),
                request_rate: Some(" INF ".into()),
                ..f()
            },
        ),
        case(
            "tensorrt-llm",
            VllmFlags {
                backend: Some("tensorrt-llm".into()),
                base_url: Some("http://h:1/pre".into()),
                ..f()
            },
        ),
        case(
            "lmdeploy",
            VllmFlags {
                backend: Some("lmdeploy".into()),
                ..f()
            },
        ),
        case(
            "unknown-backend",
            VllmFlags {
                backend: Some("nope".into()),
                ..f()
            },
        ),
        case(
            "negative-rate",
            VllmFlags {
                request_rate: Some("-2".into()),
                ..f()
            },
        ),
        case(
            "word-rate",
            VllmFlags {
                request_rate: Some("fast".into()),
                ..f()
            },
        ),
        case(
            "bad-percentile",
            VllmFlags {
                metric_percentiles: Some("50,x".into()),
                ..f()
            },
        ),
        case(
            "percentile-out-of-range",
            VllmFlags {
                metric_percentiles: Some("50,101".into()),
                ..f()
            },
        ),
        case(
            "unknown-percentile-metric",
            VllmFlags {
                percentile_metrics: Some("ttft,nope".into()),
                ..f()
            },
        ),
        case(
            "header-without-value",
            VllmFlags {
                headers: vec!["nokey".into()],
                ..f()
            },
        ),
        case(
            "header-with-dot",
            VllmFlags {
                headers: vec!["a.b=1".into()],
                ..f()
            },
        ),
        case(
            "dataset-key-for-another-kind",
            VllmFlags {
                dataset_name: Some("jsonl".into()),
                dataset_path: Some("p.jsonl".into()),
                random_input_len: Some(5),
                ..f()
            },
        ),
        case(
            "unknown-dataset-kind",
            VllmFlags {
                dataset_name: Some("telepathy".into()),
                ..f()
            },
        ),
        Case {
            sets: vec!["load.max_concurrency=0"],
            ..case(
                "set-blamed-over-flag",
                VllmFlags {
                    max_concurrency: Some(3),
                    ..f()
                },
            )
        },
        case(
            "zero-max-concurrency",
            VllmFlags {
                max_concurrency: Some(0),
                ..f()
            },
        ),
        Case {
            goodput: vec!["ttft=5"],
            ..case("goodput-without-colon", f())
        },
        Case {
            goodput: vec!["foo:5"],
            ..case("goodput-unknown-metric", f())
        },
        Case {
            goodput: vec!["ttft:fast"],
            ..case("goodput-not-a-number", f())
        },
        Case {
            goodput: vec!["ttft:-5"],
            ..case("goodput-negative", f())
        },
        Case {
            gates: (Some(1.5), None),
            ..case("failure-ratio-out-of-range", f())
        },
        Case {
            gates: (None, Some(0.5)),
            ..case("attainment-without-slo", f())
        },
    ]
}

#[test]
fn flags_resolve_as_they_did() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let mut out = String::new();
    for c in cases() {
        let text = match resolve(&root, &c) {
            Ok(s) => serde_json::to_string_pretty(&s).unwrap(),
            Err(e) => format!("error: {e}"),
        };
        let text = text.replace(&root.display().to_string(), "<repo>");
        let _ = writeln!(out, "== {}\n{text}", c.name);
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flags.txt");
    if std::env::var_os("CICADA_BLESS").is_some() {
        std::fs::write(&path, &out).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    if let Some(line) = expected.lines().zip(out.lines()).position(|(a, b)| a != b) {
        panic!(
            "{} differs at line {}:\n expected: {:?}\n actual:   {:?}",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            out.lines().nth(line)
        );
    }
    assert_eq!(expected, out);
}
