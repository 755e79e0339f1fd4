//! Loading the HF tokenizer a scenario names: a `tokenizer.json` file, a model
//! directory holding one, or a hub id found in the local Hugging Face cache.
//! Nothing is downloaded; a missing tokenizer is an error that says where we looked.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

/// Why a tokenizer could not be loaded or used.
#[derive(Debug, Error)]
pub enum TokenizerError {
    /// Not found anywhere we looked.
    #[error(
        "tokenizer \"{source_name}\" not found: it is not a tokenizer.json file, not a directory \
         holding tokenizer.json, and not in the Hugging Face cache (looked in {looked}). \
         Download it first, e.g. `huggingface-cli download {source_name} tokenizer.json`, \
         or point tokenizer.source at a local tokenizer.json"
    )]
    NotFound { source_name: String, looked: String },
    /// The file exists but could not be read or parsed.
    #[error("tokenizer {path}: {reason}")]
    Invalid { path: String, reason: String },
    /// Encoding or decoding failed.
    #[error("tokenizer: {0}")]
    Use(String),
}

/// A loaded tokenizer plus the JSON it came from (shipped to workers that count tokens).
#[derive(Clone)]
pub struct Tokenizer {
    inner: Arc<tokenizers::Tokenizer>,
    json: Arc<str>,
    /// What the scenario named.
    pub source: String,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("source", &self.source)
            .finish()
    }
}

/// Where a hub id would sit in the cache, for the error message.
fn cache_dir_for(id: &str) -> PathBuf {
    let cache = hf_hub::Cache::from_env();
    cache
        .path()
        .join(format!("models--{}", id.replace('/', "--")))
}

/// Resolve a tokenizer source to a `tokenizer.json` path.
pub fn resolve(source: &str) -> Result<PathBuf, TokenizerError> {
    let p = Path::new(source);
    if p.is_file() {
        return Ok(p.to_path_buf());
    }
    if p.is_dir() {
        let f = p.join("tokenizer.json");
        if f.is_file() {
            return Ok(f);
        }
        return Err(TokenizerError::NotFound {
            source_name: source.to_string(),
            looked: f.display().to_string(),
        });
    }
    let cache = hf_hub::Cache::from_env();
    if let Some(f) = cache.model(source.to_string()).get("tokenizer.json") {
        return Ok(f);
    }
    Err(TokenizerError::NotFound {
        source_name: source.to_string(),
        looked: cache_dir_for(source).display().to_string(),
    })
}

impl Tokenizer {
    /// Load from a scenario's `tokenizer.source`.
    pub fn load(source: &str) -> Result<Self, TokenizerError> {
        let path = resolve(source)?;
        let json = std::fs::read_to_string(&path).map_err(|e| TokenizerError::Invalid {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let mut t = Self::from_json(&json).map_err(|e| TokenizerError::Invalid {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        t.source = source.to_string();
        Ok(t)
    }

    /// Build from `tokenizer.json` text (as shipped in a plan).
    pub fn from_json(json: &str) -> Result<Self, TokenizerError> {
        let inner = tokenizers::Tokenizer::from_bytes(json.as_bytes())
            .map_err(|e| TokenizerError::Use(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(inner),
            json: json.into(),
            source: String::new(),
        })
    }

    /// The `tokenizer.json` text.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Token ids of `text` without special tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| TokenizerError::Use(e.to_string()))
    }

    /// Number of tokens in `text` without special tokens.
    pub fn count(&self, text: &str) -> Result<usize, TokenizerError> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.len())
            .map_err(|e| TokenizerError::Use(e.to_string()))
    }

    /// Number of tokens with the tokenizer's special tokens (BOS), as vLLM counts ShareGPT prompts.
    pub fn count_with_special(&self, text: &str) -> Result<usize, TokenizerError> {
        self.inner
            .encode_fast(text, true)
            .map(|e| e.len())
            .map_err(|e| TokenizerError::Use(e.to_string()))
    }

    /// Special tokens the tokenizer adds to a single sequence (a BOS, usually 0 or 1).
    pub fn num_special_tokens(&self) -> usize {
        use tokenizers::PostProcessor as _;
        self.inner
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(false))
    }

    /// Text of token ids.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner
            .decode(ids, false)
            .map_err(|e| TokenizerError::Use(e.to_string()))
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> u32 {
        self.inner.get_vocab_size(true) as u32
    }

    /// Vocabulary size without added tokens (transformers' `vocab_size`,
    /// which `vllm bench serve` draws token ids below).
    pub fn base_vocab_size(&self) -> u32 {
        self.inner.get_vocab_size(false) as u32
    }

    /// The id of token `token`, added tokens included.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Whether the model is BPE (transformers skips its clean-up of
    /// decoded text for BPE models).
    pub fn is_bpe(&self) -> bool {
        matches!(self.inner.get_model(), tokenizers::ModelWrapper::BPE(_))
    }

    /// Ids of special (added, special) tokens, which prompts must not contain.
    pub fn special_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .inner
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, t)| t.special)
            .map(|(id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// Train a small byte-level BPE tokenizer on `corpus`: a real HF tokenizer for
/// tests and offline examples, built without any download.
pub fn train_bpe(corpus: &[String], vocab_size: usize) -> Result<Tokenizer, TokenizerError> {
    use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
    use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::{
        AddedToken, DecoderWrapper, NormalizerWrapper, PostProcessorWrapper, PreTokenizerWrapper,
        TokenizerBuilder,
    };

    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(1)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .special_tokens(vec![
            AddedToken::from("<s>", true),
            AddedToken::from("</s>", true),
        ])
        .build();
    let mut t = TokenizerBuilder::<
        BPE,
        NormalizerWrapper,
        PreTokenizerWrapper,
        PostProcessorWrapper,
        DecoderWrapper,
    >::new()
    .with_model(BPE::default())
    .with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false).into()))
    .with_decoder(Some(ByteLevelDecoder::default().into()))
    .build()
    .map_err(|e| TokenizerError::Use(e.to_string()))?;
    t.train(&mut trainer, corpus.iter())
        .map_err(|e| TokenizerError::Use(e.to_string()))?;
    let tokenizer: tokenizers::Tokenizer = t.into();
    let json = tokenizer
        .to_string(false)
        .map_err(|e| TokenizerError::Use(e.to_string()))?;
    let mut out = Tokenizer::from_json(&json)?;
    out.source = "trained-bpe".to_string();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<String> {
        (0..400)
            .map(|i| {
                format!(
                    "the quick brown fox {i} jumps over the lazy dog number {}",
                    i * 7
                )
            })
            .collect()
    }

    #[test]
    fn trained_tokenizer_round_trips_and_ships_as_json() {
        let t = train_bpe(&corpus(), 600).unwrap();
        let ids = t.encode("the lazy fox jumps").unwrap();
        assert!(!ids.is_empty());
        assert_eq!(t.decode(&ids).unwrap(), "the lazy fox jumps");
        assert_eq!(t.count("the lazy fox jumps").unwrap(), ids.len());
        let shipped = Tokenizer::from_json(t.json()).unwrap();
        assert_eq!(
            shipped.encode("over the dog").unwrap(),
            t.encode("over the dog").unwrap()
        );
        assert_eq!(t.special_ids().len(), 2);
        assert!(t.vocab_size() > 256);
    }

    #[test]
    fn sources_resolve_from_file_dir_and_cache_or_say_where_they_looked() {
        let dir = std::env::temp_dir().join(format!("cicada-tok-{}", std::process::id()));
        let t = train_bpe(&corpus(), 400).unwrap();
        // a model directory
        std::fs::create_dir_all(dir.join("model")).unwrap();
        std::fs::write(dir.join("model/tokenizer.json"), t.json()).unwrap();
        assert!(Tokenizer::load(dir.join("model").to_str().unwrap()).is_ok());
        assert!(Tokenizer::load(dir.join("model/tokenizer.json").to_str().unwrap()).is_ok());
        // an HF cache laid out as huggingface_hub writes it
        let hub = dir.join("hf/hub/models--acme--tiny");
        std::fs::create_dir_all(hub.join("refs")).unwrap();
        std::fs::create_dir_all(hub.join("snapshots/abc123")).unwrap();
        std::fs::write(hub.join("refs/main"), "abc123").unwrap();
        std::fs::write(hub.join("snapshots/abc123/tokenizer.json"), t.json()).unwrap();
        // SAFETY-free: tests in this module do not read HF_HOME concurrently
        let found = {
            let cache = hf_hub::Cache::new(dir.join("hf/hub"));
            cache.model("acme/tiny".to_string()).get("tokenizer.json")
        };
        assert!(found.is_some());
        let err = Tokenizer::load("acme/does-not-exist")
            .unwrap_err()
            .to_string();
        assert!(err.contains("models--acme--does-not-exist"), "{err}");
        std::fs::write(dir.join("broken.json"), "{").unwrap();
        let err = Tokenizer::load(dir.join("broken.json").to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("broken.json"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
