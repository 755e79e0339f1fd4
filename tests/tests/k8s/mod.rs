//! The Kubernetes manifests as Kubernetes would read them: rendered by
//! `kubectl kustomize` (a pinned upstream kubectl, `scripts/kubectl.sh`),
//! deserialised into the typed API structs (every field must be one the API
//! knows), and turned into the command, arguments, environment and files a
//! pod's container would start with.

pub mod pod;
pub mod wiring;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, PersistentVolumeClaim, Pod, PodSpec, Secret, Service,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Run `kubectl kustomize DIR` (the renderer `kubectl apply -k` runs) and
/// return the YAML it prints. kubectl is the pinned upstream release that
/// `scripts/kubectl.sh` installs into the cache (checked against the
/// Kubernetes project's SHA-256), not whatever is on PATH.
pub fn kustomize(dir: &Path) -> String {
    let kubectl = cicada_tests::servers::install("kubectl.sh").join("bin/kubectl");
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "running {} kustomize {}: {e}",
                kubectl.display(),
                dir.display()
            )
        });
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("kustomize prints UTF-8")
}

/// Every YAML document in `text` (empty ones skipped), as JSON values.
pub fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("bad YAML document: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// Deserialise `doc` into `T` and check that nothing was dropped on the way:
/// serde ignores fields a struct does not have, so a misspelt or misplaced
/// key would otherwise pass unnoticed (and be ignored by the API server too).
pub fn typed<T: DeserializeOwned + Serialize>(doc: &Value) -> T {
    let what = format!(
        "{} {}",
        doc["kind"].as_str().unwrap_or("?"),
        doc["metadata"]["name"].as_str().unwrap_or("?")
    );
    let t: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{what} is not a valid object: {e}"));
    let back = serde_json::to_value(&t).expect("API objects serialise");
    let mut lost = Vec::new();
    dropped(doc, &back, String::new(), &mut lost);
    assert!(
        lost.is_empty(),
        "{what}: fields the Kubernetes API does not know (or changed on the way): {}",
        lost.join(", ")
    );
    t
}

fn dropped(original: &Value, back: &Value, path: String, lost: &mut Vec<String>) {
    match (original, back) {
        (Value::Object(o), Value::Object(b)) => {
            for (k, v) in o {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(bv) => dropped(v, bv, p, lost),
                    None if v.is_null() => {}
                    None => lost.push(p),
                }
            }
        }
        (Value::Array(o), Value::Array(b)) if o.len() == b.len() => {
            for (i, (v, bv)) in o.iter().zip(b).enumerate() {
                dropped(v, bv, format!("{path}[{i}]"), lost);
            }
        }
        (Value::Number(o), Value::Number(b)) if o.as_f64() == b.as_f64() => {}
        (o, b) if o == b => {}
        _ => lost.push(path),
    }
}

/// The objects of one rendering, by kind.
#[derive(Debug, Default)]
pub struct Rendered {
    pub jobs: Vec<Job>,
    pub services: Vec<Service>,
    pub config_maps: Vec<ConfigMap>,
    pub claims: Vec<PersistentVolumeClaim>,
    pub pods: Vec<Pod>,
    pub secrets: Vec<Secret>,
}

impl Rendered {
    /// Read every document; an object of a kind we do not expect fails.
    pub fn parse(text: &str) -> Rendered {
        let mut r = Rendered::default();
        for doc in documents(text) {
            match (doc["apiVersion"].as_str(), doc["kind"].as_str()) {
                (Some("batch/v1"), Some("Job")) => r.jobs.push(typed(&doc)),
                (Some("v1"), Some("Service")) => r.services.push(typed(&doc)),
                (Some("v1"), Some("ConfigMap")) => r.config_maps.push(typed(&doc)),
                (Some("v1"), Some("PersistentVolumeClaim")) => r.claims.push(typed(&doc)),
                (Some("v1"), Some("Pod")) => r.pods.push(typed(&doc)),
                (Some("v1"), Some("Secret")) => r.secrets.push(typed(&doc)),
                (v, k) => panic!("unexpected object {v:?} {k:?}: {doc}"),
            }
        }
        r
    }

    /// Render a kustomization directory.
    pub fn of(dir: &Path) -> Rendered {
        Self::parse(&kustomize(dir))
    }

    /// The Job called `name`.
    pub fn job(&self, name: &str) -> &Job {
        self.jobs
            .iter()
            .find(|j| j.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no Job {name} in the rendering"))
    }

    /// The ConfigMap called `name` (after kustomize's hash suffix).
    pub fn config_map(&self, name: &str) -> &ConfigMap {
        self.config_maps
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no ConfigMap {name} in the rendering"))
    }

    /// The namespace every object goes to (`default` when none is set).
    pub fn namespace(&self) -> String {
        self.jobs
            .first()
            .and_then(|j| j.metadata.namespace.clone())
            .unwrap_or_else(|| "default".into())
    }
}

/// A Job's pod spec.
pub fn pod_spec(job: &Job) -> &PodSpec {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a Job has a pod template")
}

/// A Job's pod template labels.
pub fn pod_labels(job: &Job) -> BTreeMap<String, String> {
    job.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

/// The only container of a Job's pod.
pub fn container(job: &Job) -> &Container {
    let spec = pod_spec(job);
    assert_eq!(
        spec.containers.len(),
        1,
        "{:?}: one container per pod",
        job.metadata.name
    );
    &spec.containers[0]
}

/// The value following `flag` in `args` (`--flag VALUE` or `--flag=VALUE`).
pub fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(flag)?.strip_prefix('=')
        }
    })
}
