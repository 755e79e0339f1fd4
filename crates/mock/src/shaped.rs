//! Answers in the shape a request asks for: a call of one of its tools, or
//! JSON for its response format. The value is a minimal instance of the
//! schema (or, for the `invalid_output` knob, a value of the wrong type),
//! spread over the answer's tokens so timing and counts stay the mock's.

use cicada_request::{ResponseFormat, ToolChoice};
use serde_json::{Map, Value, json};

use crate::request::IncomingRequest;

/// What a shaped answer says, fixed when the request arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shaped {
    /// The function called, or `None` for a JSON answer in `content`.
    pub tool: Option<String>,
    /// The JSON text (arguments or answer), padded with spaces to at least
    /// one character per token.
    text: String,
    /// Byte offset of each character, and the text's length last.
    bounds: Vec<usize>,
    /// It was broken on purpose.
    pub invalid: bool,
}

impl Shaped {
    fn new(tool: Option<String>, mut text: String, tokens: u32, invalid: bool) -> Self {
        let chars = text.chars().count();
        let tokens = tokens.max(1) as usize;
        if chars < tokens {
            // JSON allows trailing whitespace: every token carries a character
            text.extend(std::iter::repeat_n(' ', tokens - chars));
        }
        let mut bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        bounds.push(text.len());
        Self {
            tool,
            text,
            bounds,
            invalid,
        }
    }

    /// Text of tokens `first .. first + n` of an answer of `total` tokens.
    pub fn piece(&self, first: u32, n: u32, total: u32) -> &str {
        let chars = self.bounds.len() - 1;
        let total = u64::from(total.max(1));
        let at = |token: u32| {
            let t = u64::from(token.min(total as u32));
            self.bounds[(t * chars as u64 / total) as usize]
        };
        let end = if u64::from(first + n) >= total {
            self.text.len()
        } else {
            at(first + n)
        };
        &self.text[at(first).min(end)..end]
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// The shaped answer a request asks for, if any: a call when it offers
/// tools (and `tool_choice` is not "none"), else JSON when it asks a
/// response format; `tokens` is the answer's length, `invalid` breaks it.
/// Each API's spelling is read (chat completions, Responses, Messages).
pub(crate) fn answer(req: &IncomingRequest, tokens: u32, invalid: bool) -> Option<Shaped> {
    let shape = req.shape()?;
    if !shape.tools.is_empty() && shape.tool_choice != Some(ToolChoice::None) {
        let chosen = match &shape.tool_choice {
            Some(ToolChoice::Function(name)) => shape.tool(name)?,
            _ => shape.tools.first()?,
        };
        let schema = chosen
            .parameters
            .clone()
            .unwrap_or_else(|| json!({"type": "object"}));
        let text = instance(&schema, invalid);
        return Some(Shaped::new(
            Some(chosen.name.clone()),
            text,
            tokens,
            invalid,
        ));
    }
    let schema = match shape.response_format? {
        ResponseFormat::JsonObject => json!({"type": "object"}),
        ResponseFormat::JsonSchema { schema, .. } => schema,
        ResponseFormat::Text => return None,
    };
    Some(Shaped::new(
        None,
        instance(&schema, invalid),
        tokens,
        invalid,
    ))
}

/// A minimal valid instance of `schema` as JSON text, or a broken one.
fn instance(schema: &Value, invalid: bool) -> String {
    let v = if invalid {
        wrong(schema)
    } else {
        example(schema, schema, 0)
    };
    v.to_string()
}

/// Deepest nesting followed (a recursive schema ends in `null`).
const MAX_DEPTH: u32 = 16;

/// The schema a local `$ref` (`#/$defs/x`, `#/definitions/x`) points at.
fn resolve<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let path = r.strip_prefix('#')?;
    if path.is_empty() {
        return Some(root);
    }
    root.pointer(path)
}

/// A minimal instance: `const`, the first `enum` value, the first branch of
/// `anyOf`/`oneOf`, every property of an object, `minItems` items, strings
/// and numbers at their lower bounds.
fn example(s: &Value, root: &Value, depth: u32) -> Value {
    let Some(o) = s.as_object() else {
        return Value::Null;
    };
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        return resolve(root, r).map_or(Value::Null, |t| example(t, root, depth + 1));
    }
    if let Some(c) = o.get("const") {
        return c.clone();
    }
    if let Some(first) = o
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(first) = o.get(key).and_then(Value::as_array).and_then(|b| b.first()) {
            return example(first, root, depth + 1);
        }
    }
    if let Some(all) = o.get("allOf").and_then(Value::as_array) {
        let mut merged = Map::new();
        for part in all {
            if let Value::Object(m) = example(part, root, depth + 1) {
                merged.extend(m);
            }
        }
        return Value::Object(merged);
    }
    let ty = match o.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.iter().find_map(Value::as_str).unwrap_or("null"),
        _ if o.contains_key("properties") => "object",
        _ if o.contains_key("items") => "array",
        _ => "null",
    };
    let number = |key: &str| o.get(key).and_then(Value::as_f64);
    match ty {
        "object" => {
            let mut m = Map::new();
            if let Some(props) = o.get("properties").and_then(Value::as_object) {
                for (k, p) in props {
                    m.insert(k.clone(), example(p, root, depth + 1));
                }
            }
            Value::Object(m)
        }
        "array" => {
            let n = o
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(64);
            let item = o
                .get("items")
                .map_or(Value::Null, |i| example(i, root, depth + 1));
            Value::Array(vec![item; n as usize])
        }
        "string" => {
            let n = o
                .get("minLength")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .min(4096);
            Value::String("a".repeat(n.max(1) as usize))
        }
        "integer" => {
            let low = number("minimum")
                .map(f64::ceil)
                .or(number("exclusiveMinimum").map(|m| m.floor() + 1.0))
                .unwrap_or(0.0);
            json!(low as i64)
        }
        "number" => json!(
            number("minimum")
                .or(number("exclusiveMinimum").map(|m| m + 1.0))
                .unwrap_or(0.0)
        ),
        "boolean" => Value::Bool(true),
        _ => Value::Null,
    }
}

/// A value of a type the schema does not take (its type's opposite), or
/// text that is not JSON when the schema names no type.
fn wrong(s: &Value) -> Value {
    match s.get("type").and_then(Value::as_str) {
        Some("string") => json!(12345),
        Some(_) => json!("cicada-invalid"),
        None => json!({"cicada-invalid": [1, "x"]}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: Value) -> IncomingRequest {
        serde_json::from_value(v).unwrap()
    }

    /// Instances of a nested schema parse and have every asked part.
    #[test]
    fn examples_follow_the_schema() {
        let schema = json!({"type": "object", "required": ["a", "n"], "$defs": {"p": {"type": "integer", "minimum": 3}},
            "properties": {"a": {"type": "array", "minItems": 2, "items": {"$ref": "#/$defs/p"}},
                           "n": {"enum": ["x", "y"]}, "s": {"type": "string", "minLength": 3},
                           "u": {"anyOf": [{"type": "boolean"}, {"type": "null"}]}}});
        let v: Value = serde_json::from_str(&instance(&schema, false)).unwrap();
        assert_eq!(v, json!({"a": [3, 3], "n": "x", "s": "aaa", "u": true}));
        let bad: Value = serde_json::from_str(&instance(&schema, true)).unwrap();
        assert!(bad.is_string());
    }

    /// The pieces of an answer join to its text, one or more characters each.
    #[test]
    fn pieces_cover_the_text_once() {
        let r = req(json!({"response_format": {"type": "json_object"}}));
        for tokens in [1, 2, 3, 7, 40] {
            let s = answer(&r, tokens, false).unwrap();
            let joined: String = (0..tokens).map(|j| s.piece(j, 1, tokens)).collect();
            assert_eq!(joined, s.text());
            assert!((0..tokens).all(|j| !s.piece(j, 1, tokens).is_empty()));
            assert_eq!(joined.trim(), "{}");
            let two: String = (0..tokens)
                .step_by(2)
                .map(|j| s.piece(j, 2, tokens))
                .collect();
            assert_eq!(two, s.text());
        }
    }

    /// Tools win over a response format; tool_choice picks the function.
    #[test]
    fn the_asked_function_is_called() {
        let tools = json!([{"type": "function", "function": {"name": "f"}},
                           {"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {"k": {"type": "string"}}}}}]);
        let named = req(
            json!({"tools": tools, "tool_choice": {"type": "function", "function": {"name": "g"}},
                               "response_format": {"type": "json_object"}}),
        );
        let s = answer(&named, 5, false).unwrap();
        assert_eq!(s.tool.as_deref(), Some("g"));
        assert_eq!(s.text().trim(), r#"{"k":"a"}"#);
        let none = req(json!({"tools": tools, "tool_choice": "none"}));
        assert!(answer(&none, 5, false).is_none());
        let first = req(json!({"tools": tools}));
        assert_eq!(answer(&first, 5, false).unwrap().tool.as_deref(), Some("f"));
        assert!(answer(&req(json!({})), 5, false).is_none());
        // Responses' and Messages' spellings ask the same
        let flat = json!([{"type": "function", "name": "f"}, {"type": "function", "name": "g", "parameters": {"type": "object", "properties": {"k": {"type": "string"}}}}]);
        let resp = req(json!({"tools": flat, "tool_choice": {"type": "function", "name": "g"}}));
        assert_eq!(answer(&resp, 5, false).unwrap(), s);
        let anthropic = json!([{"name": "f"}, {"name": "g", "input_schema": {"type": "object", "properties": {"k": {"type": "string"}}}}]);
        let msg = req(json!({"tools": anthropic, "tool_choice": {"type": "tool", "name": "g"}}));
        assert_eq!(answer(&msg, 5, false).unwrap(), s);
        let format = req(
            json!({"text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object", "properties": {"k": {"type": "string"}}}}}}),
        );
        let j = answer(&format, 5, false).unwrap();
        assert_eq!((j.tool.as_deref(), j.text().trim()), (None, r#"{"k":"a"}"#));
        let anthropic = req(
            json!({"output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"k": {"type": "string"}}}}}}),
        );
        assert_eq!(answer(&anthropic, 5, false).unwrap(), j);
    }
}
