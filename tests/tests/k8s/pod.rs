//! One pod's container as the kubelet would start it: its volumes laid out as
//! files, its environment resolved (secrets, config maps, the downward API,
//! service links), `$(VAR)` references expanded, and every mounted path mapped
//! to where those files are on this machine. Nothing else is changed.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, EnvVar, Volume};

use super::{Rendered, container, pod_spec};

/// `PATH` in the runtime image (distroless sets the usual one).
pub const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The annotation an Indexed Job puts its completion index in.
pub const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";

/// What the scheduler decided about one pod.
#[derive(Debug, Clone)]
pub struct PodIdentity {
    pub name: String,
    pub hostname: String,
    pub ip: Ipv4Addr,
    pub annotations: BTreeMap<String, String>,
}

/// The Secrets that exist in the namespace: name -> key -> value.
pub type Secrets = BTreeMap<String, BTreeMap<String, String>>;

/// A Service and the address its name resolves to.
#[derive(Debug, Clone)]
pub struct ServiceLink {
    pub name: String,
    pub ip: Ipv4Addr,
    pub port: i32,
}

/// How the container starts.
#[derive(Debug, Clone)]
pub struct Launch {
    /// `command[0]`: a program on the image's PATH.
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// (mount path in the container, directory here)
    pub mounts: Vec<(String, PathBuf)>,
}

impl Launch {
    /// The environment variable `name`, if set.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Lay out `job`'s pod under `root` and say how its container starts.
/// Persistent volume claims live under `claims` (shared by every pod).
pub fn launch(
    rendered: &Rendered,
    job: &Job,
    pod: &PodIdentity,
    secrets: &Secrets,
    services: &[ServiceLink],
    root: &Path,
    claims: &Path,
) -> Launch {
    let spec = pod_spec(job);
    let c = container(job);
    let mut mounts = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        assert!(
            m.sub_path.is_none() && m.sub_path_expr.is_none(),
            "{}: subPath mounts are not simulated",
            m.name
        );
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == m.name)
            .unwrap_or_else(|| panic!("mount {} names no volume of the pod", m.name));
        let dir = materialise(rendered, volume, secrets, root, claims);
        mounts.push((m.mount_path.clone(), dir));
    }
    // longest mount path first, so nested mounts win
    mounts.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));

    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), IMAGE_PATH.into()),
        ("HOSTNAME".into(), pod.hostname.clone()),
        ("HOME".into(), "/home/nonroot".into()),
    ];
    for s in services {
        let prefix = s.name.to_ascii_uppercase().replace('-', "_");
        env.push((format!("{prefix}_SERVICE_HOST"), s.ip.to_string()));
        env.push((format!("{prefix}_SERVICE_PORT"), s.port.to_string()));
        env.push((
            format!("{prefix}_PORT"),
            format!("tcp://{}:{}", s.ip, s.port),
        ));
    }
    for e in c.env.iter().flatten() {
        if let Some(value) = resolve(rendered, e, pod, secrets, &env) {
            env.retain(|(k, _)| k != &e.name);
            env.push((e.name.clone(), value));
        }
    }
    let indexed = job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed");
    if indexed && !env.iter().any(|(k, _)| k == "JOB_COMPLETION_INDEX") {
        // the Job controller adds it to every container of an Indexed Job
        env.push((
            "JOB_COMPLETION_INDEX".into(),
            pod.annotations[INDEX_ANNOTATION].clone(),
        ));
    }

    let mut words: Vec<String> = c
        .command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .map(|w| expand(w, &env))
        .collect();
    assert!(
        !c.command.as_ref().is_none_or(Vec::is_empty),
        "container {}: give `command` (the image holds two programs)",
        c.name
    );
    let program = words.remove(0);
    let args = words
        .into_iter()
        .map(|a| in_mounts(&a, &mounts, c))
        .collect();
    Launch {
        program,
        args,
        env,
        mounts,
    }
}

/// Write a volume's files; returns their directory here.
fn materialise(
    rendered: &Rendered,
    v: &Volume,
    secrets: &Secrets,
    root: &Path,
    claims: &Path,
) -> PathBuf {
    let write_all = |dir: &Path, files: &BTreeMap<String, String>| {
        std::fs::create_dir_all(dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
    };
    let dir = root.join(&v.name);
    if let Some(cm) = &v.config_map {
        let data = rendered
            .config_map(&cm.name)
            .data
            .clone()
            .unwrap_or_default();
        write_all(&dir, &select(&data, cm.items.as_deref()));
    } else if let Some(s) = &v.secret {
        let name = s
            .secret_name
            .as_deref()
            .expect("a secret volume names its Secret");
        match secrets.get(name) {
            Some(data) => write_all(&dir, &select(data, s.items.as_deref())),
            None if s.optional == Some(true) => std::fs::create_dir_all(&dir).unwrap(),
            None => panic!("the pod would not start: Secret {name} does not exist"),
        }
    } else if let Some(pvc) = &v.persistent_volume_claim {
        assert!(
            rendered
                .claims
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(pvc.claim_name.as_str())),
            "the pod would not start: no PersistentVolumeClaim {}",
            pvc.claim_name
        );
        let dir = claims.join(&pvc.claim_name);
        std::fs::create_dir_all(&dir).unwrap();
        return dir;
    } else if v.empty_dir.is_some() {
        std::fs::create_dir_all(&dir).unwrap();
    } else {
        panic!("volume {}: this kind of volume is not simulated", v.name);
    }
    dir
}

/// The files of a config map or secret volume: every key, or the `items` asked for.
fn select(
    data: &BTreeMap<String, String>,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
) -> BTreeMap<String, String> {
    match items {
        None => data.clone(),
        Some(items) => items
            .iter()
            .map(|i| {
                let value = data
                    .get(&i.key)
                    .unwrap_or_else(|| panic!("volume item: no key {}", i.key));
                (i.path.clone(), value.clone())
            })
            .collect(),
    }
}

/// One `env` entry's value (None: an optional reference to nothing).
fn resolve(
    rendered: &Rendered,
    e: &EnvVar,
    pod: &PodIdentity,
    secrets: &Secrets,
    env: &[(String, String)],
) -> Option<String> {
    if let Some(v) = &e.value {
        return Some(expand(v, env));
    }
    let from = e
        .value_from
        .as_ref()
        .unwrap_or_else(|| panic!("env {} has neither value nor valueFrom", e.name));
    if let Some(r) = &from.secret_key_ref {
        let v = secrets.get(&r.name).and_then(|s| s.get(&r.key)).cloned();
        assert!(
            v.is_some() || r.optional == Some(true),
            "the pod would not start: env {} needs Secret {} key {}",
            e.name,
            r.name,
            r.key
        );
        return v;
    }
    if let Some(r) = &from.config_map_key_ref {
        let data = rendered
            .config_map(&r.name)
            .data
            .clone()
            .unwrap_or_default();
        let v = data.get(&r.key).cloned();
        assert!(
            v.is_some() || r.optional == Some(true),
            "the pod would not start: env {} needs ConfigMap {} key {}",
            e.name,
            r.name,
            r.key
        );
        return v;
    }
    if let Some(f) = &from.field_ref {
        let path = f.field_path.as_str();
        let key = |prefix: &str| {
            path.strip_prefix(prefix)?
                .strip_suffix("']")
                .map(str::to_string)
        };
        return Some(match path {
            "metadata.name" => pod.name.clone(),
            "status.podIP" => pod.ip.to_string(),
            _ => match key("metadata.annotations['") {
                Some(k) => pod.annotations.get(&k).cloned().unwrap_or_default(),
                None => panic!("env {}: fieldRef {path} is not simulated", e.name),
            },
        });
    }
    panic!("env {}: this valueFrom is not simulated", e.name)
}

/// Kubernetes' `$(VAR)` expansion: defined variables are replaced, others
/// stay as written, `$$` is a literal `$`.
pub fn expand(s: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match env.iter().rev().find(|(k, _)| k == name) {
                Some((_, v)) => out.push_str(v),
                None => out.push_str(&rest[i..i + 2 + end + 1]),
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A path argument under a mount, mapped to the files here. Any other
/// absolute path would point into the image, which holds only the programs.
fn in_mounts(arg: &str, mounts: &[(String, PathBuf)], c: &Container) -> String {
    if !arg.starts_with('/') {
        return arg.to_string();
    }
    for (at, dir) in mounts {
        if let Some(rest) = arg.strip_prefix(at.as_str())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return format!("{}{rest}", dir.display());
        }
    }
    panic!(
        "container {}: argument {arg} is a path outside every mounted volume",
        c.name
    )
}
