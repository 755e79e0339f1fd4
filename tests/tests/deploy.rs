//! Issue: Kubernetes. The kustomize base and the example overlay render, every
//! object is a valid typed API object, and the pieces are wired together
//! (Service -> coordinator pod and port, worker Job -> Service, worker count,
//! secrets by reference, non-root containers, results volume). Then the
//! rendered coordinator and workers run, each on its own network-namespace
//! host, with exactly the command, arguments and environment the manifests
//! give them, and the run completes against the mock.

mod k8s;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use cicada_tests::netns::Lan;
use cicada_tests::*;
use k8s::pod::{INDEX_ANNOTATION, Launch, PodIdentity, Secrets, ServiceLink};
use k8s::wiring::{API_KEY_SECRET, COORDINATOR, TOKEN_SECRET, WORKERS, check_wiring, non_root};
use k8s::{Rendered, container, flag};
use k8s_openapi::api::batch::v1::Job;

fn base() -> PathBuf {
    repo_root().join("deploy/k8s")
}

/// `kubectl kustomize deploy/k8s` renders valid objects that fit together.
#[test]
fn the_base_renders_and_is_wired_together() {
    let r = Rendered::of(&base());
    let w = check_wiring(&r);
    assert_eq!(w.workers, 2);
    assert!(
        w.scenario.contains("backend = \"mock\""),
        "the smoke scenario"
    );
}

/// The example overlay changes the worker count, scenario, image and
/// namespace, and everything still fits.
#[test]
fn the_example_overlay_changes_count_scenario_and_image_consistently() {
    let r = Rendered::of(&repo_root().join("deploy/k8s-overlays/vllm"));
    let w = check_wiring(&r);
    assert_eq!(w.workers, 8);
    assert!(w.scenario.contains("backend = \"vllm-chat\""));
    assert_eq!(r.namespace(), "bench");
    assert!(
        container(r.job(WORKERS))
            .image
            .as_deref()
            .unwrap()
            .starts_with("registry.example.com/")
    );
    assert_eq!(w.service.metadata.namespace.as_deref(), Some("bench"));
}

/// The pod that fetches results mounts the claim the coordinator writes to.
#[test]
fn the_fetch_pod_reads_the_results_claim_as_non_root() {
    let text = std::fs::read_to_string(base().join("fetch-results.yaml")).unwrap();
    let r = Rendered::parse(&text);
    assert_eq!(r.pods.len(), 1);
    let pod = &r.pods[0];
    let spec = pod.spec.as_ref().unwrap();
    let claim = spec
        .volumes
        .iter()
        .flatten()
        .find_map(|v| v.persistent_volume_claim.as_ref())
        .expect("a claim");
    let rendered = Rendered::of(&base());
    assert_eq!(
        Some(claim.claim_name.as_str()),
        rendered.claims[0].metadata.name.as_deref()
    );
    non_root(spec.security_context.as_ref(), &spec.containers[0], "fetch");
    let out = flag(
        container(rendered.job(COORDINATOR)).args.as_ref().unwrap(),
        "--output-dir",
    )
    .unwrap()
    .to_string();
    assert!(
        text.contains(&format!("cicada-fetch-results:{out}")),
        "the README's kubectl cp path"
    );
}

/// Running processes, killed if the test ends early.
struct Pods(Vec<(String, Child)>);

impl Drop for Pods {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Pods {
    /// Wait for the pod called `name`; its exit code.
    fn wait(&mut self, name: &str, deadline: Instant) -> Option<i32> {
        let (_, child) = self
            .0
            .iter_mut()
            .find(|(n, _)| n == name)
            .expect("a started pod");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "pod {name} did not finish in time"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Start a container on a LAN host the way the kubelet would: a clean
/// environment holding exactly `l.env`, the rendered arguments, both output
/// streams in one log (as `kubectl logs` shows them).
fn start(lan: &Lan, host: usize, l: &Launch, log: &Path) -> Child {
    let program = bin_dir().join(&l.program);
    assert!(
        program.exists(),
        "{} is not a program of the image",
        l.program
    );
    let out = File::create(log).unwrap();
    let err = out.try_clone().unwrap();
    lan.command(host, &program)
        .env_clear()
        .envs(l.env.iter().map(|(k, v)| (k, v)))
        .args(&l.args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("starting a pod's container")
}

/// The rendered base runs: the coordinator on one host and every worker pod on
/// its own, each with the rendered command, arguments and environment, the
/// Service name resolving (through the host's /etc/hosts) to the coordinator's
/// host. Workers start first and keep dialling; each takes its index from
/// JOB_COMPLETION_INDEX; the coordinator's log ends with the result block and
/// the results land on the claim.
#[test]
fn the_rendered_pods_run_the_scenario_on_namespace_hosts() {
    let _g = serial();
    let rendered = Rendered::of(&base());
    let wiring = check_wiring(&rendered);
    let n = wiring.workers as usize;
    let ns = rendered.namespace();
    let mut lan = Lan::new(n + 1);
    let coord_ip = lan.hosts[0].ip;
    let svc_name = wiring.service.metadata.name.clone().unwrap();
    let svc_port = wiring
        .service
        .spec
        .as_ref()
        .unwrap()
        .ports
        .as_ref()
        .unwrap()[0]
        .port;
    let dns: Vec<String> = vec![
        svc_name.clone(),
        format!("{svc_name}.{ns}"),
        format!("{svc_name}.{ns}.svc"),
        format!("{svc_name}.{ns}.svc.cluster.local"),
    ];
    assert!(dns.contains(&wiring.dial_host));
    let dns: Vec<(&str, std::net::Ipv4Addr)> = dns.iter().map(|d| (d.as_str(), coord_ip)).collect();

    let token = "k8s-token-canary-51c0e7";
    let mut secrets = Secrets::new();
    secrets.insert(
        TOKEN_SECRET.0.into(),
        [(TOKEN_SECRET.1.to_string(), format!("{token}\n"))].into(),
    );
    secrets.insert(
        API_KEY_SECRET.0.into(),
        [(
            API_KEY_SECRET.1.to_string(),
            "sk-not-needed-by-the-mock".to_string(),
        )]
        .into(),
    );
    let services = [ServiceLink {
        name: svc_name.clone(),
        ip: coord_ip,
        port: svc_port,
    }];
    let dir = scratch();
    let claims = dir.path().join("claims");

    // the workers, started first and in reverse order: the index is the
    // scheduler's, not the order of joining
    let mut pods = Pods(Vec::new());
    let worker_job: &Job = rendered.job(WORKERS);
    for i in (0..n).rev() {
        let host = i + 1;
        let hostname = format!("{WORKERS}-{i}");
        lan.set_hostname(host, &hostname);
        lan.hosts_file(host, &dns);
        let pod = PodIdentity {
            name: format!("{WORKERS}-{i}-x7k2p"),
            hostname: hostname.clone(),
            ip: lan.hosts[host].ip,
            annotations: [(INDEX_ANNOTATION.to_string(), i.to_string())].into(),
        };
        let l = k8s::pod::launch(
            &rendered,
            worker_job,
            &pod,
            &secrets,
            &services,
            &dir.path().join(&pod.name),
            &claims,
        );
        assert_eq!(l.var("JOB_COMPLETION_INDEX"), Some(i.to_string().as_str()));
        let log = dir.path().join(format!("{hostname}.log"));
        pods.0.push((hostname, start(&lan, host, &l, &log)));
    }
    std::thread::sleep(Duration::from_secs(1));

    let pod = PodIdentity {
        name: format!("{COORDINATOR}-q9v4d"),
        hostname: format!("{COORDINATOR}-q9v4d"),
        ip: coord_ip,
        annotations: BTreeMap::new(),
    };
    lan.set_hostname(0, &pod.hostname);
    let l = k8s::pod::launch(
        &rendered,
        rendered.job(COORDINATOR),
        &pod,
        &secrets,
        &services,
        &dir.path().join(&pod.name),
        &claims,
    );
    let coord_log = dir.path().join("coordinator.log");
    pods.0
        .push((COORDINATOR.into(), start(&lan, 0, &l, &coord_log)));

    let deadline = Instant::now() + Duration::from_secs(120);
    let code = pods.wait(COORDINATOR, deadline);
    let log = std::fs::read_to_string(&coord_log).unwrap();
    assert_eq!(code, Some(0), "coordinator log:\n{log}");
    for i in 0..n {
        let name = format!("{WORKERS}-{i}");
        let code = pods.wait(&name, deadline);
        let wlog = std::fs::read_to_string(dir.path().join(format!("{name}.log"))).unwrap();
        assert_eq!(code, Some(0), "{name}:\n{wlog}\ncoordinator:\n{log}");
        assert!(!wlog.contains(token), "the token leaked into {name}'s log");
    }

    // the log ends with the result block, and names where the files went
    let last = log.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        last.starts_with("=====") && last.trim_matches('=').is_empty(),
        "{log}"
    );
    assert!(log.contains("Serving Benchmark Result"), "{log}");
    assert!(!log.contains(token), "the token leaked into the log");

    // the results are on the claim the coordinator mounted at --output-dir
    let coordinator = container(rendered.job(COORDINATOR));
    let out_at = flag(coordinator.args.as_ref().unwrap(), "--output-dir").unwrap();
    let out = l
        .mounts
        .iter()
        .find(|(at, _)| at == out_at)
        .map(|(_, d)| d.clone())
        .expect("the results mount");
    assert!(out.starts_with(&claims));
    assert_eq!(flag(&l.args, "--output-dir"), out.to_str());
    let j = read_json(&out.join("result.json"));
    let scenario = cicada_scenarios::load_file(&write(dir.path(), "s.toml", &wiring.scenario), &[])
        .unwrap()
        .scenario;
    let planned = scenario.load.num_prompts.unwrap();
    assert_eq!(
        j["completed"].as_u64(),
        Some(planned),
        "{}",
        j["cicada"]["outcomes"]
    );
    assert_eq!(j["failed"].as_u64(), Some(0));
    let shares = j["cicada"]["worker_shares"].as_array().unwrap();
    assert_eq!(shares.len(), n);
    for s in shares {
        let w = s["worker"].as_u64().unwrap();
        assert_eq!(
            s["host"],
            format!("{WORKERS}-{w}"),
            "worker {w} took its index from its pod"
        );
        assert_eq!(s["lost"], false);
        assert_eq!(s["reported_requests"], s["planned_requests"]);
    }
    assert!(out.join("summary.csv").exists());
}
