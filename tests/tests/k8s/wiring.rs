//! The wiring of a rendering: which object refers to which, and whether the
//! references meet (Service -> coordinator pod and port, worker Job -> Service,
//! worker count, secrets by reference, non-root containers, results volume).

use std::collections::BTreeMap;

use cicada_tests::{scratch, write};
use k8s_openapi::api::core::v1::{Container, PodSecurityContext, PodSpec, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Rendered, container, flag, pod_labels, pod_spec};

/// The coordinator Job.
pub const COORDINATOR: &str = "cicada-coordinator";
/// The worker Job.
pub const WORKERS: &str = "cicada-workers";
/// The Secrets deploy/k8s/README.md tells users to create.
pub const TOKEN_SECRET: (&str, &str) = ("cicada-worker-token", "token");
/// The optional API key Secret.
pub const API_KEY_SECRET: (&str, &str) = ("cicada-api-key", "api-key");

/// What the wiring checks established about one rendering.
pub struct Wiring {
    pub workers: i32,
    pub service: Service,
    /// The host name the workers dial.
    pub dial_host: String,
    /// The scenario file in the ConfigMap.
    pub scenario: String,
}

/// The container runs as a non-root user without privileges.
pub fn non_root(pod: Option<&PodSecurityContext>, c: &Container, what: &str) {
    let csc = c.security_context.as_ref();
    let non_root = csc
        .and_then(|s| s.run_as_non_root)
        .or(pod.and_then(|p| p.run_as_non_root));
    assert_eq!(non_root, Some(true), "{what}: runAsNonRoot");
    let uid = csc
        .and_then(|s| s.run_as_user)
        .or(pod.and_then(|p| p.run_as_user));
    assert!(uid.is_some_and(|u| u > 0), "{what}: runAsUser {uid:?}");
    let csc = csc.unwrap_or_else(|| panic!("{what}: no container securityContext"));
    assert_eq!(csc.allow_privilege_escalation, Some(false), "{what}");
    assert_eq!(csc.read_only_root_filesystem, Some(true), "{what}");
    let dropped = csc
        .capabilities
        .as_ref()
        .and_then(|c| c.drop.clone())
        .unwrap_or_default();
    assert_eq!(dropped, vec!["ALL".to_string()], "{what}: capabilities");
}

fn requests_resources(c: &Container, what: &str) {
    let req = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone())
        .unwrap_or_default();
    assert!(
        req.contains_key("cpu") && req.contains_key("memory"),
        "{what}: resource requests {req:?}"
    );
}

/// Secret volumes and the Secret keys that env vars read; nothing inlined.
fn secret_refs(spec: &PodSpec, c: &Container) -> Vec<(String, String)> {
    let mut refs = Vec::new();
    for e in c.env.iter().flatten() {
        let lower = e.name.to_ascii_lowercase();
        if ["token", "key", "secret", "password"]
            .iter()
            .any(|w| lower.contains(w))
        {
            assert!(
                e.value.is_none(),
                "env {} is inlined; reference a Secret",
                e.name
            );
        }
        if let Some(r) = e
            .value_from
            .as_ref()
            .and_then(|f| f.secret_key_ref.as_ref())
        {
            refs.push((r.name.clone(), r.key.clone()));
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(s) = &v.secret {
            refs.push((s.secret_name.clone().unwrap_or_default(), "*".into()));
        }
    }
    refs
}

/// The mount path of the secret volume `secret`, in `c`.
fn secret_mount(spec: &PodSpec, c: &Container, secret: &str) -> String {
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some(secret))
        .unwrap_or_else(|| panic!("{}: no volume of Secret {secret}", c.name));
    c.volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == volume.name)
        .unwrap_or_else(|| panic!("{}: Secret {secret} is not mounted", c.name))
        .mount_path
        .clone()
}

/// Check everything that refers to something else; panics naming what does not meet.
pub fn check_wiring(r: &Rendered) -> Wiring {
    assert!(
        r.secrets.is_empty(),
        "Secrets must be referenced, not rendered"
    );
    assert_eq!(r.jobs.len(), 2, "a coordinator Job and a worker Job");
    assert_eq!(r.services.len(), 1);
    let (cj, wj) = (r.job(COORDINATOR), r.job(WORKERS));
    let (cspec, wspec) = (pod_spec(cj), pod_spec(wj));
    let (cc, wc) = (container(cj), container(wj));
    let (cargs, wargs) = (
        cc.args.clone().unwrap_or_default(),
        wc.args.clone().unwrap_or_default(),
    );
    assert_eq!(cc.command.as_deref(), Some(&["cicada".to_string()][..]));
    assert_eq!(wc.command.as_deref(), Some(&["cicada".to_string()][..]));
    assert_eq!(cargs.first().map(String::as_str), Some("run"));
    assert_eq!(wargs.first().map(String::as_str), Some("worker"));
    assert_eq!(cc.image, wc.image, "one image for both");

    // the worker Job: Indexed, all at once, as many as the coordinator expects
    let ws = wj.spec.as_ref().unwrap();
    assert_eq!(ws.completion_mode.as_deref(), Some("Indexed"));
    let n = ws.parallelism.expect("parallelism");
    assert_eq!(ws.completions, Some(n), "completions = parallelism");
    let expect = cc
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "CICADA_EXPECT_WORKERS")
        .and_then(|e| e.value.clone())
        .or_else(|| flag(&cargs, "--expect-workers").map(str::to_string))
        .expect("the coordinator is told how many workers to expect");
    assert_eq!(expect.parse::<i32>().ok(), Some(n), "expected workers");
    assert!(
        flag(&cargs, "--workers").is_none_or(|w| w == "0"),
        "no local workers"
    );
    for (j, spec) in [(cj, cspec), (wj, wspec)] {
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(j.spec.as_ref().unwrap().backoff_limit, Some(0));
    }

    // the Service selects the coordinator pod (only) on the port it listens on
    let svc = r.services[0].clone();
    let sspec = svc.spec.as_ref().unwrap();
    let selector = sspec.selector.clone().unwrap_or_default();
    assert!(!selector.is_empty());
    let selects =
        |labels: &BTreeMap<String, String>| selector.iter().all(|(k, v)| labels.get(k) == Some(v));
    assert!(
        selects(&pod_labels(cj)),
        "the Service selects the coordinator"
    );
    assert!(!selects(&pod_labels(wj)), "the Service selects no worker");
    let listen = flag(&cargs, "--listen").expect("--listen");
    let listen_port: i32 = listen.rsplit(':').next().unwrap().parse().unwrap();
    let ports = sspec.ports.clone().unwrap_or_default();
    assert_eq!(ports.len(), 1);
    let container_port = match ports[0].target_port.clone() {
        Some(IntOrString::Int(p)) => p,
        Some(IntOrString::String(name)) => {
            cc.ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .unwrap_or_else(|| panic!("targetPort {name} is no port of the coordinator"))
                .container_port
        }
        None => ports[0].port,
    };
    assert_eq!(container_port, listen_port, "the Service reaches --listen");
    assert!(
        listen.starts_with("0.0.0.0:") || listen.starts_with("[::]:"),
        "the coordinator listens on every interface: {listen}"
    );

    // workers dial the Service by name
    let url = flag(&wargs, "--coordinator").expect("--coordinator");
    let authority = url
        .strip_prefix("http://")
        .expect("plain gRPC (or add TLS)");
    let (host, port) = authority.trim_end_matches('/').rsplit_once(':').unwrap();
    let name = svc.metadata.name.clone().unwrap();
    let ns = r.namespace();
    let names = [
        name.clone(),
        format!("{name}.{ns}"),
        format!("{name}.{ns}.svc"),
        format!("{name}.{ns}.svc.cluster.local"),
    ];
    assert!(names.contains(&host.to_string()), "{host} is not {name}");
    assert_eq!(port.parse::<i32>().ok(), Some(ports[0].port));
    assert!(
        flag(&wargs, "--index").is_none(),
        "the index comes from the Job"
    );

    // the token: one Secret, mounted by both, read with --token-file
    for (spec, c, args) in [(cspec, cc, &cargs), (wspec, wc, &wargs)] {
        let at = secret_mount(spec, c, TOKEN_SECRET.0);
        assert_eq!(
            flag(args, "--token-file"),
            Some(format!("{at}/{}", TOKEN_SECRET.1).as_str()),
            "{}",
            c.name
        );
        for (secret, _) in secret_refs(spec, c) {
            assert!(
                [TOKEN_SECRET.0, API_KEY_SECRET.0].contains(&secret.as_str()),
                "{}: Secret {secret} is not one the README tells users to create",
                c.name
            );
        }
        non_root(spec.security_context.as_ref(), c, &c.name);
        requests_resources(c, &c.name);
    }

    // the scenario: the ConfigMap mounted where `cicada run` reads it
    let path = &cargs[1];
    let mount = cc
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| path.starts_with(&format!("{}/", m.mount_path)))
        .expect("the scenario path is under a mount");
    let volume = cspec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap();
    let cm_name = &volume.config_map.as_ref().expect("a ConfigMap").name;
    let file = &path[mount.mount_path.len() + 1..];
    let scenario = r.config_map(cm_name).data.as_ref().unwrap()[file].clone();
    // the API key the scenario names reaches every worker by reference
    let dir = scratch();
    let loaded = cicada_scenarios::load_file(&write(dir.path(), "s.toml", &scenario), &[])
        .unwrap_or_else(|e| panic!("the rendered scenario is invalid: {e}"));
    if let Some(var) = &loaded.scenario.target.api_key_env {
        let e = wc
            .env
            .iter()
            .flatten()
            .find(|e| &e.name == var)
            .unwrap_or_else(|| panic!("workers lack {var}, the scenario's api_key_env"));
        let r = e
            .value_from
            .as_ref()
            .and_then(|f| f.secret_key_ref.as_ref());
        assert_eq!(
            r.map(|r| (r.name.as_str(), r.key.as_str())),
            Some(API_KEY_SECRET)
        );
    }

    // results: --output-dir is a persistent volume claim that is rendered too
    let out = flag(&cargs, "--output-dir").expect("--output-dir");
    let m = cc
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == out)
        .expect("--output-dir is a mount");
    let claim = cspec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == m.name)
        .and_then(|v| v.persistent_volume_claim.as_ref())
        .expect("results on a persistent volume claim");
    assert!(
        r.claims
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(claim.claim_name.as_str()))
    );

    Wiring {
        workers: n,
        service: svc,
        dial_host: host.to_string(),
        scenario,
    }
}
