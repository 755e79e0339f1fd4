//! The random streams `vllm bench serve` (vLLM 0.32) draws its samples from,
//! reproduced draw for draw, so cicada's `sampler = "vllm"` picks what vLLM
//! picks for the same seed.
//!
//! - [`Numpy`]: `numpy.random.default_rng(seed)` (numpy 2.x): a `PCG64` bit
//!   generator seeded through `SeedSequence(seed)`, and `Generator.integers`
//!   for int64 results. vLLM's `RandomDataset` draws every length, offset and
//!   extra token from one such generator
//!   (`vllm/benchmarks/datasets/{datasets,utils}.py`).
//! - [`Python`]: CPython's `random` module (MT19937, `Modules/_randommodule.c`
//!   and `Lib/random.py` of 3.11): `random.seed(int)`, `random.shuffle` and
//!   `random.choice`. vLLM's `ShareGPTDataset` shuffles the records with it
//!   and `maybe_oversample_requests` pads a short sample with it.
//!
//! The raw generators are crates (`rand_pcg`'s `Pcg64` is numpy's PCG64
//! stream with the same 128-bit state and increment; `rand_mt`'s `Mt` is the
//! reference MT19937 with `init_by_array`); the seeding and the algorithms
//! that turn raw words into numbers are written here. The tests check all of
//! it against vectors written by the installed numpy and Python
//! (`tests/fixtures/pyrng/make.py`).

use rand::RngCore;
use rand_mt::Mt;
use rand_pcg::Pcg64;

/// numpy's `SeedSequence` constants (`numpy/random/bit_generator.pyx`).
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
/// `SeedSequence`'s default pool size, in 32-bit words.
const POOL_SIZE: usize = 4;

/// An integer seed as the little-endian 32-bit words numpy and CPython both
/// make of it (`_coerce_to_uint32_array`, `random_seed`): `[0]` for zero.
fn seed_words(seed: u64) -> Vec<u32> {
    let mut words = vec![seed as u32];
    if seed >> 32 != 0 {
        words.push((seed >> 32) as u32);
    }
    words
}

/// `SeedSequence.mix_entropy`'s `hashmix`: one word through the running hash.
fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut value = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    value = value.wrapping_mul(*hash_const);
    value ^ (value >> XSHIFT)
}

/// `SeedSequence`'s `mix`.
fn mix(x: u32, y: u32) -> u32 {
    let r = MIX_MULT_L
        .wrapping_mul(x)
        .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    r ^ (r >> XSHIFT)
}

/// `SeedSequence(seed).pool`: the entropy mixed into four words.
fn seed_pool(seed: u64) -> [u32; POOL_SIZE] {
    let entropy = seed_words(seed);
    let mut hash_const = INIT_A;
    let mut pool = [0u32; POOL_SIZE];
    for (i, p) in pool.iter_mut().enumerate() {
        *p = hashmix(entropy.get(i).copied().unwrap_or(0), &mut hash_const);
    }
    for src in 0..POOL_SIZE {
        for dst in 0..POOL_SIZE {
            if src != dst {
                pool[dst] = mix(pool[dst], hashmix(pool[src], &mut hash_const));
            }
        }
    }
    for &word in entropy.iter().skip(POOL_SIZE) {
        for p in &mut pool {
            *p = mix(*p, hashmix(word, &mut hash_const));
        }
    }
    pool
}

/// `SeedSequence(seed).generate_state(n, np.uint64)`.
fn generate_state_u64(seed: u64, n: usize) -> Vec<u64> {
    let pool = seed_pool(seed);
    let mut hash_const = INIT_B;
    let words: Vec<u32> = (0..2 * n)
        .map(|i| {
            let mut v = pool[i % POOL_SIZE] ^ hash_const;
            hash_const = hash_const.wrapping_mul(MULT_B);
            v = v.wrapping_mul(hash_const);
            v ^ (v >> XSHIFT)
        })
        .collect();
    // numpy views the uint32 words as little-endian uint64s
    words
        .chunks_exact(2)
        .map(|w| u64::from(w[0]) | (u64::from(w[1]) << 32))
        .collect()
}

/// `numpy.random.default_rng(seed)`: PCG64 with numpy's seeding and its
/// buffered 32-bit draws.
pub(crate) struct Numpy {
    pcg: Pcg64,
    /// The upper half of the last 64-bit output, not yet used
    /// (`pcg64_next32`'s `has_uint32`/`uinteger`).
    half: Option<u32>,
}

impl Numpy {
    /// `np.random.default_rng(seed)`: `PCG64(SeedSequence(seed))`, whose
    /// state and increment are `generate_state(4, uint64)` as two 128-bit
    /// numbers, high word first (`pcg64_set_seed`).
    pub fn new(seed: u64) -> Self {
        let s = generate_state_u64(seed, 4);
        let state = (u128::from(s[0]) << 64) | u128::from(s[1]);
        let stream = (u128::from(s[2]) << 64) | u128::from(s[3]);
        Self {
            pcg: Pcg64::new(state, stream),
            half: None,
        }
    }

    /// `next_uint64`: one raw output.
    fn next_u64(&mut self) -> u64 {
        self.pcg.next_u64()
    }

    /// `next_uint32`: the low half of a fresh output, then its high half.
    fn next_u32(&mut self) -> u32 {
        if let Some(h) = self.half.take() {
            return h;
        }
        let v = self.pcg.next_u64();
        self.half = Some((v >> 32) as u32);
        v as u32
    }

    /// `buffered_bounded_lemire_uint32`: uniform in `0..=rng` (`rng < u32::MAX`).
    fn lemire32(&mut self, rng: u32) -> u32 {
        let excl = rng + 1;
        let mut m = u64::from(self.next_u32()) * u64::from(excl);
        let mut leftover = m as u32;
        if leftover < excl {
            let threshold = (u32::MAX - rng) % excl;
            while leftover < threshold {
                m = u64::from(self.next_u32()) * u64::from(excl);
                leftover = m as u32;
            }
        }
        (m >> 32) as u32
    }

    /// `bounded_lemire_uint64`: uniform in `0..=rng` (`rng < u64::MAX`).
    fn lemire64(&mut self, rng: u64) -> u64 {
        let excl = rng + 1;
        let mut m = u128::from(self.next_u64()) * u128::from(excl);
        let mut leftover = m as u64;
        if leftover < excl {
            let threshold = (u64::MAX - rng) % excl;
            while leftover < threshold {
                m = u128::from(self.next_u64()) * u128::from(excl);
                leftover = m as u64;
            }
        }
        (m >> 64) as u64
    }

    /// `Generator.integers(low, high, size=n)` (int64, `high` excluded):
    /// `random_bounded_uint64_fill` without masking. An empty range
    /// (`high == low + 1`) draws nothing; a range within 32 bits draws 32-bit
    /// words (two per raw output), a wider one 64-bit outputs.
    pub fn integers(&mut self, low: i64, high: i64, n: usize) -> Vec<i64> {
        let rng = high.wrapping_sub(low).wrapping_sub(1) as u64;
        let draw = |g: &mut Self| -> u64 {
            if rng == 0 {
                0
            } else if rng < u64::from(u32::MAX) {
                u64::from(g.lemire32(rng as u32))
            } else if rng == u64::from(u32::MAX) {
                u64::from(g.next_u32())
            } else if rng == u64::MAX {
                g.next_u64()
            } else {
                g.lemire64(rng)
            }
        };
        (0..n)
            .map(|_| (low as u64).wrapping_add(draw(self)) as i64)
            .collect()
    }
}

/// CPython's `random.Random(seed)` (MT19937).
pub(crate) struct Python {
    mt: Mt,
}

impl Python {
    /// `random.seed(seed)` for an int: `init_by_array` of its 32-bit words.
    pub fn new(seed: u64) -> Self {
        Self {
            mt: Mt::new_with_key(seed_words(seed)),
        }
    }

    /// `getrandbits(k)` for `1 <= k <= 32`: the top `k` bits of one word.
    fn getrandbits(&mut self, k: u32) -> u32 {
        self.mt.next_u32() >> (32 - k)
    }

    /// `_randbelow_with_getrandbits(n)`: uniform in `0..n` by rejection
    /// (`n >= 1`, within 32 bits: every list cicada shuffles is).
    pub fn below(&mut self, n: u32) -> u32 {
        let k = u32::BITS - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `random.shuffle(x)`: Fisher-Yates from the end.
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.below(u32::try_from(i + 1).unwrap_or(u32::MAX)) as usize;
            x.swap(i, j);
        }
    }

    /// `random.choice(seq)` as an index into a sequence of `len` (`len >= 1`).
    pub fn choice(&mut self, len: usize) -> usize {
        self.below(u32::try_from(len).unwrap_or(u32::MAX)) as usize
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn fixture(name: &str) -> Value {
        let text = match name {
            "numpy" => include_str!("../../tests/fixtures/pyrng/numpy.json"),
            _ => include_str!("../../tests/fixtures/pyrng/python.json"),
        };
        serde_json::from_str(text).unwrap()
    }

    fn u64s(v: &Value) -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    }

    #[test]
    fn seed_sequence_and_pcg64_match_numpy() {
        let f = fixture("numpy");
        for s in f["seeds"].as_array().unwrap() {
            let seed = s["seed"].as_u64().unwrap();
            assert_eq!(
                generate_state_u64(seed, 4),
                u64s(&s["state"]),
                "seed {seed}"
            );
            let mut g = Numpy::new(seed);
            let raw: Vec<u64> = (0..6).map(|_| g.next_u64()).collect();
            assert_eq!(raw, u64s(&s["raw"]), "seed {seed}");
        }
    }

    #[test]
    fn integers_match_numpy_call_by_call() {
        let f = fixture("numpy");
        let calls = f["calls"].as_array().unwrap();
        for s in f["seeds"].as_array().unwrap() {
            let seed = s["seed"].as_u64().unwrap();
            let mut g = Numpy::new(seed);
            for (call, want) in calls.iter().zip(s["integers"].as_array().unwrap()) {
                let (lo, hi, n) = (
                    call[0].as_i64().unwrap(),
                    call[1].as_i64().unwrap(),
                    call[2].as_u64().unwrap() as usize,
                );
                let want: Vec<i64> = want
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_i64().unwrap())
                    .collect();
                assert_eq!(g.integers(lo, hi, n), want, "seed {seed}, {call}");
            }
        }
    }

    #[test]
    fn mt19937_seeding_shuffle_and_choice_match_cpython() {
        let f = fixture("python");
        for s in f["seeds"].as_array().unwrap() {
            // the fixture's last seed is past 64 bits: cicada's seeds are u64
            let Some(seed) = s["seed"].as_u64() else {
                continue;
            };
            let mut r = Python::new(seed);
            let words: Vec<u64> = (0..6).map(|_| u64::from(r.getrandbits(32))).collect();
            assert_eq!(words, u64s(&s["words"]), "seed {seed}");
            for (n, want) in s["shuffles"].as_object().unwrap() {
                let mut r = Python::new(seed);
                let mut x: Vec<u64> = (0..n.parse::<u64>().unwrap()).collect();
                r.shuffle(&mut x);
                assert_eq!(x, u64s(want), "seed {seed}, shuffle of {n}");
            }
            let mut r = Python::new(seed);
            let mut picks: Vec<u64> = (0..12).map(|_| r.choice(7) as u64).collect();
            picks.extend((0..6).map(|_| r.choice(1000) as u64));
            assert_eq!(picks, u64s(&s["choices"]), "seed {seed}");
        }
    }
}
