//! The scenario a `cicada` command line describes: a scenario file (or none),
//! `vllm bench serve`'s flags over it, the gate and goodput flags, then every
//! `--set` over all of them.

use std::path::Path;

use cicada_scenarios::{LoadedScenario, Override, Setting, load_file, load_file_with, parse_with};

use super::RunArgs;
use super::vllm::{self, VllmFlags};
use crate::error::RunError;

/// The scenario of `cicada run`.
pub fn of_run(args: &RunArgs) -> Result<LoadedScenario, RunError> {
    describe(
        args.scenario.as_deref(),
        &args.vllm,
        &args.sets,
        &args.goodput,
        (args.max_failure_ratio, args.min_slo_attainment),
    )
}

/// The scenario from an optional file, then (each over the ones before)
/// vLLM's flags, the `--set` overrides, `--goodput` and the gate flags
/// (`--max-failure-ratio`, `--min-slo-attainment`).
pub fn describe(
    file: Option<&Path>,
    flags: &VllmFlags,
    sets: &[String],
    goodput: &[String],
    (max_failure_ratio, min_attainment): (Option<f64>, Option<f64>),
) -> Result<LoadedScenario, RunError> {
    let goodput = goodput_settings(goodput)?;
    let mut settings = vllm::settings(flags, file.is_some())?;
    for s in sets {
        settings.push(s.parse::<Override>()?.setting());
    }
    settings.extend(goodput);
    let gates = [
        (
            "max-failure-ratio",
            "output.max_failure_ratio",
            max_failure_ratio,
        ),
        ("min-slo-attainment", "slo.min_attainment", min_attainment),
    ];
    for (flag, key, v) in gates {
        if let Some(v) = v {
            settings.push(flag_setting(flag, key, toml::Value::Float(v)));
        }
    }
    Ok(match file {
        Some(path) => load_file_with(path, &settings)?,
        None => LoadedScenario {
            scenario: parse_with("", "command line", &settings)?,
            origin: "command line".to_string(),
        },
    })
}

fn flag_setting(flag: &str, key: &str, value: toml::Value) -> Setting {
    Setting {
        key: key.to_string(),
        value,
        source: format!("--{flag}"),
        origin: format!("command line (--{flag})"),
    }
}

/// vLLM-style `--goodput ttft:500 tpot:50` as `slo.*_ms` settings.
pub fn goodput_settings(specs: &[String]) -> Result<Vec<Setting>, RunError> {
    specs
        .iter()
        .map(|spec| {
            let (key, value) = spec.split_once(':').ok_or_else(|| {
                RunError::BadInput(format!(
                    "--goodput {spec}: expected METRIC:MILLISECONDS, e.g. ttft:500"
                ))
            })?;
            let key = key.trim().to_ascii_lowercase();
            if !["ttft", "tpot", "e2el", "itl"].contains(&key.as_str()) {
                return Err(RunError::BadInput(format!(
                    "--goodput {spec}: unknown metric \"{key}\"; expected ttft, tpot, e2el or itl"
                )));
            }
            let ms: f64 = value.trim().parse().map_err(|_| {
                RunError::BadInput(format!(
                    "--goodput {spec}: \"{value}\" is not a number of milliseconds"
                ))
            })?;
            Ok(flag_setting(
                "goodput",
                &format!("slo.{key}_ms"),
                toml::Value::Float(ms),
            ))
        })
        .collect()
}

/// Read a scenario with `--set` overrides (`cicada validate`).
pub fn load(path: &Path, sets: &[String]) -> Result<LoadedScenario, RunError> {
    let overrides = sets
        .iter()
        .map(|s| s.parse::<Override>())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(load_file(path, &overrides)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_flags_become_slo_settings() {
        let o = goodput_settings(&["ttft:500".into(), "TPOT:50".into()]).unwrap();
        let keys: Vec<(&str, f64)> = o
            .iter()
            .map(|s| (s.key.as_str(), s.value.as_float().unwrap()))
            .collect();
        assert_eq!(keys, [("slo.ttft_ms", 500.0), ("slo.tpot_ms", 50.0)]);
        assert_eq!(o[0].origin, "command line (--goodput)");
        assert!(goodput_settings(&["ttft=5".into()]).is_err());
        assert!(goodput_settings(&["foo:5".into()]).is_err());
        assert!(goodput_settings(&["ttft:fast".into()]).is_err());
    }
}
