//! The workloads that send images or audio, against the APIs that take them:
//! images go in chat-completions, Responses or Messages requests, audio only to a transcription backend, and a
//! transcription backend sends nothing else.

use crate::dataset::media_checks::{image_buckets, item_bounds};
use crate::scenario::{Backend, Dataset, Scenario};

/// Problems of a media workload's keys and of its backend, as (key, message).
pub(crate) fn media_problems(s: &Scenario) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let backend = s.target.backend;
    let (key, name) = if backend == Backend::Mock {
        ("mock.api", format!("mock.api {:?}", s.mock.api))
    } else {
        ("target.backend", format!("\"{}\"", backend.name()))
    };
    let audio_backend = backend.sends_audio(s.mock.api);
    match &s.dataset {
        Dataset::RandomMm(d) => {
            if let Err(m) = item_bounds(d) {
                out.push(("dataset.num_mm_items_range_ratio".into(), m.0));
            }
            if d.image_dir.is_none()
                && let Err(m) = image_buckets(d)
            {
                out.push(("dataset.bucket_config".into(), m.0));
            }
            if backend.spelling(s.mock.api).is_none() {
                out.push((
                    key.into(),
                    format!(
                        "the random-mm workload sends images in chat messages; {name} takes none (use a -chat backend, \"openai-responses\" or \"anthropic-messages\")"
                    ),
                ));
            }
        }
        Dataset::Audio(_) if !audio_backend => out.push((
            key.into(),
            format!(
                "the audio workload sends clips to transcribe; {name} takes no audio (use backend \"openai-audio\")"
            ),
        )),
        Dataset::Audio(_) => {}
        other if audio_backend => out.push((
            "dataset.kind".into(),
            format!(
                "{name} transcribes audio; the {} workload sends none (use kind \"audio\")",
                other.kind().name()
            ),
        )),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::Scenario;

    fn problems_of(text: &str) -> Vec<(String, String)> {
        let s: Scenario = toml::from_str(text).unwrap();
        crate::validate::problems(&s)
    }

    /// Images go where cicada writes them (chat completions, Responses,
    /// Messages); a text-only API is refused by name, never sent without them.
    #[test]
    fn images_need_a_chat_route() {
        let mm = "[dataset]\nkind = \"random-mm\"\ninput_len = 4\n";
        for backend in ["vllm-chat", "openai-responses", "anthropic-messages"] {
            let ok = format!(
                "[target]\nbackend = \"{backend}\"\nbase_url = \"http://127.0.0.1:1\"\n{mm}"
            );
            assert_eq!(problems_of(&ok), [], "{backend}");
        }
        for backend in ["vllm", "tgi", "llamacpp"] {
            let p = problems_of(&format!(
                "[target]\nbackend = \"{backend}\"\nbase_url = \"http://127.0.0.1:1\"\n{mm}"
            ));
            assert_eq!(p.len(), 1, "{p:?}");
            assert_eq!(p[0].0, "target.backend", "{p:?}");
            assert!(p[0].1.contains(backend), "{p:?}");
        }
    }
}
