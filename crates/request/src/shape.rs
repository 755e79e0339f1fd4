//! The shape a request asks its output to take: the tools it offers, how the
//! model must use them, and the answer's format, held apart from any API's
//! spelling (each backend writes its own). Scenario files and JSONL lines
//! spell them as OpenAI's chat completions does; [`OutputShape::from_openai`]
//! reads that spelling.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

/// One tool (a function) the model may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    /// The function's name, what a call names.
    pub name: String,
    /// What the function does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON schema of the call's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Ask the server to hold the arguments to the schema exactly (OpenAI `strict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// How the model must use the tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// At least one tool call.
    Required,
    /// A call of this function.
    Function(String),
}

/// The format the answer text must take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Free text (nothing to check).
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON valid against a schema.
    JsonSchema {
        /// The schema's name (OpenAI requires one).
        name: String,
        schema: Value,
        /// Ask the server to hold the answer to the schema exactly.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

/// Tools, tool choice and response format of one request, in no API's spelling.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OutputShape {
    /// Tools offered to the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// How the model must use them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// The answer's format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// Keep the shape off the wire: the server is not told, only cicada's
    /// check holds the output to it (what an unconstrained server makes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_only: bool,
}

/// A key of a tools / tool_choice / response_format setting that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{key}: {message}")]
pub struct ShapeError {
    /// The key, as the scenario or dataset spells it (`tools[1].function.name`).
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

fn bad(key: impl Into<String>, message: impl Into<String>) -> ShapeError {
    ShapeError {
        key: key.into(),
        message: message.into(),
    }
}

impl OutputShape {
    /// Read OpenAI chat completions' spelling of `tools`, `tool_choice` and
    /// `response_format` (each optional).
    pub fn from_openai(
        tools: Option<&Value>,
        tool_choice: Option<&Value>,
        response_format: Option<&Value>,
    ) -> Result<Self, ShapeError> {
        let tools = match tools {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, t)| tool_from_openai(&format!("tools[{i}]"), t))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad("tools", "must be an array of tools")),
        };
        let tool_choice = tool_choice
            .filter(|v| !v.is_null())
            .map(choice_from_openai)
            .transpose()?;
        let response_format = response_format
            .filter(|v| !v.is_null())
            .map(format_from_openai)
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

    /// Nothing is asked of the output.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.tool_choice.is_none() && self.response_format.is_none()
    }

    /// The tool of this name.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// A tool choice names a tool that is offered, and asks for calls only when some are.
    fn consistent(&self) -> Result<(), ShapeError> {
        match &self.tool_choice {
            Some(ToolChoice::Function(name)) if self.tool(name).is_none() => Err(bad(
                "tool_choice",
                format!("names the function {name:?}, which is not among the tools"),
            )),
            Some(ToolChoice::Required | ToolChoice::Function(_)) if self.tools.is_empty() => {
                Err(bad(
                    "tool_choice",
                    "asks for a tool call, and no tools are given",
                ))
            }
            _ => Ok(()),
        }
    }
}

fn tool_from_openai(key: &str, v: &Value) -> Result<Tool, ShapeError> {
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
    // OpenAI chat nests the function; the flat spelling (Responses) is taken too
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
    let parameters = match f.get("parameters") {
        None | Some(Value::Null) => None,
        Some(p @ (Value::Object(_) | Value::Bool(_))) => Some(p.clone()),
        Some(_) => return Err(bad(format!("{fkey}.parameters"), "must be a JSON schema")),
    };
    let strict = strict_of(f, &fkey)?;
    Ok(Tool {
        name: name.to_string(),
        description,
        parameters,
        strict,
    })
}

fn strict_of(o: &serde_json::Map<String, Value>, key: &str) -> Result<Option<bool>, ShapeError> {
    match o.get("strict") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(format!("{key}.strict"), "must be true or false")),
    }
}

fn choice_from_openai(v: &Value) -> Result<ToolChoice, ShapeError> {
    const WANT: &str = "must be \"auto\", \"none\", \"required\" or {type = \"function\", function = {name = \"...\"}}";
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            _ => Err(bad("tool_choice", format!("{s:?}: {WANT}"))),
        },
        Value::Object(o) => {
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
        _ => Err(bad("tool_choice", WANT)),
    }
}

fn format_from_openai(v: &Value) -> Result<ResponseFormat, ShapeError> {
    let Some(o) = v.as_object() else {
        return Err(bad("response_format", "must be a table (an object)"));
    };
    match o.get("type").and_then(Value::as_str) {
        Some("text") => Ok(ResponseFormat::Text),
        Some("json_object") => Ok(ResponseFormat::JsonObject),
        Some("json_schema") => {
            let js = o
                .get("json_schema")
                .and_then(Value::as_object)
                .ok_or_else(|| {
                    bad(
                        "response_format.json_schema",
                        "is missing (a table with name and schema)",
                    )
                })?;
            let name = match js.get("name") {
                None | Some(Value::Null) => "output".to_string(),
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(_) => {
                    return Err(bad(
                        "response_format.json_schema.name",
                        "must be a non-empty string",
                    ));
                }
            };
            let schema = match js.get("schema") {
                Some(s @ (Value::Object(_) | Value::Bool(_))) => s.clone(),
                _ => {
                    return Err(bad(
                        "response_format.json_schema.schema",
                        "is missing (a JSON schema)",
                    ));
                }
            };
            Ok(ResponseFormat::JsonSchema {
                name,
                schema,
                strict: strict_of(js, "response_format.json_schema")?,
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
        OutputShape::from_openai(Some(&tools), Some(&choice), Some(&format))
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
        assert!(
            OutputShape::from_openai(None, None, None)
                .unwrap()
                .is_empty()
        );
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
