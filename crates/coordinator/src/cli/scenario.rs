//! The scenario a `coord` command line describes: a scenario file (or none),
//! `vllm bench serve`'s flags over it, the gate and goodput flags, then every
//! `--set` over all of them.

use std::path::Path;

use cicada_scenarios::{LoadedScenario, Override, load_file};

use super::RunArgs;
use crate::error::RunError;

/// The scenario of `coord run`: file, flags, then `--set`.
pub fn of_run(args: &RunArgs) -> Result<LoadedScenario, RunError> {
    let mut sets = args.sets.clone();
    sets.extend(goodput_overrides(&args.goodput)?);
    sets.extend(gate_overrides(args));
    super::vllm::load_with_flags(args.scenario.as_deref(), &args.vllm, &sets)
}

/// Turn vLLM-style `--goodput ttft:500 tpot:50` into `slo.*_ms` overrides.
pub fn goodput_overrides(specs: &[String]) -> Result<Vec<String>, RunError> {
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
            Ok(format!("slo.{key}_ms={ms}"))
        })
        .collect()
}

/// Turn the gate flags into `output.max_failure_ratio` / `slo.min_attainment` overrides.
pub fn gate_overrides(args: &RunArgs) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = args.max_failure_ratio {
        out.push(format!("output.max_failure_ratio={r:?}"));
    }
    if let Some(a) = args.min_slo_attainment {
        out.push(format!("slo.min_attainment={a:?}"));
    }
    out
}

/// Read a scenario with `--set` overrides.
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
    fn goodput_flags_become_slo_overrides() {
        let o = goodput_overrides(&["ttft:500".into(), "TPOT:50".into()]).unwrap();
        assert_eq!(o, vec!["slo.ttft_ms=500", "slo.tpot_ms=50"]);
        assert!(goodput_overrides(&["ttft=5".into()]).is_err());
        assert!(goodput_overrides(&["foo:5".into()]).is_err());
        assert!(goodput_overrides(&["ttft:fast".into()]).is_err());
    }
}
