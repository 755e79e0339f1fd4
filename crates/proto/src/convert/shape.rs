//! Wire <-> domain conversion of the pool's output shapes (tools, tool
//! choice, response format); schemas travel as JSON text.

use cicada_plan::pool::OutputShape;
use cicada_request::{ResponseFormat, Tool, ToolChoice};
use serde_json::Value;

use crate::v1;

/// A shape as it goes on the wire.
pub(super) fn shape(s: &OutputShape) -> v1::OutputShape {
    use v1::output_shape::{ResponseFormat as F, ToolChoice as C};
    v1::OutputShape {
        tools: s
            .tools
            .iter()
            .map(|t| v1::Tool {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters_json: t.parameters.as_ref().map(Value::to_string),
                strict: t.strict,
            })
            .collect(),
        tool_choice: s.tool_choice.as_ref().map(|c| match c {
            ToolChoice::Auto => C::ToolChoiceMode(v1::ToolChoiceMode::Auto as i32),
            ToolChoice::None => C::ToolChoiceMode(v1::ToolChoiceMode::None as i32),
            ToolChoice::Required => C::ToolChoiceMode(v1::ToolChoiceMode::Required as i32),
            ToolChoice::Function(name) => C::ToolChoiceFunction(name.clone()),
        }),
        response_format: s.response_format.as_ref().map(|f| match f {
            ResponseFormat::Text => F::Text(true),
            ResponseFormat::JsonObject => F::JsonObject(true),
            ResponseFormat::JsonSchema {
                name,
                schema,
                strict,
            } => F::JsonSchema(v1::JsonSchemaFormat {
                name: name.clone(),
                schema_json: schema.to_string(),
                strict: *strict,
            }),
        }),
        check_only: s.check_only,
    }
}

fn json(text: &str, what: &'static str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("{what} is not JSON: {e}"))
}

/// A shape from the wire, or what is wrong with it (the plan's caller
/// names it a corrupt shape).
pub(super) fn shape_from(s: v1::OutputShape) -> Result<OutputShape, String> {
    use v1::output_shape::{ResponseFormat as F, ToolChoice as C};
    let tools = s
        .tools
        .into_iter()
        .map(|t| {
            Ok(Tool {
                name: t.name,
                description: t.description,
                parameters: t
                    .parameters_json
                    .map(|p| json(&p, "a tool's parameters"))
                    .transpose()?,
                strict: t.strict,
            })
        })
        .collect::<Result<_, String>>()?;
    let tool_choice = match s.tool_choice {
        None => None,
        Some(C::ToolChoiceFunction(name)) => Some(ToolChoice::Function(name)),
        Some(C::ToolChoiceMode(m)) => Some(match v1::ToolChoiceMode::try_from(m) {
            Ok(v1::ToolChoiceMode::Auto) => ToolChoice::Auto,
            Ok(v1::ToolChoiceMode::None) => ToolChoice::None,
            Ok(v1::ToolChoiceMode::Required) => ToolChoice::Required,
            _ => {
                return Err(format!("unknown shape.tool_choice_mode {m}"));
            }
        }),
    };
    let response_format = match s.response_format {
        None => None,
        Some(F::Text(_)) => Some(ResponseFormat::Text),
        Some(F::JsonObject(_)) => Some(ResponseFormat::JsonObject),
        Some(F::JsonSchema(j)) => Some(ResponseFormat::JsonSchema {
            name: j.name,
            schema: json(&j.schema_json, "a response format's schema")?,
            strict: j.strict,
        }),
    };
    Ok(OutputShape {
        tools,
        tool_choice,
        response_format,
        check_only: s.check_only,
    })
}
