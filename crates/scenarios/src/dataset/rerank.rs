//! Rerank requests: a query and the documents scored against it. From a
//! text workload (random, ShareGPT, ...) each entry takes the next text as
//! its query and the following ones as its documents, `[pooling]`'s batch
//! size of them (fixed, or drawn uniformly from the seed); JSONL lines of
//! `{"query": ..., "documents": [...]}` are entries as they are. Built once
//! by the coordinator, so the same for any worker count.

use super::{DatasetError, PoolEntry, Prompt};
use crate::scenario::Pooling;

/// Salt of the document-count draws, apart from the dataset's own draws
/// and the embeddings batch sizes'.
const SIZE_SALT: u64 = 0x7265_7261_6e6b_0001;

/// Input tokens of a rerank request, as a cross-encoder sees it: the query
/// beside each document, so the query counts once per document.
pub(crate) fn pair_tokens(query: u32, documents: impl IntoIterator<Item = u32>) -> u32 {
    documents
        .into_iter()
        .fold(0u32, |sum, d| sum.saturating_add(query).saturating_add(d))
}

/// Texts a rerank pool of `n` requests draws from: a query and at most
/// `most` documents each.
pub(crate) fn texts_needed(n: u64, most: u32) -> u64 {
    n.saturating_mul(u64::from(most.max(1)) + 1)
}

/// `n` rerank entries from the workload's `entries`: whole rerank lines kept
/// (in pool order, wrapping), plain texts grouped into a query and
/// documents. A pool mixing the two is refused.
pub(super) fn group(
    p: &Pooling,
    seed: u64,
    entries: Vec<PoolEntry>,
    n: u64,
) -> Result<Vec<PoolEntry>, DatasetError> {
    let ready = entries
        .iter()
        .filter(|e| matches!(e.prompt, Prompt::Rerank { .. }))
        .count();
    if ready == entries.len() {
        return Ok(entries
            .into_iter()
            .cycle()
            .take(usize::try_from(n).unwrap_or(usize::MAX))
            .enumerate()
            .map(|(id, e)| PoolEntry { id: id as u64, ..e })
            .collect());
    }
    if ready > 0 {
        return Err(DatasetError::Invalid(format!(
            "{ready} of the dataset's {} records are rerank lines (\"query\" and \"documents\"), the others are not: give one kind",
            entries.len()
        )));
    }
    Ok(from_texts(p, seed, &entries, n))
}

/// `n` entries, each the next text as its query and the following
/// `size` texts as its documents (texts taken in order, wrapping).
fn from_texts(p: &Pooling, seed: u64, texts: &[PoolEntry], n: u64) -> Vec<PoolEntry> {
    if texts.is_empty() {
        return Vec::new();
    }
    let mut size = super::batch::size_draws(p, seed, SIZE_SALT);
    let mut next = texts
        .iter()
        .map(|e| (e.prompt.text(), e.input_tokens))
        .cycle();
    (0..n)
        .map(|id| {
            let size = size();
            let (query, query_tokens) = next
                .next()
                .map_or((String::new(), 0), |(t, n)| (t.into_owned(), n));
            let mut documents = Vec::with_capacity(size);
            let mut doc_tokens = Vec::with_capacity(size);
            for (text, t) in next.by_ref().take(size) {
                documents.push(text.into_owned());
                doc_tokens.push(t);
            }
            PoolEntry {
                id,
                input_tokens: pair_tokens(query_tokens, doc_tokens),
                prompt: Prompt::Rerank { query, documents },
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

    fn text(id: u64, tokens: u32) -> PoolEntry {
        PoolEntry {
            id,
            prompt: Prompt::Text(format!("t{id}").into()),
            input_tokens: tokens,
            output_tokens: Some(5),
            conversation: None,
            shape: None,
            media: Default::default(),
        }
    }

    /// A query, then its documents, texts in order and wrapping; the
    /// query's tokens count once per document.
    #[test]
    fn texts_become_a_query_and_documents() {
        let p = Pooling {
            batch_size: 2,
            ..Pooling::default()
        };
        let texts: Vec<PoolEntry> = (0..4).map(|i| text(i, 1 + i as u32)).collect();
        let out = group(&p, 1, texts, 2).unwrap();
        assert_eq!(
            out[1].prompt,
            Prompt::Rerank {
                query: "t3".into(),
                documents: vec!["t0".into(), "t1".into()],
            }
        );
        // query t0 (1 token) beside t1 (2) and t2 (3): 1+2 + 1+3
        assert_eq!(out[0].input_tokens, 7);
        assert_eq!(out[1].input_tokens, 4 + 1 + 4 + 2);
        assert!(out.iter().all(|e| e.prompt.items() == 2));
        assert_eq!(out[1].id, 1);
    }

    /// Drawn document counts stay in range, reach both ends, repeat with the seed.
    #[test]
    fn drawn_document_counts_are_seeded_and_in_range() {
        let p = Pooling {
            batch_size: 1,
            batch_size_max: Some(4),
            ..Pooling::default()
        };
        let texts: Vec<PoolEntry> = (0..10).map(|i| text(i, 2)).collect();
        let sizes = |seed| -> Vec<u32> {
            group(&p, seed, texts.clone(), 200)
                .unwrap()
                .iter()
                .map(|e| e.prompt.items())
                .collect()
        };
        let a = sizes(7);
        assert_eq!(a, sizes(7));
        assert_ne!(a, sizes(8));
        assert!(a.iter().all(|s| (1..=4).contains(s)));
        assert!(a.contains(&1) && a.contains(&4));
    }

    /// Rerank lines are kept whole and wrap; a mixed pool is refused.
    #[test]
    fn rerank_lines_are_kept_and_mixing_is_refused() {
        let line = |q: &str| PoolEntry {
            prompt: Prompt::Rerank {
                query: q.into(),
                documents: vec!["d".into()],
            },
            ..text(9, 3)
        };
        let out = group(&Pooling::default(), 1, vec![line("a"), line("b")], 3).unwrap();
        let ids: Vec<u64> = out.iter().map(|e| e.id).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(out[2].prompt, line("a").prompt);
        let err = group(&Pooling::default(), 1, vec![line("a"), text(1, 1)], 3).unwrap_err();
        assert!(err.to_string().contains("1 of the dataset's 2"), "{err}");
    }
}
