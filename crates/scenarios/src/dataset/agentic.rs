//! The `agentic` workload: synthetic agent sessions, no file.
//!
//! Session `i` is drawn from generators seeded by the seed and `i` alone
//! (like `multi_turn`'s): the main agent's turns, and after each turn,
//! with `fan_out_chance`, `fan_out` sub-agents of `sub_agent_turns` turns
//! each (which fan out in turn while `depth` allows), and between turns,
//! with `tool_chance`, a tool wait of `tool_delay` whose result
//! (`tool_output_len` tokens) joins the history. So 1, 2 or 4 workers send
//! the same sessions. Nodes are drawn depth first: a turn, its sub-agents,
//! then the next turn.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::conversations::entry;
use super::exact::Vocab;
use super::multi_turn::{Len, session_rng, tokenizer_error, words};
use super::select::mix;
use super::{Branch, Build, DatasetError, DatasetReport, PoolEntry, Turn, parallel};
use crate::scenario::AgenticSpec;
use crate::tokenizer::TokenizerError;

/// RNG stream of the agentic sessions' draws (their texts use the next).
const STREAM: u64 = 13;

/// Most nodes (turns and tool waits) one session may hold: past it, no
/// turn fans out any more.
pub(super) const MAX_NODES: u64 = 10_000;

/// The knobs' lengths, ready to draw.
struct Lens {
    first: Len,
    later: Len,
    output: Len,
    fan_out: Len,
    sub_turns: Len,
    tool_output: Len,
}

/// The texts of a session: common one-token words, or with a tokenizer
/// text fitted to exactly the drawn number of tokens.
pub(super) struct Texts<'a> {
    rng: ChaCha8Rng,
    vocab: Option<&'a Vocab<'a>>,
    /// Messages whose text is not their drawn length.
    pub(super) inexact: u64,
}

impl<'a> Texts<'a> {
    /// Session `id`'s text stream (stream `stream`).
    pub(super) fn new(seed: u64, id: u64, stream: u64, vocab: Option<&'a Vocab<'a>>) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(mix(seed ^ mix(id)));
        rng.set_stream(stream);
        Texts {
            rng,
            vocab,
            inexact: 0,
        }
    }

    /// A message of `n` tokens, and the tokens it has.
    pub(super) fn message(&mut self, n: u32) -> Result<(String, u32), TokenizerError> {
        match self.vocab {
            None => Ok((words(&mut self.rng, n), n)),
            Some(v) => {
                let want = n as usize;
                let f = v.fit("", v.random(&mut self.rng, want), want, &mut self.rng)?;
                self.inexact += u64::from(!f.exact);
                Ok((f.text, u32::try_from(f.tokens).unwrap_or(u32::MAX)))
            }
        }
    }
}

/// One session being drawn.
struct Draw<'a> {
    d: &'a AgenticSpec,
    lens: &'a Lens,
    rng: ChaCha8Rng,
    texts: Texts<'a>,
    nodes: u64,
}

impl Draw<'_> {
    fn pause(&mut self, lo: std::time::Duration, hi: Option<std::time::Duration>) -> Option<u64> {
        let hi = hi?;
        let lo = lo.as_millis() as u64;
        let hi = (hi.as_millis() as u64).max(lo);
        Some(self.rng.random_range(lo..=hi))
    }

    /// A branch of `turns` turns at sub-agent `level` (0: the main agent).
    fn branch(&mut self, turns: u32, level: u32) -> Result<Vec<Turn>, TokenizerError> {
        let d = self.d;
        let mut out = Vec::new();
        for k in 0..turns.max(1) {
            let input = if k == 0 && level == 0 {
                self.lens.first.draw(&mut self.rng)
            } else {
                self.lens.later.draw(&mut self.rng)
            };
            let output = self.lens.output.draw(&mut self.rng);
            let think = if k > 0 {
                self.pause(d.think_time.get(), d.think_time_max.map(|m| m.get()))
            } else {
                None
            };
            let (user, tokens) = self.texts.message(input)?;
            self.nodes += 1;
            let mut turn = Turn {
                think_ms: think,
                ..Turn::chat(user, tokens, Some(output))
            };
            if level < d.depth && self.rng.random_bool(d.fan_out_chance) && self.nodes < MAX_NODES {
                let n = self.lens.fan_out.draw(&mut self.rng);
                for _ in 0..n {
                    let t = self.lens.sub_turns.draw(&mut self.rng);
                    let turns = self.branch(t, level + 1)?;
                    turn.forks.push(Branch {
                        turns,
                        fresh: false,
                    });
                }
            }
            out.push(turn);
            if k + 1 < turns && self.rng.random_bool(d.tool_chance) {
                let lo = d.tool_delay.get();
                let delay = self
                    .pause(lo, d.tool_delay_max.map(|m| m.get()))
                    .unwrap_or(lo.as_millis() as u64);
                let n = self.lens.tool_output.draw(&mut self.rng);
                let (result, tokens) = self.texts.message(n)?;
                self.nodes += 1;
                out.push(Turn {
                    tool_ms: Some(delay),
                    ..Turn::chat(result, tokens, None)
                });
            }
        }
        Ok(out)
    }
}

/// The pool: one session per entry.
pub(crate) fn build(
    b: &Build<'_, AgenticSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let d = b.d;
    let first = Len::new(&d.input_len, "input_len")?;
    let later = match &d.per_turn_input_len {
        Some(l) => Len::new(l, "per_turn_input_len")?,
        None => Len::new(&d.input_len, "input_len")?,
    };
    let lens = Lens {
        first,
        later,
        output: Len::new(&d.output_len, "output_len")?,
        fan_out: Len::new(&d.fan_out, "fan_out")?,
        sub_turns: Len::new(&d.sub_agent_turns, "sub_agent_turns")?,
        tool_output: Len::new(&d.tool_output_len, "tool_output_len")?,
    };
    let vocab = match b.tokenizer {
        Some(t) => Some(Vocab::new(t).map_err(tokenizer_error)?),
        None => None,
    };
    let ids: Vec<u64> = (0..b.n).collect();
    b.progress.start("building agent sessions", b.n, "sessions");
    let entries = parallel::try_map(&ids, |id| {
        let e = session(d, &lens, b.seed, *id, vocab.as_ref());
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

/// Session `id` as a pool entry, and how many of its messages are not
/// their drawn length.
fn session(
    d: &AgenticSpec,
    lens: &Lens,
    seed: u64,
    id: u64,
    vocab: Option<&Vocab<'_>>,
) -> Result<(PoolEntry, u64), TokenizerError> {
    let mut rng = session_rng(seed, id);
    rng.set_stream(STREAM);
    let (lo, hi) = d.turn_range();
    let n = rng.random_range(lo.max(1)..=hi.max(lo).max(1));
    let mut draw = Draw {
        d,
        lens,
        rng,
        texts: Texts::new(seed, id, STREAM + 1, vocab),
        nodes: 0,
    };
    let turns = draw.branch(n, 0)?;
    let inexact = draw.texts.inexact;
    Ok((entry(id, None, 0, turns), inexact))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;
    use cicada_plan::units::Span;

    fn build_with(d: &AgenticSpec, seed: u64, n: u64) -> Vec<PoolEntry> {
        let b = Build {
            d,
            seed,
            n,
            tokenizer: None,
            progress: &Silent,
        };
        build(&b).unwrap().0
    }

    /// (requests, tool waits, deepest sub-agent level) of a branch.
    fn shape(turns: &[Turn], level: u32) -> (u64, u64, u32) {
        let mut out = (0, 0, level);
        for t in turns {
            if t.tool_ms.is_some() {
                out.1 += 1;
            } else {
                out.0 += 1;
            }
            for b in &t.forks {
                let s = shape(&b.turns, level + 1);
                out = (out.0 + s.0, out.1 + s.1, out.2.max(s.2));
            }
        }
        out
    }

    #[test]
    fn sessions_follow_the_knobs_and_depend_on_seed_and_index_only() {
        let d = AgenticSpec {
            turns: 4,
            input_len: 20.into(),
            per_turn_input_len: Some(5.into()),
            output_len: 3.into(),
            fan_out_chance: 0.5,
            fan_out: 3.into(),
            depth: 2,
            sub_agent_turns: 2.into(),
            tool_chance: 0.5,
            tool_delay: Span::millis(10),
            tool_delay_max: Some(Span::millis(30)),
            tool_output_len: 7.into(),
            ..AgenticSpec::default()
        };
        let a = build_with(&d, 9, 100);
        let (mut tools, mut deepest, mut forks) = (0, 0, 0);
        for e in &a {
            let c = e.conversation.as_ref().unwrap();
            let main: Vec<&Turn> = c.turns.iter().filter(|t| t.tool_ms.is_none()).collect();
            assert_eq!(main.len(), 4);
            assert_eq!(main[0].input_tokens, 20);
            assert!(
                c.turns.last().unwrap().tool_ms.is_none(),
                "no tool at the end"
            );
            for t in &c.turns {
                if let Some(ms) = t.tool_ms {
                    assert!((10..=30).contains(&ms));
                    assert_eq!(t.input_tokens, 7);
                    assert!(t.forks.is_empty());
                } else if !t.forks.is_empty() {
                    forks += 1;
                    assert_eq!(t.forks.len(), 3);
                }
            }
            let s = shape(&c.turns, 0);
            assert_eq!(s.0, c.requests());
            tools += s.1;
            deepest = deepest.max(s.2);
        }
        assert!(tools > 0 && forks > 0, "tools {tools}, fan-outs {forks}");
        assert_eq!(deepest, 2, "sub-agents of sub-agents, no deeper");
        // a smaller pool is a prefix of a larger one; another seed differs
        assert_eq!(build_with(&d, 9, 30)[..], a[..30]);
        assert_ne!(build_with(&d, 10, 30)[..], a[..30]);
        // no chance, no fan-out and no tools: a multi-turn session
        let plain = AgenticSpec {
            fan_out_chance: 0.0,
            tool_chance: 0.0,
            ..d
        };
        for e in build_with(&plain, 1, 10) {
            let c = e.conversation.unwrap();
            assert_eq!(c.turns.len(), 4);
            assert!(c.turns.iter().all(|t| t.forks.is_empty()));
        }
    }
}
