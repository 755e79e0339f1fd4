//! Issue 35: CI's entry point cannot be told to check nothing. `CICADA_BLESS`
//! makes every golden test rewrite its file and pass, so `.ci/run` refuses to
//! start with it set (to anything, empty included: the tests only ask whether
//! it is set), before any install, lint or test.
//!
//! `.ci/run` runs here from a scratch copy of the repository's layout that
//! holds only the script itself and stand-ins for every program it starts
//! (`cargo` on PATH, every script under `scripts/`). Each stand-in
//! records that it ran and fails, so the real suite cannot start from this
//! test however the guard breaks, and a record proves work began.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cicada_tests::{repo_root, scratch, write};

/// A stand-in that records its own name and arguments in `ran` and fails.
fn stand_in(dir: &Path, name: &str, ran: &Path) {
    let text = format!(
        "#!/usr/bin/env bash\necho \"{name} $*\" >> '{}'\nexit 1\n",
        ran.display()
    );
    let p = write(dir, name, &text);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Run a copy of `.ci/run` among stand-ins with `bless` as CICADA_BLESS
/// (`None`: unset); returns its output and what the stand-ins recorded.
fn ci_run(bless: Option<&str>) -> (Output, String) {
    let dir = scratch();
    let root = dir.path().join("repo");
    for sub in [".ci", "scripts", "bin"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::copy(repo_root().join(".ci/run"), root.join(".ci/run")).unwrap();
    let ran: PathBuf = dir.path().join("ran.log");
    stand_in(&root.join("bin"), "cargo", &ran);
    // every script of the repository's, whichever .ci/run starts
    for entry in std::fs::read_dir(repo_root().join("scripts")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".sh") {
            stand_in(&root.join("scripts"), &name, &ran);
        }
    }
    let mut cmd = Command::new("bash");
    cmd.arg(root.join(".ci/run"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", root.join("bin").display()),
        )
        .env("HOME", dir.path())
        .env("CICADA_CACHE", dir.path().join("cache"))
        .env_remove("CICADA_BLESS")
        .stdin(Stdio::null());
    if let Some(v) = bless {
        cmd.env("CICADA_BLESS", v);
    }
    let out = cmd.output().expect("running bash .ci/run");
    let log = std::fs::read_to_string(&ran).unwrap_or_default();
    (out, log)
}

#[test]
fn ci_refuses_to_run_with_cicada_bless_set() {
    for value in ["1", ""] {
        let (out, ran) = ci_run(Some(value));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "CICADA_BLESS={value:?}: .ci/run must refuse with exit code 2; stderr:\n{stderr}"
        );
        assert!(
            stderr.contains("refusing to run with CICADA_BLESS set"),
            "CICADA_BLESS={value:?}: the refusal must say why: {stderr}"
        );
        assert!(
            ran.is_empty(),
            "CICADA_BLESS={value:?}: .ci/run started work before refusing:\n{ran}"
        );
    }
}

/// The stand-ins see work begin when CICADA_BLESS is unset, so the test
/// above, finding none, means the guard stopped it.
#[test]
fn without_cicada_bless_ci_starts_its_work() {
    let (out, ran) = ci_run(None);
    assert!(
        !out.status.success(),
        "a stand-in fails, so .ci/run must too"
    );
    assert!(
        ran.starts_with("system-packages.sh"),
        ".ci/run's first step is the system packages; the stand-ins saw:\n{ran}"
    );
}
