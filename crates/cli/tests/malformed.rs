//! Every malformed scenario in `crates/scenarios/tests/malformed/` makes the
//! real `cicada validate` exit 2 with one located line naming the key, never a panic.
//!
//! Each file says what it expects in its leading comments:
//! `# expect: at=LINE key=KEY` (`at=file` when the key is not in the file,
//! `at=cli` when a `--set` is to blame) and `# set: KEY=VALUE` for overrides.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How many malformed scenarios the corpus must hold at least (issue 8's acceptance).
const MIN_CORPUS: usize = 30;

#[derive(Debug)]
enum At {
    Line(usize),
    File,
    CommandLine,
}

#[derive(Debug)]
struct Expectation {
    at: At,
    key: String,
    sets: Vec<String>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/tests/malformed")
        .canonicalize()
        .expect("the malformed corpus exists")
}

fn expectation(path: &Path) -> Expectation {
    let bytes = std::fs::read(path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let mut sets = Vec::new();
    let mut expect = None;
    for line in text.lines() {
        let line = line.trim_start_matches('\u{feff}').trim_end();
        if let Some(spec) = line.strip_prefix("# set: ") {
            sets.push(spec.to_string());
        } else if let Some(rest) = line.strip_prefix("# expect: ") {
            let mut at = None;
            let mut key = None;
            for field in rest.split_whitespace() {
                match field.split_once('=') {
                    Some(("at", "file")) => at = Some(At::File),
                    Some(("at", "cli")) => at = Some(At::CommandLine),
                    Some(("at", n)) => at = Some(At::Line(n.parse().expect("at=LINE"))),
                    Some(("key", k)) => key = Some(k.to_string()),
                    _ => panic!("{}: unknown expect field {field}", path.display()),
                }
            }
            expect = Some((
                at.unwrap_or_else(|| panic!("{}: expect needs at=", path.display())),
                key.unwrap_or_else(|| panic!("{}: expect needs key=", path.display())),
            ));
        }
    }
    let (at, key) = expect.unwrap_or_else(|| panic!("{}: no `# expect:` comment", path.display()));
    Expectation { at, key, sets }
}

fn validate(path: &Path, sets: &[String]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cicada"));
    cmd.arg("validate").arg(path).env("RUST_BACKTRACE", "1");
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    let out = cmd.output().expect("running cicada validate");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One paragraph: a single `error: ` line, nothing from a panic.
fn assert_clean(what: &str, code: Option<i32>, stdout: &str, stderr: &str) -> String {
    assert_eq!(code, Some(2), "{what}: exit code; stderr:\n{stderr}");
    assert!(stdout.is_empty(), "{what}: stdout: {stdout}");
    for bad in ["panicked", "stack backtrace", "RUST_BACKTRACE"] {
        assert!(!stderr.contains(bad), "{what}: {bad} in stderr:\n{stderr}");
    }
    assert_eq!(stderr.lines().count(), 1, "{what}: not one line:\n{stderr}");
    let message = stderr
        .trim_end()
        .strip_prefix("error: ")
        .unwrap_or_else(|| panic!("{what}: no `error: ` prefix: {stderr}"));
    message.to_string()
}

#[test]
fn every_malformed_scenario_gets_a_located_one_line_error() {
    let dir = corpus_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= MIN_CORPUS,
        "only {} malformed scenarios in {}",
        files.len(),
        dir.display()
    );
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let expect = expectation(path);
        let (code, stdout, stderr) = validate(path, &expect.sets);
        let result = std::panic::catch_unwind(|| {
            let message = assert_clean(&name, code, &stdout, &stderr);
            let prefix = match expect.at {
                At::Line(n) => format!("{}:{n}:", path.display()),
                At::File => format!("{}: ", path.display()),
                At::CommandLine => "command line (--set".to_string(),
            };
            assert!(
                message.starts_with(&prefix),
                "{name}: expected `{prefix}` first, got: {message}"
            );
            let key = format!("`{}`", expect.key);
            assert!(message.contains(&key), "{name}: {key} not named: {message}");
            let (_, said) = message.split_once(&key).unwrap();
            assert!(
                said.trim_start_matches(':').trim().len() > 5,
                "{name}: no explanation after the key: {message}"
            );
        });
        if result.is_err() {
            failures.push(name);
        }
    }
    assert!(failures.is_empty(), "failed: {failures:?}");
}

#[test]
fn a_missing_scenario_file_is_named() {
    let path = corpus_dir().join("does-not-exist.toml");
    let (code, stdout, stderr) = validate(&path, &[]);
    let message = assert_clean("missing file", code, &stdout, &stderr);
    assert!(
        message.starts_with(&format!("{}: cannot read the scenario", path.display())),
        "{message}"
    );
}
