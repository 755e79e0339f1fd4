//! Problems of the `[structured]` section, and of shapes with a backend or
//! workload that cannot carry them.

use cicada_request::Structured;

use crate::scenario::{Backend, Scenario};
use crate::structured::StructuredSpec;

/// Problems of `[structured]`, and of shapes with a backend or workload that
/// cannot carry them, as (dotted key, message).
pub(crate) fn problems(s: &Scenario) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let spec = &s.structured;
    match spec.shape() {
        Err(e) => out.push((format!("structured.{}", e.key), e.message)),
        Ok(Some(shape)) => {
            if let Err(e) = Structured::new(shape) {
                out.push((format!("structured.{}", e.key), e.message));
            }
        }
        Ok(None) if spec.check_only => out.push((
            "structured.check_only".to_string(),
            "there is nothing to check: give tools or response_format".to_string(),
        )),
        Ok(None) => {}
    }
    if spec.is_unset() {
        return out;
    }
    let key = format!("structured.{}", spec_key(spec));
    if let Some(why) = cannot_carry(s) {
        out.push((key.clone(), why));
    }
    if s.dataset.kind().sessions() {
        out.push((
            key,
            format!(
                "the {} workload sends no tools or response format (a turn's answer feeds the next)",
                s.dataset.kind().name()
            ),
        ));
    }
    out
}

/// Why the scenario's backend cannot send tools or a response format, if it
/// cannot: only the chat-completions, Responses and Messages APIs take them.
pub(crate) fn cannot_carry(s: &Scenario) -> Option<String> {
    let backend = s.target.backend;
    if backend.spelling(s.mock.api).is_some() {
        return None;
    }
    Some(if backend == Backend::Mock {
        format!(
            "mock.api {:?} cannot send tools or a response format (use mock.api = \"openai-chat\", \"openai-responses\" or \"anthropic-messages\")",
            s.mock.api
        )
    } else {
        format!(
            "backend \"{}\" cannot send tools or a response format (use a -chat backend, \"openai-responses\" or \"anthropic-messages\")",
            backend.name()
        )
    })
}

/// The first key given, for messages about the section as a whole.
fn spec_key(spec: &StructuredSpec) -> &'static str {
    if spec.tools.is_some() {
        "tools"
    } else if spec.response_format.is_some() {
        "response_format"
    } else {
        "tool_choice"
    }
}
