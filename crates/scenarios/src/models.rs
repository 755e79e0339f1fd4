//! Multi-model (and LoRA adapter) traffic: `target.models`, the weight of
//! each, and which model request `i` names.
//!
//! The choice depends only on the request's global index and the scenario
//! seed, like the replica choice (`target.routing`) and the prompt choice, so
//! the server sees the same split whatever the worker count. A conversation
//! takes the model of the request that starts it and keeps it.

use serde::{Deserialize, Serialize};

use crate::scenario::{Backend, MockApi};

/// One model of `target.models`: its name as requests send it, and its share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedModel {
    /// The `model` every request assigned to it carries (a model id or a LoRA adapter's name).
    pub name: String,
    /// Relative share of the requests under `random` assignment.
    #[serde(default = "one")]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

/// How each request picks one of `target.models`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ModelAssignment {
    /// A seeded random model per request, in proportion to the weights.
    #[default]
    Random,
    /// Request `i` names model `i mod n` (equal shares).
    RoundRobin,
}

impl ModelAssignment {
    /// Name as written in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            ModelAssignment::Random => "random",
            ModelAssignment::RoundRobin => "round_robin",
        }
    }

    /// The default, left out when a scenario is written back.
    pub fn is_random(&self) -> bool {
        *self == ModelAssignment::Random
    }
}

/// splitmix64 finaliser: a well-mixed 64-bit hash.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Keeps the model stream apart from the replica stream, which hashes the
/// same index and seed: without it a random model and a random replica
/// would be correlated.
const MODEL_SALT: u64 = 0x6d6f_6465_6c73_0001;

/// The model (index into `models`) of request `index` of the global run;
/// 0 when there is at most one model.
pub fn pick(assignment: ModelAssignment, models: &[WeightedModel], index: u64, seed: u64) -> usize {
    let n = models.len();
    if n <= 1 {
        return 0;
    }
    match assignment {
        ModelAssignment::RoundRobin => (index % n as u64) as usize,
        ModelAssignment::Random => {
            let total: f64 = models.iter().map(|m| m.weight.max(0.0)).sum();
            // 53 random bits: a uniform draw in [0, 1)
            let u = (mix(seed ^ MODEL_SALT ^ mix(index)) >> 11) as f64 / (1u64 << 53) as f64;
            let mut point = u * total;
            for (i, m) in models.iter().enumerate() {
                let w = m.weight.max(0.0);
                if point < w {
                    return i;
                }
                point -= w;
            }
            // rounding at the top end: the last model with any weight
            models.iter().rposition(|m| m.weight > 0.0).unwrap_or(0)
        }
    }
}

/// Whether `backend`'s requests carry a `model` in their body (TGI,
/// llama.cpp's native route and Triton name none, so they cannot split).
fn names_model(backend: Backend, mock_api: MockApi) -> bool {
    match backend {
        Backend::Tgi | Backend::Llamacpp | Backend::Triton => false,
        Backend::Mock => !matches!(mock_api, MockApi::Tgi | MockApi::Llamacpp | MockApi::Triton),
        _ => true,
    }
}

/// Problems with `target.models` and `target.model_assignment`, as (key, message).
pub(crate) fn problems(s: &crate::Scenario) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let t = &s.target;
    if t.models.is_empty() {
        return out;
    }
    if !names_model(t.backend, s.mock.api) {
        out.push((
            "target.models".to_string(),
            format!(
                "backend \"{}\" sends no model in its requests, so it cannot split traffic over models",
                t.backend.name()
            ),
        ));
    }
    if t.model.is_some() {
        out.push((
            "target.models".to_string(),
            "give either target.model or target.models, not both".to_string(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, m) in t.models.iter().enumerate() {
        if m.name.trim().is_empty() {
            out.push((
                format!("target.models[{i}].name"),
                "must not be empty".into(),
            ));
        } else if !seen.insert(m.name.as_str()) {
            out.push((
                format!("target.models[{i}].name"),
                format!("\"{}\" is listed twice", m.name),
            ));
        }
        if !(m.weight.is_finite() && m.weight > 0.0) {
            out.push((
                format!("target.models[{i}].weight"),
                format!("must be a positive number, got {}", m.weight),
            ));
        }
    }
    let unequal = t.models.iter().any(|m| m.weight != t.models[0].weight);
    if t.model_assignment == ModelAssignment::RoundRobin && unequal {
        out.push((
            "target.model_assignment".to_string(),
            "round_robin gives every model the same share; remove the weights or use \"random\""
                .to_string(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn models(weights: &[f64]) -> Vec<WeightedModel> {
        weights
            .iter()
            .enumerate()
            .map(|(i, w)| WeightedModel {
                name: format!("m{i}"),
                weight: *w,
            })
            .collect()
    }

    #[test]
    fn round_robin_cycles_in_order() {
        let m = models(&[1.0, 1.0, 1.0]);
        let got: Vec<usize> = (0..6)
            .map(|i| pick(ModelAssignment::RoundRobin, &m, i, 9))
            .collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn random_follows_the_weights_and_the_seed() {
        let m = models(&[3.0, 1.0]);
        let draw = |seed| -> Vec<usize> {
            (0..4000)
                .map(|i| pick(ModelAssignment::Random, &m, i, seed))
                .collect()
        };
        let a = draw(5);
        assert_eq!(a, draw(5));
        assert_ne!(a, draw(6));
        // p = 0.75, n = 4000: sd = 27.4; 5 sd either side
        let first = a.iter().filter(|x| **x == 0).count() as f64;
        assert!(
            (3000.0 - 137.0..=3000.0 + 137.0).contains(&first),
            "{first}"
        );
    }

    #[test]
    fn a_model_list_beside_model_is_an_error_with_file_line_and_key() {
        let text = "[target]\nbase_url = \"http://h\"\nmodel = \"a\"\nmodels = [{ name = \"b\" }, { name = \"c\", weight = 2 }]\n";
        let err = crate::parse(text, "s.toml", &[]).unwrap_err().to_string();
        assert_eq!(
            err,
            "s.toml:4: `target.models`: give either target.model or target.models, not both"
        );
        let rr = "[target]\nbase_url = \"http://h\"\nmodel_assignment = \"round_robin\"\nmodels = [{ name = \"b\" }, { name = \"c\", weight = 2 }]\n";
        let err = crate::parse(rr, "s.toml", &[]).unwrap_err().to_string();
        assert!(err.contains("s.toml:3: `target.model_assignment`"), "{err}");
        let tgi =
            "[target]\nbackend = \"tgi\"\nbase_url = \"http://h\"\nmodels = [{ name = \"b\" }]\n";
        let err = crate::parse(tgi, "s.toml", &[]).unwrap_err().to_string();
        assert!(err.contains("sends no model"), "{err}");
        let ok = "[target]\nbase_url = \"http://h\"\nmodels = [{ name = \"b\" }, { name = \"c\", weight = 2 }]\n";
        let s = crate::parse(ok, "s.toml", &[]).unwrap();
        assert_eq!(s.target.models[1].weight, 2.0);
        assert_eq!(s.target.model_assignment, ModelAssignment::Random);
    }

    #[test]
    fn vllm_lora_flags_become_the_model_list() {
        let f = crate::vllm::VllmFlags {
            backend: Some("vllm".into()),
            model: Some("base".into()),
            lora_modules: vec!["sql=/adapters/sql".into(), "chat".into()],
            lora_assignment: Some("round-robin".into()),
            ..Default::default()
        };
        let s = crate::vllm::describe(None, &f, &[], &[], (None, None))
            .unwrap()
            .scenario;
        let names: Vec<&str> = s.target.models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["sql", "chat"]);
        assert!(s.target.models.iter().all(|m| m.weight == 1.0));
        assert_eq!(s.target.model, None, "--model is the base model");
        assert_eq!(s.target.model_assignment, ModelAssignment::RoundRobin);
        let bad = crate::vllm::VllmFlags {
            lora_assignment: Some("sticky".into()),
            ..f
        };
        let err = crate::vllm::describe(None, &bad, &[], &[], (None, None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("lora-assignment"), "{err}");
    }

    #[test]
    fn one_model_is_always_zero() {
        let m = models(&[2.0]);
        assert_eq!(pick(ModelAssignment::Random, &m, 17, 1), 0);
        assert_eq!(pick(ModelAssignment::RoundRobin, &[], 17, 1), 0);
    }
}
