//! The three generation APIs' spellings of what a request sends beside its
//! text: tools, tool choice, response format and images, written and read in
//! this one place. OpenAI chat completions nests each tool's function and
//! has `response_format` and `image_url` parts; OpenAI Responses has flat
//! tools, `text.format` and `input_image` parts; Anthropic Messages has
//! `input_schema`, a `{type}` tool choice, base64 `image` blocks and the
//! format as `output_config.format` (Anthropic's structured outputs, which
//! vLLM 0.32 reads; llama-server's `/v1/messages` drops it). The client
//! writes bodies with it; the mock and the scenario files read it back
//! (each reader takes every spelling).

use serde_json::{Map, Value, json};

use crate::api::WireApi;
use crate::shape::{OutputShape, ResponseFormat, Tool, ToolChoice};

mod read;

/// One of the APIs whose requests carry tools, response formats and images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// OpenAI chat completions (`/v1/chat/completions`).
    Chat,
    /// OpenAI Responses (`/v1/responses`).
    Responses,
    /// Anthropic Messages (`/v1/messages`).
    Messages,
}

impl Spelling {
    /// The spelling of a wire API, if it carries tools, formats and images.
    pub fn of(api: WireApi) -> Option<Self> {
        match api {
            WireApi::Chat => Some(Spelling::Chat),
            WireApi::Responses => Some(Spelling::Responses),
            WireApi::Messages => Some(Spelling::Messages),
            _ => None,
        }
    }

    /// Add the shape's tools, tool choice and response format to a body.
    pub fn put_shape(self, m: &mut Map<String, Value>, shape: &OutputShape) {
        if !shape.tools.is_empty() {
            let tools = shape.tools.iter().map(|t| self.tool(t)).collect();
            m.insert("tools".into(), Value::Array(tools));
        }
        if let Some(c) = &shape.tool_choice {
            m.insert("tool_choice".into(), self.choice(c));
        }
        match (self, &shape.response_format) {
            (Spelling::Chat, Some(f)) => {
                m.insert("response_format".into(), self.format(f));
            }
            (Spelling::Responses, Some(f)) => {
                m.insert("text".into(), json!({"format": self.format(f)}));
            }
            // Anthropic's structured outputs take a schema alone
            (Spelling::Messages, Some(f)) => {
                let schema = match f {
                    ResponseFormat::Text => return,
                    ResponseFormat::JsonObject => json!({"type": "object"}),
                    ResponseFormat::JsonSchema { schema, .. } => schema.clone(),
                };
                m.insert(
                    "output_config".into(),
                    json!({"format": {"type": "json_schema", "schema": schema}}),
                );
            }
            (_, None) => {}
        }
    }

    fn tool(self, t: &Tool) -> Value {
        let mut f = Map::new();
        if self == Spelling::Responses {
            f.insert("type".into(), json!("function"));
        }
        f.insert("name".into(), json!(t.name));
        if let Some(d) = &t.description {
            f.insert("description".into(), json!(d));
        }
        match (&t.parameters, self) {
            (Some(p), Spelling::Messages) => {
                f.insert("input_schema".into(), p.clone());
            }
            // Anthropic requires a schema: any object
            (None, Spelling::Messages) => {
                f.insert("input_schema".into(), json!({"type": "object"}));
            }
            (Some(p), _) => {
                f.insert("parameters".into(), p.clone());
            }
            (None, _) => {}
        }
        if let Some(s) = t.strict {
            f.insert("strict".into(), json!(s));
        }
        match self {
            Spelling::Chat => json!({"type": "function", "function": f}),
            Spelling::Responses | Spelling::Messages => Value::Object(f),
        }
    }

    fn choice(self, c: &ToolChoice) -> Value {
        match (self, c) {
            (Spelling::Messages, ToolChoice::Auto) => json!({"type": "auto"}),
            (Spelling::Messages, ToolChoice::None) => json!({"type": "none"}),
            (Spelling::Messages, ToolChoice::Required) => json!({"type": "any"}),
            (Spelling::Messages, ToolChoice::Function(n)) => json!({"type": "tool", "name": n}),
            (_, ToolChoice::Auto) => json!("auto"),
            (_, ToolChoice::None) => json!("none"),
            (_, ToolChoice::Required) => json!("required"),
            (Spelling::Chat, ToolChoice::Function(n)) => {
                json!({"type": "function", "function": {"name": n}})
            }
            (Spelling::Responses, ToolChoice::Function(n)) => {
                json!({"type": "function", "name": n})
            }
        }
    }

    /// Chat's `response_format`, or Responses' `text.format` (flat).
    fn format(self, f: &ResponseFormat) -> Value {
        match f {
            ResponseFormat::Text => json!({"type": "text"}),
            ResponseFormat::JsonObject => json!({"type": "json_object"}),
            ResponseFormat::JsonSchema {
                name,
                schema,
                strict,
            } => {
                let mut js = json!({"name": name, "schema": schema});
                if let Some(s) = strict {
                    js["strict"] = json!(s);
                }
                if self == Spelling::Chat {
                    json!({"type": "json_schema", "json_schema": js})
                } else {
                    js["type"] = json!("json_schema");
                    js
                }
            }
        }
    }

    /// Put images (as `data:` URLs) after the text of the last user message,
    /// as this API's content parts (vLLM's `random-mm` order: text, then
    /// images). A conversation without a user message gets one.
    pub fn put_images(self, messages: &mut Vec<Value>, data_urls: Vec<String>) {
        if data_urls.is_empty() {
            return;
        }
        let at = match messages.iter().rposition(|m| m["role"] == "user") {
            Some(i) => i,
            None => {
                messages.push(json!({"role": "user", "content": ""}));
                messages.len() - 1
            }
        };
        let text = messages[at]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let text_type = if self == Spelling::Responses {
            "input_text"
        } else {
            "text"
        };
        let mut parts = vec![json!({"type": text_type, "text": text})];
        parts.extend(data_urls.into_iter().map(|url| self.image(url)));
        messages[at]["content"] = Value::Array(parts);
    }

    fn image(self, url: String) -> Value {
        match self {
            Spelling::Chat => json!({"type": "image_url", "image_url": {"url": url}}),
            Spelling::Responses => json!({"type": "input_image", "image_url": url}),
            Spelling::Messages => {
                let (mime, data) = url
                    .strip_prefix("data:")
                    .and_then(|u| u.split_once(";base64,"))
                    .unwrap_or(("application/octet-stream", ""));
                json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
            }
        }
    }
}

/// The bytes an image content part of any of the three spellings carries
/// (its base64 decoded; 0 for an image by reference), or `None` when the
/// part is not an image.
pub fn image_part_bytes(part: &Value) -> Option<u64> {
    let b64 = match part.get("type").and_then(Value::as_str)? {
        "image_url" => data_url_base64(part["image_url"]["url"].as_str()),
        "input_image" => data_url_base64(part["image_url"].as_str()),
        "image" if part["source"]["type"] == "base64" => part["source"]["data"].as_str(),
        "image" => None,
        _ => return None,
    };
    Some(b64.map_or(0, |b| {
        let pad = b.bytes().rev().take_while(|&c| c == b'=').count();
        (b.len() / 4 * 3).saturating_sub(pad) as u64
    }))
}

fn data_url_base64(url: Option<&str>) -> Option<&str> {
    url?.split_once(";base64,").map(|(_, b)| b)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::read::read_choice;
    use super::*;
    use crate::shape::ShapeError;

    fn read(tools: Value, choice: Value, format: Value) -> Result<OutputShape, ShapeError> {
        OutputShape::read(Some(&tools), Some(&choice), Some(&format))
    }

    fn every_kind() -> OutputShape {
        read(
            json!([{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}, "strict": true}},
                   {"type": "function", "function": {"name": "g"}}]),
            json!({"type": "function", "function": {"name": "g"}}),
            json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}, "strict": true}}),
        )
        .unwrap()
    }

    /// Each API's spelling as it goes out, and read back to the same shape
    /// (Messages' format is a schema alone: its name is not sent).
    #[test]
    fn each_spelling_is_written_and_read_back() {
        let shape = every_kind();
        let write = |sp: Spelling| {
            let mut m = Map::new();
            sp.put_shape(&mut m, &shape);
            Value::Object(m)
        };
        let chat = write(Spelling::Chat);
        assert_eq!(chat["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(
            chat["tool_choice"],
            json!({"type": "function", "function": {"name": "g"}})
        );
        assert_eq!(chat["response_format"]["json_schema"]["name"], "n");
        let resp = write(Spelling::Responses);
        assert_eq!(resp["tools"][0]["type"], "function");
        assert_eq!(resp["tools"][0]["name"], "f");
        assert_eq!(resp["tools"][0]["strict"], true);
        assert_eq!(
            resp["tool_choice"],
            json!({"type": "function", "name": "g"})
        );
        assert_eq!(
            resp["text"]["format"],
            json!({"type": "json_schema", "name": "n", "schema": {"type": "object"}, "strict": true})
        );
        assert!(resp.get("response_format").is_none());
        let msg = write(Spelling::Messages);
        assert_eq!(
            msg["tools"][0]["input_schema"]["properties"]["a"]["type"],
            "integer"
        );
        assert_eq!(
            msg["tools"][1]["input_schema"],
            json!({"type": "object"}),
            "Anthropic requires one"
        );
        assert!(msg["tools"][0].get("type").is_none());
        assert_eq!(msg["tools"][0]["strict"], true);
        assert_eq!(msg["tool_choice"], json!({"type": "tool", "name": "g"}));
        assert!(msg.get("response_format").is_none() && msg.get("text").is_none());
        assert_eq!(
            msg["output_config"],
            json!({"format": {"type": "json_schema", "schema": {"type": "object"}}})
        );
        for (v, format) in [
            (&chat, &chat["response_format"]),
            (&resp, &resp["text"]["format"]),
        ] {
            let back = OutputShape::read(Some(&v["tools"]), Some(&v["tool_choice"]), Some(format))
                .unwrap();
            assert_eq!(back, shape, "{v}");
        }
        let back = OutputShape::read(
            Some(&msg["tools"]),
            Some(&msg["tool_choice"]),
            Some(&msg["output_config"]["format"]),
        )
        .unwrap();
        assert_eq!(back.tools[0], shape.tools[0]);
        assert_eq!(back.tool_choice, shape.tool_choice);
        assert_eq!(
            back.response_format,
            Some(ResponseFormat::JsonSchema {
                name: "output".into(),
                schema: json!({"type": "object"}),
                strict: None
            })
        );
        let mut any = Map::new();
        let object = OutputShape {
            response_format: Some(ResponseFormat::JsonObject),
            ..OutputShape::default()
        };
        Spelling::Messages.put_shape(&mut any, &object);
        assert_eq!(
            any["output_config"]["format"]["schema"],
            json!({"type": "object"})
        );
        for (choice, anthropic) in [
            (ToolChoice::Auto, json!({"type": "auto"})),
            (ToolChoice::None, json!({"type": "none"})),
            (ToolChoice::Required, json!({"type": "any"})),
        ] {
            assert_eq!(Spelling::Messages.choice(&choice), anthropic);
            assert_eq!(read_choice(&anthropic).unwrap(), choice);
            assert_eq!(
                read_choice(&Spelling::Responses.choice(&choice)).unwrap(),
                choice
            );
        }
    }

    /// Images follow the last user message's text in each API's parts, and
    /// the reader finds each spelling's bytes.
    #[test]
    fn images_in_each_spelling() {
        let url = "data:image/png;base64,YWJjZA==".to_string();
        for (sp, text_type, image_type) in [
            (Spelling::Chat, "text", "image_url"),
            (Spelling::Responses, "input_text", "input_image"),
            (Spelling::Messages, "text", "image"),
        ] {
            let mut msgs = vec![
                json!({"role": "system", "content": "s"}),
                json!({"role": "user", "content": "look"}),
            ];
            sp.put_images(&mut msgs, vec![url.clone(), url.clone()]);
            assert_eq!(msgs[0]["content"], "s");
            let parts = msgs[1]["content"].as_array().unwrap();
            assert_eq!(parts.len(), 3);
            assert_eq!(parts[0], json!({"type": text_type, "text": "look"}));
            assert_eq!(parts[1]["type"], image_type);
            assert_eq!(image_part_bytes(&parts[1]), Some(4), "{sp:?}");
            assert_eq!(image_part_bytes(&parts[0]), None);
            let mut none = vec![json!({"role": "assistant", "content": "a"})];
            sp.put_images(&mut none, vec![url.clone()]);
            assert_eq!(none[1]["role"], "user", "a user message is made");
        }
        let mut msgs = vec![json!({"role": "user", "content": "x"})];
        Spelling::Messages.put_images(&mut msgs, vec![url]);
        assert_eq!(
            msgs[0]["content"][1]["source"],
            json!({"type": "base64", "media_type": "image/png", "data": "YWJjZA=="})
        );
        let by_ref = json!({"type": "image_url", "image_url": {"url": "https://x/y.png"}});
        assert_eq!(image_part_bytes(&by_ref), Some(0));
    }
}
