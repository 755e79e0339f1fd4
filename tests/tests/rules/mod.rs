//! The house rules' checks, each a function of source text so that a test
//! can run it on a made-up source that breaks the rule.

pub mod deps;
pub mod length;
pub mod modules;
pub mod outputs;
pub mod source;
pub mod wire;
