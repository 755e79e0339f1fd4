//! The scenario a `cicada` command line describes: a scenario file (or none),
//! `vllm bench serve`'s flags over it (a typed overlay,
//! `cicada_scenarios::vllm`), then every `--set`, `--goodput` and the gate
//! flags over all of them.

use std::path::Path;

use cicada_scenarios::{LoadedScenario, Override, Setting, load_file};

use super::RunArgs;
use crate::error::RunError;

/// The scenario of `cicada run`.
pub fn of_run(args: &RunArgs) -> Result<LoadedScenario, RunError> {
    of_run_with(args, &[])
}

/// The scenario of `cicada run` with typed `extra` settings after its
/// `--set`s (the web UI's start form).
pub fn of_run_with(args: &RunArgs, extra: &[Setting]) -> Result<LoadedScenario, RunError> {
    Ok(cicada_scenarios::vllm::describe_with(
        args.scenario.as_deref(),
        &args.vllm,
        &args.sets,
        extra,
        &args.goodput,
        (args.max_failure_ratio, args.min_slo_attainment),
    )?)
}

/// Read a scenario with `--set` overrides (`cicada validate`).
pub fn load(path: &Path, sets: &[String]) -> Result<LoadedScenario, RunError> {
    let overrides = sets
        .iter()
        .map(|s| s.parse::<Override>())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(load_file(path, &overrides)?)
}
