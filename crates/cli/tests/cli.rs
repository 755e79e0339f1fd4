//! `cicada` command-line behaviour that needs no fleet.

use std::process::Command;

fn cicada(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cicada"))
        .args(args)
        .output()
        .expect("running cicada");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn validate_accepts_the_quickstart() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.toml"
    );
    let (code, out, err) = cicada(&["validate", path]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ok"), "{out}");
}

#[test]
fn validate_names_file_line_and_key_and_exits_2() {
    let dir = std::env::temp_dir().join(format!("cicada-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[target]\nbackend = \"mock\"\n\n[load]\nrequest_rate = -5\n",
    )
    .unwrap();
    let (code, _, err) = cicada(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("bad.toml:5: `load.request_rate`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let (code, _, err) = cicada(&["validate", dir.join("missing.toml").to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("missing.toml"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_with_a_bad_override_exits_2() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.toml"
    );
    let (code, _, err) = cicada(&["run", path, "--set", "load.burstiness=0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("command line (--set): `load.burstiness`"),
        "{err}"
    );
}

#[test]
fn run_without_a_scenario_checks_the_vllm_flags() {
    let (code, _, err) = cicada(&["run", "--request-rate=-3", "--num-prompts", "4"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("command line (--request-rate): `load.request_rate`"),
        "{err}"
    );
    let (code, _, err) = cicada(&["run", "--backend", "nope"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown backend"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
