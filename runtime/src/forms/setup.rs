//! Opening a stream: what every form derives from its blob and checks before it takes a step.
//!
//! A stream applies three numbers of the blob in `f32`, each rounded in the direction that keeps
//! the privacy claim: the noise scale `σ·ζ·sens` rounded **up** ([`noise_scale`], never below the
//! exact product), the clip norm `ζ` rounded **down** ([`clip_norm`]: clipping to a slightly
//! smaller norm is safe) and within the range [`crate::clip`] proves exact, and the horizon it
//! stops at ([`horizon`]). [`prepare`] runs these checks, and the workspace's, in the order every
//! form reports them, and hands the form its zeroed workspace. No `f64` arithmetic is needed for
//! the roundings ([`to_f32_rounded`] works on the bits): a Cortex-M4F has none in hardware.

use mfc_formats::Mechanism;

use crate::clip::clip_norm_supported;
use crate::error::Error;
use crate::noise::MAX_COORDINATES;

/// Whether a stream may have `dim` coordinates: at least one, and no more than a noise row can
/// address ([`MAX_COORDINATES`]).
pub(crate) const fn dimension_supported(dim: usize) -> bool {
    dim != 0 && dim as u64 <= MAX_COORDINATES
}

/// The steps a stream releases: the blob's `steps`, or for a sensitivity valid for every horizon
/// (`SensitivityMethod::BltTailBound`, a BLT's only) `u32::MAX`, the step counter's own limit —
/// the stream never stops earlier, and refuses the step after it rather than reuse a noise row.
pub(crate) fn horizon(mechanism: &Mechanism<'_>) -> u32 {
    if mechanism.header.sensitivity.method.covers_every_horizon() {
        u32::MAX
    } else {
        mechanism.header.steps
    }
}

/// The noise multiplier `σ` recorded in the blob ([`Error::NotCalibrated`] if none).
pub(crate) fn recorded_noise_multiplier(mechanism: &Mechanism<'_>) -> Result<f64, Error> {
    Ok(mechanism
        .header
        .calibration
        .ok_or(Error::NotCalibrated)?
        .noise_multiplier)
}

/// What a stream applies, in `f32`: the noise scale `σ·ζ·sens` and the clip norm `ζ`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scales {
    pub(crate) noise: f32,
    pub(crate) clip_norm: f32,
}

/// A positive finite `f64` as a normal `f32`, rounded down (toward zero) or up, from the bits:
/// truncate the significand to 24 bits, and add one ulp when rounding up discarded a non-zero
/// bit. No `f64` arithmetic (software on a Cortex-M4F) and a rounding direction chosen for
/// privacy, which `as f32` (to nearest) does not give. `None` unless `x` is positive, finite
/// and the result a finite normal `f32`.
pub(crate) fn to_f32_rounded(x: f64, up: bool) -> Option<f32> {
    let bits = x.to_bits();
    // Also refuses negative numbers, whose sign bit puts them above +∞.
    if bits == 0 || bits >= f64::INFINITY.to_bits() {
        return None;
    }
    let exponent = (bits >> 52) as i32 - 1023;
    if !(-126..=127).contains(&exponent) {
        return None;
    }
    let significand = bits & ((1 << 52) - 1);
    let truncated = ((exponent + 127) as u32) << 23 | (significand >> 29) as u32;
    let inexact = significand & ((1 << 29) - 1) != 0;
    let y = f32::from_bits(truncated + u32::from(up && inexact));
    y.is_finite().then_some(y)
}

/// `σ·ζ·sens` in `f32`, never below the exact product: the three factors are rounded up, the two
/// products round to nearest (a relative error of at most `u = 2⁻²⁴` each), and 3 ulps up (each
/// at least `u` of the value) more than make up for them; the excess is below `4·10⁻⁷`. `None`
/// unless every factor and the result are normal `f32` numbers.
pub(crate) fn noise_scale(noise_multiplier: f64, clip_norm: f64, sensitivity: f64) -> Option<f32> {
    let mut product = 1.0f32;
    for x in [noise_multiplier, clip_norm, sensitivity] {
        product *= to_f32_rounded(x, true)?;
    }
    let up = f32::from_bits(product.to_bits() + 3);
    (product.is_normal() && up.is_finite()).then_some(up)
}

/// The clip norm `ζ` a stream applies: the blob's, rounded down to `f32` (clipping to a slightly
/// smaller norm is safe), and in the range [`clip_factor`](crate::clip_factor) clips exactly.
pub(crate) fn clip_norm(mechanism: &Mechanism<'_>) -> Result<f32, Error> {
    to_f32_rounded(mechanism.header.clip_norm, false)
        .filter(|&z| clip_norm_supported(z))
        .ok_or(Error::UnsupportedClipNorm)
}

/// What every stream form checks and claims at construction, in this order: the workspace holds
/// `needed` floats ([`Error::WorkspaceTooSmall`]), `σ·ζ·sens` is a positive normal `f32`
/// ([`Error::InvalidNoiseMultiplier`], see [`noise_scale`]), and `ζ` rounded to `f32` is one
/// [`clip_factor`](crate::clip_factor) clips exactly ([`Error::UnsupportedClipNorm`]). Returns
/// the scales and the first `needed` floats of the workspace, zeroed.
pub(crate) fn prepare<'w>(
    mechanism: &Mechanism<'_>,
    noise_multiplier: f64,
    workspace: &'w mut [f32],
    needed: usize,
) -> Result<(Scales, &'w mut [f32]), Error> {
    let found = workspace.len();
    let Some(workspace) = workspace.get_mut(..needed) else {
        return Err(Error::WorkspaceTooSmall { needed, found });
    };
    let h = mechanism.header;
    let noise = noise_scale(noise_multiplier, h.clip_norm, h.sensitivity.value)
        .ok_or(Error::InvalidNoiseMultiplier)?;
    let clip_norm = clip_norm(mechanism)?;
    workspace.fill(0.0);
    Ok((Scales { noise, clip_norm }, workspace))
}

#[cfg(test)]
mod tests {
    use super::to_f32_rounded;
    use proptest::prelude::*;

    proptest! {
        /// Down: the largest `f32` at most `x`; up: the smallest at least `x` (checked in `f64`,
        /// where every `f32` is exact).
        #[test]
        fn directed_rounding_brackets_x(bits in 0x3810_0000_0000_0000u64..0x47ef_ffff_ffff_ffff) {
            let x = f64::from_bits(bits);
            let down = to_f32_rounded(x, false).unwrap();
            prop_assert!(f64::from(down) <= x && f64::from(down.next_up()) > x);
            match to_f32_rounded(x, true) {
                Some(up) => prop_assert!(f64::from(up) >= x && f64::from(up.next_down()) < x),
                None => prop_assert!(x > f64::from(f32::MAX)),
            }
        }
    }

    #[test]
    fn directed_rounding_refuses_what_is_not_a_positive_normal_f32() {
        for x in [
            0.0,
            -0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            1e-39,
            1e39,
            f64::MIN_POSITIVE,
        ] {
            assert_eq!(to_f32_rounded(x, false), None, "{x}");
            assert_eq!(to_f32_rounded(x, true), None, "{x}");
        }
        let max = f64::from(f32::MAX);
        assert_eq!(to_f32_rounded(max, true), Some(f32::MAX));
        assert_eq!(to_f32_rounded(max.next_up(), false), Some(f32::MAX));
        assert_eq!(to_f32_rounded(max.next_up(), true), None);
        let min = f64::from(f32::MIN_POSITIVE);
        assert_eq!(to_f32_rounded(min, false), Some(f32::MIN_POSITIVE));
        assert_eq!(to_f32_rounded(min.next_down(), true), None);
        assert_eq!(to_f32_rounded(0.1, false), Some(0.1f32.next_down()));
        assert_eq!(to_f32_rounded(0.1, true), Some(0.1f32));
    }
}
