//! Replays the committed fuzz inputs (`fuzz/seeds/` and the minimised
//! `fuzz/corpus/`) through the same checks the fuzz targets run, so CI keeps
//! every finding without nightly or cargo-fuzz.

#[path = "../../../fuzz/checks/http_response.rs"]
mod http_response;
#[path = "../../../fuzz/checks/openai.rs"]
mod openai;
#[path = "../../../fuzz/checks/sse.rs"]
mod sse;

use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files = Vec::new();
    for dir in ["seeds", "corpus"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else {
            continue;
        };
        files.extend(
            entries.map(|e| e.unwrap().path()).filter(|p| {
                p.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with('.')
            }),
        );
    }
    files.sort();
    assert!(!files.is_empty(), "no fuzz inputs for {target}");
    files
}

fn replay(target: &str, check: fn(&[u8])) {
    let mut failed = Vec::new();
    for path in inputs(target) {
        let data = std::fs::read(&path).unwrap();
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(failed.is_empty(), "{target}: failing inputs {failed:#?}");
}

#[test]
fn sse_framer_corpus() {
    replay("sse_framer", sse::check);
}

#[test]
fn openai_events_corpus() {
    replay("openai_events", openai::check);
}

#[test]
fn http_response_corpus() {
    replay("http_response", http_response::check);
}
