//! llama.cpp's native `/completion`: one partial event per token with running
//! counts, then a final event (`stop: true`) with `timings`; no `[DONE]`.

use std::fmt::Write as _;

use super::{Reply, token_id, word};

/// llama.cpp's in-band error (newer `server-context.cpp`; the stream then ends).
pub(super) const ERROR_EVENT: &str = "data: {\"error\":{\"code\":500,\"message\":\"mock injected error\",\"type\":\"server_error\"}}\n\n";

/// One partial event per token of the step.
pub(super) fn step(r: &Reply, out: &mut String, first: u32, n: u32) {
    for j in first..first + n {
        let _ = write!(
            out,
            "data: {{\"index\":0,\"content\":\"{}\",\"tokens\":[{}],\"stop\":false,\"id_slot\":0",
            word(r.seq, j),
            token_id(r.seq, j)
        );
        if r.counts {
            let _ = write!(
                out,
                ",\"tokens_predicted\":{},\"tokens_evaluated\":{}",
                j + 1,
                r.prompt_tokens
            );
        }
        out.push_str("}\n\n");
    }
}

fn final_fields(r: &Reply, out: &mut String, completion: u32, stop_type: &str) {
    let _ = write!(
        out,
        ",\"id_slot\":0,\"stop\":true,\"model\":{}",
        r.model_json
    );
    if r.counts {
        let _ = write!(
            out,
            ",\"tokens_predicted\":{completion},\"tokens_evaluated\":{}",
            r.prompt_tokens
        );
    }
    let _ = write!(
        out,
        ",\"generation_settings\":{{\"n_predict\":{}}},\"prompt\":\"\",\"has_new_line\":false,\"truncated\":false,\"stop_type\":\"{stop_type}\",\"stopping_word\":\"\",\"tokens_cached\":{}",
        r.limit_tokens,
        r.prompt_tokens + completion
    );
    if r.counts {
        out.push(',');
        r.timings(out, completion);
    }
}

/// The final event: empty content in stream mode, counts and `timings`.
pub(super) fn close(r: &Reply, out: &mut String, completion: u32, stop_type: &str) {
    out.push_str("data: {\"index\":0,\"content\":\"\",\"tokens\":[]");
    final_fields(r, out, completion, stop_type);
    out.push_str("}\n\n");
}

/// `stream: false`: the final object with the whole text.
pub(super) fn full(r: &Reply, out: &mut String, text: &str, completion: u32) {
    let _ = write!(out, "{{\"index\":0,\"content\":\"{text}\",\"tokens\":[]");
    let stop_type = if completion == 0 || r.eos {
        "eos"
    } else {
        "limit"
    };
    final_fields(r, out, completion, stop_type);
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::super::{Api, tests::payloads, tests::reply};
    use super::*;

    #[test]
    fn partials_count_and_the_final_event_has_timings() {
        let model = "\"m\"".to_string();
        let mut r = reply(Api::LlamaCpp, &model);
        r.spec_tokens = 4;
        r.tokens_per_event = 2;
        let mut out = String::new();
        step(&r, &mut out, 0, 2);
        step(&r, &mut out, 2, 2);
        close(&r, &mut out, 4, "limit");
        let p = payloads(&out);
        assert_eq!(p.len(), 5);
        let v: Vec<serde_json::Value> =
            p.iter().map(|e| serde_json::from_str(e).unwrap()).collect();
        assert_eq!(v[1]["tokens_predicted"], 2);
        assert_eq!(v[1]["stop"], false);
        assert_eq!(v[4]["stop"], true);
        assert_eq!(v[4]["content"], "");
        assert_eq!(v[4]["tokens_predicted"], 4);
        assert_eq!(v[4]["tokens_evaluated"], 5);
        let t = &v[4]["timings"];
        assert_eq!(t["cache_n"], 2);
        assert_eq!(t["prompt_n"], 3);
        assert_eq!(t["predicted_n"], 4);
        // 4 tokens in 2 events: 1 speculative step proposing 4, accepting 1
        assert_eq!(t["draft_n"], 4);
        assert_eq!(t["draft_n_accepted"], 1);
        assert!(!out.contains("[DONE]"));
    }
}
