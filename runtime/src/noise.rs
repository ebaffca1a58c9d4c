//! Gaussian noise rows `z_t ~ N(0, I_d)`, regenerable per step and per coordinate range.
//!
//! A [`NoiseSource`] is a pure function of (seed, step, coordinate): the runtime asks for row `t`
//! once, but a device short of RAM may recompute a row instead of storing it, and shards of one
//! large row can be produced by separate workers and still agree. [`ChaChaNoise`] is the secure
//! default: ChaCha20 keyed by a 256-bit seed, one ChaCha stream per step, and coordinates grouped
//! in blocks of [`BLOCK`] that start at fixed word positions (`block << 26`), so any block can be
//! reached directly. Samples come from `rand_distr`'s ziggurat `StandardNormal` in `f64`, cast to
//! `f32`.
//!
//! # The tail
//!
//! The ziggurat has a largest output. Its tail branch (Marsaglia's method) returns
//! `R − x` with `R = 3.654152885…` and `x = ln(u₁)/R`, accepted only if `x² ≤ −2 ln(u₂)`, where
//! `u₁, u₂` are `Open01` uniforms built from 52 random bits, so `u ≥ 2⁻⁵³`. Hence
//! `|x| ≤ √(106 ln 2) ≈ 8.5717` and every sample satisfies
//!
//! `|z| ≤ R + √(106 ln 2) ≈ 12.2258`
//!
//! (the body of the ziggurat returns `|z| < R`). The noise is thus truncated at about `12.2σ`,
//! above the required `8σ`; `P(|N(0,1)| > 12.2258) ≈ 2.3·10⁻³⁴`. A test pins the bound.
//!
//! # Other sources
//!
//! - With the `os-entropy` feature, `ChaChaNoise::from_os_entropy` seeds from the operating
//!   system (`getrandom`): the way to seed a stream on a host. Devices pass a seed from their
//!   hardware RNG to [`ChaChaNoise::from_seed`].
//! - With the `insecure-simulation` feature, `InsecureSimulationNoise` (Xoshiro256++, one
//!   generator per step and block) follows the same contract several times faster. It is
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
//! coordinates below [`MAX_COORDINATES`] `= 2⁵²` have distinct blocks (the stream refuses larger
//! dimensions). A block of 1024 samples uses about 2 100 words on average; running into the next
//! block would need 2²⁶ words, which does not happen in practice.

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

use crate::Error;

/// Coordinates per independently addressable block of a noise row.
pub const BLOCK: u64 = 1024;
/// log2 of the ChaCha words reserved for one block (a block uses about 2 words per sample).
const BLOCK_WORDS_LOG2: u32 = 26;
/// Coordinates per noise row [`ChaChaNoise`] can address without two blocks sharing words.
pub const MAX_COORDINATES: u64 = 1 << (68 - BLOCK_WORDS_LOG2 + 10);

/// A source of i.i.d. standard normal noise rows.
pub trait NoiseSource {
    /// Fills `out` with coordinates `offset .. offset + out.len()` of the noise row `z_step`.
    /// The values must depend only on the source's seed, `step` and the coordinate index.
    fn fill_standard_normal(&mut self, step: u64, offset: u64, out: &mut [f32]);
}

/// ChaCha20-based noise: the default, cryptographically secure source.
pub struct ChaChaNoise {
    rng: ChaCha20Rng,
    /// `(step, coordinate)` the generator is positioned at, if it is at a sample boundary.
    cursor: Option<(u64, u64)>,
}

impl ChaChaNoise {
    /// Keys the generator with a secret 32-byte seed (from the OS or a hardware RNG; never
    /// reused for another stream). The all-zero seed is refused.
    pub fn from_seed(seed: [u8; 32]) -> Result<Self, Error> {
        if seed == [0; 32] {
            return Err(Error::WeakSeed);
        }
        Ok(Self {
            rng: ChaCha20Rng::from_seed(seed),
            cursor: None,
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
        let mut coordinate = offset;
        let mut rest = out;
        while !rest.is_empty() {
            let block = coordinate / BLOCK;
            let within = coordinate % BLOCK;
            if within == 0 || self.cursor != Some((step, coordinate)) {
                if self.rng.get_stream() != step {
                    self.rng.set_stream(step);
                }
                self.rng.set_word_pos(u128::from(block) << BLOCK_WORDS_LOG2);
                for _ in 0..within {
                    let _: f64 = StandardNormal.sample(&mut self.rng);
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

/// Fills `out` with ziggurat samples, drawn in `f64` and rounded to `f32`.
#[inline]
fn draw<R: rand_core::Rng + ?Sized>(rng: &mut R, out: &mut [f32]) {
    for x in out {
        let z: f64 = StandardNormal.sample(rng);
        *x = z as f32;
    }
}

#[cfg(feature = "insecure-simulation")]
pub use simulation::InsecureSimulationNoise;

#[cfg(feature = "insecure-simulation")]
mod simulation {
    use rand_core::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::{BLOCK, NoiseSource, draw};
    use crate::Error;

    /// **Not secure.** Xoshiro256++ noise for simulations and benchmarks: the same contract as
    /// [`ChaChaNoise`](super::ChaChaNoise) (a pure function of seed, step and coordinate, blocks
    /// of [`BLOCK`] coordinates reachable directly), several times faster, and predictable: a few
    /// outputs reveal the generator's state and with it every other noise value, so a release
    /// noised by it is **not** differentially private. Only built with the `insecure-simulation`
    /// feature.
    ///
    /// Block `b` of step `t` has its own generator, whose 256-bit state is the key mixed with
    /// `(t, b)` by SplitMix64's finalizer.
    pub struct InsecureSimulationNoise {
        key: [u64; 4],
        rng: Xoshiro256PlusPlus,
        cursor: Option<(u64, u64)>,
    }

    /// SplitMix64's finalizer: a bijection of `u64` with full avalanche.
    fn mix(mut x: u64) -> u64 {
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

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
                rng: Xoshiro256PlusPlus::seed_from_u64(0),
                cursor: None,
            })
        }

        /// The generator of block `block` of row `step`.
        fn block_rng(&self, step: u64, block: u64) -> Xoshiro256PlusPlus {
            let tweak = mix(step.wrapping_mul(GOLDEN) ^ mix(block.wrapping_add(GOLDEN)));
            let mut state = [0u8; 32];
            let mut lane = tweak;
            for (bytes, &k) in state.chunks_exact_mut(8).zip(&self.key) {
                lane = lane.wrapping_add(GOLDEN);
                bytes.copy_from_slice(&mix(k ^ lane).to_le_bytes());
            }
            // An all-zero state (probability 2⁻²⁵⁶) is replaced by a fixed one inside.
            Xoshiro256PlusPlus::from_seed(state)
        }
    }

    impl NoiseSource for InsecureSimulationNoise {
        fn fill_standard_normal(&mut self, step: u64, offset: u64, out: &mut [f32]) {
            let mut coordinate = offset;
            let mut rest = out;
            while !rest.is_empty() {
                let block = coordinate / BLOCK;
                let within = coordinate % BLOCK;
                if within == 0 || self.cursor != Some((step, coordinate)) {
                    self.rng = self.block_rng(step, block);
                    for _ in 0..within {
                        let _: f64 = StandardNormal.sample(&mut self.rng);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::convert::Infallible;

    /// Replays fixed 64-bit words, to drive the ziggurat into its tail.
    struct Replay<'a>(&'a [u64]);

    impl rand_core::TryRng for Replay<'_> {
        type Error = Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Infallible> {
            Ok(self.try_next_u64()? as u32)
        }
        fn try_next_u64(&mut self) -> Result<u64, Infallible> {
            let (first, rest) = self.0.split_first().expect("replay exhausted");
            self.0 = rest;
            Ok(*first)
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
            for chunk in dst.chunks_mut(8) {
                let word = self.try_next_u64()?.to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
            Ok(())
        }
    }

    /// The documented cap `R + √(106 ln 2) ≈ 12.2258` is reached (to 1e-3) and not exceeded.
    #[test]
    fn the_tail_reaches_but_does_not_pass_the_documented_cap() {
        let cap = 3.654_152_885_361_009 + libm::sqrt(106.0 * core::f64::consts::LN_2);
        assert!((cap - 12.2258).abs() < 1e-4);
        // Layer 0 (low byte 0) with |u| ≈ 1 enters the tail; then u₁ = 112.5·2⁻⁵², u₂ = 2⁻⁵³
        // (fraction bits 0): the most extreme accepted pair. Fraction 111 is rejected.
        let positive = 0xffff_ffff_ffff_f000;
        let negative = 0x0000_0000_0000_1000;
        let extreme: f64 = StandardNormal.sample(&mut Replay(&[positive, 112 << 12, 0]));
        assert!(extreme <= cap && extreme > cap - 1e-3, "{extreme}");
        let retried: f64 =
            StandardNormal.sample(&mut Replay(&[positive, 111 << 12, 0, 112 << 12, 0]));
        assert_eq!(retried, extreme);
        let mirrored: f64 = StandardNormal.sample(&mut Replay(&[negative, 112 << 12, 0]));
        assert_eq!(mirrored, -extreme);
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
