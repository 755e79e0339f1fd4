//! `cicada report`: result files read back (cicada's own and `vllm bench
//! serve --save-result` files) and shown side by side as a table, merged
//! into one row (histograms re-merged exactly), or drawn as comparison
//! curves on an HTML page (`--html`).
//!
//! `cicada compare A B` weighs two sides (single runs or repeated runs)
//! figure by figure, with confidence intervals and significance.
//!
//! It only reads: the result model it reads is `cicada_results::document`,
//! written by the writers in `cicada-results`; nothing here runs a load.

pub mod cli;
pub mod compare;
pub mod curves;
pub mod error;
pub mod merge;
pub mod read;
pub mod repeats;
pub mod stats;
pub mod table;
