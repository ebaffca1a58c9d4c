//! The FFT form under the max-error objective: nothing to optimize but the block length.
//!
//! The FFT mechanisms ([`crate::forms::fft`], Choquette-Choo et al. 2023, 001 App. K) have no free
//! parameters: the kernel `y` and the encoder `C_F = YE` are fixed in closed form by the block
//! length `m = n/s`. Of the two decoders, the optimal one `B = S C_F†` (Mechanism 2) is
//! **simultaneously** optimal for the total and for the max error among all decoders of that
//! encoder: every `B'` with `B'C_F = S` is `B + Z` with `Z C_F = 0`, whose rows are orthogonal
//! to the rows of `S C_F† = (S(C_FᵀC_F)⁻¹)C_Fᵀ` (those lie in the column space of `C_F`, the
//! rows of `Z` in its orthogonal complement), so `‖B'[i,:]‖² = ‖B[i,:]‖² + ‖Z[i,:]‖²` row by
//! row. (Mechanism 1, `B_F = PY`, has every row of the same norm `‖y‖`, so its max error is
//! its RMSE per step.) Under `--objective max` the choice left is the number of stamps `s` (and
//! the mechanism): [`choose_fft_for_max_error`] compiles the candidates and keeps the smallest
//! max error of what ships; the max error of a compiled mechanism is [`fft_max_error`].

use crate::forms::fft::{FftKind, FftMechanism, FftOptions, compile_fft};
use crate::privacy::participation::Participation;
use crate::{Error, Result};

/// `sens·max_i ‖B̂[i,:]‖` of a compiled FFT mechanism (its per-step variances).
pub fn fft_max_error(mechanism: &FftMechanism) -> f64 {
    super::max_step_stddev(&mechanism.per_step_variance)
}

/// One candidate of [`choose_fft_for_max_error`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FftCandidate {
    /// `s`.
    pub stamps: usize,
    /// The decoder.
    pub kind: FftKind,
    /// Its max error (what ships).
    pub max_error: f64,
}

/// Compiles both FFT decoders for every stamp count in `stamps` that divides `steps` and returns
/// the one with the smallest max error, with every candidate's figure.
pub fn choose_fft_for_max_error(
    steps: usize,
    stamps: &[usize],
    participation: &Participation,
) -> Result<(FftMechanism, Vec<FftCandidate>)> {
    let mut best: Option<(f64, FftMechanism)> = None;
    let mut candidates = Vec::new();
    for &s in stamps.iter().filter(|&&s| s > 0 && steps % s == 0) {
        for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
            let mechanism = compile_fft(&FftOptions {
                steps,
                stamps: s,
                kind,
                participation: *participation,
            })?;
            let max_error = fft_max_error(&mechanism);
            candidates.push(FftCandidate {
                stamps: s,
                kind,
                max_error,
            });
            if best.as_ref().is_none_or(|(v, _)| max_error < *v) {
                best = Some((max_error, mechanism));
            }
        }
    }
    let (_, mechanism) = best.ok_or_else(|| {
        Error::InvalidArgument(format!(
            "no stamp count in {stamps:?} divides the {steps} steps"
        ))
    })?;
    Ok((mechanism, candidates))
}
