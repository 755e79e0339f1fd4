//! The shape a request asks its output to take: the tools it offers, how the
//! model must use them, and the answer's format, held apart from any API's
//! spelling: [`crate::Spelling`] writes and reads each API's. Scenario files
//! and JSONL lines spell them as OpenAI's chat completions does.

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

pub(crate) fn bad(key: impl Into<String>, message: impl Into<String>) -> ShapeError {
    ShapeError {
        key: key.into(),
        message: message.into(),
    }
}

impl OutputShape {
    /// Nothing is asked of the output.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.tool_choice.is_none() && self.response_format.is_none()
    }

    /// The tool of this name.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// A tool choice names a tool that is offered, and asks for calls only when some are.
    pub(crate) fn consistent(&self) -> Result<(), ShapeError> {
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
