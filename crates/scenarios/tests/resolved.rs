//! What the scenario reader makes of a fixed set of inputs, byte for byte:
//! the resolved scenario (as it is written into `result.json`) of every
//! example and of made-up scenarios that give every `[dataset]` kind every
//! key it takes, and the error text of every malformed scenario. A change to
//! how scenarios are read that means to change none of this keeps this file's
//! fixture as it is; one that means to reblesses it (`CICADA_BLESS=1`) so the
//! diff shows what a user will see differently.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use cicada_scenarios::{Override, load_file, parse};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    out
}

/// Scenarios that are not among the examples: every dataset kind with every
/// key it applies to, and with none (its defaults), and the other sections.
const MADE_UP: [(&str, &str); 14] = [
    ("random-defaults", "[target]\nbackend = \"mock\"\n"),
    (
        "random-every-key",
        "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"random\"\ninput_len = 10\noutput_len = 4\nrange_ratio = 0.5\nprefix_len = 3\n",
    ),
    (
        "sharegpt",
        "[target]\nbackend = \"mock\"\n[tokenizer]\nsource = \"t\"\n[dataset]\nkind = \"sharegpt\"\npath = \"x.json\"\n",
    ),
    (
        "sharegpt-every-key",
        "[target]\nbackend = \"mock\"\n[tokenizer]\nsource = \"t\"\n[dataset]\nkind = \"sharegpt\"\npath = \"x.json\"\noutput_len = 7\nshuffle = false\n",
    ),
    (
        "sonnet",
        "[target]\nbackend = \"mock\"\n[tokenizer]\nsource = \"t\"\n[dataset]\nkind = \"sonnet\"\npath = \"s.txt\"\n",
    ),
    (
        "prefix",
        "[target]\nbackend = \"mock\"\n[tokenizer]\nsource = \"t\"\n[dataset]\nkind = \"prefix\"\n",
    ),
    (
        "prefix-every-key",
        "[target]\nbackend = \"mock\"\n[tokenizer]\nsource = \"t\"\n[dataset]\nkind = \"prefix\"\nnum_prefixes = 2\nprefix_len = 5\nsuffix_len = 6\noutput_len = 7\nshuffle = false\n",
    ),
    (
        "jsonl",
        "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"jsonl\"\npath = \"p.jsonl\"\n",
    ),
    (
        "jsonl-every-key",
        "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"jsonl\"\npath = \"p.jsonl\"\noutput_len = 9\nshuffle = false\n",
    ),
    (
        "conversations-every-key",
        "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"conversations\"\npath = \"c.jsonl\"\nthink_time = \"2s\"\nmax_turns = 3\noutput_len = 8\nshuffle = false\n",
    ),
    (
        "trace-every-key",
        "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"trace\"\npath = \"t.jsonl\"\nspeed = 2.5\nblock_size = 16\n",
    ),
    (
        "mock-and-target",
        "name = \"m\"\nseed = 7\n[target]\nbackend = \"mock\"\ntimeout = \"30s\"\nkeep_alive = false\nheaders = { X-Team = \"perf\" }\n[mock]\napi = \"llamacpp-chat\"\nttft_ms = 5\neos_after_tokens = 3\nprompt_tokens_details = true\n[mock.faults]\nhttp_500 = 0.25\nstall = 0.125\n[sampling]\ntemperature = 0.5\nmin_tokens = 2\nextra_body = { foo = [1, 2] }\n[slo]\nttft_ms = 100\nmin_attainment = 0.5\n[output]\nmetric_percentiles = [50, 99.9]\nhtml = false\n",
    ),
    (
        "stages-and-closed-loop",
        "[target]\nbackend = \"vllm\"\nurls = [\"http://a:1\", \"http://b:2\"]\nrouting = \"least_in_flight\"\n[load]\nspawn_rate = 4\nthink_time = { uniform = [\"1s\", \"2s\"] }\nwarmup = \"5s\"\n[[stages]]\nname = \"low\"\nduration = \"10s\"\nusers = 4\n[[stages]]\nduration = \"20s\"\nusers = 16\n",
    ),
    (
        "sweep-and-ramp",
        "[target]\nbackend = \"sglang-chat\"\nbase_url = \"http://h:1/p\"\n[load]\nduration = \"1m\"\nburstiness = 0.5\nmax_concurrency = 64\n[load.ramp]\nstrategy = \"exponential\"\nstart_rps = 1\nend_rps = 8\n[sweep]\nmax_concurrency = [1, 8]\npause = \"3s\"\n",
    ),
];

/// `# set: ...` lines of a malformed scenario, as overrides.
fn sets(text: &str) -> Result<Vec<Override>, cicada_scenarios::ScenarioError> {
    text.lines()
        .filter_map(|l| l.trim_start_matches('\u{feff}').strip_prefix("# set: "))
        .map(|s| s.trim_end().parse())
        .collect()
}

fn render() -> String {
    let mut out = String::new();
    let root = root();
    let shown = |p: &Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    for path in files(&root.join("examples"), "toml") {
        let s = load_file(&path, &[]).unwrap().scenario;
        let json = serde_json::to_string_pretty(&s).unwrap();
        let json = json.replace(&root.display().to_string(), "<repo>");
        let _ = writeln!(out, "== {}\n{json}", shown(&path));
    }
    for (name, text) in MADE_UP {
        let s = parse(text, "made-up.toml", &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let json = serde_json::to_string_pretty(&s).unwrap();
        let _ = writeln!(out, "== {name}\n{json}");
    }
    let malformed = root.join("crates/scenarios/tests/malformed");
    for path in files(&malformed, "toml") {
        let bytes = std::fs::read(&path).unwrap();
        let e = match sets(&String::from_utf8_lossy(&bytes)).map(|o| load_file(&path, &o)) {
            Ok(Ok(_)) => "(no error)".to_string(),
            Ok(Err(e)) | Err(e) => e.to_string(),
        };
        let e = e.replace(&malformed.display().to_string(), "<malformed>");
        let _ = writeln!(out, "== {}\n{e}", shown(&path));
    }
    out
}

#[test]
fn scenarios_resolve_as_they_did() {
    let actual = render();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/resolved.txt");
    if std::env::var_os("CICADA_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        let section = expected
            .lines()
            .take(line + 1)
            .filter(|l| l.starts_with("== "))
            .last()
            .unwrap_or("");
        panic!(
            "{} differs at line {} (in {section}):\n expected: {:?}\n actual:   {:?}",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}
