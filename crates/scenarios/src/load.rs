//! Reading a scenario: TOML text + `--set` overrides -> a validated [`Scenario`].

use std::path::Path;

use crate::describe::{
    describe_serde_error, encoding_error, printable, section_problems, syntax_error,
};
use crate::error::{Problem, ScenarioError};
use crate::source::SourceMap;
use crate::{Scenario, validate};

/// One `--set key.path=value` override.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// Dotted key path.
    pub key: String,
    /// Value in TOML syntax; bare words are taken as strings.
    pub value: String,
}

impl std::str::FromStr for Override {
    type Err = ScenarioError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (key, value) = spec
            .split_once('=')
            .ok_or_else(|| ScenarioError::Override {
                spec: printable(&format!("--set {spec}")),
                message: format!(
                    "`{}` has no value; write KEY=VALUE, e.g. load.request_rate=8",
                    printable(spec.trim())
                ),
            })?;
        let key = key.trim();
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(ScenarioError::Override {
                spec: printable(&format!("--set {spec}")),
                message: format!(
                    "`{}` has an empty part; a key is a dotted path such as load.request_rate",
                    printable(key)
                ),
            });
        }
        Ok(Self {
            key: key.to_string(),
            value: value.trim().to_string(),
        })
    }
}

/// A parsed scenario plus where it came from.
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    /// The validated scenario.
    pub scenario: Scenario,
    /// File path or "command line".
    pub origin: String,
}

/// One key set on top of the scenario file: a typed value, and who set it.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// Dotted key path (`load.request_rate`, `target.headers.X-Team`).
    pub key: String,
    /// The value, as the scenario file would hold it.
    pub value: toml::Value,
    /// What the user typed to set it (`--request-rate 8`, `--set load.request_rate=8`).
    pub source: String,
    /// Where problems with the key are blamed (`command line (--request-rate)`).
    pub origin: String,
}

impl Override {
    /// The override as a setting: its text read as a TOML value (bare words as strings).
    pub fn setting(&self) -> Setting {
        Setting {
            key: self.key.clone(),
            value: parse_value(&self.value),
            source: format!("--set {}={}", self.key, self.value),
            origin: "command line (--set)".to_string(),
        }
    }
}

/// Read, parse, override and validate a scenario file.
pub fn load_file(path: &Path, overrides: &[Override]) -> Result<LoadedScenario, ScenarioError> {
    let settings: Vec<Setting> = overrides.iter().map(Override::setting).collect();
    load_file_with(path, &settings)
}

/// Read a scenario file, apply `settings` in order (a later one wins), validate.
pub fn load_file_with(path: &Path, settings: &[Setting]) -> Result<LoadedScenario, ScenarioError> {
    let origin = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ScenarioError::Read {
        origin: origin.clone(),
        source,
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| encoding_error(&origin, &bytes, &e))?;
    let mut scenario = parse_with(text, &origin, settings)?;
    resolve_relative_paths(&mut scenario, path.parent());
    Ok(LoadedScenario { scenario, origin })
}

/// Parse, override and validate scenario text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str, overrides: &[Override]) -> Result<Scenario, ScenarioError> {
    let settings: Vec<Setting> = overrides.iter().map(Override::setting).collect();
    parse_with(text, origin, &settings)
}

/// Whether a problem with `key` is one with the `setting`'s key (itself, or
/// inside it: a table's key, an array's item).
fn covers(setting: &str, key: &str) -> bool {
    key.strip_prefix(setting)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// Parse scenario text, apply `settings` in order (a later one wins),
/// validate; a problem is blamed on the last setting of its key, else on
/// the text (`origin`, at its line).
pub fn parse_with(
    text: &str,
    origin: &str,
    settings: &[Setting],
) -> Result<Scenario, ScenarioError> {
    let map = SourceMap::new(text).map_err(|e| syntax_error(origin, text, &e))?;
    let mut table: toml::Table =
        toml::from_str(text).map_err(|e| syntax_error(origin, text, &e))?;
    for s in settings {
        apply_setting(&mut table, s)?;
    }
    // keys and values may come from the command line and hold anything: print them on one line
    let locate = |(key, message): (String, String)| -> Problem {
        // a key missing from a table the command line made is the command line's
        let made = key
            .rsplit_once('.')
            .map(|(parent, _)| parent)
            .filter(|parent| !map.contains(parent));
        let set_by = settings
            .iter()
            .rev()
            .find(|s| covers(&s.key, &key) || made.is_some_and(|p| covers(p, &s.key)));
        Problem {
            origin: set_by.map_or_else(|| origin.to_string(), |s| s.origin.clone()),
            line: if set_by.is_some() {
                None
            } else {
                map.line_of(&key)
            },
            key: printable(&key),
            message: printable(&message),
        }
    };
    let sections: Vec<Problem> = section_problems(&table)
        .into_iter()
        .chain(crate::dataset_spec::key_problems(&table))
        .map(locate)
        .collect();
    if !sections.is_empty() {
        return Err(ScenarioError::Invalid { problems: sections });
    }
    let scenario: Scenario =
        serde_path_to_error::deserialize(table).map_err(|e| ScenarioError::Invalid {
            problems: vec![locate(describe_serde_error(&e))],
        })?;
    // each workload is checked as a scenario of its own (`validate` again)
    let problems: Vec<Problem> = validate::problems(&scenario)
        .into_iter()
        .chain(crate::workloads::problems(&scenario))
        .map(locate)
        .collect();
    if problems.is_empty() {
        Ok(scenario)
    } else {
        Err(ScenarioError::Invalid { problems })
    }
}

fn apply_setting(table: &mut toml::Table, s: &Setting) -> Result<(), ScenarioError> {
    let parts: Vec<&str> = s.key.split('.').collect();
    let (last, parents) = parts.split_last().ok_or_else(|| ScenarioError::Override {
        spec: s.source.clone(),
        message: "empty key".to_string(),
    })?;
    let mut cur = table;
    for (depth, p) in parents.iter().enumerate() {
        let entry = cur
            .entry((*p).to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        widen_length(&parts[..=depth], entry);
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => {
                return Err(ScenarioError::Override {
                    spec: printable(&s.source),
                    message: format!(
                        "`{}` holds a value, so `{}` cannot be set inside it",
                        printable(&parts[..=depth].join(".")),
                        printable(&s.key)
                    ),
                });
            }
        };
    }
    cur.insert((*last).to_string(), s.value.clone());
    Ok(())
}

/// `input_len = 1000` set inside (`--set dataset.input_len.dist=normal`)
/// becomes the table `{ mean = 1000 }`, so a plain length turns into a
/// distribution around it, key by key.
fn widen_length(path: &[&str], entry: &mut toml::Value) {
    if let (["dataset", "input_len" | "output_len"], toml::Value::Integer(n)) = (path, &*entry) {
        let mut t = toml::Table::new();
        t.insert("mean".into(), toml::Value::Integer(*n));
        *entry = toml::Value::Table(t);
    }
}

/// A TOML value if `raw` is one (`5`, `"x"`, `[1, 2]`, `true`), else the raw text as a string.
fn parse_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

/// Dataset and tokenizer paths in a file are relative to the file, not the shell.
fn resolve_relative_paths(scenario: &mut Scenario, base: Option<&Path>) {
    let Some(base) = base else { return };
    for path in scenario.dataset_paths_mut() {
        if path.is_relative() {
            let joined = base.join(&*path);
            if joined.exists() {
                *path = joined;
            }
        }
    }
    // a tokenizer source is a path or a hub id; only an existing relative path is rebased
    if let Some(t) = &mut scenario.tokenizer {
        let p = Path::new(&t.source);
        if p.is_relative() {
            let joined = base.join(p);
            if joined.exists() {
                t.source = joined.display().to_string();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_plan::units::Rate;

    fn err(text: &str) -> String {
        parse(text, "s.toml", &[]).unwrap_err().to_string()
    }

    #[test]
    fn defaults_parse_from_almost_nothing() {
        let s = parse("[target]\nbackend = \"mock\"\n", "s.toml", &[]).unwrap();
        assert_eq!(s.load.request_rate, Rate::Infinite);
        assert_eq!(
            s.dataset,
            crate::scenario::Dataset::Random(crate::scenario::RandomSpec {
                input_len: 1024.into(),
                output_len: 128.into(),
                range_ratio: 0.0,
                prefix_len: 0,
                sampler: crate::scenario::Sampler::Cicada,
                prompt_token_ids: false,
            })
        );
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e =
            err("[target]\nbackend = \"mock\"\n\n[load]\nrequest_rate = 2\nmax_concurency = 3\n");
        assert!(
            e.starts_with("s.toml:6: `load.max_concurency`: unknown key"),
            "{e}"
        );
        assert!(e.contains("max_concurrency"), "{e}");
    }

    #[test]
    fn wrong_type_names_file_line_and_key() {
        let e = err("[target]\nbackend = \"mock\"\n[load]\nburstiness = \"lots\"\n");
        assert!(e.starts_with("s.toml:4: `load.burstiness`:"), "{e}");
    }

    #[test]
    fn unknown_enum_value_lists_choices() {
        let e = err("[target]\nbackend = \"nope\"\n");
        assert!(
            e.starts_with("s.toml:2: `target.backend`: unknown value \"nope\""),
            "{e}"
        );
        assert!(e.contains("openai-chat"), "{e}");
    }

    #[test]
    fn out_of_range_values_are_located() {
        let e = err("[target]\nbackend = \"mock\"\n[load]\nrequest_rate = -3\n");
        assert!(e.starts_with("s.toml:4: `load.request_rate`:"), "{e}");
    }

    #[test]
    fn syntax_errors_have_line_and_column() {
        let e = err("[target]\nbackend = \"mock\n");
        assert!(e.starts_with("s.toml:2:"), "{e}");
        let e = err("[load\n");
        assert!(e.starts_with("s.toml:1:"), "{e}");
    }

    #[test]
    fn backends_routing_and_tls_keys() {
        for b in crate::scenario::Backend::ALL {
            let text = if b == crate::scenario::Backend::Mock {
                "[target]\nbackend = \"mock\"\n".to_string()
            } else {
                format!(
                    "[target]\nbackend = \"{}\"\nurls = [\"http://a:1\", \"https://b:2/p\"]\nrouting = \"least_in_flight\"\n",
                    b.name()
                )
            };
            // a transcription backend sends the audio workload only
            let text = if b.sends_audio(Default::default()) {
                format!("{text}[dataset]\nkind = \"audio\"\n")
            } else {
                text
            };
            let s = parse(&text, "s.toml", &[]).unwrap();
            assert_eq!(s.target.backend, b);
            assert_eq!(crate::scenario::Backend::from_name(b.name()), Some(b));
        }
        let e = err(
            "[target]\nbackend = \"vllm\"\nbase_url = \"https://h\"\ntls_ca = \"ca.pem\"\ntls_insecure = true\n",
        );
        assert!(e.starts_with("s.toml:5: `target.tls_insecure`"), "{e}");
        let e = err("[target]\nbackend = \"mock\"\n[output]\nresult_filename = \"a/b.json\"\n");
        assert!(e.starts_with("s.toml:4: `output.result_filename`"), "{e}");
        let e = err("[target]\nbackend = \"mock\"\nrouting = \"fastest\"\n");
        assert!(e.contains("least_in_flight"), "{e}");
        let s = parse(
            "[target]\nbackend = \"mock\"\n[mock]\napi = \"tgi\"\n",
            "s.toml",
            &[],
        )
        .unwrap();
        assert_eq!(s.mock.api, cicada_mock::MockApi::Tgi);
    }

    #[test]
    fn syntax_errors_name_the_key_being_parsed() {
        let e = err("[target]\nbackend = \"mock\"\n[load]\nrequest_rate =\n");
        assert_eq!(
            e,
            "s.toml:4:15: invalid TOML at `load.request_rate`: missing value after `=`"
        );
    }

    #[test]
    fn sections_and_required_keys_are_named() {
        let e = err("[target]\nbackend = \"mock\"\n[[load]]\n");
        assert!(e.starts_with("s.toml:3: `load`: `[[load]]`"), "{e}");
        let e = err("[target]\nbackend = \"mock\"\n[tokenizer]\nverify_every = 2\n");
        assert!(
            e.starts_with("s.toml:3: `tokenizer.source`: required"),
            "{e}"
        );
    }

    #[test]
    fn overrides_that_cannot_apply_name_the_flag_and_key() {
        let o: Override = "target.backend.x=1".parse().unwrap();
        let e = parse("[target]\nbackend = \"mock\"\n", "s.toml", &[o])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "command line (--set target.backend.x=1): `target.backend` holds a value, so `target.backend.x` cannot be set inside it"
        );
    }

    #[test]
    fn non_utf8_files_are_located() {
        let dir = std::env::temp_dir().join(format!("cicada-utf8-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("latin1.toml");
        std::fs::write(
            &path,
            b"[target]\nbackend = \"mock\"\nmodel = \"caf\xe9\"\n",
        )
        .unwrap();
        let e = load_file(&path, &[]).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.contains("latin1.toml:3:13: invalid TOML at `target.model`: byte 0xE9"),
            "{e}"
        );
    }

    #[test]
    fn overrides_apply_and_are_blamed_on_the_command_line() {
        let o: Override = "load.request_rate=7.5".parse().unwrap();
        let s = parse("[target]\nbackend = \"mock\"\n", "s.toml", &[o]).unwrap();
        assert_eq!(s.load.request_rate, Rate::Finite(7.5));
        let o: Override = "load.request_rate=-1".parse().unwrap();
        let e = parse("[target]\nbackend = \"mock\"\n", "s.toml", &[o])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("command line (--set): `load.request_rate`"),
            "{e}"
        );
        let o: Override = "target.model=my-model".parse().unwrap();
        let s = parse("[target]\nbackend = \"mock\"\n", "s.toml", &[o]).unwrap();
        assert_eq!(s.target.model.as_deref(), Some("my-model"));
        assert!("nokey".parse::<Override>().is_err());
        assert!("a..b=1".parse::<Override>().is_err());
    }
}

#[cfg(test)]
mod path_tests {
    use super::*;

    #[test]
    fn dataset_and_tokenizer_paths_are_relative_to_the_scenario_file() {
        let dir = std::env::temp_dir().join(format!("cicada-load-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("data/t.jsonl"), "{\"prompt\": \"hi\"}\n").unwrap();
        std::fs::write(dir.join("data/tok.json"), "{}").unwrap();
        let sc = dir.join("s.toml");
        std::fs::write(
            &sc,
            "[target]\nbackend = \"mock\"\n[tokenizer]\nsource = \"data/tok.json\"\n[dataset]\nkind = \"jsonl\"\npath = \"data/t.jsonl\"\n",
        )
        .unwrap();
        let s = load_file(&sc, &[]).unwrap().scenario;
        assert_eq!(s.dataset.path(), Some(dir.join("data/t.jsonl").as_path()));
        assert_eq!(
            s.tokenizer.unwrap().source,
            dir.join("data/tok.json").display().to_string()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
