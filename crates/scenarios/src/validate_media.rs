//! The workloads that send images or audio, against the APIs that take them:
//! images go in chat messages, audio only to a transcription backend, and a
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
                out.push(("dataset.num_mm_items_range_ratio".into(), m));
            }
            if d.image_dir.is_none()
                && let Err(m) = image_buckets(d)
            {
                out.push(("dataset.bucket_config".into(), m));
            }
            if !backend.sends_messages(s.mock.api) {
                out.push((
                    key.into(),
                    format!(
                        "the random-mm workload sends images in chat messages; {name} takes no chat messages (use a -chat backend)"
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
