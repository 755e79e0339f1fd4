//! The scenario's `[structured]` section: `tools`, `tool_choice` and
//! `response_format` sent with every request (OpenAI chat completions'
//! spelling). Its checks are in `validate_structured`, the pool's table of
//! distinct shapes in `dataset::shapes`.

use cicada_request::OutputShape;
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
        let mut shape = OutputShape::read(
            self.tools.as_ref(),
            self.tool_choice.as_ref(),
            self.response_format.as_ref(),
        )?;
        shape.check_only = self.check_only;
        Ok((!shape.is_empty()).then_some(shape))
    }
}

#[cfg(test)]
mod tests {
    use crate::Scenario;
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
        // Responses and Messages take tools in their own spelling
        for backend in ["openai-responses", "anthropic-messages"] {
            let target =
                format!("[target]\nbackend = \"{backend}\"\nbase_url = \"http://127.0.0.1:1\"\n");
            assert_eq!(problems_of(&format!("{target}{SECTION}")), [], "{backend}");
            assert_eq!(
                problems_of(&format!("{mock}[mock]\napi = \"{backend}\"\n{SECTION}")),
                []
            );
        }
        // and a response format in theirs (Messages: output_config.format)
        let format = "[structured]\nresponse_format = {type = \"json_object\"}\n";
        for api in ["openai-responses", "anthropic-messages"] {
            assert_eq!(
                problems_of(&format!("{mock}[mock]\napi = \"{api}\"\n{format}")),
                []
            );
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
