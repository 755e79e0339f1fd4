//! The client-bound verdict of `/stats/requests` (`cicada.client`): is the
//! client, not the server, the limit of the step so far?

use cicada_results::RunResult;
use serde_json::{Value, json};

use super::figures::round2;

/// Is the client the limit? The step's verdict so far (runtime stalls and
/// schedule lag; each worker's CPU share is judged at the step's end).
pub(super) fn client_block(r: &RunResult) -> Value {
    match &r.client {
        None => Value::Null,
        Some(c) => json!({
            "client_bound": c.client_bound,
            "reasons": c.reasons,
            "stall_p50_ms": round2(c.stall_p50_ms),
            "stall_p99_ms": round2(c.stall_p99_ms),
            "stall_max_ms": round2(c.stall_max_ms),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::result;
    use cicada_results::client_health::ClientHealth;

    #[test]
    fn the_verdict_and_its_reasons_show() {
        let mut r = result();
        assert_eq!(client_block(&r), Value::Null);
        r.client = Some(ClientHealth {
            client_bound: true,
            reasons: vec!["the worker runtime ran late".into()],
            stall_p99_ms: 12.345,
            ..ClientHealth::default()
        });
        let v = client_block(&r);
        assert_eq!(v["client_bound"], true);
        assert_eq!(v["reasons"][0], "the worker runtime ran late");
        assert_eq!(v["stall_p99_ms"], 12.35);
    }
}
