//! The old names, kept for one release: `coord` is `cicada` and `worker` is
//! `cicada worker`, each after one line on stderr saying so; arguments,
//! output and exit codes pass through unchanged.

use std::process::Command;

use cicada_tests::{bin_dir, repo_root};

fn run(alias: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin_dir().join(alias))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {alias}: {e}"));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn coord_is_cicada_with_a_deprecation_line() {
    let quickstart = repo_root().join("examples/quickstart.toml");
    let (code, out, err) = run("coord", &["validate", quickstart.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("quickstart.toml: ok"), "{out}");
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        ["coord: this name is deprecated and goes in the next release; run `cicada` instead"],
    );
    // exit codes pass through
    let (code, _, err) = run("coord", &["validate", "/nonexistent/scenario.toml"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn worker_is_cicada_worker() {
    let (code, out, err) = run("worker", &["--help"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("--coordinator"), "{out}");
    assert!(out.contains("cicada worker"), "{out}");
    assert!(
        err.contains("worker: this name is deprecated and goes in the next release; run `cicada worker` instead"),
        "{err}"
    );
}
