//! OpenAI completions and chat completions, with vLLM/SGLang extras.

mod events;

use cicada_request::{ServerFamily, Spelling, WireApi};
use serde_json::{Map, Value, json};

use super::{ApiCodec, Ask, common_sampling, extra_body};
pub(super) use events::{Timings, parse_event};

/// What a server family accepts beyond the OpenAI API (`ignore_eos` is sent
/// whenever the resolved sampling says so: the scenario decides per backend).
struct Extras {
    /// `min_tokens` is understood.
    min_tokens: bool,
    /// `stream_options.continuous_usage_stats` is understood.
    continuous_usage: bool,
}

fn extras(family: ServerFamily) -> Extras {
    match family {
        ServerFamily::Vllm | ServerFamily::Sglang | ServerFamily::Mock => Extras {
            min_tokens: true,
            continuous_usage: true,
        },
        ServerFamily::LlamaCpp
        | ServerFamily::Openai
        | ServerFamily::Tgi
        | ServerFamily::Triton => Extras {
            min_tokens: false,
            continuous_usage: false,
        },
    }
}

pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("model".into(), Value::String(b.model.clone()));
    match b.api {
        WireApi::Chat => {
            let messages = super::spelled::messages(Spelling::Chat, entry);
            m.insert("messages".into(), Value::Array(messages));
            if let Some(n) = entry.output_tokens {
                m.insert("max_completion_tokens".into(), json!(n));
            }
            super::spelled::shape(Spelling::Chat, &mut m, entry);
        }
        _ => {
            m.insert("prompt".into(), super::prompt_value(&entry.prompt));
            if let Some(n) = entry.output_tokens {
                m.insert("max_tokens".into(), json!(n));
            }
        }
    }
    let x = extras(b.family);
    if b.stream {
        m.insert("stream".into(), Value::Bool(true));
        let mut opts = json!({"include_usage": true});
        if x.continuous_usage {
            // usage on every chunk gives exact tokens per event (ITL under spec decode)
            opts["continuous_usage_stats"] = Value::Bool(true);
        }
        m.insert("stream_options".into(), opts);
    }
    let s = &b.sampling;
    common_sampling(&mut m, s);
    if s.ignore_eos {
        m.insert("ignore_eos".into(), Value::Bool(true));
    }
    if x.min_tokens
        && let Some(n) = s.min_tokens
    {
        m.insert("min_tokens".into(), json!(n));
    }
    extra_body(&mut m, s);
    m
}

#[cfg(test)]
mod tests {
    use cicada_request::Prompt;

    use super::*;

    fn codec(api: WireApi, family: ServerFamily) -> ApiCodec {
        ApiCodec::new(
            api,
            family,
            "m".into(),
            cicada_request::ResolvedSampling {
                temperature: Some(0.0),
                top_p: None,
                top_k: None,
                ignore_eos: true,
                min_tokens: None,
                extra_body: [("seed".to_string(), json!(3))].into_iter().collect(),
            },
            true,
        )
    }

    fn entry() -> Ask {
        Ask {
            prompt: Prompt::Text("hi there".into()),
            media: Default::default(),
            output_tokens: Some(5),
            structured: None,
        }
    }

    /// Images go after the text of the last user message, as data URLs.
    #[test]
    fn images_follow_the_last_user_text_as_data_urls() {
        use cicada_request::{ChatMessage, Image, MediaFile};
        let file = std::sync::Arc::new(MediaFile {
            mime: "image/jpeg".into(),
            name: "a.jpg".into(),
            bytes: b"abc".to_vec().into(),
        });
        let mut e = entry();
        e.prompt = Prompt::Chat(vec![
            ChatMessage::new("system", "s"),
            ChatMessage::new("user", "look"),
        ]);
        e.media.images = vec![
            Image::Synthetic {
                width: 4,
                height: 2,
                seed: 9,
            },
            Image::File(file),
        ];
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Chat, ServerFamily::Vllm).body(&e)).unwrap();
        assert_eq!(v["messages"][0]["content"], "s");
        let parts = v["messages"][1]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0], json!({"type": "text", "text": "look"}));
        assert_eq!(parts[1]["type"], "image_url");
        let url = parts[1]["image_url"]["url"].as_str().unwrap();
        assert!(url.starts_with("data:image/png;base64,"), "{url}");
        assert_eq!(parts[2]["image_url"]["url"], "data:image/jpeg;base64,YWJj");
    }

    #[test]
    fn bodies_carry_limits_usage_and_extras() {
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Chat, ServerFamily::Vllm).body(&entry()))
                .unwrap();
        assert_eq!(v["messages"][0]["content"], "hi there");
        assert_eq!(v["max_completion_tokens"], 5);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["stream_options"]["continuous_usage_stats"], true);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["seed"], 3);
        let v: Value = serde_json::from_slice(
            &codec(WireApi::Completions, ServerFamily::Openai).body(&entry()),
        )
        .unwrap();
        assert_eq!(v["prompt"], "hi there");
        assert_eq!(v["max_tokens"], 5);
        // asked for, ignore_eos goes to a plain OpenAI route too (as vllm
        // bench serve sends it); whether it is asked is the scenario's call
        assert_eq!(v["ignore_eos"], true);
        assert!(v["stream_options"].get("continuous_usage_stats").is_none());
        let mut quiet = codec(WireApi::Completions, ServerFamily::Openai);
        quiet.sampling.ignore_eos = false;
        let v: Value = serde_json::from_slice(&quiet.body(&entry())).unwrap();
        assert!(v.get("ignore_eos").is_none(), "not asked, not sent");
    }

    /// `--prompt-token-ids`: a completions prompt goes as the id array itself.
    #[test]
    fn token_id_prompts_go_as_an_array_of_ids() {
        let mut ask = entry();
        ask.prompt = Prompt::Tokens(vec![5, 0, 151_000]);
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Completions, ServerFamily::Vllm).body(&ask))
                .unwrap();
        assert_eq!(v["prompt"], json!([5, 0, 151_000]));
        assert_eq!(v["max_tokens"], 5);
    }

    #[test]
    fn each_server_family_sends_only_the_extras_it_understands() {
        use crate::backend::test_support::{body, codec as b};
        for (family, min_tokens, continuous) in [
            (ServerFamily::Vllm, true, true),
            (ServerFamily::Sglang, true, true),
            (ServerFamily::Mock, true, true),
            (ServerFamily::LlamaCpp, false, false),
            (ServerFamily::Openai, false, false),
        ] {
            let v = body(&b(WireApi::Chat, family, true));
            // the resolved sampling asks for it: every server family sends it
            assert_eq!(v["ignore_eos"], true, "{family:?}");
            assert_eq!(v.get("min_tokens").is_some(), min_tokens, "{family:?}");
            assert_eq!(
                v["stream_options"].get("continuous_usage_stats").is_some(),
                continuous,
                "{family:?}"
            );
            assert_eq!(v["stream_options"]["include_usage"], true);
        }
        let v = body(&b(WireApi::Completions, ServerFamily::Vllm, false));
        assert!(v.get("stream").is_none() && v.get("stream_options").is_none());
        assert_eq!(v["max_tokens"], 5);
    }

    /// unless the shape is only checked.
    #[test]
    fn chat_bodies_carry_the_shape() {
        use cicada_request::{OutputShape, Structured};
        let shape = OutputShape::read(
            Some(&json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}}])),
            Some(&json!({"type": "function", "function": {"name": "f"}})),
            Some(&json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}})),
        )
        .unwrap();
        let mut ask = entry();
        ask.structured = Some(std::sync::Arc::new(Structured::new(shape.clone()).unwrap()));
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Chat, ServerFamily::Vllm).body(&ask)).unwrap();
        assert_eq!(
            v["tools"],
            json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}}])
        );
        assert_eq!(
            v["tool_choice"],
            json!({"type": "function", "function": {"name": "f"}})
        );
        assert_eq!(
            v["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}})
        );
        let mut quiet = shape;
        quiet.check_only = true;
        ask.structured = Some(std::sync::Arc::new(Structured::new(quiet).unwrap()));
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Chat, ServerFamily::Vllm).body(&ask)).unwrap();
        assert!(v.get("tools").is_none() && v.get("response_format").is_none());
    }
}
