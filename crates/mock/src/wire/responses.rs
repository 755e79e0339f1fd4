//! OpenAI Responses (`/v1/responses`) in vLLM 0.32's shape: `event:` lines
//! beside typed `data:` payloads, `response.created` and the message item
//! first, one `response.output_text.delta` per step, then
//! `response.output_text.done` and `response.completed` (status
//! `incomplete` when the output stopped at the limit, as vLLM says it) with
//! the usage. No `[DONE]`. A shaped answer that calls a tool opens a
//! `function_call` item instead and streams
//! `response.function_call_arguments.delta` events. A reasoning answer
//! thinks first in a `reasoning` item (`response.reasoning_text.delta`),
//! which is done before the message item opens at output index 1, as vLLM's
//! reasoning parsers stream it; `reasoning_tokens` in the usage counts it.

use std::fmt::Write as _;

use super::{Reply, json_string, token_text};

fn event(out: &mut String, kind: &str) {
    let _ = write!(
        out,
        "event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":"
    );
}

/// `status` and the reason, as vLLM reports an output cut at the limit.
fn status(r: &Reply, completion: u32) -> &'static str {
    if r.eos || completion == 0 || r.shaped.is_some() {
        "\"status\":\"completed\",\"incomplete_details\":null"
    } else {
        "\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"}"
    }
}

/// The sequence number of the event carrying token `token`: the two events
/// that close the reasoning item and open the message come before the answer.
fn seq_of(r: &Reply, token: u32) -> u32 {
    let t = r.thinking();
    2 + token + if t > 0 && token >= t { 2 } else { 0 }
}

/// The reasoning item of an output of `completion` tokens, done.
fn reasoning_item(r: &Reply, out: &mut String, completion: u32) {
    let mut text = String::new();
    token_text(&mut text, r.seq, 0, r.thinking().min(completion));
    let _ = write!(
        out,
        "{{\"id\":\"rs_{}\",\"type\":\"reasoning\",\"summary\":[],\"content\":[{{\"type\":\"reasoning_text\",\"text\":\"{text}\"}}],\"status\":\"completed\"}}",
        r.seq
    );
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
        ",\"usage\":{{\"input_tokens\":{p},\"input_tokens_details\":{{\"cached_tokens\":{cached}}},\"output_tokens\":{completion},\"output_tokens_details\":{{\"reasoning_tokens\":{}}},\"total_tokens\":{}}}",
        r.thinking().min(completion),
        p + completion
    );
}

/// The answer's text, whole: words, or the shaped answer's JSON.
fn answer_text(r: &Reply, completion: u32) -> String {
    match r.shaped.as_ref().filter(|_| completion > 0) {
        Some(s) => s.text().to_string(),
        None => {
            let t = r.thinking().min(completion);
            let mut text = String::new();
            token_text(&mut text, r.seq, t, completion - t);
            text
        }
    }
}

/// The output item, done: a function call with its arguments, or the
/// message holding the answer text.
fn output_item(r: &Reply, out: &mut String, completion: u32) {
    let text = json_string(&answer_text(r, completion));
    match r.shaped.as_ref().and_then(|s| s.tool.as_deref()) {
        Some(name) if completion > 0 => {
            let _ = write!(
                out,
                "{{\"id\":\"fc_{seq}\",\"type\":\"function_call\",\"status\":\"completed\",\"call_id\":\"call_{seq}\",\"name\":{},\"arguments\":{text}}}",
                json_string(name),
                seq = r.seq
            );
        }
        _ => {
            let _ = write!(
                out,
                "{{\"id\":\"msg_{}\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{{\"type\":\"output_text\",\"text\":{text},\"annotations\":[],\"logprobs\":[]}}]}}",
                r.seq
            );
        }
    }
}

/// The response object: its head, and (when `done`) its output and usage.
fn response(r: &Reply, out: &mut String, done: bool, completion: u32) {
    let _ = write!(
        out,
        "{{\"id\":\"resp_{}\",\"object\":\"response\",\"created_at\":{},\"model\":{},",
        r.seq, r.created, r.model_json
    );
    if done {
        out.push_str(status(r, completion));
        out.push_str(",\"output\":[");
        let t = r.thinking();
        if t > 0 && completion > 0 {
            reasoning_item(r, out, completion);
        }
        if completion > t {
            if t > 0 {
                out.push(',');
            }
            output_item(r, out, completion);
        }
        out.push(']');
        usage(r, out, completion);
    } else {
        out.push_str("\"status\":\"in_progress\",\"output\":[]");
    }
    out.push('}');
}

/// The function a shaped answer calls.
fn called(r: &Reply) -> Option<&str> {
    r.shaped.as_ref().and_then(|s| s.tool.as_deref())
}

/// `response.created` and the output item (a message, or the function
/// call naming its function), before any text.
pub(super) fn opening(r: &Reply, out: &mut String) {
    event(out, "response.created");
    out.push_str("0,\"response\":");
    response(r, out, false, 0);
    out.push_str("}\n\n");
    event(out, "response.output_item.added");
    if r.thinking() > 0 {
        let _ = write!(
            out,
            "1,\"output_index\":0,\"item\":{{\"id\":\"rs_{}\",\"type\":\"reasoning\",\"summary\":[],\"content\":[],\"status\":\"in_progress\"}}}}\n\n",
            r.seq
        );
        return;
    }
    let item = match called(r) {
        Some(name) => format!(
            "{{\"id\":\"fc_{seq}\",\"type\":\"function_call\",\"status\":\"in_progress\",\"call_id\":\"call_{seq}\",\"name\":{},\"arguments\":\"\"}}",
            json_string(name),
            seq = r.seq
        ),
        None => format!(
            "{{\"id\":\"msg_{}\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"in_progress\",\"content\":[]}}",
            r.seq
        ),
    };
    let _ = write!(out, "1,\"output_index\":0,\"item\":{item}}}\n\n");
}

/// The reasoning item done and the message item opened, between the last
/// thinking token and the first answer token.
fn to_answer(r: &Reply, out: &mut String) {
    let t = r.thinking();
    event(out, "response.output_item.done");
    let _ = write!(out, "{},\"output_index\":0,\"item\":", 2 + t);
    reasoning_item(r, out, t);
    out.push_str("}\n\n");
    event(out, "response.output_item.added");
    let _ = write!(
        out,
        "{},\"output_index\":1,\"item\":{{\"id\":\"msg_{}\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"in_progress\",\"content\":[]}}}}\n\n",
        3 + t,
        r.seq
    );
}

/// One step carrying tokens `first .. first + n`: thinking, then (from the
/// first answer token) answer text or a piece of the function call's
/// arguments.
pub(super) fn step(r: &Reply, out: &mut String, first: u32, n: u32) {
    let t = r.thinking();
    let thought = t.saturating_sub(first).min(n);
    if thought > 0 {
        let mut text = String::with_capacity(8 * thought as usize);
        token_text(&mut text, r.seq, first, thought);
        event(out, "response.reasoning_text.delta");
        let _ = write!(
            out,
            "{},\"item_id\":\"rs_{}\",\"output_index\":0,\"content_index\":0,\"delta\":\"{text}\"}}\n\n",
            seq_of(r, first),
            r.seq
        );
    }
    let (first, n) = (first + thought, n - thought);
    if n == 0 {
        return;
    }
    if t > 0 && first == t {
        to_answer(r, out);
    }
    let delta = match &r.shaped {
        Some(s) => json_string(s.piece(first, n, r.total_tokens)),
        None => {
            let mut text = String::with_capacity(8 * n as usize + 2);
            text.push('"');
            token_text(&mut text, r.seq, first, n);
            text.push('"');
            text
        }
    };
    let (seq, index) = (seq_of(r, first), r.answer_index());
    match called(r) {
        Some(_) => {
            event(out, "response.function_call_arguments.delta");
            let _ = write!(
                out,
                "{seq},\"item_id\":\"fc_{}\",\"output_index\":0,\"delta\":{delta}}}\n\n",
                r.seq
            );
        }
        None => {
            event(out, "response.output_text.delta");
            let _ = write!(
                out,
                "{seq},\"item_id\":\"msg_{}\",\"output_index\":{index},\"content_index\":0,\"delta\":{delta},\"logprobs\":[]}}\n\n",
                r.seq
            );
        }
    }
}

/// The text's (or the arguments') `done` event and `response.completed`
/// with the usage.
pub(super) fn close(r: &Reply, out: &mut String, completion: u32) {
    let text = json_string(&answer_text(r, completion));
    match called(r).filter(|_| completion > 0) {
        Some(name) => {
            event(out, "response.function_call_arguments.done");
            let _ = write!(
                out,
                "{},\"item_id\":\"fc_{}\",\"output_index\":0,\"name\":{},\"arguments\":{text}}}\n\n",
                seq_of(r, completion),
                r.seq,
                json_string(name)
            );
        }
        // a reasoning output cut before its answer has no message to close
        None if completion <= r.thinking() => {}
        None => {
            event(out, "response.output_text.done");
            let _ = write!(
                out,
                "{},\"item_id\":\"msg_{}\",\"output_index\":{},\"content_index\":0,\"text\":{text},\"logprobs\":[]}}\n\n",
                seq_of(r, completion),
                r.seq,
                r.answer_index()
            );
        }
    }
    event(out, "response.completed");
    let _ = write!(out, "{},\"response\":", seq_of(r, completion) + 1);
    response(r, out, true, completion);
    out.push_str("}\n\n");
}

/// OpenAI's in-band `error` event (the stream ends).
pub(super) fn error_event(out: &mut String) {
    out.push_str("event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"mock injected error\",\"param\":null,\"sequence_number\":2}\n\n");
}

/// A delta whose JSON is cut short.
pub(super) const MALFORMED_EVENT: &str = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\n\n";

/// A whole non-streamed response.
pub(super) fn full(r: &Reply, out: &mut String, completion: u32) {
    response(r, out, true, completion);
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

    /// A reasoning answer thinks in a reasoning item, which is done before
    /// the message opens at index 1 (a step may hold both); the usage
    /// counts the thinking; sequence numbers rise; whole, the output holds
    /// both items.
    #[test]
    fn a_reasoning_answer_thinks_in_its_own_item_first() {
        let model = "\"m\"".to_string();
        let (r, out) = super::super::tests::thinking_stream(Api::Responses, &model);
        let e = events(&out);
        let kinds: Vec<&str> = e.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.output_item.added",
                "response.reasoning_text.delta",
                "response.reasoning_text.delta",
                "response.output_item.done",
                "response.output_item.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.completed"
            ]
        );
        let seqs: Vec<u64> = e
            .iter()
            .map(|(_, d)| d["sequence_number"].as_u64().unwrap())
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        assert_eq!(e[1].1["item"]["type"], "reasoning");
        let (mut thought, mut answer) = (String::new(), String::new());
        token_text(&mut thought, r.seq, 0, 3);
        token_text(&mut answer, r.seq, 3, 2);
        let joined = |k: &str| -> String {
            e.iter()
                .filter(|(n, _)| n == k)
                .map(|(_, d)| d["delta"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(joined("response.reasoning_text.delta"), thought);
        assert_eq!(joined("response.output_text.delta"), answer);
        assert_eq!(e[5].1["output_index"], 1);
        assert_eq!(e[6].1["output_index"], 1);
        let done = &e[9].1["response"];
        assert_eq!(
            done["usage"]["output_tokens_details"]["reasoning_tokens"],
            3
        );
        assert_eq!(done["output"][0]["content"][0]["text"], thought.as_str());
        assert_eq!(done["output"][1]["content"][0]["text"], answer.as_str());
        let mut whole = String::new();
        full(&r, &mut whole, 5);
        let v: serde_json::Value = serde_json::from_str(&whole).unwrap();
        assert_eq!(v["output"][0]["type"], "reasoning");
        assert_eq!(v["output"][1]["content"][0]["text"], answer.as_str());
    }

    /// A tool call opens a function_call item, streams its arguments in
    /// pieces that join to the call, and completes with the item.
    #[test]
    fn a_tool_call_streams_its_arguments() {
        let model = "\"m\"".to_string();
        let mut r = reply(Api::Responses, &model);
        let req: crate::request::IncomingRequest = serde_json::from_value(serde_json::json!({
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "tool_choice": "required"
        }))
        .unwrap();
        r.shaped = crate::shaped::answer(&req, r.total_tokens, false);
        let mut out = String::new();
        opening(&r, &mut out);
        for j in 0..4 {
            step(&r, &mut out, j, 1);
        }
        close(&r, &mut out, 4);
        let e = events(&out);
        assert_eq!(e[1].1["item"]["type"], "function_call");
        assert_eq!(e[1].1["item"]["name"], "f");
        let args: String = e[2..6]
            .iter()
            .map(|(k, d)| {
                assert_eq!(k, "response.function_call_arguments.delta");
                assert_eq!(d["item_id"], e[1].1["item"]["id"]);
                d["delta"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(args.trim(), r#"{"city":"a"}"#);
        assert_eq!(e[6].0, "response.function_call_arguments.done");
        let done = &e[7].1["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"][0]["type"], "function_call");
        assert_eq!(done["output"][0]["arguments"], args.as_str());
        let mut whole = String::new();
        full(&r, &mut whole, 4);
        let v: serde_json::Value = serde_json::from_str(&whole).unwrap();
        assert_eq!(v["output"][0]["name"], "f");
    }
}
