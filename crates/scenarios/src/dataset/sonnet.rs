//! The `sonnet` workload (`vllm bench serve --dataset-name sonnet`): an
//! instruction, the poem's first lines as a prefix shared by every prompt,
//! then lines drawn at random (with replacement) up to `input_len`.
//!
//! Line counts come from the average line length: `round((input_len − base) /
//! avg)` lines in all, `max(round((prefix_len − base) / avg), 0)` of them the
//! shared prefix, where `base` is the instruction's length. A drawn prompt is
//! kept only if it has at most `input_len` tokens, and drawing repeats until
//! the pool is full. vLLM measures `base` and prompts after its chat template;
//! cicada sends the raw text (chat APIs wrap it in one user message), so it
//! counts the raw text with the tokenizer's special tokens.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    Build, DatasetError, DatasetReport, PoolEntry, Prompt, count_piece, parallel, tokenizer_error,
};
use crate::scenario::SonnetSpec;

/// The instruction every prompt starts with (vLLM's).
pub(crate) const BASE_PROMPT: &str = "Pick as many lines as you can from these poem lines:\n";

/// RNG stream reserved for the sonnet dataset.
const STREAM: u64 = 4;

/// Drawn prompts tokenised per parallel batch.
const BATCH: usize = 256;

/// The pool: `n` prompts of at most `input_len` tokens.
pub(crate) fn build(
    b: &Build<'_, SonnetSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let tok = b.tokenizer()?;
    let path = b.d.path.as_path();
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| DatasetError::Read {
        path: shown.clone(),
        source,
    })?;
    let lines: Vec<String> = text
        .split_inclusive('\n')
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    if lines.is_empty() {
        return Err(DatasetError::Empty {
            origin: shown,
            reason: "the file has no lines of text".to_string(),
        });
    }
    let counts = parallel::try_map(&lines, |l| count_piece(Some(tok), l))
        .map_err(|e| tokenizer_error(path, e))?;
    let avg = counts.iter().map(|c| f64::from(*c)).sum::<f64>() / lines.len() as f64;
    let base = tok
        .count_with_special(BASE_PROMPT)
        .map_err(|e| tokenizer_error(path, e))?;
    let (input_len, prefix_len) = (b.d.input_len as usize, b.d.prefix_len as usize);
    if input_len <= base {
        return Err(DatasetError::Invalid(format!(
            "dataset.input_len ({input_len}) must exceed the sonnet instruction's {base} tokens"
        )));
    }
    let per_line = avg.max(1.0);
    let num_input = ((input_len - base) as f64 / per_line).round() as usize;
    let num_prefix = ((prefix_len as f64 - base as f64) / per_line)
        .round()
        .max(0.0) as usize;
    let mut prefix = String::from(BASE_PROMPT);
    for l in lines.iter().take(num_prefix) {
        prefix.push_str(l);
    }
    let drawn = num_input.saturating_sub(num_prefix);
    let output = b.d.output_len;
    let mut rng = ChaCha8Rng::seed_from_u64(b.seed);
    rng.set_stream(STREAM);
    let mut report = b.report();
    report.read = lines.len() as u64;
    let want = usize::try_from(b.n).unwrap_or(usize::MAX);
    // enough draws that only an impossible input_len gives up
    let max_draws = want.saturating_mul(50).saturating_add(1000);
    let mut draws = 0usize;
    let mut entries: Vec<PoolEntry> = Vec::with_capacity(want.min(1 << 20));
    b.progress.start("building sonnet prompts", b.n, "prompts");
    while entries.len() < want && draws < max_draws {
        let batch: Vec<String> = (0..BATCH.min(max_draws - draws))
            .map(|_| {
                let mut p = prefix.clone();
                for _ in 0..drawn {
                    p.push_str(&lines[rng.random_range(0..lines.len())]);
                }
                p
            })
            .collect();
        draws += batch.len();
        let counted = parallel::try_map(&batch, |p| tok.count_with_special(p))
            .map_err(|e| tokenizer_error(path, e))?;
        for (p, n) in batch.into_iter().zip(counted) {
            if entries.len() == want {
                break;
            }
            if n > input_len {
                report.drop_for("prompt > input_len tokens");
                continue;
            }
            entries.push(PoolEntry {
                id: entries.len() as u64,
                prompt: Prompt::Text(p.into()),
                input_tokens: u32::try_from(n).unwrap_or(u32::MAX),
                output_tokens: Some(output),
                conversation: None,
                shape: None,
                media: super::Media::default(),
            });
            b.progress.advance(1);
        }
    }
    b.progress.finish();
    if entries.len() < want {
        return Err(DatasetError::Empty {
            origin: shown,
            reason: format!(
                "only {} of {draws} drawn prompts fit in input_len = {input_len} tokens; raise input_len",
                entries.len()
            ),
        });
    }
    report.kept = entries.len() as u64;
    Ok((entries, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;
    use crate::dataset::testutil::{Scratch, tokenizer};

    fn poem() -> String {
        (0..40)
            .map(|i| format!("line {i}: the water was one day for all of us and it was good\n"))
            .collect()
    }

    #[test]
    fn prompts_share_the_prefix_lines_and_fit_the_input_length() {
        let tok = tokenizer();
        let dir = Scratch::new("sonnet");
        let path = dir.file("sonnet.txt", &poem());
        let d = SonnetSpec {
            path: path.clone(),
            input_len: 300,
            output_len: 150,
            prefix_len: 120,
        };
        let b = Build {
            d: &d,
            seed: 3,
            n: 50,
            tokenizer: Some(&tok),
            progress: &Silent,
        };
        let (entries, report) = build(&b).unwrap();
        assert_eq!(entries.len(), 50);
        assert_eq!(report.read, 40);
        let (again, _) = build(&b).unwrap();
        assert_eq!(entries, again);
        for e in &entries {
            let t = e.prompt.text();
            assert!(t.starts_with(&format!("{BASE_PROMPT}line 0: ")), "{t}");
            assert!(
                t.contains("\nline 1: "),
                "the first lines are the shared prefix"
            );
            assert!(e.input_tokens <= 300);
            assert_eq!(e.input_tokens as usize, tok.count_with_special(&t).unwrap());
            assert_eq!(e.output_tokens, Some(150));
        }
        let small = SonnetSpec {
            input_len: 5,
            prefix_len: 0,
            ..d.clone()
        };
        let e = build(&Build { d: &small, ..b }).unwrap_err().to_string();
        assert!(e.contains("must exceed"), "{e}");
        let empty = dir.file("empty.txt", "\n\n");
        let d = SonnetSpec { path: empty, ..d };
        let e = build(&Build { d: &d, ..b }).unwrap_err().to_string();
        assert!(e.contains("no lines"), "{e}");
    }
}
