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
//! its RMSE per step.) So `mfc compile --objective max` ships the FFT blob asked for, the same
//! under both objectives, and its report says the objective is `none`. What is left to choose
//! is the number of stamps `s` and the mechanism, which a request fixes: for a library caller
//! choosing them, [`choose_fft_for_max_error`] compiles the candidates and keeps the smallest
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forms::fft::stored_dense_decoder;
    use crate::max_error::reference::{close, max_stddev, per_step_variance};

    /// Every candidate's max error is `sens·max_i ‖B̂[i,:]‖` of the dense decoder the runtime
    /// replays from the stored `f32` kernel and generator, with the recorded sensitivity; the
    /// mechanism chosen is the one with the smallest such value. Mechanism 2's figures use the
    /// exact `T̂⁻¹` where the device applies the stored generator: they may differ by its
    /// residual `‖M̂T̂ − I‖₁`.
    #[test]
    fn the_choice_is_the_smallest_max_error_of_what_ships() {
        let steps = 24;
        let stamps = [1, 2, 3, 4, 5, 6, 7];
        for participation in [
            Participation::Single,
            Participation::min_separation(3, 8).unwrap(),
        ] {
            let (chosen, candidates) =
                choose_fft_for_max_error(steps, &stamps, &participation).unwrap();
            assert_eq!(
                candidates.len(),
                2 * 5,
                "s ∈ {{1, 2, 3, 4, 6}}, both decoders"
            );
            let mut dense = Vec::new();
            for candidate in &candidates {
                let mechanism = compile_fft(&FftOptions {
                    steps,
                    stamps: candidate.stamps,
                    kind: candidate.kind,
                    participation,
                })
                .unwrap();
                let b = stored_dense_decoder(
                    mechanism.kind,
                    mechanism.stamps,
                    &mechanism.kernel,
                    &mechanism.generator,
                );
                assert_eq!(b.nrows(), steps);
                let value = max_stddev(&per_step_variance(b.as_ref(), mechanism.sensitivity));
                let tolerance = 1e-10 + 4.0 * mechanism.generator_residual;
                assert!(
                    close(candidate.max_error, value, tolerance),
                    "{participation:?} {candidate:?}: dense {value}"
                );
                assert!(close(fft_max_error(&mechanism), value, tolerance));
                dense.push(value);
            }
            // The chosen one has the smallest reported value, and (the reported values being
            // the dense ones within the residual) the smallest dense value up to the residual:
            // at s = 1 the two decoders differ by 6·10⁻⁸ relative.
            let reported = candidates
                .iter()
                .map(|c| c.max_error)
                .fold(f64::INFINITY, f64::min);
            assert_eq!(fft_max_error(&chosen), reported);
            let smallest = dense.iter().copied().fold(f64::INFINITY, f64::min);
            let position = candidates
                .iter()
                .position(|c| (c.stamps, c.kind) == (chosen.stamps, chosen.kind))
                .unwrap();
            assert_eq!(candidates[position].max_error, reported);
            assert!(
                dense[position] <= smallest * (1.0 + 1e-6),
                "{participation:?}: {candidates:?} vs dense {dense:?}"
            );
        }
        assert!(choose_fft_for_max_error(steps, &[5, 7], &Participation::Single).is_err());
    }
}
