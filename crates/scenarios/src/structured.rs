//! The scenario's `[structured]` section: `tools`, `tool_choice` and
//! `response_format` sent with every request (OpenAI chat completions'
//! spelling), and the pool's table of distinct shapes that entries point
//! into, so one shape asked by many requests is held and shipped once.

use std::collections::HashMap;

use cicada_request::{OutputShape, Structured};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dataset::PoolEntry;
use crate::scenario::{Backend, Dataset, Scenario};

/// `[structured]`: what every request asks of its output's shape (a JSONL
/// line's own `tools` / `tool_choice` / `response_format` replace it).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StructuredSpec {
    /// Tools offered, as OpenAI writes them (`{type = "function", function = {...}}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Value>,
    /// "auto", "none", "required", or `{type = "function", function = {name = "..."}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// `{type = "json_schema", json_schema = {name, schema, strict}}` or `{type = "json_object"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    /// Send none of it: only cicada's check holds outputs to the shape.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub check_only: bool,
}

impl StructuredSpec {
    /// Nothing is set: the section may be left out.
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    /// The shape it asks for (`None` when it asks nothing).
    pub fn shape(&self) -> Result<Option<OutputShape>, cicada_request::ShapeError> {
        let mut shape = OutputShape::from_openai(
            self.tools.as_ref(),
            self.tool_choice.as_ref(),
            self.response_format.as_ref(),
        )?;
        shape.check_only = self.check_only;
        Ok((!shape.is_empty()).then_some(shape))
    }
}

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
    if matches!(s.dataset, Dataset::Conversations(_)) {
        out.push((
            key,
            "the conversations workload sends no tools or response format (a turn's answer feeds the next)".to_string(),
        ));
    }
    out
}

/// Why the scenario's backend cannot send tools or a response format, if it cannot.
pub(crate) fn cannot_carry(s: &Scenario) -> Option<String> {
    if s.target.backend.chat_completions(s.mock.api) {
        return None;
    }
    Some(if s.target.backend == Backend::Mock {
        format!(
            "mock.api {:?} cannot send tools or a response format (use mock.api = \"openai-chat\")",
            s.mock.api
        )
    } else {
        format!(
            "backend \"{}\" cannot send tools or a response format (only the chat-completions backends can: use a -chat backend)",
            s.target.backend.name()
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

/// The pool's distinct shapes, each once, for entries to point into.
#[derive(Debug, Default)]
pub(crate) struct ShapeTable {
    shapes: Vec<OutputShape>,
    /// Each shape's JSON, to find it again.
    index: HashMap<String, u32>,
}

impl ShapeTable {
    /// The index of `shape`, added if new.
    pub fn intern(&mut self, shape: OutputShape) -> u32 {
        self.intern_new(shape).0
    }

    /// The index of `shape`, and whether it was added now.
    pub fn intern_new(&mut self, shape: OutputShape) -> (u32, bool) {
        let key = serde_json::to_string(&shape).unwrap_or_default();
        if let Some(i) = self.index.get(&key) {
            return (*i, false);
        }
        let i = self.shapes.len() as u32;
        self.shapes.push(shape);
        self.index.insert(key, i);
        (i, true)
    }

    /// The shapes, in index order.
    pub fn into_shapes(self) -> Vec<OutputShape> {
        self.shapes
    }
}

/// Give entries without a shape of their own the scenario's, drop shapes no
/// entry uses (a JSONL line read but not kept), and apply `check_only`.
pub(crate) fn settle(
    s: &Scenario,
    entries: &mut [PoolEntry],
    shapes: Vec<OutputShape>,
) -> Vec<OutputShape> {
    let mut table = ShapeTable::default();
    let base = s.structured.shape().ok().flatten().map(|b| table.intern(b));
    let mut shapes: Vec<Option<OutputShape>> = shapes.into_iter().map(Some).collect();
    let mut renumbered: HashMap<u32, u32> = HashMap::new();
    for e in entries.iter_mut() {
        e.shape = match e.shape {
            None => base,
            Some(old) => Some(*renumbered.entry(old).or_insert_with(|| {
                let mut shape = shapes
                    .get_mut(old as usize)
                    .and_then(Option::take)
                    .unwrap_or_default();
                shape.check_only = s.structured.check_only;
                table.intern(shape)
            })),
        };
    }
    table.into_shapes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::build_pool;
    use crate::dataset::testutil::Scratch;

    const SECTION: &str = "[structured]\ntool_choice = \"required\"\ntools = [{type = \"function\", function = {name = \"weather\", parameters = {type = \"object\", required = [\"city\"], properties = {city = {type = \"string\"}}}}}]\n";

    fn problems_of(text: &str) -> Vec<(String, String)> {
        let s: Scenario = toml::from_str(text).unwrap();
        crate::validate::problems(&s)
    }

    /// A sound section passes; each mistake names its key, and a backend or
    /// workload that cannot carry it is named.
    #[test]
    fn the_section_is_checked_key_by_key() {
        let mock = "[target]\nbackend = \"mock\"\n";
        assert_eq!(problems_of(&format!("{mock}{SECTION}")), []);
        let p = problems_of(&format!("{mock}[structured]\ntool_choice = \"required\"\n"));
        assert_eq!(p[0].0, "structured.tool_choice", "{p:?}");
        let p = problems_of(&format!(
            "{mock}[structured]\nresponse_format = {{type = \"json_schema\", json_schema = {{name = \"n\", schema = {{type = \"objekt\"}}}}}}\n"
        ));
        assert_eq!(
            p[0].0, "structured.response_format.json_schema.schema",
            "{p:?}"
        );
        let p = problems_of(&format!(
            "[target]\nbackend = \"vllm\"\nbase_url = \"http://127.0.0.1:1\"\n{SECTION}"
        ));
        assert_eq!(p[0].0, "structured.tools", "{p:?}");
        assert!(p[0].1.contains("backend \"vllm\""), "{p:?}");
        let p = problems_of(&format!("{mock}[mock]\napi = \"llamacpp\"\n{SECTION}"));
        assert!(p[0].1.contains("mock.api"), "{p:?}");
        // Responses and Messages spell tools otherwise: refused, not sent without them
        for backend in ["openai-responses", "anthropic-messages"] {
            let p = problems_of(&format!(
                "[target]\nbackend = \"{backend}\"\nbase_url = \"http://127.0.0.1:1\"\n{SECTION}"
            ));
            assert_eq!(p[0].0, "structured.tools", "{p:?}");
            assert!(p[0].1.contains(&format!("backend \"{backend}\"")), "{p:?}");
            let p = problems_of(&format!("{mock}[mock]\napi = \"{backend}\"\n{SECTION}"));
            assert!(p[0].1.contains("mock.api"), "{p:?}");
        }
        let p = problems_of(&format!(
            "{mock}[dataset]\nkind = \"conversations\"\npath = \"c.jsonl\"\n{SECTION}"
        ));
        assert!(
            p.iter()
                .any(|(k, m)| k == "structured.tools" && m.contains("conversations")),
            "{p:?}"
        );
        let p = problems_of(&format!("{mock}[structured]\ncheck_only = true\n"));
        assert_eq!(p[0].0, "structured.check_only", "{p:?}");
    }

    /// Every entry of a synthetic pool points at the one shape of the section.
    #[test]
    fn the_section_is_one_shape_for_every_entry() {
        let s: Scenario = toml::from_str(&format!(
            "[target]\nbackend = \"mock\"\n[dataset]\ninput_len = 4\n[load]\nnum_prompts = 5\n{SECTION}"
        ))
        .unwrap();
        let pool = build_pool(&s, None).unwrap();
        assert_eq!(pool.shapes.len(), 1);
        assert_eq!(pool.shapes[0].tools[0].name, "weather");
        assert!(pool.entries.iter().all(|e| e.shape == Some(0)));
        let plain: Scenario = toml::from_str("[target]\nbackend = \"mock\"\n").unwrap();
        let pool = build_pool(&plain, None).unwrap();
        assert!(pool.shapes.is_empty() && pool.entries.iter().all(|e| e.shape.is_none()));
    }

    /// JSONL lines carry their own shapes, held once however many lines ask
    /// them; lines without use the section's; a bad line names its number.
    #[test]
    fn jsonl_lines_carry_their_own_shapes_once() {
        let dir = Scratch::new("structured");
        let json = r#"{"type": "json_object"}"#;
        let tool = r#"[{"type": "function", "function": {"name": "f"}}]"#;
        let lines = format!(
            "{{\"prompt\": \"a\", \"response_format\": {json}}}\n{{\"prompt\": \"b\"}}\n{{\"prompt\": \"c\", \"tools\": {tool}}}\n{{\"prompt\": \"d\", \"response_format\": {json}}}\n"
        );
        let path = dir.file("d.jsonl", &lines);
        let text = format!(
            "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"jsonl\"\npath = {path:?}\nshuffle = false\n[load]\nnum_prompts = 4\n{SECTION}check_only = true\n"
        );
        let s: Scenario = toml::from_str(&text).unwrap();
        let pool = build_pool(&s, None).unwrap();
        assert_eq!(pool.shapes.len(), 3, "{:?}", pool.shapes);
        let by_prompt: Vec<_> = pool
            .entries
            .iter()
            .map(|e| (e.prompt.text().into_owned(), e.shape))
            .collect();
        let (a, b, c, d) = (
            by_prompt[0].1,
            by_prompt[1].1,
            by_prompt[2].1,
            by_prompt[3].1,
        );
        assert_eq!(a, d, "the same format is one shape");
        assert_ne!(a, b);
        assert_ne!(b, c);
        let base = &pool.shapes[b.unwrap() as usize];
        assert_eq!(base.tools[0].name, "weather");
        assert!(
            pool.shapes.iter().all(|s| s.check_only),
            "check_only holds for every shape"
        );
        // a schema that is not one
        let bad = dir.file(
            "bad.jsonl",
            "{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": {\"minimum\": \"x\"}}}}\n",
        );
        let s: Scenario = toml::from_str(&format!(
            "[target]\nbackend = \"mock\"\n[dataset]\nkind = \"jsonl\"\npath = {bad:?}\n"
        ))
        .unwrap();
        let e = build_pool(&s, None).unwrap_err().to_string();
        assert!(
            e.contains("bad.jsonl:2:") && e.contains("response_format.json_schema.schema"),
            "{e}"
        );
        // a backend that cannot send them
        let s: Scenario = toml::from_str(&format!(
            "[target]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\n[dataset]\nkind = \"jsonl\"\npath = {path:?}\n"
        ))
        .unwrap();
        let e = build_pool(&s, None).unwrap_err().to_string();
        assert!(e.contains("backend \"openai\""), "{e}");
    }
}
