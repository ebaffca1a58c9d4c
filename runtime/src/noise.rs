//! Gaussian noise rows `z_t ~ N(0, I_d)`, regenerable per step and per coordinate range.
//!
//! A [`NoiseSource`] is a pure function of (seed, step, coordinate): the runtime asks for row `t`
//! once, but a device short of RAM may recompute a row instead of storing it, and shards of one
//! large row can be produced by separate workers and still agree. [`ChaChaNoise`] is the secure
//! default: ChaCha20 keyed by a 256-bit seed, one ChaCha stream per step, and coordinates grouped
//! in blocks of [`BLOCK`] that start at fixed word positions (`block << 26`), so any block can be
//! reached directly. Samples come from a 128-layer ziggurat in `f32` (Marsaglia & Tsang 2000,
//! RNOR; tables and construction in `ziggurat.rs`): one 32-bit word gives the layer, the sign and
//! an odd 24-bit abscissa, and 97.2% of samples are accepted on that word alone. Only `f32`
//! arithmetic is used, with `libm`'s `expf` (wedges) and `logf` (tail) on the rare slow path: on
//! a Cortex-M4F everything runs on the single-precision FPU. On average a sample takes 1.041
//! words: 1.0124 tries of one word each, a second word for the 2.7% of tries that reach a wedge,
//! and two per tail try.
//!
//! # The tail
//!
//! The sampler has a largest output. Its body returns `|z| < r = 3.442619855899`: a point of
//! layer `i` lies below `x_i ≤ r`, and the base layer hands every point beyond `r` to the tail.
//! The tail branch (Marsaglia 1964, as in Marsaglia & Tsang's `nfix`) draws `x = −ln(u₁)/r` and
//! `y = −ln(u₂)`, accepts when `2y ≥ x²` and returns `±(r + x)`. Each uniform is
//! `u = (k + ½)·2⁻³²` for a fresh 32-bit word `k`, evaluated in `f32` (`k` rounded to 24
//! significant bits, then `+ ½` and an exact scaling), so `0 < u ≤ 1` and `ln u` is finite. The
//! smallest uniform is `u = 2⁻³³` (`k = 0`, exact), so `−ln u ≤ 33 ln 2 ≈ 22.873` and
//! `x ≤ 33 ln 2 / r ≈ 6.6443`. That extreme pair is accepted (`2y = 66 ln 2 ≈ 45.75` and
//! `x² ≈ 44.15`), so the bound is attained, and every sample satisfies
//!
//! `|z| ≤ r + 33 ln 2 / r ≈ 10.086937`
//!
//! (`10.0869366…`; the `f32` evaluation `r + (−logf(2⁻³³))·(1/r)` returns `10.0869370`, bits
//! `0x41216418`, `3·10⁻⁷` above it, under one `f32` ulp). `logf` is monotone and `k ↦ u`
//! non-decreasing, so `k = 0` gives the largest `x`. The noise is thus truncated at about
//! `10.09σ`, above the required `8σ`; `P(|N(0,1)| > 10.086937) ≈ 6.3·10⁻²⁴`. Tests replay the
//! extreme words, reach the cap and check, over all `2²⁰` smallest words and a sweep of the
//! rest, that it is never exceeded.
//!
//! # Other sources
//!
//! - With the `os-entropy` feature, `ChaChaNoise::from_os_entropy` seeds from the operating
//!   system (`getrandom`): the way to seed a stream on a host. Devices pass a seed from their
//!   hardware RNG to [`ChaChaNoise::from_seed`].
//! - With the `insecure-simulation` feature, `InsecureSimulationNoise` (Xoshiro256++, one
//!   generator per step and block) follows the same contract, faster (`BENCHMARKS.md`). It is
//!   **predictable** — its outputs reveal its state — so it is for simulations and benchmarks
//!   only, never for a release that must be private. The default build does not contain it.
//!
//! Both sources keep a cursor: a call that continues where the previous one stopped (same step,
//! next coordinate) goes on drawing instead of repositioning, so a row filled piece by piece costs
//! what one call would. The values never depend on it.
//!
//! Without `insecure-simulation` there is no predictable generator to name (this example fails to
//! compile in the default build, and runs with `--features insecure-simulation`):
//!
#![cfg_attr(not(feature = "insecure-simulation"), doc = "```compile_fail")]
#![cfg_attr(feature = "insecure-simulation", doc = "```")]
//! let noise = mfc_runtime::InsecureSimulationNoise::from_seed([1; 32]);
//! ```
//!
//! # Limits
//!
//! Block `b` starts at word `b·2²⁶` of its step's ChaCha stream, whose word counter has 68 bits:
//! coordinates below [`MAX_COORDINATES`] `= 2⁵¹` have distinct blocks (the stream refuses larger
//! dimensions), all in the lower half of the stream, below word `2⁶⁷`. The upper half is not
//! noise: the checkpoint keys ([`stream_key`](crate::checkpoint::stream_key)) are drawn there, so
//! a root secret misused as a noise seed still never releases a key. A block of 1024 samples
//! uses about 1 066 words on average (1.04 per sample, a test measures it); running into the next
//! block (or, from the last block, into the keys' half) would need 2²⁶ words, more than 60 000
//! times as many, which does not happen in practice.

use chacha20::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

use crate::error::Error;
use crate::ziggurat::{NORMAL, Ziggurat};

/// Coordinates per independently addressable block of a noise row.
pub const BLOCK: u64 = 1024;
/// log2 of the ChaCha words reserved for one block (a block uses about 1.04 words per sample).
const BLOCK_WORDS_LOG2: u32 = 26;
/// The first word of each ChaCha stream that noise never reads: the blocks of coordinates below
/// [`MAX_COORDINATES`] start below it. Key derivation reads from here ([module docs](self)).
pub(crate) const KEY_WORD: u128 = 1 << 67;
/// Coordinates per noise row [`ChaChaNoise`] can address without two blocks sharing words, all
/// below `KEY_WORD`.
pub const MAX_COORDINATES: u64 = 1 << (67 - BLOCK_WORDS_LOG2 + 10);

/// A source of i.i.d. standard normal noise rows.
pub trait NoiseSource {
    /// Fills `out` with coordinates `offset .. offset + out.len()` of the noise row `z_step`.
    /// The values must depend only on the source's seed, `step` and the coordinate index.
    fn fill_standard_normal(&mut self, step: u64, offset: u64, out: &mut [f32]);
}

/// ChaCha20-based noise: the default, cryptographically secure source.
pub struct ChaChaNoise {
    blocks: Blocks<ChaCha20Rng>,
}

impl ChaChaNoise {
    /// Keys the generator with a secret 32-byte seed (from the OS or a hardware RNG; never
    /// reused for another stream). The all-zero seed is refused.
    pub fn from_seed(seed: [u8; 32]) -> Result<Self, Error> {
        if seed == [0; 32] {
            return Err(Error::WeakSeed);
        }
        Ok(Self {
            blocks: Blocks::new(ChaCha20Rng::from_seed(seed)),
        })
    }

    /// Keys the generator with 32 bytes from the operating system's secure random source
    /// (`getrandom`): the way to seed a stream on a host. The seed is never exposed, so it cannot
    /// be reused for another stream — nor can the stream's noise be regenerated after a restart.
    #[cfg(feature = "os-entropy")]
    pub fn from_os_entropy() -> Result<Self, Error> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|_| Error::EntropyUnavailable)?;
        Self::from_seed(seed)
    }
}

impl NoiseSource for ChaChaNoise {
    fn fill_standard_normal(&mut self, step: u64, offset: u64, out: &mut [f32]) {
        self.blocks.fill(step, offset, out, |rng, block| {
            if rng.get_stream() != step {
                rng.set_stream(step);
            }
            rng.set_word_pos(u128::from(block) << BLOCK_WORDS_LOG2);
        });
    }
}

/// A generator and the sample it is at: the part every source shares.
struct Blocks<R> {
    rng: R,
    /// `(step, coordinate)` the generator is positioned at, if it is at a sample boundary.
    cursor: Option<(u64, u64)>,
}

impl<R: Rng> Blocks<R> {
    fn new(rng: R) -> Self {
        Self { rng, cursor: None }
    }

    /// Fills `out` with coordinates `offset ..` of row `step`, block by block: at the start of
    /// each block, and wherever the call does not continue where the last one stopped (the
    /// cursor, module docs), `seek(rng, block)` puts the generator at the start of block `block`
    /// of the row, and the samples of the block before `offset` are drawn and discarded.
    fn fill(&mut self, step: u64, offset: u64, out: &mut [f32], mut seek: impl FnMut(&mut R, u64)) {
        let mut coordinate = offset;
        let mut rest = out;
        while !rest.is_empty() {
            let block = coordinate / BLOCK;
            let within = coordinate % BLOCK;
            if within == 0 || self.cursor != Some((step, coordinate)) {
                seek(&mut self.rng, block);
                for _ in 0..within {
                    standard_normal(&mut self.rng);
                }
            }
            let take = rest.len().min((BLOCK - within) as usize);
            let (now, later) = rest.split_at_mut(take);
            draw(&mut self.rng, now);
            rest = later;
            coordinate = coordinate.wrapping_add(take as u64);
            self.cursor = Some((step, coordinate));
        }
    }
}

/// Fills `out` with standard normal samples.
#[inline]
fn draw<R: Rng + ?Sized>(rng: &mut R, out: &mut [f32]) {
    for x in out {
        *x = standard_normal(rng);
    }
}

/// One standard normal sample from the ziggurat [`NORMAL`].
#[inline]
fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    sample(&NORMAL, rng)
}

/// Bits 0–6 of a word: the layer.
const LAYER: u32 = 0x7f;
/// Bit 7 of a word: the sign.
const SIGN: u32 = 0x80;

/// The ziggurat's fast path (Marsaglia & Tsang 2000, `RNOR`): one word, accepted at once when
/// its point lies in the part of its layer under the curve (see `ziggurat.rs` for the word's
/// fields and the tables).
#[inline(always)]
fn sample<R: Rng + ?Sized>(table: &Ziggurat, rng: &mut R) -> f32 {
    let word = rng.next_u32();
    let (k, w) = table.layer(word & LAYER);
    let j = (word >> 8) | 1;
    if j < k {
        return with_sign(j as f32 * w, word);
    }
    slow_path(table, rng, word)
}

/// `|x|` with the sign bit of `word` (`x ≥ 0`).
#[inline(always)]
fn with_sign(x: f32, word: u32) -> f32 {
    f32::from_bits(x.to_bits() | ((word & SIGN) << 24))
}

/// `u = (k + ½)·2⁻³²` for a word `k`, in `f32`: `2⁻³³ ≤ u ≤ 1`.
#[inline(always)]
fn uniform(k: u32) -> f32 {
    const TWO_TO_MINUS_32: f32 = 1.0 / 4_294_967_296.0;
    (k as f32 + 0.5) * TWO_TO_MINUS_32
}

/// The ziggurat's slow path (Marsaglia & Tsang 2000, `nfix`), for a word the fast path did not
/// accept: the tail for the base layer, else the wedge test with a second word; a rejected
/// point starts over with a new word.
#[cold]
#[inline(never)]
fn slow_path<R: Rng + ?Sized>(table: &Ziggurat, rng: &mut R, mut word: u32) -> f32 {
    loop {
        let layer = word & LAYER;
        let (k, w) = table.layer(layer);
        let j = (word >> 8) | 1;
        let x = j as f32 * w;
        if j < k {
            return with_sign(x, word);
        }
        if layer == 0 {
            return with_sign(tail(table, rng), word);
        }
        let u = uniform(rng.next_u32());
        let (below, above) = table.heights(layer);
        if below + u * (above - below) < libm::expf(-0.5 * x * x) {
            return with_sign(x, word);
        }
        word = rng.next_u32();
    }
}

/// A sample of the normal tail beyond `r` (Marsaglia 1964): `r + x` with `x = −ln(u₁)/r`,
/// accepted when `−2 ln(u₂) ≥ x²`. At most `r + 33 ln 2 / r` (see `# The tail`).
fn tail<R: Rng + ?Sized>(table: &Ziggurat, rng: &mut R) -> f32 {
    loop {
        let x = -libm::logf(uniform(rng.next_u32())) * table.r_inv;
        let y = -libm::logf(uniform(rng.next_u32()));
        if y + y >= x * x {
            return table.r + x;
        }
    }
}

#[cfg(feature = "insecure-simulation")]
pub use simulation::InsecureSimulationNoise;

#[cfg(feature = "insecure-simulation")]
mod simulation {
    use rand_core::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::{Blocks, NoiseSource};
    use crate::error::Error;

    /// **Not secure.** Xoshiro256++ noise for simulations and benchmarks: the same contract as
    /// [`ChaChaNoise`](super::ChaChaNoise) (a pure function of seed, step and coordinate, blocks
    /// of [`BLOCK`](super::BLOCK) coordinates reachable directly), faster (`BENCHMARKS.md`), and
    /// predictable: a few outputs reveal the generator's state and with it every other noise
    /// value, so a release noised by it is **not** differentially private. Only built with the
    /// `insecure-simulation` feature.
    ///
    /// Block `b` of step `t` has its own generator, whose 256-bit state is the key mixed with
    /// `(t, b)` by SplitMix64's finalizer.
    pub struct InsecureSimulationNoise {
        key: [u64; 4],
        blocks: Blocks<Xoshiro256PlusPlus>,
    }

    /// SplitMix64's finalizer: a bijection of `u64` with full avalanche.
    fn mix(mut x: u64) -> u64 {
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

    /// The generator of block `block` of row `step` for the key `key`.
    fn block_rng(key: &[u64; 4], step: u64, block: u64) -> Xoshiro256PlusPlus {
        let tweak = mix(step.wrapping_mul(GOLDEN) ^ mix(block.wrapping_add(GOLDEN)));
        let mut state = [0u8; 32];
        let mut lane = tweak;
        for (bytes, &k) in state.chunks_exact_mut(8).zip(key) {
            lane = lane.wrapping_add(GOLDEN);
            bytes.copy_from_slice(&mix(k ^ lane).to_le_bytes());
        }
        // An all-zero state (probability 2⁻²⁵⁶) is replaced by a fixed one inside.
        Xoshiro256PlusPlus::from_seed(state)
    }

    impl InsecureSimulationNoise {
        /// A simulation source for a 32-byte seed; the all-zero seed is refused, as for
        /// [`ChaChaNoise`](super::ChaChaNoise).
        pub fn from_seed(seed: [u8; 32]) -> Result<Self, Error> {
            if seed == [0; 32] {
                return Err(Error::WeakSeed);
            }
            let mut key = [0u64; 4];
            for (k, bytes) in key.iter_mut().zip(seed.chunks_exact(8)) {
                let mut word = [0u8; 8];
                word.copy_from_slice(bytes);
                *k = u64::from_le_bytes(word);
            }
            Ok(Self {
                key,
                blocks: Blocks::new(Xoshiro256PlusPlus::seed_from_u64(0)),
            })
        }
    }

    impl NoiseSource for InsecureSimulationNoise {
        fn fill_standard_normal(&mut self, step: u64, offset: u64, out: &mut [f32]) {
            let key = &self.key;
            self.blocks.fill(step, offset, out, |rng, block| {
                *rng = block_rng(key, step, block);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::convert::Infallible;

    /// Replays fixed 32-bit words, to drive the ziggurat into its wedges and its tail.
    struct Replay<'a>(&'a [u32]);

    impl rand_core::TryRng for Replay<'_> {
        type Error = Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Infallible> {
            let (first, rest) = self.0.split_first().expect("replay exhausted");
            self.0 = rest;
            Ok(*first)
        }
        fn try_next_u64(&mut self) -> Result<u64, Infallible> {
            unreachable!("the sampler draws 32-bit words")
        }
        fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), Infallible> {
            unreachable!("the sampler draws 32-bit words")
        }
    }

    /// The sample the words `words` give; all of them must be used.
    fn replay(words: &[u32]) -> f32 {
        let mut rng = Replay(words);
        let z = standard_normal(&mut rng);
        assert!(rng.0.is_empty(), "{} words left", rng.0.len());
        z
    }

    const R: f64 = 3.442_619_855_899;
    const V: f64 = 9.912_563_035_262_17e-3;
    const TWO_TO_24: f64 = 16_777_216.0;

    /// The cap derived in `# The tail`: `r + 33 ln 2 / r`.
    fn cap() -> f64 {
        R + 33.0 * core::f64::consts::LN_2 / R
    }

    /// A word of layer `layer` with odd abscissa `j` and the given sign.
    fn word(layer: u32, j: u32, negative: bool) -> u32 {
        assert!(layer < 128 && j % 2 == 1 && j < 1 << 24);
        layer | u32::from(negative) << 7 | (j >> 1) << 9
    }

    /// The largest abscissa of the base layer (`≈ q > r`): always the tail.
    const TAIL: u32 = 0xffff_ff00;

    /// The cap `r + 33 ln 2 / r ≈ 10.086937` is reached (to 1e-5, f32 rounding) by the extreme
    /// words (`u₁ = u₂ = 2⁻³³`) and never exceeded: the tail's output does not increase with
    /// `u₁`'s word, over all `2²⁰` smallest words and a sweep of the rest.
    #[test]
    fn the_tail_reaches_but_does_not_pass_the_documented_cap() {
        let cap = cap();
        assert!((cap - 10.086_937).abs() < 1e-6, "{cap}");
        // The truncated mass the docs and SECURITY.md state: P(|N(0,1)| > cap) ≈ 6.3·10⁻²⁴.
        let truncated = libm::erfc(cap / core::f64::consts::SQRT_2);
        assert!((truncated / 6.3e-24 - 1.0).abs() < 0.01, "{truncated:e}");
        // SECURITY.md: beyond 8.9σ (mass 5.6·10⁻¹⁹) the first uniform takes fewer than 30 values.
        let beyond = libm::erfc(8.9 / core::f64::consts::SQRT_2);
        assert!((beyond / 5.6e-19 - 1.0).abs() < 0.01, "{beyond:e}");
        let words = libm::exp(-(8.9 - f64::from(NORMAL.r)) * f64::from(NORMAL.r)) * 4_294_967_296.0;
        assert!(words < 30.0, "{words}");
        assert_eq!(TAIL & 0xff, 0, "layer 0, positive");
        let extreme = replay(&[TAIL, 0, 0]);
        assert!(
            (f64::from(extreme) - cap).abs() < 1e-5,
            "{extreme} vs {cap}"
        );
        assert!(extreme > 10.0 && f64::from(extreme) > cap - 1e-3);
        // u₂ ≈ 1 (y ≈ 0) rejects the extreme x; the retry with the extreme pair gives it.
        assert_eq!(replay(&[TAIL, 0, u32::MAX, 0, 0]), extreme);
        // u₂ = 2⁻³³ accepts every x (x² ≤ (33 ln 2 / r)² < 66 ln 2 = 2y).
        let mut previous = extreme;
        let sweep = (0..1u32 << 20).chain((1u32 << 20..=u32::MAX).step_by(4093));
        for k in sweep.chain([u32::MAX]) {
            let z = replay(&[TAIL, k, 0]);
            assert!(
                z <= previous && z >= 3.442_619_8,
                "word {k}: {z} after {previous}"
            );
            previous = z;
        }
        // The sign bit mirrors the tail.
        assert_eq!(replay(&[TAIL | 0x80, 0, 0]), -extreme);
        assert_eq!(replay(&[TAIL | 0x80, 0, u32::MAX, 0, 0]), -extreme);
    }

    /// The body never leaves `(−r, r)`: the largest abscissa of every layer that the fast path
    /// accepts, and a point of the base layer just below `r`.
    #[test]
    fn the_body_stays_below_r() {
        for layer in 1..128 {
            let j = NORMAL.k[layer as usize].saturating_sub(1) | 1;
            if j < NORMAL.k[layer as usize] {
                let z = replay(&[word(layer, j, true)]);
                assert!(z < 0.0 && f64::from(-z) < R, "layer {layer}: {z}");
            }
        }
        let j = (NORMAL.k[0] - 1) | 1;
        let j = if j < NORMAL.k[0] { j } else { j - 2 };
        let z = replay(&[word(0, j, false)]);
        assert!(f64::from(z) < R && f64::from(z) > R - 1e-6, "{z}");
    }

    /// The wedge test `f_i + u·(f_{i−1} − f_i) < e^{−x²/2}` of layers 1 (the top), 64 and 127:
    /// a point in the wedge is accepted when `u` is below the threshold computed here in `f64`,
    /// and rejected above it, after which the next word is a new try (here a fast-path point).
    #[test]
    fn the_wedge_accepts_below_the_curve_and_rejects_above() {
        let (_, x) = crate::ziggurat::build(R, V);
        let next = word(127, 1001, false);
        let after_rejection = 1001.0 * R / TWO_TO_24;
        for layer in [1u32, 64, 127] {
            let i = layer as usize;
            // Halfway between the inner edge x_{i−1} (0 for the top layer) and x_i.
            let inner = if i == 1 { 0.0 } else { x[i - 1] };
            let j = (libm::floor(TWO_TO_24 * (inner + x[i]) / (2.0 * x[i])) as u32) | 1;
            assert!(j >= NORMAL.k[i], "layer {layer}: not a wedge point");
            let point = f64::from(j) * x[i] / TWO_TO_24;
            let above = if i == 1 {
                1.0
            } else {
                libm::exp(-0.5 * inner * inner)
            };
            let below = libm::exp(-0.5 * x[i] * x[i]);
            let threshold = (libm::exp(-0.5 * point * point) - below) / (above - below);
            assert!((0.1..0.9).contains(&threshold), "{threshold}");
            let u = |p: f64| (p * 4_294_967_296.0) as u32;
            for negative in [false, true] {
                let w = word(layer, j, negative);
                let sign = if negative { -1.0 } else { 1.0 };
                let accepted = replay(&[w, u(threshold - 1e-3)]);
                assert!(
                    (f64::from(accepted) - sign * point).abs() < 1e-6,
                    "{accepted}"
                );
                let rejected = replay(&[w, u(threshold + 1e-3), next]);
                assert!((f64::from(rejected) - after_rejection).abs() < 1e-6);
            }
        }
        // A rejected wedge point may be followed by another slow word: here the tail.
        assert_eq!(
            replay(&[word(1, 1 << 23 | 1, false), u32::MAX, TAIL, 0, 0]),
            replay(&[TAIL, 0, 0])
        );
    }

    extern crate std;
    use std::vec::Vec;

    /// `n` samples of `next`.
    fn samples(n: usize, mut next: impl FnMut() -> f32) -> Vec<f32> {
        (0..n).map(|_| next()).collect()
    }

    /// Standard scores of the sample mean, variance and fourth moment against N(0, 1)
    /// (`E z⁴ = 3`, `Var z⁴ = 105 − 9 = 96`), and the Kolmogorov–Smirnov statistic `√n·D`.
    struct Verdict {
        mean: f64,
        variance: f64,
        fourth: f64,
        ks: f64,
    }

    /// Four detectors sharing a false-alarm probability of 1e-6: `|score| ≤ 5.3` for each
    /// moment (two-sided 1.2e-7), and `√n·D ≤ √(ln(2/α)/2)` for `α = 2.5e-7` (≈ 2.82).
    impl Verdict {
        const Z: f64 = 5.3;

        fn moments_pass(&self) -> bool {
            self.mean.abs() <= Self::Z
                && self.variance.abs() <= Self::Z
                && self.fourth.abs() <= Self::Z
        }

        fn ks_passes(&self) -> bool {
            self.ks <= libm::sqrt(libm::log(2.0 / 2.5e-7) / 2.0)
        }
    }

    fn verdict(mut z: Vec<f32>) -> Verdict {
        let n = z.len() as f64;
        let moment = |p: i32| {
            z.iter()
                .map(|&x| libm::pow(f64::from(x), f64::from(p)))
                .sum::<f64>()
                / n
        };
        let (m1, m2, m4) = (moment(1), moment(2), moment(4));
        z.sort_by(f32::total_cmp);
        let phi = |x: f64| 0.5 * libm::erfc(-x / core::f64::consts::SQRT_2);
        let d = z
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = phi(f64::from(x));
                (f - i as f64 / n).max((i + 1) as f64 / n - f)
            })
            .fold(0.0, f64::max);
        Verdict {
            mean: m1 * libm::sqrt(n),
            variance: (m2 - m1 * m1 - 1.0) / libm::sqrt(2.0 / n),
            fourth: (m4 - 3.0) / libm::sqrt(96.0 / n),
            ks: d * libm::sqrt(n),
        }
    }

    /// 2²⁰ samples of the ChaCha source pass the KS test and the moment tests, and none
    /// exceeds the cap.
    #[test]
    fn samples_pass_ks_and_moment_tests() {
        let mut noise = ChaChaNoise::from_seed(SEED).unwrap();
        let mut z = Vec::new();
        let mut row = [0.0f32; 4096];
        for step in 0..256 {
            noise.fill_standard_normal(step, 0, &mut row);
            z.extend_from_slice(&row);
        }
        assert!(z.iter().all(|x| f64::from(x.abs()) <= cap() + 1e-5));
        let v = verdict(z);
        assert!(
            v.moments_pass() && v.ks_passes(),
            "mean {:.2}, variance {:.2}, fourth {:.2}, √n·D {:.3}",
            v.mean,
            v.variance,
            v.fourth,
            v.ks
        );
    }

    /// The detectors fire on the sampler with tables built from wrong constants. `r = 3.4`
    /// (1.2% low, `v` right) leaves the top layer 19% short of its area and gives the tail
    /// beyond 3.4 too much mass: the variance is off by about 11 standard errors, while the
    /// KS distance stays below its threshold (`√n·D ≈ 0.6`). `v = 0.0097` (2% low, `r` right)
    /// misshapes every layer: `√n·D ≈ 6.7`. (Expected values from the mutants' exact output
    /// densities, integrated numerically.)
    #[test]
    fn the_tests_catch_wrong_constants() {
        let mut rng = ChaCha20Rng::from_seed(SEED);
        let (wrong_r, _) = crate::ziggurat::build(3.4, V);
        let v = verdict(samples(1 << 20, || sample(&wrong_r, &mut rng)));
        assert!(!v.moments_pass(), "r = 3.4: variance {:.2}", v.variance);
        let (wrong_v, _) = crate::ziggurat::build(R, 0.0097);
        let v = verdict(samples(1 << 20, || sample(&wrong_v, &mut rng)));
        assert!(!v.ks_passes(), "v = 0.0097: √n·D {:.3}", v.ks);
        // The same seed with the right tables passes.
        let (right, _) = crate::ziggurat::build(R, V);
        let v = verdict(samples(1 << 20, || sample(&right, &mut rng)));
        assert!(v.moments_pass() && v.ks_passes());
    }

    /// Words per sample, measured on ChaCha's word counter, agree with the expectation
    /// `(128 v / √(π/2))·(1 + P(wedge) + 2·P(tail)/a)`: tries per sample, each one word, plus a
    /// word per wedge test and two per tail try, the tail accepting with probability
    /// `a = r·∫_r^∞ e^{−x²/2} dx / e^{−r²/2}`.
    #[test]
    fn a_sample_takes_about_1_04_words() {
        use core::f64::consts::{FRAC_PI_2, SQRT_2};
        let k = |i: usize| f64::from(NORMAL.k[i]) / TWO_TO_24;
        let wedge = (1..128).map(|i| 1.0 - k(i)).sum::<f64>() / 128.0;
        let tail = (1.0 - k(0)) / 128.0;
        let tail_mass = libm::sqrt(FRAC_PI_2) * libm::erfc(R / SQRT_2);
        let accept = R * tail_mass / libm::exp(-0.5 * R * R);
        let tries = 128.0 * V / libm::sqrt(FRAC_PI_2);
        let expected = tries * (1.0 + wedge + 2.0 * tail / accept);
        assert!((expected - 1.041).abs() < 1e-3, "{expected}");
        let mut rng = ChaCha20Rng::from_seed(SEED);
        let n = 1 << 20;
        for _ in 0..n {
            standard_normal(&mut rng);
        }
        let measured = rng.get_word_pos() as f64 / f64::from(n);
        assert!(
            (measured - expected).abs() < 1e-3,
            "{measured} vs {expected}"
        );
    }

    const SEED: [u8; 32] = [7; 32];

    #[test]
    fn rows_do_not_depend_on_how_they_are_split() {
        let mut whole = [0.0f32; 3000];
        ChaChaNoise::from_seed(SEED)
            .unwrap()
            .fill_standard_normal(5, 0, &mut whole);
        let mut parts = [0.0f32; 3000];
        let mut noise = ChaChaNoise::from_seed(SEED).unwrap();
        // Unaligned pieces, out of order, with other steps in between.
        let mut scratch = [0.0f32; 10];
        noise.fill_standard_normal(5, 1500, &mut parts[1500..]);
        noise.fill_standard_normal(6, 0, &mut scratch);
        noise.fill_standard_normal(5, 7, &mut parts[7..1500]);
        noise.fill_standard_normal(5, 0, &mut parts[..7]);
        assert_eq!(whole, parts);
    }

    #[test]
    fn steps_and_seeds_give_different_rows() {
        let mut a = [0.0f32; 64];
        let mut b = [0.0f32; 64];
        let mut noise = ChaChaNoise::from_seed(SEED).unwrap();
        noise.fill_standard_normal(0, 0, &mut a);
        noise.fill_standard_normal(1, 0, &mut b);
        assert_ne!(a, b);
        ChaChaNoise::from_seed([8; 32])
            .unwrap()
            .fill_standard_normal(0, 0, &mut b);
        assert_ne!(a, b);
        ChaChaNoise::from_seed(SEED)
            .unwrap()
            .fill_standard_normal(0, 0, &mut b);
        assert_eq!(a, b);
    }

    /// A row filled in consecutive pieces of odd sizes (the cursor continues without
    /// repositioning) equals the row filled at once; a jump back repositions.
    fn consecutive_pieces_equal_one_call<N: NoiseSource>(mut make: impl FnMut() -> N) {
        let mut whole = [0.0f32; 3000];
        make().fill_standard_normal(9, 100, &mut whole);
        let mut pieces = [0.0f32; 3000];
        let mut noise = make();
        let mut start = 0;
        for len in [1, 13, 900, 1, 1111, 974] {
            noise.fill_standard_normal(9, 100 + start as u64, &mut pieces[start..start + len]);
            start += len;
        }
        assert_eq!(start, 3000);
        assert_eq!(whole, pieces);
        let mut again = [0.0f32; 50];
        noise.fill_standard_normal(9, 1000, &mut again);
        assert_eq!(again, whole[900..950]);
        noise.fill_standard_normal(8, 1950, &mut again);
        assert_ne!(again, whole[1850..1900]);
    }

    #[test]
    fn chacha_rows_filled_in_pieces_equal_one_call() {
        consecutive_pieces_equal_one_call(|| ChaChaNoise::from_seed(SEED).unwrap());
    }

    #[cfg(feature = "insecure-simulation")]
    mod simulation {
        use super::*;
        use crate::noise::InsecureSimulationNoise;

        fn sim(seed: [u8; 32]) -> InsecureSimulationNoise {
            InsecureSimulationNoise::from_seed(seed).unwrap()
        }

        #[test]
        fn rows_are_regenerable_in_any_split() {
            consecutive_pieces_equal_one_call(|| sim(SEED));
            let mut whole = [0.0f32; 3000];
            sim(SEED).fill_standard_normal(5, 0, &mut whole);
            let mut parts = [0.0f32; 3000];
            let mut noise = sim(SEED);
            noise.fill_standard_normal(5, 2047, &mut parts[2047..]);
            noise.fill_standard_normal(5, 0, &mut parts[..2047]);
            assert_eq!(whole, parts);
        }

        #[test]
        fn steps_blocks_and_seeds_give_different_rows() {
            let mut a = [0.0f32; 2048];
            let mut b = [0.0f32; 2048];
            sim(SEED).fill_standard_normal(0, 0, &mut a);
            sim(SEED).fill_standard_normal(1, 0, &mut b);
            assert_ne!(a, b);
            assert_ne!(a[..1024], a[1024..], "blocks have their own generators");
            sim([8; 32]).fill_standard_normal(0, 0, &mut b);
            assert_ne!(a, b);
            ChaChaNoise::from_seed(SEED)
                .unwrap()
                .fill_standard_normal(0, 0, &mut b);
            assert_ne!(a, b);
            assert!(matches!(
                InsecureSimulationNoise::from_seed([0; 32]),
                Err(Error::WeakSeed)
            ));
        }

        /// Mean and variance of 10⁶ samples within 5 standard errors of N(0, 1).
        #[test]
        fn samples_are_standard_normal() {
            let mut noise = sim(SEED);
            let mut row = [0.0f32; 10_000];
            let (mut sum, mut squares, mut n) = (0.0f64, 0.0f64, 0.0f64);
            for step in 0..100 {
                noise.fill_standard_normal(step, 0, &mut row);
                for &x in &row {
                    sum += f64::from(x);
                    squares += f64::from(x) * f64::from(x);
                    n += 1.0;
                }
            }
            let mean = sum / n;
            let variance = squares / n - mean * mean;
            assert!(mean.abs() < 5.0 / libm::sqrt(n), "{mean}");
            assert!(
                (variance - 1.0).abs() < 5.0 * libm::sqrt(2.0 / n),
                "{variance}"
            );
        }
    }

    #[cfg(feature = "os-entropy")]
    #[test]
    fn os_seeded_generators_differ() {
        let mut a = [0.0f32; 16];
        let mut b = [0.0f32; 16];
        ChaChaNoise::from_os_entropy()
            .unwrap()
            .fill_standard_normal(0, 0, &mut a);
        ChaChaNoise::from_os_entropy()
            .unwrap()
            .fill_standard_normal(0, 0, &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn the_zero_seed_is_refused() {
        assert!(matches!(
            ChaChaNoise::from_seed([0; 32]),
            Err(Error::WeakSeed)
        ));
    }
}
