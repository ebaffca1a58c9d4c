//! Clipping an input row to L2 norm `ζ` in `f32` arithmetic, with a proof that the clipped row's
//! norm never exceeds `ζ`.
//!
//! The mechanism's privacy rests on `‖clip(x)‖ ≤ ζ`: a clipped row whose norm is `ζ(1 + ε)` has
//! sensitivity `(1 + ε)` times the recorded one. Rounding errors in the norm and in the scaling
//! must therefore err on the small side. [`clip_factor`] returns `f` with `‖fl(f·x)‖ ≤ ζ` for
//! every finite row of at most 2⁵² coordinates and every `ζ` in `[2⁻⁶⁴, 2⁶⁴]`, in single
//! precision only (a Cortex-M4F has no `f64` hardware):
//!
//! 1. `m = max |xᵢ|`. If `m ≤ 2⁻³²ζ` then `‖x‖ ≤ √d·m ≤ 2⁻⁶ζ`: `f = 1`. If `m > 2⁹⁶ζ`, the
//!    row is zeroed (`f = 0`: its factor would be below `2⁻⁹⁶`; such a row is garbage, and
//!    zeroing is safe).
//! 2. Otherwise the row is scaled by the power of two `s` with `m·s ∈ [1, 4)` (exact, except
//!    for entries so small that `x·s` is subnormal, whose absolute error `2⁻¹⁵⁰` is negligible
//!    below) and `S = Σ (s·xᵢ)²` is summed pairwise: 16 lanes over blocks of 256 coordinates,
//!    the lanes added as a tree, the blocks combined by a binary counter. Every term passes
//!    through at most 108 roundings (1 square, ≤ 15 lane additions, 4 tree levels, ≤ 44
//!    carries, ≤ 44 final additions). With the round bound `D = 128`, `Ŝ ≥ S(1 − γ_D)` where
//!    `γ_D = Du/(1 − Du) ≈ 7.7·10⁻⁶`, `u = 2⁻²⁴` (Higham 2002, Lemma 3.1 and §4.2: terms are
//!    non-negative).
//! 3. `f = fl(fl(ζs / fl(√Ŝ))·(1 − 2⁻¹⁶))`, a normal number (`ζs ∈ [2⁻⁹⁶, 2³⁴)`,
//!    `√Ŝ ∈ [1, 2²⁸]`). With `‖x‖ = √S/s` and the correctly rounded square root, division,
//!    margin multiply and final products `fl(f·xᵢ)`:
//!
//!    `‖fl(f·x)‖ ≤ ζ·(1 + u)⁴·(1 − 2⁻¹⁶)/√(1 − γ_D) ≤ ζ·(1 − 1.1·10⁻⁵)`,
//!
//!    (the streams round the blob's `f64` clip norm down to `f32`, so this `ζ` is at most the
//!    blob's). If `f ≥ 1` the row is within the norm by the same bound and is left untouched
//!    (`f = 1`).
//!
//! So the clipped row's norm is at most `ζ`, and at least `ζ(1 − 2⁻¹⁵)` when it was clipped;
//! rows with `‖x‖ ≤ ζ(1 − 2⁻¹⁵)` are never changed. `tests/clip.rs` checks both against an
//! `f64` reference on random rows over the whole exponent range.

/// The margin `2⁻¹⁶` by which the factor is shrunk to cover every rounding error (module docs).
const MARGIN: f32 = 1.0 - 1.0 / 65536.0;
/// Coordinates per block of the pairwise sum (16 per lane).
const BLOCK: usize = 256;
/// Partial sums per block: independent chains of additions, which vectorize.
const LANES: usize = 16;
/// Rows longer than this (the stream's own limit) are not covered by the proof and are zeroed.
const MAX_LEN: u64 = 1 << 52;

/// Whether `ζ` lies in `[2⁻⁶⁴, 2⁶⁴]`, the clip norms [`clip_factor`] clips exactly.
pub fn clip_norm_supported(clip_norm: f32) -> bool {
    (1.0 / 18_446_744_073_709_551_616.0..=18_446_744_073_709_551_616.0).contains(&clip_norm)
}

/// `2⁹⁶`: rows whose largest magnitude exceeds `2⁹⁶·ζ` would need a clip factor below the
/// smallest normal `f32` the proof allows (module docs, step 1).
const MAX_RATIO: f32 = 79_228_162_514_264_337_593_543_950_336.0;

/// Whether a row whose largest magnitude is `largest` (finite) lies within the range
/// [`clip_factor`] clips exactly, `largest ≤ 2⁹⁶·ζ`; beyond it [`clip_factor`] returns 0 and the
/// streams refuse the row (`Error::InputTooLarge`, `Error::ExampleTooLarge`) rather than drop it
/// silently.
pub(crate) fn clip_range_holds(largest: f32, clip_norm: f32) -> bool {
    largest <= clip_norm * MAX_RATIO
}

/// The factor `f ∈ [0, 1]` that scales `row` to L2 norm at most `clip_norm` (`ζ`): `‖fl(f·x)‖ ≤ ζ`
/// with `f` within `2⁻¹⁵` of `min(1, ζ/‖x‖)` (module docs have the proof). Rows within
/// `ζ(1 − 2⁻¹⁵)` get exactly 1; rows more than `2⁹⁶ζ` long, rows with an entry that is not finite,
/// and a `ζ` outside [`clip_norm_supported`] (including NaN) get 0. The same row gives the same
/// factor on every target.
pub fn clip_factor(row: &[f32], clip_norm: f32) -> f32 {
    match largest_magnitude(row) {
        Ok(largest) => clip_factor_with_largest(row, clip_norm, largest),
        Err(_) => 0.0,
    }
}

/// [`clip_factor`] of a finite `row` whose largest magnitude, `largest`, the caller has found
/// already ([`largest_magnitude`]): the streams check their input and find it in one pass.
pub(crate) fn clip_factor_with_largest(row: &[f32], clip_norm: f32, largest: f32) -> f32 {
    if !clip_norm_supported(clip_norm) || row.len() as u64 > MAX_LEN {
        return 0.0;
    }
    // Exact products: ζ is a normal number in [2⁻⁶⁴, 2⁶⁴].
    if largest <= clip_norm * (1.0 / 4_294_967_296.0) {
        return 1.0;
    }
    if !clip_range_holds(largest, clip_norm) {
        return 0.0;
    }
    // `largest` > 2⁻⁹⁶ is normal, with biased exponent e ∈ [31, 254]: s = 2^(127 − e), but at
    // least 2⁻¹²⁶ (a normal number), so that largest·s ∈ [1, 4).
    let exponent = (largest.to_bits() >> 23) & 0xff;
    let scale = f32::from_bits(254u32.saturating_sub(exponent).max(1) << 23);
    let root = libm::sqrtf(scaled_sum_of_squares(row, scale));
    let factor = (clip_norm * scale / root) * MARGIN;
    if factor >= 1.0 { 1.0 } else { factor }
}

/// The bits of `+∞`: those of `|x|` are at least this exactly when `x` is not finite.
const INFINITY_BITS: u32 = 0x7f80_0000;

/// `max |xᵢ|` (0 for an empty row), or the index of the first entry that is not finite. One pass
/// over the bits of `|xᵢ|` in 8 integer lanes, which vectorizes: for non-negative floats the
/// order of the bits is the order of the values, with ±∞ and NaN above every finite one. The
/// position is searched only when there is one.
pub(crate) fn largest_magnitude(row: &[f32]) -> Result<f32, usize> {
    let mut lanes = [0u32; 8];
    let mut eights = row.chunks_exact(8);
    for eight in &mut eights {
        for (lane, &x) in lanes.iter_mut().zip(eight) {
            *lane = (*lane).max(x.to_bits() & 0x7fff_ffff);
        }
    }
    for (lane, &x) in lanes.iter_mut().zip(eights.remainder()) {
        *lane = (*lane).max(x.to_bits() & 0x7fff_ffff);
    }
    let largest = lanes.iter().fold(0, |m, &a| m.max(a));
    if largest >= INFINITY_BITS {
        return Err(row.iter().position(|x| !x.is_finite()).unwrap_or(0));
    }
    Ok(f32::from_bits(largest))
}

/// `Σ (s·xᵢ)²`, summed pairwise ([`LANES`] lanes per block of [`BLOCK`], blocks by a binary
/// counter) so that each term meets at most 108 roundings for any row of at most 2⁵² coordinates.
fn scaled_sum_of_squares(row: &[f32], scale: f32) -> f32 {
    // pending[k]: the sum of 2ᵏ consecutive blocks, for each set bit k of `blocks`.
    let mut pending = [0.0f32; 64];
    let mut blocks: u64 = 0;
    for block in row.chunks(BLOCK) {
        let mut lanes = [0.0f32; LANES];
        let parts = block.chunks_exact(LANES);
        let rest = parts.remainder();
        for part in parts.chain([rest]) {
            for (lane, &x) in lanes.iter_mut().zip(part) {
                let y = x * scale;
                *lane += y * y;
            }
        }
        // The lanes added as a tree of depth 4.
        let mut width = LANES;
        while width > 1 {
            width /= 2;
            let (low, high) = lanes.split_at_mut(width);
            for (l, h) in low.iter_mut().zip(high.iter()) {
                *l += *h;
            }
        }
        let mut sum = lanes[0];
        let mut level = 0;
        while blocks >> level & 1 == 1 {
            sum += pending.get(level).copied().unwrap_or(0.0);
            level += 1;
        }
        if let Some(slot) = pending.get_mut(level) {
            *slot = sum;
        }
        blocks += 1;
    }
    pending
        .iter()
        .enumerate()
        .filter(|&(level, _)| blocks >> level & 1 == 1)
        .fold(0.0, |total, (_, &p)| total + p)
}

/// Scales `row` in place to L2 norm at most `clip_norm` by [`clip_factor`]: rows within the
/// norm are untouched, rows above it keep their direction, and an unsupported `clip_norm` zeroes
/// the row.
pub fn clip_to_norm(row: &mut [f32], clip_norm: f32) {
    let factor = clip_factor(row, clip_norm);
    if factor < 1.0 {
        for x in row.iter_mut() {
            *x *= factor;
        }
    }
}
