//! The routes Locust's own page reads beyond the statistics, in Locust's
//! shapes, with what honestly maps onto a cicada run: `/tasks` (a single
//! user class, the scenario, whose tasks are the models its requests name,
//! at their configured shares), `/exceptions` (always empty: Locust lists
//! Python exceptions raised in a locustfile's code, and a cicada run runs no
//! user code; a request's failure is a failure, in `errors`), `/logs` (the
//! run's stage boundaries as log lines), `/worker-count`, and the
//! `templateArgs` its `index.html` is rendered with.

use cicada_plan::models::ModelAssignment;
use cicada_scenarios::{Scenario, sharding};
use serde_json::{Map, Value, json};

use super::state::Board;
use super::stats::{self, PERCENTILES_TO_CHART, PERCENTILES_TO_STATISTICS, csv_line};

/// The scenario the figures are of: the step's, else the one the page starts.
fn scenario(b: &Board) -> &Scenario {
    b.latest().map_or(&b.scenario, |r| &r.scenario)
}

/// The host Locust's page shows and its start form sends back: the
/// target's base URL, or its first replica's (empty for the built-in mock).
pub fn host(b: &Board) -> String {
    let t = &scenario(b).target;
    t.base_url
        .clone()
        .or_else(|| t.urls.first().cloned())
        .unwrap_or_default()
}

/// Each model the requests name, with its share of them.
fn model_shares(b: &Board) -> Vec<(String, f64)> {
    let (model, models, assignment) = match b.latest() {
        Some(r) => (
            Some(r.target.model.clone()),
            &r.target.models,
            r.target.model_assignment,
        ),
        None => {
            let t = &b.scenario.target;
            (t.model.clone(), &t.models, t.model_assignment)
        }
    };
    if models.is_empty() {
        let name = model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "the server's first model".into());
        return vec![(name, 1.0)];
    }
    let n = models.len() as f64;
    let sum: f64 = models.iter().map(|m| m.weight).sum();
    models
        .iter()
        .map(|m| {
            let share = match assignment {
                ModelAssignment::RoundRobin => 1.0 / n,
                ModelAssignment::Random if sum > 0.0 => m.weight / sum,
                ModelAssignment::Random => 1.0 / n,
            };
            (m.name.clone(), share)
        })
        .collect()
}

/// `GET /tasks`: Locust's `{"per_class": ..., "total": ...}`. One class,
/// named for the scenario, holding every user (ratio 1); its tasks are the
/// models the requests name, at the shares the scenario gives them.
pub fn tasks(b: &Board) -> Value {
    let tasks: Map<String, Value> = model_shares(b)
        .into_iter()
        .map(|(name, share)| (name, json!({ "ratio": share })))
        .collect();
    let mut class = Map::new();
    class.insert(
        scenario(b).name.clone(),
        json!({ "ratio": 1.0, "tasks": tasks }),
    );
    json!({ "per_class": class, "total": class })
}

/// `GET /exceptions`: Locust's shape, always empty (see the module's note).
pub fn exceptions() -> Value {
    json!({ "exceptions": [] })
}

/// `GET /exceptions/csv`: Locust's header, no rows.
pub fn exceptions_csv() -> String {
    csv_line(&["Count", "Message", "Traceback", "Nodes"].map(String::from))
}

/// `GET /logs`: Locust's `{"master": [...], "workers": {...}}`; the
/// coordinator's lines are the run's stage boundaries (a sweep's steps,
/// `[[stages]]` windows, changes and resets from the page), as the charts
/// mark them.
pub fn logs(b: &Board) -> Value {
    let lines: Vec<String> = b
        .marks
        .iter()
        .map(|m| format!("cicada: `{}` begins {:.1} s into the run", m.name, m.t))
        .collect();
    json!({ "master": lines, "workers": {} })
}

/// `GET /worker-count`: what Locust's start form waits on.
pub fn worker_count(b: &Board) -> Value {
    json!({ "worker_count": b.active_workers() })
}

/// The `templateArgs` Locust's `index.html` is rendered with (the keys of
/// Locust's `WebUI.update_template_args`), from the run's board. The page's
/// users and spawn-rate fields are a closed loop's; for an open loop they
/// are disabled (`hide_common_options`), as for a Locust shape class.
pub fn template_args(b: &Board) -> Value {
    let s = scenario(b);
    let closed = sharding::is_closed_loop(s);
    let (load, _) = b.load_now();
    json!({
        "locustfile": s.name,
        "state": b.state.word(),
        "is_distributed": true,
        "user_count": stats::user_count(b),
        "version": format!("cicada {}", cicada_results::VERSION),
        "host": host(b),
        "history": [],
        "override_host_warning": false,
        "missing_host_warning": false,
        "num_users": if closed { load.users.or(s.load.users) } else { None },
        "spawn_rate": if closed { load.spawn_rate.or(s.load.spawn_rate) } else { None },
        "worker_count": b.active_workers(),
        "hide_common_options": !closed,
        "shape_use_common_options": false,
        "stats_history_enabled": false,
        "tasks": "{}",
        "extra_options": {},
        "run_time": s.load.duration.map(|d| d.to_string()),
        "show_userclass_picker": false,
        "available_user_classes": null,
        "available_shape_classes": ["Default"],
        "available_user_tasks": null,
        "users": null,
        "percentiles_to_chart": PERCENTILES_TO_CHART,
        "percentiles_to_statistics": PERCENTILES_TO_STATISTICS,
        "is_host_required": false,
        "profile": null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::fixtures::result;
    use crate::web::state::{Feed, RunState};
    use cicada_plan::models::WeightedModel;

    #[test]
    fn tasks_are_the_models_at_their_shares() {
        let feed = Feed::new(Scenario::default(), RunState::Ready);
        let mut r = result();
        r.scenario.name = "chat".into();
        r.target.models = [("a", 1.0), ("b", 3.0)]
            .map(|(n, w)| WeightedModel {
                name: n.into(),
                weight: w,
                lora_id: None,
            })
            .to_vec();
        feed.step_finished(&[r]);
        let t = tasks(&feed.lock());
        assert_eq!(t["per_class"]["chat"]["ratio"], 1.0);
        assert_eq!(t["per_class"]["chat"]["tasks"]["a"]["ratio"], 0.25);
        assert_eq!(t["total"]["chat"]["tasks"]["b"]["ratio"], 0.75);
    }

    #[test]
    fn locust_shapes_of_the_other_routes() {
        let mut sc = Scenario {
            name: "page".into(),
            ..Scenario::default()
        };
        sc.load.users = Some(4);
        let feed = Feed::new(sc, RunState::Ready);
        let b = feed.lock();
        assert_eq!(exceptions(), json!({"exceptions": []}));
        assert_eq!(exceptions_csv(), "Count,Message,Traceback,Nodes\n");
        assert_eq!(logs(&b), json!({"master": [], "workers": {}}));
        assert_eq!(worker_count(&b), json!({"worker_count": 0}));
        let args = template_args(&b);
        assert_eq!(args["state"], "ready");
        assert_eq!(args["locustfile"], "page");
        assert_eq!(args["num_users"], 4);
        assert_eq!(args["hide_common_options"], false);
        assert_eq!(args["percentiles_to_statistics"], json!([0.95, 0.99]));
    }
}
