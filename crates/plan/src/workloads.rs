//! Mixed traffic (`[[workloads]]`): the resolved part of each workload a
//! plan carries, and which workload and pool entry request `i` uses.
//!
//! The choice depends only on the request's global index and the scenario
//! seed, like the model choice (`models::pick`), so the server sees the same
//! mix whatever the worker count. Each workload's pool entries sit in one
//! run of the plan's pool ids (`pool_start..pool_start + pool_len`); the
//! `k`-th request of the run that picks workload `w` is not counted, request
//! `i` simply uses entry `i mod pool_len` of its workload's run.
//!
//! An arrival `i` that picks a session workload starts one session: the
//! conversation of that same entry, so a session's content depends only on
//! the seed, its workload and `i`, never on the worker count.

use cicada_metrics::Slo;
use cicada_request::ResolvedSampling;
use serde::{Deserialize, Serialize};

use crate::models::mix;
use crate::sessions::ConversationSettings;
use crate::target::ResolvedTarget;

/// One workload of a mixed run, resolved: what its requests are and how they are judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadPart {
    /// Its name in results.
    pub name: String,
    /// Relative share of the run's requests (> 0).
    pub weight: f64,
    /// The target as its requests reach it: the run's, with its own API,
    /// model and route (its `urls`).
    pub target: ResolvedTarget,
    /// Its generation parameters.
    pub sampling: ResolvedSampling,
    /// Its SLO: its requests' goodput is judged against it.
    pub slo: Slo,
    /// Its first pool id.
    pub pool_start: u64,
    /// Its pool entries (at least 1).
    pub pool_len: u64,
    /// Set when it is a session workload (`conversations`, `multi_turn`,
    /// `agentic`, `agent_trace`): each arrival that picks it starts the
    /// session of its pool entry, whose turns then follow on one worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<ConversationSettings>,
}

/// Keeps the workload stream apart from the model and replica streams,
/// which hash the same index and seed.
const WORKLOAD_SALT: u64 = 0x776f_726b_6c6f_6164;

/// The workload (index into `parts`) of request `index` of the global run,
/// in proportion to the weights; 0 with at most one workload.
pub fn pick(parts: &[WorkloadPart], index: u64, seed: u64) -> usize {
    if parts.len() <= 1 {
        return 0;
    }
    let total: f64 = parts.iter().map(|p| p.weight.max(0.0)).sum();
    // 53 random bits: a uniform draw in [0, 1)
    let u = (mix(seed ^ WORKLOAD_SALT ^ mix(index)) >> 11) as f64 / (1u64 << 53) as f64;
    let mut point = u * total;
    for (i, p) in parts.iter().enumerate() {
        let w = p.weight.max(0.0);
        if point < w {
            return i;
        }
        point -= w;
    }
    // rounding at the top end: the last workload with any weight
    parts.iter().rposition(|p| p.weight > 0.0).unwrap_or(0)
}

/// Request `index`'s workload and the pool id it sends: entry
/// `index mod pool_len` of its workload's run of ids.
pub fn entry_of(parts: &[WorkloadPart], index: u64, seed: u64) -> Option<(usize, u64)> {
    let w = pick(parts, index, seed);
    let p = parts.get(w)?;
    Some((w, p.pool_start + index % p.pool_len.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ModelAssignment;
    use std::collections::BTreeMap;

    fn parts(weights: &[f64]) -> Vec<WorkloadPart> {
        let target = ResolvedTarget {
            api: crate::WireApi::Chat,
            family: crate::ServerFamily::Mock,
            urls: vec!["http://x/v1/chat/completions".into()],
            model: "m".into(),
            models: Vec::new(),
            model_assignment: ModelAssignment::Random,
            headers: BTreeMap::new(),
            api_key_env: None,
            timeout_ms: 1,
            stream: true,
            routing: crate::Routing::RoundRobin,
            tls: Default::default(),
            keep_alive: true,
            http: Default::default(),
            addresses: Default::default(),
            proxy: Default::default(),
            no_proxy: Vec::new(),
            max_event_bytes: 1,
        };
        let mut start = 0;
        weights
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let len = 10 * (i as u64 + 1);
                let p = WorkloadPart {
                    name: format!("w{i}"),
                    weight: *w,
                    target: target.clone(),
                    sampling: ResolvedSampling::default(),
                    slo: Slo::default(),
                    pool_start: start,
                    pool_len: len,
                    sessions: None,
                };
                start += len;
                p
            })
            .collect()
    }

    #[test]
    fn the_split_follows_the_weights_and_the_seed() {
        let p = parts(&[7.0, 2.0, 1.0]);
        let draw = |seed| -> Vec<usize> { (0..10_000).map(|i| pick(&p, i, seed)).collect() };
        let a = draw(5);
        assert_eq!(a, draw(5));
        assert_ne!(a, draw(6));
        for (w, share) in [(0usize, 0.7), (1, 0.2), (2, 0.1)] {
            // binomial, n = 10,000: 5 standard deviations either side
            let n: f64 = 10_000.0;
            let got = a.iter().filter(|x| **x == w).count() as f64;
            let bound = 5.0 * (n * share * (1.0 - share)).sqrt();
            assert!((got - n * share).abs() <= bound, "workload {w}: {got}");
        }
        // the model stream is another draw: the two are not the same choice
        let models: Vec<crate::WeightedModel> = [7.0, 2.0, 1.0]
            .iter()
            .map(|w| crate::WeightedModel {
                name: String::new(),
                weight: *w,
                lora_id: None,
            })
            .collect();
        let by_model: Vec<usize> = (0..10_000)
            .map(|i| crate::models::pick(ModelAssignment::Random, &models, i, 5))
            .collect();
        assert_ne!(a, by_model);
    }

    #[test]
    fn each_request_uses_an_entry_of_its_own_workload() {
        let p = parts(&[1.0, 1.0, 1.0]);
        for i in 0..500 {
            let (w, id) = entry_of(&p, i, 3).unwrap();
            let part = &p[w];
            assert!((part.pool_start..part.pool_start + part.pool_len).contains(&id));
            assert_eq!(id - part.pool_start, i % part.pool_len);
        }
        assert_eq!(pick(&p[..1], 17, 3), 0);
    }
}
