//! Multi-model (and LoRA adapter) traffic: `target.models`, the weight of
//! each, and which model request `i` names.
//!
//! The choice depends only on the request's global index and the scenario
//! seed, like the replica choice (`target.routing`) and the prompt choice, so
//! the server sees the same split whatever the worker count. A conversation
//! takes the model of the request that starts it and keeps it.

use serde::{Deserialize, Serialize};

/// One model of `target.models`: its name as requests send it, and its share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedModel {
    /// The `model` every request assigned to it carries (a model id or a LoRA adapter's name).
    pub name: String,
    /// Relative share of the requests under `random` assignment.
    #[serde(default = "one")]
    pub weight: f64,
    /// llama-server's id of the LoRA adapter this model's requests apply
    /// (its `--lora` order, as `GET /lora-adapters` lists them): they carry
    /// `"lora": [{"id": N, "scale": 1.0}]`, and the entries without one turn
    /// every adapter off. vLLM selects adapters by `name` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora_id: Option<u32>,
}

/// The `lora` field of each model's requests, in `models`' order: `(id,
/// scale)` of the one adapter applied, the scale 0 on entries without an
/// adapter (a non-empty list turns the adapters it leaves out off); `None`
/// for every model when no entry names an adapter.
pub fn lora_selection(models: &[WeightedModel]) -> Vec<Option<(u32, f64)>> {
    let Some(first) = models.iter().find_map(|m| m.lora_id) else {
        return vec![None; models.len()];
    };
    models
        .iter()
        .map(|m| Some(m.lora_id.map_or((first, 0.0), |id| (id, 1.0))))
        .collect()
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
pub(crate) fn mix(mut z: u64) -> u64 {
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
                lora_id: None,
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
    fn lora_ids_select_one_adapter_and_the_others_turn_them_off() {
        let mut m = models(&[1.0, 1.0, 1.0]);
        assert_eq!(lora_selection(&m), [None, None, None]);
        m[1].lora_id = Some(3);
        m[2].lora_id = Some(0);
        assert_eq!(
            lora_selection(&m),
            [Some((3, 0.0)), Some((3, 1.0)), Some((0, 1.0))]
        );
    }

    #[test]
    fn one_model_is_always_zero() {
        let m = models(&[2.0]);
        assert_eq!(pick(ModelAssignment::Random, &m, 17, 1), 0);
        assert_eq!(pick(ModelAssignment::RoundRobin, &[], 17, 1), 0);
    }
}
