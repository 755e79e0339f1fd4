//! The coordinator's file model: the scenario and its validation, datasets
//! and prompt construction (their files and tokenizers), the vLLM flags, and
//! the plans a scenario makes for its workers (`sharding`), in the plan
//! crate's terms (`cicada-plan`).

mod abort;
mod backend;
pub mod dataset;
mod dataset_spec;
mod describe;
mod error;
mod hooks;
mod length_spec;
mod load;
mod media_spec;
pub mod overlay;
mod repeats;
mod saturation;
pub mod scenario;
pub mod shape;
pub mod sharding;
mod source;
mod steady;
mod structured;
pub mod tokenizer;
mod validate;
mod validate_lengths;
mod validate_media;
mod validate_models;
mod validate_pool;
mod validate_pooling;
mod validate_shape;
mod validate_structured;
pub mod vllm;
#[cfg(test)]
mod vllm_fixture;
mod workloads;

pub use error::{Problem, ScenarioError};
pub use load::{LoadedScenario, Override, Setting, load_file, load_file_with, parse, parse_with};
pub use scenario::Scenario;
pub use source::SourceMap;
pub use validate_shape::{MAX_STREAMS, peak_streams};

impl Scenario {
    /// Paths in the scenario that point at files, for resolving relative paths.
    pub(crate) fn dataset_paths_mut(&mut self) -> Vec<&mut std::path::PathBuf> {
        let workloads = self
            .workloads
            .iter_mut()
            .filter_map(|w| w.dataset.as_mut())
            .flat_map(|d| d.path_mut());
        self.dataset
            .path_mut()
            .into_iter()
            .chain(workloads)
            .chain(self.target.tls_ca.iter_mut())
            .collect()
    }
}
