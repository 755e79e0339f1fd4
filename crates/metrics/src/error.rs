use thiserror::Error;

/// Why a measurement could not be decoded or merged.
#[derive(Debug, Error)]
pub enum MetricsError {
    /// A histogram blob was not valid HdrHistogram V2 (+deflate) data.
    #[error("histogram for `{metric}` could not be decoded: {reason}")]
    Decode { metric: String, reason: String },
    /// Two histograms could not be added (incompatible ranges).
    #[error("histogram for `{metric}` could not be merged: {reason}")]
    Merge { metric: String, reason: String },
    /// A metric, counter or outcome name not known to this version.
    #[error("unknown {kind} `{name}`")]
    UnknownName { kind: &'static str, name: String },
    /// Per-address counts that cannot be a worker's own.
    #[error("address counts refused: {0}")]
    Addresses(String),
}
