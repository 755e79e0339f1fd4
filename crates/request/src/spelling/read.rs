//! Reading tools, tool choice and response format back from any of the
//! three spellings into the neutral [`OutputShape`] (scenario files, JSONL
//! lines, and the mock reading what arrived).

use serde_json::{Map, Value};

use crate::shape::{OutputShape, ResponseFormat, ShapeError, Tool, ToolChoice, bad};

impl OutputShape {
    /// Read `tools`, `tool_choice` and the response format (each optional)
    /// in any of the three spellings: chat's nested tools or the flat ones
    /// of Responses and Messages (`parameters` or `input_schema`), chat's,
    /// Responses' or Messages' tool choice, chat's `response_format` or the
    /// flat `text.format` of Responses.
    pub fn read(
        tools: Option<&Value>,
        tool_choice: Option<&Value>,
        response_format: Option<&Value>,
    ) -> Result<Self, ShapeError> {
        let tools = match tools {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, t)| read_tool(&format!("tools[{i}]"), t))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad("tools", "must be an array of tools")),
        };
        let tool_choice = tool_choice
            .filter(|v| !v.is_null())
            .map(read_choice)
            .transpose()?;
        let response_format = response_format
            .filter(|v| !v.is_null())
            .map(read_format)
            .transpose()?;
        let shape = OutputShape {
            tools,
            tool_choice,
            response_format,
            check_only: false,
        };
        shape.consistent()?;
        Ok(shape)
    }
}

fn read_tool(key: &str, v: &Value) -> Result<Tool, ShapeError> {
    let Some(o) = v.as_object() else {
        return Err(bad(key, "must be a table (an object)"));
    };
    match o.get("type").and_then(Value::as_str) {
        Some("function") | None => {}
        Some(other) => {
            return Err(bad(
                format!("{key}.type"),
                format!("{other:?} is not supported (only \"function\")"),
            ));
        }
    }
    // OpenAI chat nests the function; Responses and Messages write it flat
    let (f, fkey) = match o.get("function") {
        Some(f) => (
            f.as_object()
                .ok_or_else(|| bad(format!("{key}.function"), "must be a table"))?,
            format!("{key}.function"),
        ),
        None => (o, key.to_string()),
    };
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad(format!("{fkey}.name"), "is missing (a non-empty string)"))?;
    let description = match f.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad(format!("{fkey}.description"), "must be a string")),
    };
    // Anthropic names the schema `input_schema`
    let schema_key = if f.contains_key("input_schema") {
        "input_schema"
    } else {
        "parameters"
    };
    let parameters = match f.get(schema_key) {
        None | Some(Value::Null) => None,
        Some(p @ (Value::Object(_) | Value::Bool(_))) => Some(p.clone()),
        Some(_) => return Err(bad(format!("{fkey}.{schema_key}"), "must be a JSON schema")),
    };
    let strict = strict_of(f, &fkey)?;
    Ok(Tool {
        name: name.to_string(),
        description,
        parameters,
        strict,
    })
}

fn strict_of(o: &Map<String, Value>, key: &str) -> Result<Option<bool>, ShapeError> {
    match o.get("strict") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(format!("{key}.strict"), "must be true or false")),
    }
}

pub(super) fn read_choice(v: &Value) -> Result<ToolChoice, ShapeError> {
    const WANT: &str = "must be \"auto\", \"none\", \"required\" or {type = \"function\", function = {name = \"...\"}} (or Anthropic's {type = \"auto\" | \"any\" | \"none\" | \"tool\", name})";
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            _ => Err(bad("tool_choice", format!("{s:?}: {WANT}"))),
        },
        // Anthropic's spelling: the kind in `type`, a chosen tool's `name` beside it
        Value::Object(o) if o.get("type").and_then(Value::as_str) != Some("function") => {
            match (o.get("type").and_then(Value::as_str), o.get("name")) {
                (Some("auto"), _) => Ok(ToolChoice::Auto),
                (Some("none"), _) => Ok(ToolChoice::None),
                (Some("any"), _) => Ok(ToolChoice::Required),
                (Some("tool") | None, Some(Value::String(n))) if !n.is_empty() => {
                    Ok(ToolChoice::Function(n.clone()))
                }
                (None, _) if o.get("function").is_some() => read_function_choice(o),
                _ => Err(bad("tool_choice", WANT)),
            }
        }
        Value::Object(o) => read_function_choice(o),
        _ => Err(bad("tool_choice", WANT)),
    }
}

/// OpenAI's `{type: "function", function: {name}}`, or Responses' flat `{type, name}`.
fn read_function_choice(o: &Map<String, Value>) -> Result<ToolChoice, ShapeError> {
    const WANT: &str = "names no function: {type = \"function\", function = {name = \"...\"}}";
    let name = o
        .get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| o.get("name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    match name {
        Some(n) => Ok(ToolChoice::Function(n.to_string())),
        None => Err(bad("tool_choice", WANT)),
    }
}

fn read_format(v: &Value) -> Result<ResponseFormat, ShapeError> {
    let Some(o) = v.as_object() else {
        return Err(bad("response_format", "must be a table (an object)"));
    };
    match o.get("type").and_then(Value::as_str) {
        Some("text") => Ok(ResponseFormat::Text),
        Some("json_object") => Ok(ResponseFormat::JsonObject),
        Some("json_schema") => {
            // Responses writes name and schema beside the type
            let (js, key) = match o.get("json_schema") {
                None if o.contains_key("schema") => (o, "response_format"),
                js => (
                    js.and_then(Value::as_object).ok_or_else(|| {
                        bad(
                            "response_format.json_schema",
                            "is missing (a table with name and schema)",
                        )
                    })?,
                    "response_format.json_schema",
                ),
            };
            let name = match js.get("name") {
                None | Some(Value::Null) => "output".to_string(),
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(_) => {
                    return Err(bad(format!("{key}.name"), "must be a non-empty string"));
                }
            };
            let schema = match js.get("schema") {
                Some(s @ (Value::Object(_) | Value::Bool(_))) => s.clone(),
                _ => {
                    return Err(bad(format!("{key}.schema"), "is missing (a JSON schema)"));
                }
            };
            Ok(ResponseFormat::JsonSchema {
                name,
                schema,
                strict: strict_of(js, key)?,
            })
        }
        other => Err(bad(
            "response_format.type",
            format!(
                "{}: must be \"json_schema\", \"json_object\" or \"text\"",
                other.map_or_else(|| "missing".to_string(), |t| format!("{t:?}"))
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(tools: Value, choice: Value, format: Value) -> Result<OutputShape, ShapeError> {
        OutputShape::read(Some(&tools), Some(&choice), Some(&format))
    }

    /// OpenAI's nested spelling and the flat one read the same.
    #[test]
    fn openai_spelling_reads_into_the_neutral_form() {
        let s = read(
            json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}},
                   {"name": "g", "description": "d"}]),
            json!({"type": "function", "function": {"name": "g"}}),
            json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}}),
        )
        .unwrap();
        assert_eq!(s.tools.len(), 2);
        assert_eq!(s.tools[0].strict, Some(true));
        assert_eq!(s.tools[1].description.as_deref(), Some("d"));
        assert_eq!(s.tool_choice, Some(ToolChoice::Function("g".into())));
        assert!(matches!(
            s.response_format,
            Some(ResponseFormat::JsonSchema { ref name, .. }) if name == "n"
        ));
        let j = read(json!(null), json!("auto"), json!({"type": "json_object"})).unwrap();
        assert_eq!(j.response_format, Some(ResponseFormat::JsonObject));
        assert!(!j.is_empty());
        assert!(OutputShape::read(None, None, None).unwrap().is_empty());
    }

    /// Every mistake names its key.
    #[test]
    fn mistakes_name_their_key() {
        let key = |r: Result<OutputShape, ShapeError>| r.unwrap_err().key;
        assert_eq!(
            key(read(
                json!([{"function": {"parameters": {}}}]),
                json!(null),
                json!(null)
            )),
            "tools[0].function.name"
        );
        assert_eq!(
            key(read(json!([{"type": "web"}]), json!(null), json!(null))),
            "tools[0].type"
        );
        assert_eq!(
            key(read(json!([]), json!("required"), json!(null))),
            "tool_choice"
        );
        assert_eq!(
            key(read(
                json!([{"name": "f"}]),
                json!({"function": {"name": "h"}}),
                json!(null)
            )),
            "tool_choice"
        );
        assert_eq!(
            key(read(
                json!(null),
                json!(null),
                json!({"type": "json_schema"})
            )),
            "response_format.json_schema"
        );
        assert_eq!(
            key(read(json!(null), json!(null), json!({"type": "yaml"}))),
            "response_format.type"
        );
    }
}
