//! The server-side block of `/stats/requests` (`cicada.server`): the
//! target's own `/metrics` figures, as rows of words the page shows.

use cicada_results::server::HistFigures;
use serde_json::{Value, json};

use super::state::Board;

/// The target's own `/metrics` figures of the running step so far (renewed
/// at every scrape), else of the newest step or stage that has them:
/// `[label, value]` rows, a server histogram's percentiles as the bucket
/// they fall in.
pub(super) fn server_block(b: &Board) -> Value {
    let running = b.current.iter().map(|r| (r, true));
    let ended = b.stages.iter().rev().chain(b.finished.iter().rev());
    let newest = running
        .chain(ended.map(|r| (r, false)))
        .find_map(|(r, live)| r.server.total.as_ref().map(|f| (r, f, live)));
    let Some((r, figures, live)) = newest else {
        return Value::Null;
    };
    let Ok(Value::Object(fields)) = serde_json::to_value(figures) else {
        return Value::Null;
    };
    let rows: Vec<Value> = fields
        .iter()
        .filter_map(|(k, v)| Some(json!([k, server_value(v)?])))
        .collect();
    let of = match (r.stage_name.is_empty(), live) {
        (_, true) => format!("step {} so far", r.stage),
        (true, false) => format!("step {}", r.stage),
        (false, false) => r.stage_name.clone(),
    };
    json!({"of": of, "rows": rows})
}

/// One server figure in words (`None`: nothing to show).
fn server_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.as_f64().map_or_else(
            || n.to_string(),
            |f| {
                if f.fract() == 0.0 {
                    format!("{f:.0}")
                } else {
                    format!("{f:.3}")
                }
            },
        )),
        Value::Array(a) => Some(
            a.iter()
                .filter_map(Value::as_f64)
                .map(|f| format!("{f:.3}"))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        Value::Object(_) => {
            let h: HistFigures = serde_json::from_value(v.clone()).ok()?;
            Some(format!(
                "n {:.0}, mean {:.1} ms, p50 {} ms, p90 {} ms, p99 {} ms",
                h.count, h.mean_ms, h.p50_ms, h.p90_ms, h.p99_ms
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::result;
    use crate::state::{Feed, RunState};
    use cicada_results::server::{Bucket, ServerFigures};
    use cicada_scenarios::Scenario;

    #[test]
    fn the_newest_server_figures_show_in_words() {
        let feed = Feed::new(Scenario::default(), RunState::Ready);
        assert_eq!(server_block(&feed.lock()), Value::Null);
        let mut r = result();
        let bucket = |above, at_most| Bucket { above, at_most };
        r.server.total = Some(ServerFigures {
            source: "vllm".into(),
            requests_finished: Some(3.0),
            ttft: Some(HistFigures {
                count: 3.0,
                mean_ms: 42.0,
                p50_ms: bucket(0.0, Some(50.0)),
                p90_ms: bucket(50.0, Some(100.0)),
                p99_ms: bucket(100.0, None),
            }),
            ..ServerFigures::default()
        });
        // while the step runs: its figures so far
        feed.step_began(r.clone(), false, &[]);
        feed.lock().current.as_mut().unwrap().server = r.server.clone();
        assert_eq!(server_block(&feed.lock())["of"], "step 0 so far");
        feed.step_finished(&[r]);
        let server = server_block(&feed.lock());
        assert_eq!(server["of"], "step 0", "{server}");
        let rows = server["rows"].as_array().unwrap();
        assert!(
            rows.contains(&json!(["requests_finished", "3"])),
            "{server}"
        );
        assert!(
            rows.contains(&json!([
                "ttft",
                "n 3, mean 42.0 ms, p50 < 50 ms, p90 50-100 ms, p99 > 100 ms"
            ])),
            "{server}"
        );
    }
}
