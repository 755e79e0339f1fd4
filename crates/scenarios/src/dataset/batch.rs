//! Pooling batches: a pooling backend's request carries several texts (an
//! embeddings `input` list), so the dataset's prompts are grouped, in pool
//! order, into entries of `[pooling]`'s batch sizes (fixed, or drawn
//! uniformly from the seed).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{PoolEntry, Prompt};
use crate::scenario::Pooling;

/// Salt of the batch-size draws, apart from the dataset's own draws.
const SIZE_SALT: u64 = 0x706f_6f6c_696e_6701;

/// The items of each request in turn: `[pooling]`'s batch size, fixed, or
/// drawn uniformly up to `batch_size_max` from `seed ^ salt` (each kind of
/// pool salts its own draws, apart from the dataset's).
pub(super) fn size_draws(p: &Pooling, seed: u64, salt: u64) -> impl FnMut() -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ salt);
    let (least, most) = (p.batch_size.max(1), p.most().max(1));
    move || {
        let size = if most > least {
            rng.random_range(least..=most)
        } else {
            least
        };
        size as usize
    }
}

/// `n` entries, each the next batch of the `texts` prompts' texts (taken in
/// order, wrapping when the source holds fewer), its input tokens their sum.
pub(super) fn group(p: &Pooling, seed: u64, texts: Vec<PoolEntry>, n: u64) -> Vec<PoolEntry> {
    if texts.is_empty() {
        return Vec::new();
    }
    let mut size = size_draws(p, seed, SIZE_SALT);
    let mut next = texts
        .iter()
        .map(|e| (e.prompt.text(), e.input_tokens))
        .cycle();
    (0..n)
        .map(|id| {
            let size = size();
            let mut batch = Vec::with_capacity(size);
            let mut tokens = 0u32;
            for (text, t) in next.by_ref().take(size) {
                batch.push(text.into_owned());
                tokens = tokens.saturating_add(t);
            }
            PoolEntry {
                id,
                prompt: Prompt::Batch(batch),
                input_tokens: tokens,
                output_tokens: None,
                conversation: None,
                shape: None,
                media: Default::default(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(n: u64) -> Vec<PoolEntry> {
        (0..n)
            .map(|id| PoolEntry {
                id,
                prompt: Prompt::Text(format!("w{id} x").into()),
                input_tokens: 2,
                output_tokens: Some(5),
                conversation: None,
                shape: None,
                media: Default::default(),
            })
            .collect()
    }

    /// Fixed sizes take the texts in order and wrap; tokens are summed.
    #[test]
    fn fixed_batches_take_texts_in_order() {
        let p = Pooling {
            batch_size: 3,
            ..Pooling::default()
        };
        let out = group(&p, 1, texts(4), 3);
        assert_eq!(out.len(), 3);
        assert_eq!(
            out[1].prompt,
            Prompt::Batch(vec!["w3 x".into(), "w0 x".into(), "w1 x".into()])
        );
        assert!(
            out.iter()
                .all(|e| e.input_tokens == 6 && e.output_tokens.is_none())
        );
        assert_eq!(out[2].id, 2);
    }

    /// Drawn sizes stay in range, reach both ends and repeat with the seed.
    #[test]
    fn drawn_sizes_are_seeded_and_in_range() {
        let p = Pooling {
            batch_size: 2,
            batch_size_max: Some(5),
            ..Pooling::default()
        };
        let sizes = |seed| -> Vec<u32> {
            group(&p, seed, texts(10), 200)
                .iter()
                .map(|e| e.prompt.items())
                .collect()
        };
        let a = sizes(7);
        assert_eq!(a, sizes(7));
        assert_ne!(a, sizes(8));
        assert!(a.iter().all(|s| (2..=5).contains(s)));
        assert!(a.contains(&2) && a.contains(&5));
    }
}
