//! Issue: Kubernetes. The container image recipe. No container engine runs on
//! the test machines, so the Dockerfile is checked for what it must be rather
//! than built: multi-stage, a release build of both binaries, a slim runtime
//! stage that runs as the same non-root user as the manifests, the programs
//! the manifests start on its PATH, and nothing secret in it.

#[allow(dead_code, reason = "this test uses a few of the shared k8s helpers")]
mod k8s;

use cicada_tests::repo_root;
use k8s::{Rendered, container, pod_spec};

/// One instruction: keyword (upper case) and its text, continuations joined.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if current.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(more) = t.strip_suffix('\\') {
            current.push_str(more);
            current.push(' ');
            continue;
        }
        current.push_str(t);
        let (kw, rest) = current.split_once(' ').unwrap_or((&current, ""));
        out.push((kw.to_ascii_uppercase(), rest.trim().to_string()));
        current.clear();
    }
    assert!(
        current.is_empty(),
        "the Dockerfile ends inside a continuation"
    );
    out
}

/// The stages: (image, name, instructions inside).
type Stage = (String, Option<String>, Vec<(String, String)>);

fn stages(ins: &[(String, String)]) -> Vec<Stage> {
    let mut out: Vec<Stage> = Vec::new();
    for (kw, rest) in ins {
        if kw == "FROM" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some(name.to_string()),
                [_] => None,
                _ => panic!("FROM {rest}: expected IMAGE [AS NAME]"),
            };
            out.push((words[0].to_string(), name, Vec::new()));
        } else if let Some(stage) = out.last_mut() {
            stage.2.push((kw.clone(), rest.clone()));
        } else {
            assert_eq!(kw, "ARG", "only ARG may come before the first FROM");
        }
    }
    out
}

#[test]
fn the_dockerfile_builds_both_binaries_into_a_slim_non_root_image() {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    let ins = instructions(&text);
    let st = stages(&ins);
    assert!(
        st.len() >= 2,
        "multi-stage: a build stage and a runtime stage"
    );
    let (build_image, build_name, build) = &st[0];
    let build_name = build_name.as_deref().expect("the build stage is named");
    assert!(build_image.starts_with("rust:"), "{build_image}");
    let cargo = build
        .iter()
        .find(|(k, r)| k == "RUN" && r.contains("cargo build"))
        .map(|(_, r)| r.as_str())
        .expect("the build stage runs cargo build");
    for want in ["--release", "--locked", "-p cicada ", "-p cicada-alias"] {
        assert!(cargo.contains(want), "cargo build lacks {want}: {cargo}");
    }

    // the runtime: slim, not the toolchain, runs as a non-root user
    let (runtime_image, _, runtime) = st.last().unwrap();
    assert!(
        runtime_image.contains("distroless")
            || runtime_image.contains("-slim")
            || runtime_image == "scratch",
        "the runtime image is slim: {runtime_image}"
    );
    assert!(!runtime_image.starts_with("rust:"));
    let user = runtime
        .iter()
        .rev()
        .find(|(k, _)| k == "USER")
        .map(|(_, r)| r.clone())
        .expect("the runtime stage sets USER");
    let uid: i64 = user
        .split(':')
        .next()
        .unwrap()
        .parse()
        .expect("a numeric USER, so runAsNonRoot can verify it");
    assert!(uid > 0, "USER {user} is root");

    // cicada and the old names' aliases come from the build stage into a
    // directory on PATH
    let copied: Vec<String> = runtime
        .iter()
        .filter(|(k, r)| k == "COPY" && r.starts_with(&format!("--from={build_name} ")))
        .flat_map(|(_, r)| {
            let words: Vec<&str> = r.split_whitespace().skip(1).collect();
            let (dest, sources) = words.split_last().unwrap();
            assert_eq!(*dest, "/usr/local/bin/", "binaries go to a PATH directory");
            sources
                .iter()
                .map(|s| s.rsplit('/').next().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    for bin in ["cicada", "coord", "worker"] {
        assert!(
            copied.iter().any(|c| c == bin),
            "{bin} is not copied: {copied:?}"
        );
    }

    // what the manifests start is in the image, as the image's user
    let rendered = Rendered::of(&repo_root().join("deploy/k8s"));
    for job in &rendered.jobs {
        let c = container(job);
        let program = &c.command.as_ref().unwrap()[0];
        assert!(copied.contains(program), "{program} is not in the image");
        let manifest_uid = pod_spec(job)
            .security_context
            .as_ref()
            .and_then(|s| s.run_as_user);
        assert_eq!(manifest_uid, Some(uid), "{}: the image's user", c.name);
    }

    // nothing secret: no credentials in ENV/ARG, no key files copied in
    for (kw, rest) in &ins {
        let upper = rest.to_ascii_uppercase();
        if kw == "ENV" || kw == "ARG" {
            for word in ["TOKEN", "KEY", "SECRET", "PASSWORD"] {
                assert!(
                    !upper.contains(word),
                    "{kw} {rest}: no secrets in the image"
                );
            }
        }
        if kw == "COPY" || kw == "ADD" {
            for ext in [".pem", ".key", ".env"] {
                assert!(
                    !rest.contains(ext),
                    "{kw} {rest}: no key files in the image"
                );
            }
        }
    }
    let ignore = std::fs::read_to_string(repo_root().join(".dockerignore"))
        .expect("a .dockerignore keeps target/ and .git/ out of the context");
    let ignored: Vec<&str> = ignore.lines().map(str::trim).collect();
    for want in ["target/", ".git/", "**/*.pem", "**/*.key", "**/.env"] {
        assert!(ignored.contains(&want), ".dockerignore lacks {want}");
    }
}

/// The toolchain the image builds with is new enough for the workspace.
#[test]
fn the_dockerfile_toolchain_meets_the_workspace_rust_version() {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    let version = |s: &str| -> (u32, u32) {
        let mut p = s.trim().trim_matches('"').split('.');
        (
            p.next().unwrap().parse().unwrap(),
            p.next().unwrap().parse().unwrap(),
        )
    };
    let arg = instructions(&text)
        .into_iter()
        .find_map(|(k, r)| {
            (k == "ARG")
                .then_some(r)?
                .strip_prefix("RUST_VERSION=")
                .map(str::to_string)
        })
        .expect("ARG RUST_VERSION=...");
    let cargo = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let msrv = cargo
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = "))
        .expect("workspace rust-version");
    assert!(
        version(&arg) >= version(msrv),
        "rust {arg} < rust-version {msrv}"
    );
    assert!(
        text.contains("FROM rust:${RUST_VERSION}-"),
        "the build stage uses the ARG"
    );
}
