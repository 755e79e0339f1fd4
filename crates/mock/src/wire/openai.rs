//! OpenAI completions and chat completions, in vLLM's dialect (role-only first
//! chunk, `finish_reason` on the last content chunk, usage-only last chunk,
//! optional running usage) or llama.cpp's (separate finish chunk with an empty
//! delta, `timings` beside usage, `system_fingerprint`).

use std::fmt::Write as _;

use super::{Api, Reply, json_string, token_text};
use crate::ReasoningField;

/// End-of-stream marker.
const DONE: &str = "data: [DONE]\n\n";

fn open(r: &Reply, out: &mut String) {
    let (prefix, object) = match r.api {
        Api::Chat => ("chatcmpl", "chat.completion.chunk"),
        _ => ("cmpl", "text_completion"),
    };
    let _ = write!(
        out,
        "data: {{\"id\":\"{prefix}-{}\",\"object\":\"{object}\",\"created\":{},\"model\":{}",
        r.seq, r.created, r.model_json
    );
    if r.llamacpp {
        out.push_str(",\"system_fingerprint\":\"b6497-cicada\"");
    }
}

fn usage(r: &Reply, out: &mut String, completion: u32) {
    let (p, c) = (r.prompt_tokens, completion);
    if r.llamacpp {
        let _ = write!(
            out,
            ",\"usage\":{{\"completion_tokens\":{c},\"prompt_tokens\":{p},\"total_tokens\":{}}}",
            p + c
        );
        return;
    }
    let _ = write!(
        out,
        ",\"usage\":{{\"prompt_tokens\":{p},\"total_tokens\":{},\"completion_tokens\":{c}",
        p + c
    );
    let reasoned = r.reasoning_tokens.min(c);
    if reasoned > 0 {
        let _ = write!(
            out,
            ",\"completion_tokens_details\":{{\"reasoning_tokens\":{reasoned}}}"
        );
    }
    if r.cached_details && r.cached_tokens > 0 {
        let _ = write!(
            out,
            ",\"prompt_tokens_details\":{{\"cached_tokens\":{}}}",
            r.cached_tokens
        );
    }
    out.push('}');
}

/// The role-only first chat chunk (not content).
pub(super) fn role(r: &Reply, out: &mut String) {
    open(r, out);
    if r.llamacpp {
        out.push_str(",\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}]");
    } else {
        out.push_str(",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]");
        if r.counts && r.continuous {
            usage(r, out, 0);
        }
    }
    out.push_str("}\n\n");
}

/// The chat delta of a shaped answer's tokens `first .. first + n`: a piece
/// of JSON content, or of the tool call's arguments (named in the opening).
fn shaped_delta(r: &Reply, first: u32, n: u32) -> Option<String> {
    let s = r.shaped.as_ref().filter(|_| r.api == Api::Chat)?;
    let piece = json_string(s.piece(first, n, r.total_tokens));
    Some(match &s.tool {
        None => format!("\"content\":{piece}"),
        Some(_) => {
            format!("\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{piece}}}}}]")
        }
    })
}

/// vLLM's first chunk of a tool call: it names the function, its
/// arguments still empty (not output: no token is counted).
pub(super) fn tool_call_opening(r: &Reply, out: &mut String) {
    let Some(name) = r.shaped.as_ref().and_then(|s| s.tool.as_ref()) else {
        return;
    };
    open(r, out);
    let _ = write!(
        out,
        ",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"id\":\"call_{}\",\"type\":\"function\",\"function\":{{\"name\":{},\"arguments\":\"\"}}}}]}},\"logprobs\":null,\"finish_reason\":null}}]",
        r.seq,
        json_string(name)
    );
    out.push_str("}\n\n");
}

/// A chat delta's text fields: the reasoning (in the configured field or
/// fields) and the answer's `content`; just `content` without reasoning.
fn delta(r: &Reply, reasoning: &str, content: &str) -> String {
    if reasoning.is_empty() {
        return format!("\"content\":\"{content}\"");
    }
    let mut out = String::new();
    for (field, on) in [
        (
            "reasoning_content",
            r.reasoning_field != ReasoningField::Reasoning,
        ),
        (
            "reasoning",
            r.reasoning_field != ReasoningField::ReasoningContent,
        ),
    ] {
        if on {
            let _ = write!(out, "\"{field}\":\"{reasoning}\",");
        }
    }
    if content.is_empty() {
        out.push_str("\"content\":null");
    } else {
        let _ = write!(out, "\"content\":\"{content}\"");
    }
    out
}

/// One choice: chat's delta holds `fields` (see [`delta`]), completions'
/// `text` holds `text`.
fn choice(r: &Reply, out: &mut String, text: &str, finish: Option<&str>) {
    let fields = delta(r, "", text);
    choice_with(r, out, (text, &fields), finish);
}

fn choice_with(r: &Reply, out: &mut String, (text, fields): (&str, &str), finish: Option<&str>) {
    let finish = finish.map_or_else(|| "null".to_string(), |f| format!("\"{f}\""));
    let stop_reason = if r.llamacpp {
        ""
    } else {
        ",\"stop_reason\":null"
    };
    match (r.api, r.llamacpp) {
        (Api::Chat, false) => {
            let _ = write!(
                out,
                ",\"choices\":[{{\"index\":0,\"delta\":{{{fields}}},\"logprobs\":null,\"finish_reason\":{finish}{}}}]",
                if finish == "null" { "" } else { stop_reason }
            );
        }
        (Api::Chat, true) if text.is_empty() => {
            let _ = write!(
                out,
                ",\"choices\":[{{\"finish_reason\":{finish},\"index\":0,\"delta\":{{}}}}]"
            );
        }
        (Api::Chat, true) => {
            let _ = write!(
                out,
                ",\"choices\":[{{\"finish_reason\":{finish},\"index\":0,\"delta\":{{{fields}}}}}]"
            );
        }
        _ => {
            let _ = write!(
                out,
                ",\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"logprobs\":null,\"finish_reason\":{finish}{stop_reason}}}]"
            );
        }
    }
}

/// One content chunk for `n` tokens (several under speculative decoding).
pub(super) fn step(r: &Reply, out: &mut String, first: u32, n: u32, last: bool) {
    // tokens before `reasoning_tokens` are thinking, the rest the answer
    let thinking = r.reasoning_tokens.clamp(first, first + n) - first;
    let mut reasoning = String::with_capacity(8 * thinking as usize);
    token_text(&mut reasoning, r.seq, first, thinking);
    let mut text = String::with_capacity(8 * (n - thinking) as usize);
    token_text(&mut text, r.seq, first + thinking, n - thinking);
    open(r, out);
    let vllm_finish = (last && !r.llamacpp).then_some(r.finish_reason());
    // a shaped answer (tool call or JSON) replaces the words; it does not reason
    let fields = shaped_delta(r, first, n).unwrap_or_else(|| delta(r, &reasoning, &text));
    choice_with(r, out, (&text, &fields), vllm_finish);
    if r.counts && r.continuous && !r.llamacpp {
        usage(r, out, first + n);
    } else if r.api == Api::Completions && !r.llamacpp {
        // vLLM's completions chunks print every field
        out.push_str(",\"usage\":null");
    }
    out.push_str("}\n\n");
    if last && r.llamacpp {
        finish_chunk(r, out, r.finish_reason(), first + n);
    }
}

/// llama.cpp's finish chunk: empty delta, the finish reason, and (when no
/// usage chunk follows) usage and `timings`.
fn finish_chunk(r: &Reply, out: &mut String, reason: &str, completion: u32) {
    open(r, out);
    choice(r, out, "", Some(reason));
    if r.counts && !r.final_usage {
        usage(r, out, completion);
        out.push(',');
        r.timings(out, completion);
    }
    out.push_str("}\n\n");
}

/// The usage-only last chunk (`choices: []`) if asked for, then `[DONE]`.
pub(super) fn close(r: &Reply, out: &mut String, completion: u32) {
    if r.counts && r.final_usage {
        open(r, out);
        out.push_str(",\"choices\":[]");
        usage(r, out, completion);
        if r.llamacpp {
            out.push(',');
            r.timings(out, completion);
        }
        out.push_str("}\n\n");
    }
    out.push_str(DONE);
}

/// A finish without any content, then the usual close.
pub(super) fn empty(r: &Reply, out: &mut String) {
    if r.llamacpp {
        finish_chunk(r, out, "stop", 0);
    } else {
        open(r, out);
        choice(r, out, "", Some("stop"));
        out.push_str("}\n\n");
    }
    close(r, out, 0);
}

/// vLLM's in-band error (then `[DONE]`), or llama.cpp's (the stream ends).
pub(super) fn error_event(r: &Reply, out: &mut String) {
    if r.llamacpp {
        out.push_str("data: {\"error\":{\"code\":500,\"message\":\"mock injected error\",\"type\":\"server_error\"}}\n\n");
    } else {
        out.push_str("data: {\"error\":{\"message\":\"mock injected error\",\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}\n\n");
        out.push_str(DONE);
    }
}

/// An event whose payload is not valid JSON, then `[DONE]`.
pub(super) fn malformed(_r: &Reply, out: &mut String) {
    out.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\n\n");
    out.push_str(DONE);
}

/// A complete non-streaming response body.
pub(super) fn full(r: &Reply, out: &mut String, text: &str, completion: u32) {
    let (prefix, object) = match r.api {
        Api::Chat => ("chatcmpl", "chat.completion"),
        _ => ("cmpl", "text_completion"),
    };
    let _ = write!(
        out,
        "{{\"id\":\"{prefix}-{}\",\"object\":\"{object}\",\"created\":{},\"model\":{}",
        r.seq, r.created, r.model_json
    );
    let finish = if completion == 0 {
        "stop"
    } else {
        r.finish_reason()
    };
    match (r.api, r.shaped.as_ref().filter(|_| completion > 0)) {
        (Api::Chat, Some(s)) => {
            let body = json_string(s.text());
            let message = match &s.tool {
                None => format!("\"content\":{body}"),
                Some(name) => format!(
                    "\"content\":null,\"tool_calls\":[{{\"id\":\"call_{}\",\"type\":\"function\",\"function\":{{\"name\":{},\"arguments\":{body}}}}}]",
                    r.seq,
                    json_string(name)
                ),
            };
            let _ = write!(
                out,
                ",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",{message}}},\"finish_reason\":\"{finish}\"}}]"
            );
        }
        (Api::Chat, None) if r.reasoning_tokens > 0 => {
            let thinking = r.reasoning_tokens.min(completion);
            let (mut reasoning, mut answer) = (String::new(), String::new());
            token_text(&mut reasoning, r.seq, 0, thinking);
            token_text(&mut answer, r.seq, thinking, completion - thinking);
            let fields = delta(r, &reasoning, &answer);
            let _ = write!(
                out,
                ",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",{fields}}},\"finish_reason\":\"{finish}\"}}]"
            );
        }
        (Api::Chat, None) => {
            let _ = write!(
                out,
                ",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{text}\"}},\"finish_reason\":\"{finish}\"}}]"
            );
        }
        _ => {
            let _ = write!(
                out,
                ",\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"finish_reason\":\"{finish}\"}}]"
            );
        }
    }
    if r.counts {
        usage(r, out, completion);
        if r.llamacpp {
            out.push(',');
            r.timings(out, completion);
        }
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::super::tests::{payloads, reply};
    use super::*;

    #[test]
    fn vllm_chat_stream_shapes() {
        let model = "\"m\"".to_string();
        let r = reply(Api::Chat, &model);
        let mut out = String::new();
        role(&r, &mut out);
        step(&r, &mut out, 0, 3, false);
        step(&r, &mut out, 3, 1, true);
        close(&r, &mut out, 4);
        let p = payloads(&out);
        assert_eq!(p.len(), 5, "{out}");
        let first: serde_json::Value = serde_json::from_str(p[0]).unwrap();
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(first["usage"]["completion_tokens"], 0);
        let second: serde_json::Value = serde_json::from_str(p[1]).unwrap();
        assert_eq!(second["usage"]["completion_tokens"], 3);
        let last: serde_json::Value = serde_json::from_str(p[2]).unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], "length");
        assert!(last["choices"][0]["stop_reason"].is_null());
        let u: serde_json::Value = serde_json::from_str(p[3]).unwrap();
        assert_eq!(u["choices"].as_array().unwrap().len(), 0);
        assert_eq!(u["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
        assert_eq!(p[4], "[DONE]");
    }

    /// A tool call streams as `delta.tool_calls` pieces whose arguments join
    /// to the JSON, named in the first; whole, it is `message.tool_calls`.
    #[test]
    fn shaped_answers_stream_as_tool_calls_or_json() {
        let model = "\"m\"".to_string();
        let req: crate::request::IncomingRequest = serde_json::from_value(serde_json::json!({
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"city": {"type": "string", "minLength": 2}}}}}]
        }))
        .unwrap();
        for llamacpp in [false, true] {
            let mut r = reply(Api::Chat, &model);
            r.llamacpp = llamacpp;
            r.shaped = crate::shaped::answer(&req, r.total_tokens, false);
            let mut out = String::new();
            r.opening(&mut out);
            step(&r, &mut out, 0, 1, false);
            step(&r, &mut out, 1, 3, true);
            close(&r, &mut out, 4);
            let events: Vec<serde_json::Value> = payloads(&out)
                .into_iter()
                .filter(|p| *p != "[DONE]")
                .map(|p| serde_json::from_str(p).unwrap())
                .collect();
            let calls: Vec<&serde_json::Value> = events
                .iter()
                .filter_map(|e| e["choices"][0]["delta"]["tool_calls"].get(0))
                .collect();
            assert_eq!(calls.len(), 3, "{out}");
            assert_eq!(calls[0]["function"]["name"], "f");
            assert_eq!(calls[0]["function"]["arguments"], "", "vLLM's naming chunk");
            assert!(calls[1]["function"].get("name").is_none());
            let args: String = calls
                .iter()
                .map(|c| c["function"]["arguments"].as_str().unwrap())
                .collect();
            let v: serde_json::Value = serde_json::from_str(&args).unwrap();
            assert_eq!(v, serde_json::json!({"city": "aa"}));
            assert!(
                events
                    .iter()
                    .any(|e| e["choices"][0]["finish_reason"] == "tool_calls")
            );
            let mut whole = String::new();
            full(&r, &mut whole, "", 4);
            let w: serde_json::Value = serde_json::from_str(&whole).unwrap();
            let call = &w["choices"][0]["message"]["tool_calls"][0]["function"];
            assert_eq!(call["name"], "f");
            let v: serde_json::Value =
                serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(v, serde_json::json!({"city": "aa"}));
        }
    }

    #[test]
    fn llamacpp_dialect_has_finish_chunk_and_timings() {
        let model = "\"m\"".to_string();
        let mut r = reply(Api::Chat, &model);
        r.llamacpp = true;
        r.final_usage = false;
        let mut out = String::new();
        role(&r, &mut out);
        step(&r, &mut out, 0, 4, true);
        close(&r, &mut out, 4);
        let p = payloads(&out);
        assert_eq!(p.len(), 4, "{out}");
        let first: serde_json::Value = serde_json::from_str(p[0]).unwrap();
        assert!(first["choices"][0]["delta"]["content"].is_null());
        let fin: serde_json::Value = serde_json::from_str(p[2]).unwrap();
        assert_eq!(fin["choices"][0]["finish_reason"], "length");
        assert_eq!(fin["choices"][0]["delta"], serde_json::json!({}));
        assert_eq!(fin["timings"]["predicted_n"], 4);
        assert_eq!(fin["timings"]["cache_n"], 2);
        assert_eq!(fin["usage"]["completion_tokens"], 4);
        assert_eq!(fin["system_fingerprint"], "b6497-cicada");
    }

    #[test]
    fn a_reasoning_chat_thinks_first_and_counts_its_thinking() {
        let mut r = reply(Api::Chat, "\"m\"");
        r.reasoning_tokens = 3;
        r.tokens_per_event = 2;
        let mut out = String::new();
        step(&r, &mut out, 0, 2, false);
        step(&r, &mut out, 2, 2, true);
        let events: Vec<serde_json::Value> = payloads(&out)
            .iter()
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        let d0 = &events[0]["choices"][0]["delta"];
        assert!(
            d0["reasoning_content"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        );
        assert!(d0["content"].is_null() && d0.get("reasoning").is_none());
        // the second step straddles: one thinking token, one answer token
        let d1 = &events[1]["choices"][0]["delta"];
        assert!(d1["reasoning_content"].as_str().is_some() && d1["content"].as_str().is_some());
        let usage = &events[1]["usage"];
        assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"], 3);
        assert_eq!(usage["completion_tokens"], 4);
        r.reasoning_field = ReasoningField::Reasoning;
        let mut full_body = String::new();
        full(&r, &mut full_body, "unused", 4);
        let v: serde_json::Value = serde_json::from_str(&full_body).unwrap();
        let m = &v["choices"][0]["message"];
        assert!(m["reasoning"].as_str().is_some() && m.get("reasoning_content").is_none());
    }
}
