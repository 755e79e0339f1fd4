//! OpenAI Responses (`/v1/responses`) in vLLM 0.32's shape: `event:` lines
//! beside typed `data:` payloads, `response.created` and the message item
//! first, one `response.output_text.delta` per step, then
//! `response.output_text.done` and `response.completed` (status
//! `incomplete` when the output stopped at the limit, as vLLM says it) with
//! the usage. No `[DONE]`.

use std::fmt::Write as _;

use super::{Reply, token_text};

fn event(out: &mut String, kind: &str) {
    let _ = write!(
        out,
        "event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":"
    );
}

/// `status` and the reason, as vLLM reports an output cut at the limit.
fn status(r: &Reply, completion: u32) -> &'static str {
    if r.eos || completion == 0 {
        "\"status\":\"completed\",\"incomplete_details\":null"
    } else {
        "\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"}"
    }
}

fn usage(r: &Reply, out: &mut String, completion: u32) {
    if !r.counts {
        out.push_str(",\"usage\":null");
        return;
    }
    let p = r.prompt_tokens;
    let cached = if r.cached_details { r.cached_tokens } else { 0 };
    let _ = write!(
        out,
        ",\"usage\":{{\"input_tokens\":{p},\"input_tokens_details\":{{\"cached_tokens\":{cached}}},\"output_tokens\":{completion},\"output_tokens_details\":{{\"reasoning_tokens\":0}},\"total_tokens\":{}}}",
        p + completion
    );
}

/// The response object: its head, the message holding `text`, and its usage.
fn response(r: &Reply, out: &mut String, text: Option<&str>, completion: u32) {
    let _ = write!(
        out,
        "{{\"id\":\"resp_{}\",\"object\":\"response\",\"created_at\":{},\"model\":{},",
        r.seq, r.created, r.model_json
    );
    match text {
        None => out.push_str("\"status\":\"in_progress\",\"output\":[]"),
        Some(t) => {
            out.push_str(status(r, completion));
            let _ = write!(
                out,
                ",\"output\":[{{\"id\":\"msg_{}\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{{\"type\":\"output_text\",\"text\":\"{t}\",\"annotations\":[],\"logprobs\":[]}}]}}]",
                r.seq
            );
            usage(r, out, completion);
        }
    }
    out.push('}');
}

/// `response.created` and the message item, before any text.
pub(super) fn opening(r: &Reply, out: &mut String) {
    event(out, "response.created");
    out.push_str("0,\"response\":");
    response(r, out, None, 0);
    out.push_str("}\n\n");
    event(out, "response.output_item.added");
    let _ = write!(
        out,
        "1,\"output_index\":0,\"item\":{{\"id\":\"msg_{}\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"in_progress\",\"content\":[]}}}}\n\n",
        r.seq
    );
}

/// One text delta carrying tokens `first .. first + n`.
pub(super) fn step(r: &Reply, out: &mut String, first: u32, n: u32) {
    let mut text = String::with_capacity(8 * n as usize);
    token_text(&mut text, r.seq, first, n);
    event(out, "response.output_text.delta");
    let _ = write!(
        out,
        "{},\"item_id\":\"msg_{}\",\"output_index\":0,\"content_index\":0,\"delta\":\"{text}\",\"logprobs\":[]}}\n\n",
        2 + first,
        r.seq
    );
}

/// The text's `done` event and `response.completed` with the usage.
pub(super) fn close(r: &Reply, out: &mut String, completion: u32) {
    let mut text = String::new();
    token_text(&mut text, r.seq, 0, completion);
    event(out, "response.output_text.done");
    let _ = write!(
        out,
        "{},\"item_id\":\"msg_{}\",\"output_index\":0,\"content_index\":0,\"text\":\"{text}\",\"logprobs\":[]}}\n\n",
        2 + completion,
        r.seq
    );
    event(out, "response.completed");
    let _ = write!(out, "{},\"response\":", 3 + completion);
    response(r, out, Some(&text), completion);
    out.push_str("}\n\n");
}

/// OpenAI's in-band `error` event (the stream ends).
pub(super) fn error_event(out: &mut String) {
    out.push_str("event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"mock injected error\",\"param\":null,\"sequence_number\":2}\n\n");
}

/// A delta whose JSON is cut short.
pub(super) const MALFORMED_EVENT: &str = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\n\n";

/// A whole non-streamed response.
pub(super) fn full(r: &Reply, out: &mut String, text: &str, completion: u32) {
    response(r, out, Some(text), completion);
}

/// vLLM's error body.
pub(super) const FULL_ERROR: &str = r#"{"error":{"message":"mock injected error","type":"InternalServerError","param":null,"code":500}}"#;

/// A whole response cut short.
pub(super) const FULL_MALFORMED: &str = r#"{"id":"resp_1","object":"response","output":["#;

#[cfg(test)]
mod tests {
    use super::super::Api;
    use super::super::tests::reply;
    use super::*;

    /// (event name, data) of every SSE event.
    fn events(text: &str) -> Vec<(String, serde_json::Value)> {
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap().to_string();
                let data = data.strip_prefix("data: ").unwrap();
                (name, serde_json::from_str(data).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_stream_opens_streams_text_and_completes_with_usage() {
        let model = "\"m\"".to_string();
        let r = reply(Api::Responses, &model);
        let mut out = String::new();
        opening(&r, &mut out);
        step(&r, &mut out, 0, 3);
        step(&r, &mut out, 3, 1);
        close(&r, &mut out, 4);
        let e = events(&out);
        let kinds: Vec<&str> = e.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.output_item.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.completed"
            ]
        );
        for (name, data) in &e {
            assert_eq!(data["type"], name.as_str());
        }
        let mut three = String::new();
        token_text(&mut three, r.seq, 0, 3);
        assert_eq!(e[2].1["delta"], three.as_str());
        let done = &e[5].1["response"];
        assert_eq!(
            done["status"], "incomplete",
            "cut at the limit, as vLLM says"
        );
        assert_eq!(done["usage"]["output_tokens"], 4);
        assert_eq!(done["usage"]["input_tokens"], 5);
        assert_eq!(done["usage"]["input_tokens_details"]["cached_tokens"], 2);
        let mut all = String::new();
        token_text(&mut all, r.seq, 0, 4);
        assert_eq!(done["output"][0]["content"][0]["text"], all.as_str());
    }
}
