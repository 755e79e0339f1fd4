//! HuggingFace TGI: one `data:` event per token (axum writes no space after
//! `data:`), `generated_text` and `details` on the last, no `[DONE]`.

use std::fmt::Write as _;

use super::{Reply, token_id, token_text, word};

/// TGI's in-band error event (`impl From<InferError> for Event`).
pub(super) const ERROR_EVENT: &str = "data:{\"error\":\"Request failed during generation: mock injected error\",\"error_type\":\"generation\"}\n\n";

fn details(r: &Reply, out: &mut String, finish: &str, generated: u32) {
    if r.counts && r.final_usage {
        let _ = write!(
            out,
            "{{\"finish_reason\":\"{finish}\",\"generated_tokens\":{generated},\"seed\":null,\"input_length\":{}}}",
            r.prompt_tokens
        );
    } else {
        out.push_str("null");
    }
}

/// TGI's finish reason of a complete output.
fn finish(r: &Reply) -> &'static str {
    if r.eos { "eos_token" } else { "length" }
}

/// One token event per token of the step; the last token of the output
/// carries the whole text and the details.
pub(super) fn step(r: &Reply, out: &mut String, first: u32, n: u32, last: bool) {
    for j in first..first + n {
        let _ = write!(
            out,
            "data:{{\"index\":{},\"token\":{{\"id\":{},\"text\":\"{}\",\"logprob\":-0.125,\"special\":false}},\"generated_text\":",
            j + 1,
            token_id(r.seq, j),
            word(r.seq, j)
        );
        if last && j + 1 == first + n {
            let mut text = String::new();
            token_text(&mut text, r.seq, 0, first + n);
            let _ = write!(out, "\"{text}\",\"details\":");
            details(r, out, finish(r), first + n);
        } else {
            out.push_str("null,\"details\":null");
        }
        out.push_str("}\n\n");
    }
}

/// The model ended at once: only the special end-of-sequence token.
pub(super) fn empty(r: &Reply, out: &mut String) {
    out.push_str("data:{\"index\":1,\"token\":{\"id\":2,\"text\":\"</s>\",\"logprob\":-0.01,\"special\":true},\"generated_text\":\"\",\"details\":");
    details(r, out, "eos_token", 1);
    out.push_str("}\n\n");
}

/// `/generate`: the text and, when asked, the details.
pub(super) fn full(r: &Reply, out: &mut String, text: &str, completion: u32) {
    let _ = write!(out, "{{\"generated_text\":\"{text}\"");
    if r.counts && r.final_usage {
        let finish = if completion == 0 {
            "eos_token"
        } else {
            finish(r)
        };
        let _ = write!(
            out,
            ",\"details\":{{\"finish_reason\":\"{finish}\",\"generated_tokens\":{completion},\"seed\":null,\"prefill\":[],\"tokens\":[]}}"
        );
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::super::{Api, tests::reply};
    use super::*;

    #[test]
    fn token_events_without_space_and_details_last() {
        let model = "\"m\"".to_string();
        let r = reply(Api::Tgi, &model);
        let mut out = String::new();
        step(&r, &mut out, 0, 2, false);
        step(&r, &mut out, 2, 1, true);
        let events: Vec<&str> = out.split("\n\n").filter(|e| !e.is_empty()).collect();
        assert_eq!(events.len(), 3);
        assert!(events.iter().all(|e| e.starts_with("data:{")));
        let v: Vec<serde_json::Value> = events
            .iter()
            .map(|e| serde_json::from_str(&e[5..]).unwrap())
            .collect();
        assert_eq!(v[0]["index"], 1);
        assert!(v[0]["generated_text"].is_null());
        assert_eq!(v[2]["index"], 3);
        assert_eq!(
            v[2]["generated_text"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count(),
            3
        );
        assert_eq!(v[2]["details"]["generated_tokens"], 3);
        assert_eq!(v[2]["details"]["input_length"], 5);
        assert_eq!(v[2]["details"]["finish_reason"], "length");
    }
}
