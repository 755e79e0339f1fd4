//! Which files a comparison reads and what each is called: paths, globs
//! and directories expanded to result files; a `[[stages]]` run's
//! `result.json` replaced by its windows' files; each file's label from
//! `--label NAME=GLOB`, else its scenario's name.

use std::path::{Path, PathBuf};

use crate::read::ResultFile;

/// A comparison's input that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{0}: no such file or directory, and no file matches it as a glob")]
    Missing(String),
    #[error("{0}: not a glob: {1}")]
    Glob(String, String),
    #[error("{0}: {1}")]
    Read(PathBuf, String),
    #[error("{0}: holds no result.json or result-stage<n>.json")]
    EmptyDir(PathBuf),
    #[error("--label {0}: expected NAME=GLOB (e.g. --label fast='runs/fast/*')")]
    Label(String),
}

/// `--label NAME=GLOB`: files the glob matches are drawn as NAME.
#[derive(Debug, Clone)]
pub struct LabelRule {
    pub name: String,
    pattern: glob::Pattern,
}

impl std::str::FromStr for LabelRule {
    type Err = InputError;

    fn from_str(s: &str) -> Result<Self, InputError> {
        let (name, glob) = s
            .split_once('=')
            .filter(|(n, g)| !n.trim().is_empty() && !g.is_empty())
            .ok_or_else(|| InputError::Label(s.to_string()))?;
        let pattern = glob::Pattern::new(glob)
            .map_err(|e| InputError::Glob(glob.to_string(), e.to_string()))?;
        Ok(Self {
            name: name.trim().to_string(),
            pattern,
        })
    }
}

impl LabelRule {
    /// Whether the glob matches the path as given or one of its directories
    /// (`--label fast=runs/fast` names every file under it).
    pub fn matches(&self, path: &Path) -> bool {
        path.ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .any(|a| self.pattern.matches_path(a))
    }
}

/// The stage number in a `<stem>-stage<n>.<ext>` file name.
fn stage_number(path: &Path) -> Option<u32> {
    let stem = path.file_stem()?.to_str()?;
    stem.rsplit_once("-stage")?.1.parse().ok()
}

/// A directory's result files: its `result-stage<n>.json` in stage order
/// (a sweep, or a `[[stages]]` run's windows), else its `result.json`.
fn in_dir(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let mut stages: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| InputError::Read(dir.to_path_buf(), e.to_string()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    stages.retain(|p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name.starts_with("result-stage")
            && name.ends_with(".json")
            && stage_number(p).is_some()
            && p.is_file()
    });
    stages.sort_by_key(|p| stage_number(p));
    if !stages.is_empty() {
        return Ok(stages);
    }
    let whole = dir.join("result.json");
    if whole.is_file() {
        Ok(vec![whole])
    } else {
        Err(InputError::EmptyDir(dir.to_path_buf()))
    }
}

/// Every argument as files: a file as it is, a directory as its result
/// files, anything else as a glob (for shells that pass it on unexpanded).
pub fn expand(args: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut out: Vec<PathBuf> = Vec::new();
    for arg in args {
        let found = if arg.is_dir() {
            in_dir(arg)?
        } else if arg.is_file() {
            vec![arg.clone()]
        } else {
            let text = arg.to_string_lossy().into_owned();
            let mut hits: Vec<PathBuf> = glob::glob(&text)
                .map_err(|e| InputError::Glob(text.clone(), e.to_string()))?
                .filter_map(Result::ok)
                .filter(|p| p.is_file())
                .collect();
            hits.sort();
            if hits.is_empty() {
                return Err(InputError::Missing(text));
            }
            hits
        };
        for f in found {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

/// The files of a `[[stages]]` run's windows beside its `result.json`
/// (`<stem>-stage<n>.<ext>`), when the file is such a run's whole and
/// they exist; else none (the file stands for itself).
pub fn windows_of(file: &ResultFile) -> Vec<PathBuf> {
    let Some(c) = file.document().cicada.as_ref() else {
        return Vec::new();
    };
    let stages = c
        .scenario
        .get("stages")
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len);
    if c.stage != 0 || stages == 0 {
        return Vec::new();
    }
    let path = &file.path;
    let (Some(stem), ext) = (
        path.file_stem().and_then(|s| s.to_str()),
        path.extension().and_then(|s| s.to_str()),
    ) else {
        return Vec::new();
    };
    (1..=stages)
        .map(|n| {
            let name = match ext {
                Some(ext) => format!("{stem}-stage{n}.{ext}"),
                None => format!("{stem}-stage{n}"),
            };
            path.with_file_name(name)
        })
        .filter(|p| p.is_file())
        .collect()
}

/// A file's label without a rule: its scenario's name, else (a `vllm bench
/// serve` file) its `--label`, else its model, else its file name.
pub fn default_label(file: &ResultFile) -> String {
    let d = file.document();
    d.cicada
        .as_ref()
        .map(|c| c.scenario_name.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| d.label.clone().filter(|l| !l.is_empty()))
        .or_else(|| d.model_id.clone().filter(|m| !m.is_empty()))
        .unwrap_or_else(|| file.path.display().to_string())
}

/// What makes two runs of one configuration different points: their load.
pub fn load_key(file: &ResultFile) -> String {
    let d = file.document();
    let load = d.cicada.as_ref().and_then(|c| c.scenario.get("load"));
    format!(
        "{:?}|{:?}|{:?}|{}",
        load.and_then(|l| l.get("users")),
        d.max_concurrency,
        d.request_rate,
        d.cicada.as_ref().map_or(0, |c| c.stage)
    )
}

/// Labels for `files`: the first matching rule's name; else the default
/// label, with the file's directory added where two files of one default
/// label share a load (the same scenario run twice with something else
/// changed, into two directories, so one line would join two configurations).
pub fn label_all(files: &[ResultFile], rules: &[LabelRule]) -> Vec<String> {
    let ruled: Vec<Option<String>> = files
        .iter()
        .map(|f| {
            rules
                .iter()
                .find(|r| r.matches(&f.path))
                .map(|r| r.name.clone())
        })
        .collect();
    let defaults: Vec<String> = files.iter().map(default_label).collect();
    let keys: Vec<String> = files.iter().map(load_key).collect();
    let clash = |i: usize| {
        (0..files.len()).any(|j| {
            j != i
                && ruled[j].is_none()
                && defaults[j] == defaults[i]
                && keys[j] == keys[i]
                && files[j].path.parent() != files[i].path.parent()
        })
    };
    let clashing: Vec<String> = (0..files.len())
        .filter(|i| ruled[*i].is_none() && clash(*i))
        .map(|i| defaults[i].clone())
        .collect();
    (0..files.len())
        .map(|i| match &ruled[i] {
            Some(name) => name.clone(),
            None if clashing.contains(&defaults[i]) => {
                let dir = files[i]
                    .path
                    .parent()
                    .map_or_else(String::new, |d| d.display().to_string());
                format!("{} ({dir})", defaults[i])
            }
            None => defaults[i].clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, rel: &str, name: &str, stage: u32, conc: u32) -> PathBuf {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(
            &p,
            format!(
                r#"{{"max_concurrency": {conc}, "request_rate": "inf", "duration": 1,
                    "cicada": {{"scenario_name": "{name}", "stage": {stage},
                    "scenario": {{"load": {{"max_concurrency": {conc}}}}}}}}}"#
            ),
        )
        .unwrap();
        p
    }

    fn read(paths: &[PathBuf]) -> Vec<ResultFile> {
        paths.iter().map(|p| ResultFile::read(p).unwrap()).collect()
    }

    #[test]
    fn directories_and_globs_expand_to_result_files_in_stage_order() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for n in [10, 2, 1] {
            file(d, &format!("sweep/result-stage{n}.json"), "s", n, n);
        }
        file(d, "single/result.json", "s", 0, 4);
        let got = expand(&[d.join("sweep"), d.join("single")]).unwrap();
        let names: Vec<String> = got
            .iter()
            .map(|p| p.strip_prefix(d).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "sweep/result-stage1.json",
                "sweep/result-stage2.json",
                "sweep/result-stage10.json",
                "single/result.json"
            ]
        );
        // a glob the shell left alone, and a file named twice, read once
        let glob = d.join("sweep/result-stage1*.json");
        let again = d.join("sweep/result-stage1.json");
        assert_eq!(expand(&[glob, again]).unwrap().len(), 2);
        let e = expand(&[d.join("nothing-*.json")]).unwrap_err().to_string();
        assert!(e.contains("nothing-*.json"), "{e}");
        std::fs::create_dir_all(d.join("empty")).unwrap();
        let e = expand(&[d.join("empty")]).unwrap_err().to_string();
        assert!(e.contains("holds no result.json"), "{e}");
    }

    #[test]
    fn labels_come_from_rules_then_names_then_directories_on_a_clash() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let paths = [
            file(d, "fast/result-stage1.json", "mock", 1, 1),
            file(d, "fast/result-stage2.json", "mock", 2, 8),
            file(d, "slow/result-stage1.json", "mock", 1, 1),
            file(d, "other/result.json", "other", 0, 1),
        ];
        let files = read(&paths);
        let labels = label_all(&files, &[]);
        let fast = format!("mock ({})", d.join("fast").display());
        let slow = format!("mock ({})", d.join("slow").display());
        assert_eq!(labels, [fast.clone(), fast, slow, "other".to_string()]);
        let rule: LabelRule = format!("quick={}", d.join("fa*").display())
            .parse()
            .unwrap();
        let labels = label_all(&files, &[rule]);
        assert_eq!(labels, ["quick", "quick", "mock", "other"]);
        assert!("nameless".parse::<LabelRule>().is_err());
        assert!("=x".parse::<LabelRule>().is_err());
        // one sweep alone: one label, no directory
        assert_eq!(label_all(&files[..2], &[]), ["mock", "mock"]);
    }

    #[test]
    fn a_vllm_file_is_named_by_its_label_then_its_model() {
        let dir = tempfile::tempdir().unwrap();
        let vllm = |name: &str, label: &str| {
            let p = dir.path().join(name);
            let text = format!(
                r#"{{"date": "20250101-120000", "label": {label}, "model_id": "llama",
                    "max_concurrency": 4, "request_rate": "inf", "duration": 1}}"#
            );
            std::fs::write(&p, text).unwrap();
            p
        };
        let files = read(&[
            vllm("a.json", r#""tp8-fp8""#),
            vllm("b.json", "null"),
            vllm("c.json", r#""""#),
        ]);
        let labels: Vec<String> = files.iter().map(default_label).collect();
        assert_eq!(labels, ["tp8-fp8", "llama", "llama"]);
    }
}
