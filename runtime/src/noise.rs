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
        })
    }
}

impl NoiseSource for ChaChaNoise {
    fn fill_standard_normal(&mut self, step: u64, offset: u64, out: &mut [f32]) {
        self.rng.set_stream(step);
        let mut coordinate = offset;
        let mut rest = out;
        while !rest.is_empty() {
            let block = coordinate / BLOCK;
            let within = coordinate % BLOCK;
            self.rng.set_word_pos(u128::from(block) << BLOCK_WORDS_LOG2);
            for _ in 0..within {
                let _: f64 = StandardNormal.sample(&mut self.rng);
            }
            let take = rest.len().min((BLOCK - within) as usize);
            let (now, later) = rest.split_at_mut(take);
            for x in now {
                let z: f64 = StandardNormal.sample(&mut self.rng);
                *x = z as f32;
            }
            rest = later;
            coordinate += take as u64;
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

    #[test]
    fn the_zero_seed_is_refused() {
        assert!(matches!(
            ChaChaNoise::from_seed([0; 32]),
            Err(Error::WeakSeed)
        ));
    }
}
