//! The tokenizer a plan ships (`tokenizer.json` text), read once per step:
//! it counts output tokens when the server reports no usage, and checks
//! the usage it reports on sampled requests. Only counting: where a
//! tokenizer is found and how prompts are built is the coordinator's.

use thiserror::Error;

/// Why the shipped tokenizer cannot be used.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct TokenizerError(String);

/// A tokenizer that counts tokens the way the coordinator's does (no special tokens).
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Read `tokenizer.json` text, as a plan carries it.
    pub fn from_json(json: &str) -> Result<Self, TokenizerError> {
        tokenizers::Tokenizer::from_bytes(json.as_bytes())
            .map(|inner| Self { inner })
            .map_err(|e| TokenizerError(e.to_string()))
    }

    /// Number of tokens in `text` without special tokens.
    pub fn count(&self, text: &str) -> Result<usize, TokenizerError> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.len())
            .map_err(|e| TokenizerError(e.to_string()))
    }
}
