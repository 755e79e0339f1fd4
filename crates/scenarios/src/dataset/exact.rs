//! Token-exact text: prompts built from token ids, decoded, re-encoded and
//! corrected until the text the server receives encodes to exactly the asked
//! number of tokens (decoding and re-encoding rarely gives back the same ids).

use rand::Rng;

use crate::tokenizer::{Tokenizer, TokenizerError};

/// Correction rounds before giving up on an exact length.
const ROUNDS: usize = 32;

/// The ids prompts may be built from: every token that is not special and
/// decodes on its own to printable text.
pub(crate) struct Vocab<'a> {
    tok: &'a Tokenizer,
    allowed: Vec<u32>,
}

/// Text fitted to a token count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fitted {
    /// The text to append after the prefix.
    pub text: String,
    /// Tokens of prefix + text.
    pub tokens: usize,
    /// `tokens` is the asked count.
    pub exact: bool,
}

fn printable(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c != '\u{FFFD}' && (!c.is_control() || c == '\n' || c == '\t'))
}

impl<'a> Vocab<'a> {
    /// The allowed ids of `tok`.
    pub fn new(tok: &'a Tokenizer) -> Result<Self, TokenizerError> {
        let special = tok.special_ids();
        let allowed: Vec<u32> = (0..tok.vocab_size())
            .filter(|id| special.binary_search(id).is_err())
            .filter(|id| tok.decode(&[*id]).is_ok_and(|s| printable(&s)))
            .collect();
        if allowed.is_empty() {
            return Err(TokenizerError::Use(
                "the tokenizer has no printable tokens to build prompts from".to_string(),
            ));
        }
        Ok(Self { tok, allowed })
    }

    /// Allowed ids in the vocabulary.
    pub fn len(&self) -> usize {
        self.allowed.len()
    }

    /// `n` ids drawn uniformly from the allowed ones.
    pub fn random(&self, rng: &mut impl Rng, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| self.allowed[rng.random_range(0..self.allowed.len())])
            .collect()
    }

    /// `n` consecutive allowed ids starting at `offset` (wrapping), as
    /// `vllm bench serve` builds its random prompts.
    pub fn run(&self, offset: usize, n: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(n);
        self.extend_run(&mut out, offset, n);
        out
    }

    /// [`Vocab::run`] appended to `out`.
    pub fn extend_run(&self, out: &mut Vec<u32>, offset: usize, n: usize) {
        let len = self.allowed.len();
        out.extend((0..n).map(|i| self.allowed[(offset + i) % len]));
    }

    /// Text that, appended to `prefix`, makes the whole encode to exactly
    /// `target` tokens (without special tokens), starting from `ids`.
    ///
    /// Each round decodes the ids, counts `prefix + text`, then truncates or
    /// extends the re-encoded ids by the difference. If no round is exact the
    /// closest text is returned with `exact = false` (a prefix alone longer
    /// than `target` cannot be fixed).
    pub fn fit(
        &self,
        prefix: &str,
        ids: Vec<u32>,
        target: usize,
        rng: &mut impl Rng,
    ) -> Result<Fitted, TokenizerError> {
        let mut ids = ids;
        let mut best: Option<Fitted> = None;
        for _ in 0..ROUNDS {
            let text = self.tok.decode(&ids)?;
            // without a prefix the text's own ids are its count: one encode
            // a round, not two
            let (tokens, reencoded) = if prefix.is_empty() {
                let reencoded = self.tok.encode(&text)?;
                (reencoded.len(), Some(reencoded))
            } else {
                let mut full = String::with_capacity(prefix.len() + text.len());
                full.push_str(prefix);
                full.push_str(&text);
                (self.tok.count(&full)?, None)
            };
            if tokens == target {
                return Ok(Fitted {
                    text,
                    tokens,
                    exact: true,
                });
            }
            let mut next = match reencoded {
                Some(ids) => ids,
                None => self.tok.encode(&text)?,
            };
            if tokens > target {
                let cut = (tokens - target).min(next.len());
                next.truncate(next.len() - cut);
            } else {
                next.extend(self.random(rng, target - tokens));
            }
            let closer = best
                .as_ref()
                .is_none_or(|b| tokens.abs_diff(target) < b.tokens.abs_diff(target));
            if closer {
                best = Some(Fitted {
                    text,
                    tokens,
                    exact: false,
                });
            }
            if next == ids {
                break;
            }
            ids = next;
        }
        best.ok_or_else(|| TokenizerError::Use("no text could be fitted".to_string()))
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::dataset::testutil::tokenizer;

    #[test]
    fn fitted_text_reencodes_to_the_target_after_a_fixed_prefix() {
        let tok = tokenizer();
        let v = Vocab::new(&tok).unwrap();
        assert!(v.len() > 300);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let prefix = v.fit("", v.random(&mut rng, 40), 40, &mut rng).unwrap();
        assert!(prefix.exact);
        assert_eq!(tok.count(&prefix.text).unwrap(), 40);
        for target in [41usize, 42, 60, 300, 1000] {
            let ids = v.run(target * 31, target - 40);
            let f = v.fit(&prefix.text, ids, target, &mut rng).unwrap();
            assert!(f.exact, "target {target}");
            let full = format!("{}{}", prefix.text, f.text);
            assert_eq!(tok.count(&full).unwrap(), target);
        }
        let too_short = v.fit(&prefix.text, Vec::new(), 10, &mut rng).unwrap();
        assert!(!too_short.exact);
    }
}
