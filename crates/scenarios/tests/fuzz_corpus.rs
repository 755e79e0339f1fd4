//! Replays the committed fuzz inputs (`fuzz/seeds/`, the minimised
//! `fuzz/corpus/`, the malformed scenarios and the examples) through the same
//! checks the fuzz targets run, so CI keeps every finding without nightly.

#[path = "../../../fuzz/checks/dataset.rs"]
mod dataset;
#[path = "../../../fuzz/checks/scenario.rs"]
mod scenario;

use std::path::{Path, PathBuf};

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect()
}

fn replay(target: &str, extra: &[&str], check: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files: Vec<PathBuf> = ["seeds", "corpus"]
        .iter()
        .flat_map(|d| files_in(&root.join("fuzz").join(d).join(target)))
        .chain(extra.iter().flat_map(|d| files_in(&root.join(d))))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fuzz inputs for {target}");
    let mut failed = Vec::new();
    for path in files {
        let data = std::fs::read(&path).unwrap();
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(failed.is_empty(), "{target}: failing inputs {failed:#?}");
}

#[test]
fn scenario_corpus() {
    replay(
        "scenario",
        &["crates/scenarios/tests/malformed", "examples"],
        scenario::check,
    );
}

#[test]
fn dataset_corpus() {
    replay("dataset", &[], dataset::check);
}
