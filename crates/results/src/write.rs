//! Writing a step's results: its `result.json` (one per `[[stages]]`
//! window too) and its `summary.csv` rows.

use std::path::{Path, PathBuf};

use cicada_plan::ResolvedTarget;
use cicada_scenarios::Scenario;
use cicada_scenarios::dataset::DatasetReport;
use sha2::{Digest, Sha256};

use super::{RunResult, csv, json};
use crate::error::WriteError;

/// What every result of a run shares.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub scenario_origin: String,
    pub target: ResolvedTarget,
    pub workers: u32,
    pub dataset: DatasetReport,
}

/// A short stable hash of the resolved scenario.
pub fn scenario_hash(s: &Scenario) -> String {
    let json = serde_json::to_vec(s).unwrap_or_default();
    Sha256::digest(&json)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Write a step's result files; returns them.
///
/// A run without sweep writes `result.json` (`output.result_filename`), plus
/// `result-stage<n>.json` per `[[stages]]` window; a sweep writes
/// `result-stage<n>.json` per step. Each result adds one CSV row per target
/// when there are several.
pub fn write_step(results: &[RunResult], sweep: bool) -> Result<Vec<PathBuf>, WriteError> {
    let Some(whole) = results.first() else {
        return Ok(Vec::new());
    };
    let dir = &whole.scenario.output.dir;
    std::fs::create_dir_all(dir).map_err(|source| WriteError::Create {
        path: dir.clone(),
        source,
    })?;
    let mut files = Vec::new();
    let base = &whole.scenario.output.result_filename;
    let main_name = if sweep {
        stage_file(base, whole.stage)
    } else {
        base.clone()
    };
    files.push(write_json(&dir.join(main_name), whole)?);
    for window in &results[1..] {
        files.push(write_json(
            &dir.join(stage_file(base, window.stage)),
            window,
        )?);
    }
    let mut rows: Vec<Vec<String>> = results[1..].iter().flat_map(csv::rows).collect();
    let mut whole_rows = csv::rows(whole);
    if results.len() > 1 {
        // the whole run beside its steps
        let h = csv::header();
        if let (Some(si), Some(ni)) = (
            h.iter().position(|c| c == "stage"),
            h.iter().position(|c| c == "stage_name"),
        ) {
            for row in &mut whole_rows {
                row[si] = "all".into();
                row[ni] = "all".into();
            }
        }
    }
    rows.extend(whole_rows);
    let csv_path = dir.join("summary.csv");
    csv::append(&csv_path, &rows)?;
    files.push(csv_path);
    Ok(files)
}

/// The JSON file of stage `n`: `result.json` -> `result-stage<n>.json`.
fn stage_file(result_filename: &str, n: u32) -> String {
    match result_filename.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}-stage{n}.{ext}"),
        _ => format!("{result_filename}-stage{n}"),
    }
}

fn write_json(path: &Path, r: &RunResult) -> Result<PathBuf, WriteError> {
    let doc = serde_json::to_vec_pretty(&json::document(r)).map_err(WriteError::Json)?;
    std::fs::write(path, doc).map_err(|source| WriteError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_files_follow_the_result_filename() {
        assert_eq!(stage_file("result.json", 2), "result-stage2.json");
        assert_eq!(stage_file("r.v1.json", 1), "r.v1-stage1.json");
        assert_eq!(stage_file("out", 3), "out-stage3");
    }
}
