//! Mixed traffic: `[[workloads]]`, several weighted workloads in one run
//! (Locust's user classes, k6's parallel scenarios). Each workload is the
//! scenario with its own tables laid over the top-level ones: its
//! `[workloads.dataset]`, `[workloads.sampling]` and `[workloads.slo]`
//! replace the top-level tables whole, and `[workloads.target]` sets only the
//! keys it names (`model`, `backend`, `endpoint`). Request `i` of the run
//! belongs to one workload, chosen by a seeded hash of the seed and `i`
//! (`cicada_plan::workloads`), so any worker count sends the same mix.
//! An arrival that picks a session workload (`conversations`, `multi_turn`,
//! `agentic`, `agent_trace`) starts one of its sessions instead of a request.

use cicada_metrics::Slo;

use crate::scenario::{Backend, Scenario, WorkloadSpec};

impl Scenario {
    /// Workload `i` of `[[workloads]]` as a scenario of its own: the
    /// top-level scenario with the workload's tables laid over it, and no
    /// workloads. `None` when there is no such workload.
    pub fn workload_scenario(&self, i: usize) -> Option<Scenario> {
        let w = self.workloads.get(i)?;
        let mut s = self.clone();
        s.workloads = Vec::new();
        if let Some(d) = &w.dataset {
            s.dataset = d.clone();
        }
        if let Some(sm) = &w.sampling {
            s.sampling = sm.clone();
        }
        if let Some(slo) = &w.slo {
            s.slo = *slo;
        }
        let t = &w.target;
        if let Some(m) = &t.model {
            s.target.model = Some(m.clone());
        }
        if let Some(b) = t.backend {
            s.target.backend = b;
            if t.endpoint.is_none() {
                // the top-level route belongs to the top-level backend
                s.target.endpoint = None;
            }
        }
        if let Some(e) = &t.endpoint {
            s.target.endpoint = Some(e.clone());
        }
        Some(s)
    }

    /// Every workload as a scenario of its own, in `[[workloads]]` order
    /// (empty without workloads).
    pub fn workload_scenarios(&self) -> Vec<Scenario> {
        (0..self.workloads.len())
            .filter_map(|i| self.workload_scenario(i))
            .collect()
    }

    /// Whether any arrival of the run starts a session: its dataset is a
    /// session kind, or (in a mix) some workload's is.
    pub fn runs_sessions(&self) -> bool {
        if self.workloads.is_empty() {
            self.dataset.kind().sessions()
        } else {
            self.workload_scenarios()
                .iter()
                .any(|w| w.dataset.kind().sessions())
        }
    }

    /// Whether any of the run's SLOs (the top-level one or a workload's) has a bound.
    pub fn any_slo_set(&self) -> bool {
        self.slo.is_set()
            || self
                .workloads
                .iter()
                .any(|w| w.slo.as_ref().is_some_and(Slo::is_set))
    }
}

/// Every problem with `[[workloads]]` as (dotted key, message): the names
/// and weights (each above 0, so their sum is too), what cannot be mixed,
/// and each workload's own scenario checked as a whole scenario is, its
/// problems blamed on the workload's keys where the workload set them.
pub(crate) fn problems(s: &Scenario) -> Vec<(String, String)> {
    if s.workloads.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if !s.target.models.is_empty() {
        out.push((
            "target.models".to_string(),
            "cannot be combined with [[workloads]]; give each workload its own `target.model`"
                .to_string(),
        ));
    }
    for (i, w) in s.workloads.iter().enumerate() {
        let key = |k: &str| format!("workloads[{i}].{k}");
        if w.name.trim().is_empty() {
            out.push((key("name"), "must not be empty".to_string()));
        } else if let Some(first) = s.workloads[..i].iter().position(|o| o.name == w.name) {
            out.push((
                key("name"),
                format!(
                    "duplicate workload name \"{}\" (also workloads[{first}]); each workload needs its own",
                    w.name
                ),
            ));
        }
        if !(w.weight.is_finite() && w.weight > 0.0) {
            out.push((key("weight"), format!("must be above 0, got {}", w.weight)));
        }
        if w.target.backend == Some(Backend::Mock) {
            out.push((
                key("target.backend"),
                "the embedded mock is started by the top-level target.backend; a workload names the API it speaks instead (e.g. \"openai-chat\")".to_string(),
            ));
        }
        if w.slo
            .as_ref()
            .is_some_and(|slo| slo.min_attainment.is_some())
        {
            out.push((
                key("slo.min_attainment"),
                "a gate on the whole run: set it in the top-level [slo] (it judges every workload's requests against their own SLO)".to_string(),
            ));
        }
        out.extend(own_problems(s, i, w));
    }
    // a top-level table every workload inherits is blamed once
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// Workload `i`'s scenario checked whole; each problem is blamed on the
/// workload's key when the workload set that table, else kept on the
/// top-level key (named once, with the workload it came up in, when the
/// top-level scenario itself has no such problem).
fn own_problems(s: &Scenario, i: usize, w: &WorkloadSpec) -> Vec<(String, String)> {
    let Some(own) = s.workload_scenario(i) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let kind = own.dataset.kind();
    let kind_key = || {
        if w.dataset.is_some() {
            format!("workloads[{i}].dataset.kind")
        } else {
            "dataset.kind".to_string()
        }
    };
    if kind == crate::scenario::DatasetKind::Trace {
        out.push((
            kind_key(),
            "kind \"trace\" cannot be mixed with other workloads (its timestamps drive the load themselves); run it as a scenario of its own".to_string(),
        ));
        return out;
    }
    if kind.sessions() && crate::sharding::is_closed_loop(s) {
        out.push((
            kind_key(),
            format!(
                "the {} workload's sessions start at the run's arrivals: a mix with sessions runs an open loop (request_rate, not users)",
                kind.name()
            ),
        ));
        return out;
    }
    let base: Vec<(String, String)> = {
        let mut top = s.clone();
        top.workloads = Vec::new();
        crate::validate::problems(&top)
    };
    let t = &w.target;
    let overlaid = |key: &str| -> bool {
        let in_section = |sec: &str| key == sec || key.starts_with(&format!("{sec}."));
        (w.dataset.is_some() && in_section("dataset"))
            || (w.sampling.is_some() && in_section("sampling"))
            || (w.slo.is_some() && in_section("slo"))
            || (t.model.is_some() && key == "target.model")
            || (t.backend.is_some() && key == "target.backend")
            || (t.endpoint.is_some() && key == "target.endpoint")
    };
    // a workload of another API against the embedded mock reaches the mock
    let on_mock = s.target.backend == Backend::Mock;
    for (key, message) in crate::validate::problems(&own) {
        if on_mock && key == "target.base_url" {
            continue;
        }
        if overlaid(&key) {
            out.push((format!("workloads[{i}].{key}"), message));
        } else if !base.iter().any(|(k, m)| *k == key && *m == message) {
            out.push((key, format!("in workload \"{}\": {message}", w.name)));
        }
    }
    out
}
