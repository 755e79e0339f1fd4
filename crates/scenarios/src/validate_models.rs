//! `target.models` and `target.model_assignment` checked against the rest of
//! the scenario (the backend must name a model in its requests).

use crate::scenario::Backend;
use cicada_mock::MockApi;
use cicada_plan::models::ModelAssignment;

/// Whether `backend`'s requests carry a `model` in their body (TGI,
/// llama.cpp's native route and Triton name none, so they cannot split).
fn names_model(backend: Backend, mock_api: MockApi) -> bool {
    match backend {
        Backend::Tgi | Backend::Llamacpp | Backend::Triton => false,
        Backend::Mock => !matches!(mock_api, MockApi::Tgi | MockApi::Llamacpp | MockApi::Triton),
        _ => true,
    }
}

/// Whether `backend` speaks to llama-server, which selects a LoRA adapter by
/// the request's `lora` field (`target.models[].lora_id`).
fn selects_lora_by_id(backend: Backend) -> bool {
    matches!(
        backend,
        Backend::Llamacpp | Backend::LlamacppChat | Backend::LlamacppCompletions | Backend::Mock
    )
}

/// Problems with `target.models` and `target.model_assignment`, as (key, message).
pub(crate) fn problems(s: &crate::Scenario) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let t = &s.target;
    if t.models.is_empty() {
        return out;
    }
    let by_adapter = t.models.iter().any(|m| m.lora_id.is_some());
    if by_adapter && !selects_lora_by_id(t.backend) {
        out.push((
            "target.models".to_string(),
            format!(
                "lora_id selects llama-server's adapters (backends llamacpp, llamacpp-chat, \
                 llamacpp-completions); backend \"{}\" selects an adapter by its name",
                t.backend.name()
            ),
        ));
    }
    // llama.cpp's native route names no model, but an adapter id splits it
    if !names_model(t.backend, s.mock.api) && !by_adapter {
        out.push((
            "target.models".to_string(),
            format!(
                "backend \"{}\" sends no model in its requests, so it cannot split traffic over models",
                t.backend.name()
            ),
        ));
    }
    if t.model.is_some() {
        out.push((
            "target.models".to_string(),
            "give either target.model or target.models, not both".to_string(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, m) in t.models.iter().enumerate() {
        if m.name.trim().is_empty() {
            out.push((
                format!("target.models[{i}].name"),
                "must not be empty".into(),
            ));
        } else if !seen.insert(m.name.as_str()) {
            out.push((
                format!("target.models[{i}].name"),
                format!("\"{}\" is listed twice", m.name),
            ));
        }
        if !(m.weight.is_finite() && m.weight > 0.0) {
            out.push((
                format!("target.models[{i}].weight"),
                format!("must be a positive number, got {}", m.weight),
            ));
        }
    }
    let unequal = t.models.iter().any(|m| m.weight != t.models[0].weight);
    if t.model_assignment == ModelAssignment::RoundRobin && unequal {
        out.push((
            "target.model_assignment".to_string(),
            "round_robin gives every model the same share; remove the weights or use \"random\""
                .to_string(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_list_beside_model_is_an_error_with_file_line_and_key() {
        let text = "[target]\nbase_url = \"http://h\"\nmodel = \"a\"\nmodels = [{ name = \"b\" }, { name = \"c\", weight = 2 }]\n";
        let err = crate::parse(text, "s.toml", &[]).unwrap_err().to_string();
        assert_eq!(
            err,
            "s.toml:4: `target.models`: give either target.model or target.models, not both"
        );
        let rr = "[target]\nbase_url = \"http://h\"\nmodel_assignment = \"round_robin\"\nmodels = [{ name = \"b\" }, { name = \"c\", weight = 2 }]\n";
        let err = crate::parse(rr, "s.toml", &[]).unwrap_err().to_string();
        assert!(err.contains("s.toml:3: `target.model_assignment`"), "{err}");
        let tgi =
            "[target]\nbackend = \"tgi\"\nbase_url = \"http://h\"\nmodels = [{ name = \"b\" }]\n";
        let err = crate::parse(tgi, "s.toml", &[]).unwrap_err().to_string();
        assert!(err.contains("sends no model"), "{err}");
        let vllm = "[target]\nbackend = \"vllm\"\nbase_url = \"http://h\"\nmodels = [{ name = \"b\", lora_id = 0 }]\n";
        let err = crate::parse(vllm, "s.toml", &[]).unwrap_err().to_string();
        assert!(err.contains("selects an adapter by its name"), "{err}");
        let native = "[target]\nbackend = \"llamacpp\"\nbase_url = \"http://h\"\nmodels = [{ name = \"base\" }, { name = \"b\", lora_id = 1 }]\n";
        let s = crate::parse(native, "s.toml", &[]).unwrap();
        assert_eq!(s.target.models[1].lora_id, Some(1));
        let ok = "[target]\nbase_url = \"http://h\"\nmodels = [{ name = \"b\" }, { name = \"c\", weight = 2 }]\n";
        let s = crate::parse(ok, "s.toml", &[]).unwrap();
        assert_eq!(s.target.models[1].weight, 2.0);
        assert_eq!(s.target.model_assignment, ModelAssignment::Random);
    }

    #[test]
    fn vllm_lora_flags_become_the_model_list() {
        let f = crate::vllm::VllmFlags {
            backend: Some("vllm".into()),
            model: Some("base".into()),
            lora_modules: vec!["sql=/adapters/sql".into(), "chat".into()],
            lora_assignment: Some("round-robin".into()),
            ..Default::default()
        };
        let s = crate::vllm::describe(None, &f, &[], &[], (None, None))
            .unwrap()
            .scenario;
        let names: Vec<&str> = s.target.models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["sql", "chat"]);
        assert!(s.target.models.iter().all(|m| m.weight == 1.0));
        assert_eq!(s.target.model, None, "--model is the base model");
        assert_eq!(s.target.model_assignment, ModelAssignment::RoundRobin);
        let bad = crate::vllm::VllmFlags {
            lora_assignment: Some("sticky".into()),
            ..f
        };
        let err = crate::vllm::describe(None, &bad, &[], &[], (None, None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("lora-assignment"), "{err}");
    }
}
