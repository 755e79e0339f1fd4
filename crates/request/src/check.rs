//! The per-request check that an output has the shape its request asked
//! for: the answer parses against the response format's schema (or is a JSON
//! object), and each tool call names an offered tool with arguments valid
//! against its `parameters`. A failure is the request's `invalid_output`.

use boon::{Compiler, SchemaIndex, Schemas, UrlLoader, ValidationError};
use serde_json::Value;

use crate::shape::{OutputShape, ResponseFormat, ShapeError, ToolChoice};

/// One tool call as the server made it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCall {
    /// The function called.
    pub name: String,
    /// Its arguments, as the text the model generated.
    pub arguments: String,
}

/// What a request generated, kept for its check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// The answer text (no reasoning).
    pub answer: String,
    /// The tool calls, in the server's order.
    pub calls: Vec<ToolCall>,
}

/// What the answer must be.
#[derive(Debug)]
enum AnswerRule {
    JsonObject,
    Schema(SchemaIndex),
}

/// A shape with its schemas compiled, ready to check outputs (compiled once
/// per shape per process, shared by every request that asks it).
pub struct Structured {
    /// What the request asks (what the backend sends).
    pub shape: OutputShape,
    schemas: Schemas,
    answer: Option<AnswerRule>,
    /// The compiled `parameters` of each tool, in the shape's order.
    parameters: Vec<Option<SchemaIndex>>,
}

/// Schemas are self-contained: a `$ref` that leaves the document is refused
/// rather than read from a file or the network.
struct NoLoader;

impl UrlLoader for NoLoader {
    fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err(format!("{url}: schemas must be self-contained (only local $ref)").into())
    }
}

fn compile(
    compiler: &mut Compiler,
    schemas: &mut Schemas,
    key: String,
    n: usize,
    schema: &Value,
) -> Result<SchemaIndex, ShapeError> {
    let url = format!("urn:cicada:schema:{n}");
    let failed = |e: boon::CompileError| ShapeError {
        key: key.clone(),
        message: format!("not a valid JSON schema: {e:#}"),
    };
    compiler
        .add_resource(&url, schema.clone())
        .map_err(failed)?;
    compiler.compile(&url, schemas).map_err(failed)
}

impl std::fmt::Debug for Structured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Structured")
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

/// Two are the same when they ask the same (the schemas follow from it).
impl PartialEq for Structured {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape
    }
}

impl Eq for Structured {}

impl Structured {
    /// Compile the shape's schemas; a schema that is not one names its key.
    pub fn new(shape: OutputShape) -> Result<Self, ShapeError> {
        let mut compiler = Compiler::new();
        compiler.use_loader(Box::new(NoLoader));
        let mut schemas = Schemas::new();
        let answer = match &shape.response_format {
            Some(ResponseFormat::JsonObject) => Some(AnswerRule::JsonObject),
            Some(ResponseFormat::JsonSchema { schema, .. }) => {
                let key = "response_format.json_schema.schema".to_string();
                let at = compile(&mut compiler, &mut schemas, key, 0, schema)?;
                Some(AnswerRule::Schema(at))
            }
            Some(ResponseFormat::Text) | None => None,
        };
        let mut parameters = Vec::with_capacity(shape.tools.len());
        for (i, t) in shape.tools.iter().enumerate() {
            let at = match &t.parameters {
                Some(p) => {
                    let key = format!("tools[{i}].function.parameters");
                    Some(compile(&mut compiler, &mut schemas, key, i + 1, p)?)
                }
                None => None,
            };
            parameters.push(at);
        }
        Ok(Self {
            shape,
            schemas,
            answer,
            parameters,
        })
    }

    /// Something about the output is checked (its text must be kept).
    pub fn checks(&self) -> bool {
        self.answer.is_some()
            || !self.shape.tools.is_empty()
            || matches!(
                self.shape.tool_choice,
                Some(ToolChoice::Required | ToolChoice::Function(_))
            )
    }

    /// Check an output; `Err` says what is wrong with it.
    pub fn check(&self, out: &Output) -> Result<(), OutputError> {
        match &self.shape.tool_choice {
            Some(ToolChoice::Required) if out.calls.is_empty() => {
                return Err(OutputError::NoCallRequired);
            }
            Some(ToolChoice::Function(name)) if !out.calls.iter().any(|c| &c.name == name) => {
                return Err(OutputError::NoCallOf(name.clone()));
            }
            Some(ToolChoice::None) if !out.calls.is_empty() => {
                return Err(OutputError::CallForbidden);
            }
            _ => {}
        }
        for (index, call) in out.calls.iter().enumerate() {
            self.check_call(call).map_err(|reason| OutputError::Call {
                index,
                name: call.name.clone(),
                reason,
            })?;
        }
        if !out.calls.is_empty() {
            // a turn that calls tools answers with the calls, not with text
            return Ok(());
        }
        match &self.answer {
            None => Ok(()),
            Some(rule) => {
                let v = parse(&out.answer).map_err(OutputError::AnswerNotJson)?;
                match rule {
                    AnswerRule::JsonObject if v.is_object() => Ok(()),
                    AnswerRule::JsonObject => Err(OutputError::NotAnObject(clip(&out.answer))),
                    AnswerRule::Schema(at) => self
                        .schemas
                        .validate(&v, *at)
                        .map_err(|e| OutputError::AnswerSchema(leaves(&e))),
                }
            }
        }
    }

    fn check_call(&self, call: &ToolCall) -> Result<(), CallError> {
        let Some(i) = self.shape.tools.iter().position(|t| t.name == call.name) else {
            return Err(CallError::UnknownFunction);
        };
        let v = parse(&call.arguments).map_err(CallError::ArgumentsNotJson)?;
        match self.parameters[i] {
            None => Ok(()),
            Some(at) => self
                .schemas
                .validate(&v, at)
                .map_err(|e| CallError::ArgumentsSchema(leaves(&e))),
        }
    }
}

/// What is wrong with an output held to the shape its request asked for
/// (the worker counts it as `invalid_output`, with this as its reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// `tool_choice: "required"` and no call.
    #[error("no tool call, and tool_choice is \"required\"")]
    NoCallRequired,
    /// `tool_choice` names a function that was not called.
    #[error("no call of {0:?}, and tool_choice names that function")]
    NoCallOf(String),
    /// `tool_choice: "none"` and a call.
    #[error("a tool call, and tool_choice is \"none\"")]
    CallForbidden,
    /// A tool call that breaks its tool.
    #[error("tool call {index} ({name:?}): {reason}")]
    Call {
        /// Its place among the calls.
        index: usize,
        /// The function it calls.
        name: String,
        /// What is wrong with it.
        reason: CallError,
    },
    /// The answer is not JSON.
    #[error("the answer {0}")]
    AnswerNotJson(NotJson),
    /// `json_object` asked and the JSON is not an object (quoted, clipped).
    #[error("the answer is JSON but not an object: {0}")]
    NotAnObject(String),
    /// The answer breaks its schema (the innermost reasons).
    #[error("the answer breaks its schema: {0}")]
    AnswerSchema(String),
}

/// What is wrong with one tool call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The function is not among the tools offered.
    #[error("calls a function that is not among the tools")]
    UnknownFunction,
    /// The arguments are not JSON.
    #[error("its arguments {0}")]
    ArgumentsNotJson(NotJson),
    /// The arguments break the function's parameters (the innermost reasons).
    #[error("its arguments break the parameters: {0}")]
    ArgumentsSchema(String),
}

/// Text that should have been JSON: the reader's complaint and the text (quoted, clipped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("is not JSON ({reason}): {text}")]
pub struct NotJson {
    /// What the JSON reader said.
    pub reason: String,
    /// The text, quoted and clipped.
    pub text: String,
}

/// Longest piece of a bad output quoted in its error.
const SHOWN: usize = 120;

fn clip(s: &str) -> String {
    let s = s.trim();
    if s.len() <= SHOWN {
        return format!("{s:?}");
    }
    let mut end = SHOWN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}…", &s[..end])
}

fn parse(text: &str) -> Result<Value, NotJson> {
    serde_json::from_str(text).map_err(|e| NotJson {
        reason: e.to_string(),
        text: clip(text),
    })
}

/// The innermost reasons a value broke its schema, one per place.
fn leaves(e: &ValidationError<'_, '_>) -> String {
    fn walk(e: &ValidationError<'_, '_>, out: &mut Vec<String>) {
        if e.causes.is_empty() {
            out.push(format!("at '{}': {}", e.instance_location, e.kind));
        }
        for c in &e.causes {
            walk(c, out);
        }
    }
    let mut out = Vec::new();
    walk(e, &mut out);
    out.truncate(4);
    out.join("; ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn structured(tools: Value, choice: Value, format: Value) -> Structured {
        Structured::new(OutputShape::read(Some(&tools), Some(&choice), Some(&format)).unwrap())
            .unwrap()
    }

    fn answer(text: &str) -> Output {
        Output {
            answer: text.to_string(),
            calls: Vec::new(),
        }
    }

    fn call(name: &str, arguments: &str) -> Output {
        Output {
            answer: String::new(),
            calls: vec![ToolCall {
                name: name.to_string(),
                arguments: arguments.to_string(),
            }],
        }
    }

    /// A schema'd answer passes when valid and names the broken place when not.
    #[test]
    fn answers_are_held_to_their_schema() {
        let s = structured(
            json!(null),
            json!(null),
            json!({"type": "json_schema", "json_schema": {"name": "p", "schema": {
                "type": "object", "required": ["age"],
                "properties": {"age": {"type": "integer", "minimum": 0}}}}}),
        );
        assert!(s.checks());
        assert_eq!(s.check(&answer(" {\"age\": 3}\n")), Ok(()));
        let e = s
            .check(&answer("{\"age\": \"x\"}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at '/age'") && e.contains("string"), "{e}");
        let e = s.check(&answer("{}")).unwrap_err().to_string();
        assert!(e.contains("age"), "{e}");
        let e = s
            .check(&answer("```json\n{\"age\": 3}```"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("the answer is not JSON"), "{e}");
    }

    /// json_object wants an object, nothing more.
    #[test]
    fn json_object_wants_an_object() {
        let s = structured(json!(null), json!(null), json!({"type": "json_object"}));
        assert_eq!(s.check(&answer("{\"a\": [1]}")), Ok(()));
        assert!(
            s.check(&answer("[1]"))
                .unwrap_err()
                .to_string()
                .contains("not an object")
        );
        assert!(s.check(&answer("{\"a\":")).is_err());
        let free = structured(json!(null), json!(null), json!({"type": "text"}));
        assert!(!free.checks());
        assert_eq!(free.check(&answer("anything")), Ok(()));
    }

    /// Calls name an offered tool, carry valid arguments, and obey tool_choice.
    #[test]
    fn tool_calls_are_held_to_their_parameters_and_choice() {
        let tools = json!([{"type": "function", "function": {"name": "weather", "parameters": {
            "type": "object", "required": ["city"], "properties": {"city": {"type": "string"}},
            "additionalProperties": false}}}]);
        let s = structured(tools.clone(), json!("required"), json!(null));
        assert_eq!(s.check(&call("weather", "{\"city\":\"Oslo\"}")), Ok(()));
        let e = s
            .check(&call("weather", "{\"town\":\"Oslo\"}"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("tool call 0 (\"weather\")"), "{e}");
        assert!(
            s.check(&call("news", "{}"))
                .unwrap_err()
                .to_string()
                .contains("not among")
        );
        assert!(
            s.check(&call("weather", "{\"city\":"))
                .unwrap_err()
                .to_string()
                .contains("not JSON")
        );
        assert!(
            s.check(&answer("it is sunny"))
                .unwrap_err()
                .to_string()
                .contains("required")
        );
        let auto = structured(tools.clone(), json!("auto"), json!(null));
        assert_eq!(auto.check(&answer("it is sunny")), Ok(()));
        let none = structured(tools, json!("none"), json!(null));
        assert!(none.check(&call("weather", "{\"city\":\"x\"}")).is_err());
    }

    /// A schema that is not one, or reaches outside itself, fails at compile time.
    #[test]
    fn bad_schemas_fail_early_and_name_their_key() {
        let shape = OutputShape::read(
            None,
            None,
            Some(&json!({"type": "json_schema", "json_schema": {"schema": {"type": 12}}})),
        )
        .unwrap();
        let e = Structured::new(shape).unwrap_err();
        assert_eq!(e.key, "response_format.json_schema.schema");
        let shape = OutputShape::read(
            Some(&json!([{"name": "f", "parameters": {"$ref": "file:///etc/hostname"}}])),
            None,
            None,
        )
        .unwrap();
        let e = Structured::new(shape).unwrap_err();
        assert_eq!(e.key, "tools[0].function.parameters");
        assert!(e.message.contains("self-contained"), "{}", e.message);
    }
}
