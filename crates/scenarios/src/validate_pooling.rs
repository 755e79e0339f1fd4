//! `[pooling]` and the pooling backends: the section applies only to them,
//! they send text batches (from the text workloads) and nothing shaped.

use crate::scenario::{Backend, DatasetKind, Scenario};

/// The workloads whose prompts a pooling backend can batch: plain texts.
const TEXT_KINDS: [DatasetKind; 5] = [
    DatasetKind::Random,
    DatasetKind::Sharegpt,
    DatasetKind::Sonnet,
    DatasetKind::Prefix,
    DatasetKind::Jsonl,
];

/// The values `encoding_format` takes (vLLM's and OpenAI's).
const ENCODINGS: [&str; 2] = ["float", "base64"];

/// The pooling backends' names, quoted and joined.
fn pooling_names() -> String {
    Backend::ALL
        .into_iter()
        .filter(|b| *b != Backend::Mock && b.pools(cicada_mock::MockApi::default()))
        .map(|b| format!("\"{}\"", b.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Problems of `[pooling]` and of a pooling backend's workload, as (key, message).
pub(crate) fn problems(s: &Scenario) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let p = &s.pooling;
    if !s.target.backend.pools(s.mock.api) {
        if !p.is_unset() {
            out.push((
                "pooling".into(),
                format!(
                    "applies to pooling backends ({}, or \"mock\" with a pooling mock.api), not \"{}\"",
                    pooling_names(),
                    s.target.backend.name()
                ),
            ));
        }
        return out;
    }
    if p.batch_size == 0 {
        out.push(("pooling.batch_size".into(), "must be at least 1".into()));
    }
    if let Some(max) = p.batch_size_max
        && max < p.batch_size
    {
        out.push((
            "pooling.batch_size_max".into(),
            format!("{max} is below pooling.batch_size ({})", p.batch_size),
        ));
    }
    if !s.target.backend.shapes_vectors(s.mock.api) {
        for (key, set) in [
            ("encoding_format", p.encoding_format.is_some()),
            ("dimensions", p.dimensions.is_some()),
        ] {
            if set {
                out.push((
                    format!("pooling.{key}"),
                    format!(
                        "applies to OpenAI embeddings and vLLM's pooling (\"{}\", \"{}\"), not \"{}\"",
                        Backend::OpenaiEmbeddings.name(),
                        Backend::VllmPooling.name(),
                        s.target.backend.name()
                    ),
                ));
            }
        }
    }
    if let Some(f) = &p.encoding_format
        && !ENCODINGS.contains(&f.as_str())
    {
        out.push((
            "pooling.encoding_format".into(),
            format!("{f:?} is not one of {ENCODINGS:?}"),
        ));
    }
    if p.dimensions == Some(0) {
        out.push(("pooling.dimensions".into(), "must be at least 1".into()));
    }
    let kind = s.dataset.kind();
    if !TEXT_KINDS.contains(&kind) {
        let names: Vec<&str> = TEXT_KINDS.iter().map(|k| k.name()).collect();
        out.push((
            "dataset.kind".into(),
            format!(
                "a pooling backend batches plain texts; \"{}\" is not one of {names:?}",
                kind.name()
            ),
        ));
    }
    if !s.structured.is_unset() {
        out.push((
            "structured".into(),
            "a pooling backend generates nothing to shape or check".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::Scenario;

    fn problems(toml: &str) -> Vec<(String, String)> {
        let s: Scenario = toml::from_str(toml).unwrap();
        super::problems(&s)
    }

    /// The section needs a pooling backend; its values are checked.
    #[test]
    fn pooling_keys_are_checked() {
        let p = problems("[pooling]\nbatch_size = 4\n");
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].1.contains("openai-embeddings"), "{p:?}");
        let ok = "[target]\nbackend = \"openai-embeddings\"\nbase_url = \"http://h\"\n";
        assert!(problems(&format!("{ok}[pooling]\nbatch_size = 4\n")).is_empty());
        let p = problems(&format!(
            "{ok}[pooling]\nbatch_size = 4\nbatch_size_max = 2\nencoding_format = \"hex\"\ndimensions = 0\n"
        ));
        let keys: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "pooling.batch_size_max",
                "pooling.encoding_format",
                "pooling.dimensions"
            ]
        );
        let p = problems(&format!("{ok}[dataset]\nkind = \"audio\"\n"));
        assert_eq!(p[0].0, "dataset.kind", "{p:?}");
        let mock = "[target]\nbackend = \"mock\"\n[mock]\napi = \"openai-embeddings\"\n[pooling]\nbatch_size = 2\n";
        assert!(problems(mock).is_empty());
    }

    /// Rerank and TEI take batch sizes but not the OpenAI vector keys.
    #[test]
    fn vector_keys_are_for_openai_embeddings_only() {
        for backend in ["vllm-rerank", "tei-embed", "tei-rerank"] {
            let t = format!("[target]\nbackend = \"{backend}\"\nbase_url = \"http://h\"\n");
            assert!(problems(&format!("{t}[pooling]\nbatch_size = 4\n")).is_empty());
            let p = problems(&format!("{t}[pooling]\ndimensions = 8\n"));
            assert_eq!(p.len(), 1, "{p:?}");
            assert_eq!(p[0].0, "pooling.dimensions");
        }
        let p = problems("[pooling]\nbatch_size = 4\n");
        assert!(p[0].1.contains("\"vllm-rerank\", \"tei-embed\""), "{p:?}");
    }
}
