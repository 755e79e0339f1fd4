//! The `multi_turn` workload: synthetic multi-turn sessions, no file.
//!
//! Session `i` is drawn from a generator seeded by the seed and `i` alone:
//! its number of turns, each turn's user message length (the first turn's
//! from `input_len`, the later ones' from `per_turn_input_len`), each turn's
//! output length and, when a range is given, each pause before a turn. So
//! the pool, and what the server receives, does not depend on the pool's
//! size or on how many workers send it. The worker sends each turn with the
//! whole history and the model's real answers (the `conversations`
//! executor), so the server's prefix cache sees a growing shared prefix.
//!
//! Without a tokenizer a message is common one-token words (the built-in
//! mock counts them exactly); with one it is fitted to exactly the drawn
//! number of tokens, counted without special tokens (the chat template adds
//! its own around it).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exact::Vocab;
use super::lengths::Drawer;
use super::select::mix;
use super::words::WORDS;
use super::{
    Build, ChatMessage, Conversation, DatasetError, DatasetReport, PoolEntry, Prompt, Turn,
    parallel,
};
use crate::length_spec::Length;
use crate::scenario::MultiTurnSpec;

/// RNG stream reserved for multi-turn sessions.
const STREAM: u64 = 11;

/// A length ready to draw: a plain number is exact (no range ratio).
pub(super) enum Len {
    Fixed(u32),
    Drawn(Drawer),
}

impl Len {
    pub(super) fn new(l: &Length, key: &str) -> Result<Len, DatasetError> {
        Ok(match l {
            Length::Fixed(n) => Len::Fixed((*n).max(1)),
            Length::Drawn(d) => Len::Drawn(Drawer::new(d, key)?),
        })
    }

    pub(super) fn draw(&self, rng: &mut ChaCha8Rng) -> u32 {
        match self {
            Len::Fixed(n) => *n,
            Len::Drawn(d) => d.draw(rng).max(1),
        }
    }
}

/// One session's turns as drawn, before their text.
struct Drawn {
    id: u64,
    /// (user message tokens, output tokens, pause before the turn in ms)
    turns: Vec<(u32, u32, Option<u64>)>,
}

/// Session `id`'s draws: they depend on the seed and `id` only.
fn draw_session(d: &MultiTurnSpec, lens: &[Len; 3], seed: u64, id: u64) -> Drawn {
    let mut rng = session_rng(seed, id);
    let (lo, hi) = d.turn_range();
    let n = rng.random_range(lo.max(1)..=hi.max(lo).max(1));
    let think = d.think_time_max.map(|max| {
        let lo = d.think_time.get().as_millis() as u64;
        (lo, (max.get().as_millis() as u64).max(lo))
    });
    let turns = (0..n)
        .map(|k| {
            let input = lens[usize::from(k > 0)].draw(&mut rng);
            let output = lens[2].draw(&mut rng);
            let pause = think
                .filter(|_| k > 0)
                .map(|(lo, hi)| rng.random_range(lo..=hi));
            (input, output, pause)
        })
        .collect();
    Drawn { id, turns }
}

pub(super) fn session_rng(seed: u64, id: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(mix(seed ^ mix(id)));
    r.set_stream(STREAM);
    r
}

/// `n` one-token words.
pub(super) fn words(rng: &mut ChaCha8Rng, n: u32) -> String {
    let mut out = String::new();
    for _ in 0..n {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    out
}

/// The pool: one session per entry.
pub(crate) fn build(
    b: &Build<'_, MultiTurnSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let d = b.d;
    let first = Len::new(&d.input_len, "input_len")?;
    let later = match &d.per_turn_input_len {
        Some(l) => Len::new(l, "per_turn_input_len")?,
        None => Len::new(&d.input_len, "input_len")?,
    };
    let lens = [first, later, Len::new(&d.output_len, "output_len")?];
    let ids: Vec<u64> = (0..b.n).collect();
    let drawn = parallel::map(&ids, |id| draw_session(d, &lens, b.seed, *id));
    let vocab = match b.tokenizer {
        Some(t) => Some(Vocab::new(t).map_err(tokenizer_error)?),
        None => None,
    };
    b.progress
        .start("building multi-turn sessions", b.n, "sessions");
    let entries = parallel::try_map(&drawn, |s| {
        let e = entry(s, b.seed, vocab.as_ref());
        b.progress.advance(1);
        e
    })
    .map_err(tokenizer_error)?;
    b.progress.finish();
    let mut report = b.report();
    report.read = b.n;
    report.kept = b.n;
    report.inexact = entries.iter().map(|(_, inexact)| inexact).sum();
    Ok((entries.into_iter().map(|(e, _)| e).collect(), report))
}

pub(super) fn tokenizer_error(e: crate::tokenizer::TokenizerError) -> DatasetError {
    DatasetError::Tokenizer {
        what: "multi-turn sessions".to_string(),
        source: e,
    }
}

/// Session `s` as a pool entry (and how many of its messages are not their
/// drawn length): the texts come from the session's own text stream.
fn entry(
    s: &Drawn,
    seed: u64,
    vocab: Option<&Vocab<'_>>,
) -> Result<(PoolEntry, u64), crate::tokenizer::TokenizerError> {
    let mut rng = session_rng(seed, s.id);
    rng.set_stream(STREAM + 1);
    let mut inexact = 0;
    let mut turns = Vec::with_capacity(s.turns.len());
    for (input, output, pause) in &s.turns {
        let (user, tokens) = match vocab {
            None => (words(&mut rng, *input), *input),
            Some(v) => {
                let want = *input as usize;
                let f = v.fit("", v.random(&mut rng, want), want, &mut rng)?;
                inexact += u64::from(!f.exact);
                (f.text, u32::try_from(f.tokens).unwrap_or(u32::MAX))
            }
        };
        turns.push(Turn {
            think_ms: *pause,
            ..Turn::chat(user, tokens, Some(*output))
        });
    }
    let first = &turns[0];
    let entry = PoolEntry {
        id: s.id,
        prompt: Prompt::Chat(vec![ChatMessage {
            role: "user".into(),
            content: first.user.clone(),
        }]),
        input_tokens: first.input_tokens,
        output_tokens: first.output_tokens,
        conversation: Some(Conversation {
            system: None,
            system_tokens: 0,
            turns,
        }),
        shape: None,
        media: super::Media::default(),
    };
    Ok((entry, inexact))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;
    use crate::dataset::testutil::tokenizer;
    use crate::tokenizer::Tokenizer;
    use cicada_plan::units::Span;

    fn build_with(d: &MultiTurnSpec, seed: u64, n: u64, tok: Option<&Tokenizer>) -> Vec<PoolEntry> {
        let b = Build {
            d,
            seed,
            n,
            tokenizer: tok,
            progress: &Silent,
        };
        let (entries, report) = build(&b).unwrap();
        assert_eq!((report.read, report.kept, report.inexact), (n, n, 0));
        entries
    }

    fn turns(e: &PoolEntry) -> &[Turn] {
        &e.conversation.as_ref().unwrap().turns
    }

    #[test]
    fn sessions_follow_the_knobs_and_depend_on_seed_and_index_only() {
        let d = MultiTurnSpec {
            turns: 3,
            min_turns: Some(2),
            max_turns: Some(6),
            input_len: 40.into(),
            per_turn_input_len: Some(7.into()),
            output_len: 5.into(),
            think_time: Span::millis(10),
            think_time_max: Some(Span::millis(90)),
        };
        let a = build_with(&d, 5, 200, None);
        let mut counts = std::collections::BTreeSet::new();
        for e in &a {
            let t = turns(e);
            counts.insert(t.len());
            assert!((2..=6).contains(&t.len()));
            assert_eq!(t[0].input_tokens, 40);
            assert_eq!(t[0].user.split(' ').count(), 40);
            assert_eq!(t[0].think_ms, None, "no pause before the first turn");
            for x in &t[1..] {
                assert_eq!((x.input_tokens, x.user.split(' ').count()), (7, 7));
                assert!((10..=90).contains(&x.think_ms.unwrap()));
            }
            assert!(t.iter().all(|x| x.output_tokens == Some(5)));
            assert_eq!(e.input_tokens, 40);
        }
        assert_eq!(
            counts.len(),
            5,
            "every count in [2, 6] is drawn: {counts:?}"
        );
        // a smaller pool is a prefix of a larger one; another seed differs
        assert_eq!(build_with(&d, 5, 50, None)[..], a[..50]);
        assert_ne!(build_with(&d, 6, 50, None)[..], a[..50]);
        // a fixed count and no range: every session alike in shape
        let fixed = MultiTurnSpec {
            turns: 4,
            ..MultiTurnSpec::default()
        };
        for e in build_with(&fixed, 1, 20, None) {
            assert_eq!(turns(&e).len(), 4);
            assert!(turns(&e).iter().all(|t| t.think_ms.is_none()));
            assert!(turns(&e).iter().all(|t| t.input_tokens == 1024));
        }
    }

    #[test]
    fn with_a_tokenizer_each_message_is_its_drawn_length_in_tokens() {
        let tok = tokenizer();
        let d = MultiTurnSpec {
            turns: 3,
            input_len: 30.into(),
            per_turn_input_len: Some(9.into()),
            output_len: 4.into(),
            ..MultiTurnSpec::default()
        };
        for e in build_with(&d, 2, 8, Some(&tok)) {
            for (k, t) in turns(&e).iter().enumerate() {
                let want = if k == 0 { 30 } else { 9 };
                assert_eq!(tok.count(&t.user).unwrap(), want);
                assert_eq!(t.input_tokens as usize, want);
            }
        }
    }
}
