//! Anthropic Messages (`/v1/messages`) as vLLM 0.32 and Anthropic stream
//! it: `message_start` (input tokens, cached ones apart), a `ping`, one text
//! block (`content_block_start`, a `text_delta` per step,
//! `content_block_stop`), `message_delta` (stop reason, output tokens) and
//! `message_stop`; every payload's `type` repeated in an `event:` line. A
//! shaped answer that calls a tool is a `tool_use` block instead, streamed
//! as `input_json_delta` pieces, stopping for `tool_use`. A reasoning answer
//! thinks first in a `thinking` block (index 0, `thinking_delta`s), stopped
//! before the text block opens at index 1. Anthropic's usage has no
//! thinking count: `output_tokens` includes the thinking.

use std::fmt::Write as _;

use super::{Reply, json_string, token_text};

fn event(out: &mut String, kind: &str) {
    let _ = write!(out, "event: {kind}\ndata: {{\"type\":\"{kind}\"");
}

/// The function a shaped answer calls.
fn called(r: &Reply) -> Option<&str> {
    r.shaped.as_ref().and_then(|s| s.tool.as_deref())
}

/// Anthropic's stop reason of a complete output.
fn stop_reason(r: &Reply, completion: u32) -> &'static str {
    if called(r).is_some() && completion > 0 {
        "tool_use"
    } else if r.eos || completion == 0 {
        "end_turn"
    } else {
        "max_tokens"
    }
}

/// The usage object; cached prompt tokens are counted apart from `input_tokens`.
fn usage(r: &Reply, out: &mut String, completion: u32) {
    if !r.counts {
        return;
    }
    let cached = if r.cached_details { r.cached_tokens } else { 0 };
    let _ = write!(
        out,
        ",\"usage\":{{\"input_tokens\":{},\"cache_read_input_tokens\":{cached},\"output_tokens\":{completion}}}",
        r.prompt_tokens - cached.min(r.prompt_tokens)
    );
}

/// `message_start`, a `ping` and the text block's start.
pub(super) fn opening(r: &Reply, out: &mut String) {
    event(out, "message_start");
    let _ = write!(
        out,
        ",\"message\":{{\"id\":\"msg_{}\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":{},\"stop_reason\":null,\"stop_sequence\":null",
        r.seq, r.model_json
    );
    usage(r, out, 0);
    out.push_str("}}\n\n");
    out.push_str("event: ping\ndata: {\"type\":\"ping\"}\n\n");
    event(out, "content_block_start");
    if r.thinking() > 0 {
        out.push_str(",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n");
        return;
    }
    match called(r) {
        Some(name) => {
            let _ = write!(
                out,
                ",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"toolu_{}\",\"name\":{},\"input\":{{}}}}}}\n\n",
                r.seq,
                json_string(name)
            );
        }
        None => {
            out.push_str(",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
        }
    }
}

/// One step carrying tokens `first .. first + n`: `thinking_delta`s, then
/// (from the first answer token, in a text block of its own) a
/// `text_delta`, or an `input_json_delta` with a piece of the tool call's
/// input.
pub(super) fn step(r: &Reply, out: &mut String, first: u32, n: u32) {
    let t = r.thinking();
    let thought = t.saturating_sub(first).min(n);
    if thought > 0 {
        let mut text = String::with_capacity(8 * thought as usize);
        token_text(&mut text, r.seq, first, thought);
        event(out, "content_block_delta");
        let _ = write!(
            out,
            ",\"index\":0,\"delta\":{{\"type\":\"thinking_delta\",\"thinking\":\"{text}\"}}}}\n\n"
        );
    }
    let (first, n) = (first + thought, n - thought);
    if n == 0 {
        return;
    }
    if t > 0 && first == t {
        event(out, "content_block_stop");
        out.push_str(",\"index\":0}\n\n");
        event(out, "content_block_start");
        out.push_str(",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    }
    event(out, "content_block_delta");
    let Some(s) = &r.shaped else {
        let mut text = String::with_capacity(8 * n as usize);
        token_text(&mut text, r.seq, first, n);
        let _ = write!(
            out,
            ",\"index\":{},\"delta\":{{\"type\":\"text_delta\",\"text\":\"{text}\"}}}}\n\n",
            r.answer_index()
        );
        return;
    };
    let piece = json_string(s.piece(first, n, r.total_tokens));
    let (kind, field) = match s.tool {
        Some(_) => ("input_json_delta", "partial_json"),
        None => ("text_delta", "text"),
    };
    let _ = write!(
        out,
        ",\"index\":0,\"delta\":{{\"type\":\"{kind}\",\"{field}\":{piece}}}}}\n\n"
    );
}

/// The block's end, the stop reason with the output count, and `message_stop`.
pub(super) fn close(r: &Reply, out: &mut String, completion: u32) {
    // the open block: the text one, unless the output ended while thinking
    let open = if completion > r.thinking() {
        r.answer_index()
    } else {
        0
    };
    event(out, "content_block_stop");
    let _ = write!(out, ",\"index\":{open}}}\n\n");
    event(out, "message_delta");
    let _ = write!(
        out,
        ",\"delta\":{{\"stop_reason\":\"{}\",\"stop_sequence\":null}}",
        stop_reason(r, completion)
    );
    usage(r, out, completion);
    out.push_str("}\n\n");
    event(out, "message_stop");
    out.push_str("}\n\n");
}

/// Anthropic's in-band error event (the stream ends).
pub(super) const ERROR_EVENT: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"mock injected error\"}}\n\n";

/// A delta whose JSON is cut short.
pub(super) const MALFORMED_EVENT: &str = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":\n\n";

/// A whole non-streamed message: a text block, or the tool call's block
/// (its `input` the shaped answer's JSON as it is).
pub(super) fn full(r: &Reply, out: &mut String, text: &str, completion: u32) {
    let block = match (&r.shaped, called(r)) {
        (Some(s), Some(name)) if completion > 0 => format!(
            "{{\"type\":\"tool_use\",\"id\":\"toolu_{}\",\"name\":{},\"input\":{}}}",
            r.seq,
            json_string(name),
            s.text()
        ),
        (Some(s), None) if completion > 0 => {
            format!("{{\"type\":\"text\",\"text\":{}}}", json_string(s.text()))
        }
        _ if r.thinking() > 0 => {
            let t = r.thinking().min(completion);
            let (mut thought, mut answer) = (String::new(), String::new());
            token_text(&mut thought, r.seq, 0, t);
            token_text(&mut answer, r.seq, t, completion - t);
            format!(
                "{{\"type\":\"thinking\",\"thinking\":\"{thought}\",\"signature\":\"\"}},{{\"type\":\"text\",\"text\":\"{answer}\"}}"
            )
        }
        _ => format!("{{\"type\":\"text\",\"text\":\"{text}\"}}"),
    };
    let _ = write!(
        out,
        "{{\"id\":\"msg_{}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":{},\"content\":[{block}],\"stop_reason\":\"{}\",\"stop_sequence\":null",
        r.seq,
        r.model_json,
        stop_reason(r, completion)
    );
    usage(r, out, completion);
    out.push('}');
}

/// Anthropic's error body.
pub(super) const FULL_ERROR: &str =
    r#"{"type":"error","error":{"type":"api_error","message":"mock injected error"}}"#;

/// A whole message cut short.
pub(super) const FULL_MALFORMED: &str = r#"{"id":"msg_1","type":"message","content":["#;

#[cfg(test)]
mod tests {
    use super::super::Api;
    use super::super::tests::reply;
    use super::*;

    #[test]
    fn a_stream_starts_streams_text_and_stops_with_usage() {
        let model = "\"m\"".to_string();
        let r = reply(Api::Messages, &model);
        let mut out = String::new();
        opening(&r, &mut out);
        step(&r, &mut out, 0, 3);
        step(&r, &mut out, 3, 1);
        close(&r, &mut out, 4);
        let e: Vec<(String, serde_json::Value)> = out
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let data = data.strip_prefix("data: ").unwrap();
                (
                    name.strip_prefix("event: ").unwrap().to_string(),
                    serde_json::from_str(data).unwrap(),
                )
            })
            .collect();
        let kinds: Vec<&str> = e.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        for (name, data) in &e {
            assert_eq!(data["type"], name.as_str());
        }
        // 5 prompt tokens, 2 of them cached: counted apart, as Anthropic does
        assert_eq!(e[0].1["message"]["usage"]["input_tokens"], 3);
        assert_eq!(e[0].1["message"]["usage"]["cache_read_input_tokens"], 2);
        assert_eq!(e[3].1["delta"]["type"], "text_delta");
        assert_eq!(e[6].1["delta"]["stop_reason"], "max_tokens");
        assert_eq!(e[6].1["usage"]["output_tokens"], 4);
    }

    /// A reasoning answer thinks in a thinking block at index 0, stopped
    /// before the text block opens at index 1 (a step may hold both);
    /// whole, the message holds both blocks.
    #[test]
    fn a_reasoning_answer_thinks_in_its_own_block_first() {
        let model = "\"m\"".to_string();
        let (r, out) = super::super::tests::thinking_stream(Api::Messages, &model);
        let data: Vec<serde_json::Value> = super::super::tests::payloads(&out)
            .into_iter()
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        let kinds: Vec<String> = data
            .iter()
            .map(|d| {
                let kind = d["type"].as_str().unwrap();
                match d["delta"]["type"].as_str() {
                    Some(delta) if kind == "content_block_delta" => format!("{kind}:{delta}"),
                    _ => format!("{kind}:{}", d["index"]),
                }
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "message_start:null",
                "ping:null",
                "content_block_start:0",
                "content_block_delta:thinking_delta",
                "content_block_delta:thinking_delta",
                "content_block_stop:0",
                "content_block_start:1",
                "content_block_delta:text_delta",
                "content_block_delta:text_delta",
                "content_block_stop:1",
                "message_delta:null",
                "message_stop:null"
            ]
        );
        assert_eq!(data[2]["content_block"]["type"], "thinking");
        let (mut thought, mut answer) = (String::new(), String::new());
        token_text(&mut thought, r.seq, 0, 3);
        token_text(&mut answer, r.seq, 3, 2);
        let joined = |field: &str| -> String {
            data.iter()
                .filter_map(|d| d["delta"][field].as_str())
                .collect()
        };
        assert_eq!(joined("thinking"), thought);
        assert_eq!(joined("text"), answer);
        assert_eq!(data[7]["index"], 1);
        assert_eq!(data[10]["usage"]["output_tokens"], 5);
        let mut whole = String::new();
        full(&r, &mut whole, "", 5);
        let v: serde_json::Value = serde_json::from_str(&whole).unwrap();
        assert_eq!(v["content"][0]["thinking"], thought.as_str());
        assert_eq!(v["content"][1]["text"], answer.as_str());
    }

    /// A tool call is a tool_use block whose input arrives as JSON pieces,
    /// stopping for tool_use; whole, the block holds the input as JSON.
    #[test]
    fn a_tool_call_streams_its_input() {
        let model = "\"m\"".to_string();
        let mut r = reply(Api::Messages, &model);
        let req: crate::request::IncomingRequest = serde_json::from_value(serde_json::json!({
            "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}],
            "tool_choice": {"type": "any"}
        }))
        .unwrap();
        r.shaped = crate::shaped::answer(&req, r.total_tokens, false);
        let mut out = String::new();
        opening(&r, &mut out);
        step(&r, &mut out, 0, 3);
        step(&r, &mut out, 3, 1);
        close(&r, &mut out, 4);
        let data: Vec<serde_json::Value> = super::super::tests::payloads(&out)
            .into_iter()
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        assert_eq!(data[2]["content_block"]["type"], "tool_use");
        assert_eq!(data[2]["content_block"]["name"], "f");
        let input: String = data[3..5]
            .iter()
            .map(|d| {
                assert_eq!(d["delta"]["type"], "input_json_delta");
                d["delta"]["partial_json"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(input.trim(), r#"{"n":0}"#);
        assert_eq!(data[6]["delta"]["stop_reason"], "tool_use");
        let mut whole = String::new();
        full(&r, &mut whole, "", 4);
        let v: serde_json::Value = serde_json::from_str(&whole).unwrap();
        assert_eq!(v["content"][0]["input"], serde_json::json!({"n": 0}));
        assert_eq!(v["stop_reason"], "tool_use");
    }
}
