//! The compile pipeline, pure math: optimum → streaming factorization → compression →
//! normalization → rounding to the stored precision → the sensitivity of what ships.
//!
//! The privacy-critical number is [`CompiledMechanism::sensitivity`]: the largest column norm of
//! the encoder `Ĉ = B̂⁻¹A` implied by the decoder **after** it was rounded to `f32`, i.e. of
//! exactly the coefficients the blob stores and the runtime multiplies by (Denisov et al. 2022,
//! App. H: "an optimal `C_B̂` can be found … as `B̂⁻¹S`").

use faer::MatRef;

use crate::compress::{BandedLowRank, CompressOptions, compress};
use crate::factorize::streaming_factorization;
use crate::optimize::{OptimizeOptions, Optimum, Progress, optimize_single_participation};
use crate::sensitivity::{encoder_for_decoder, loss, max_column_norm, per_step_variance};
use crate::{Error, Result};

/// A compiled banded-plus-low-rank mechanism, ready to be written as a blob.
#[derive(Debug, Clone)]
pub struct CompiledMechanism {
    /// The certified optimum the decoder approximates.
    pub optimum: Optimum,
    /// What ships: normalized so the encoder has sensitivity ≈ 1, every coefficient an `f32`.
    pub compressed: BandedLowRank,
    /// `max_j ‖(B̂⁻¹A)[:, j]‖` computed from the stored (rounded) coefficients.
    pub sensitivity: f64,
    /// `sqrt(L)` of what ships: `sens·‖B̂‖_F`.
    pub sqrt_loss: f64,
    /// `sqrt(L)` of the optimum.
    pub optimal_sqrt_loss: f64,
    /// `sens²·‖B̂[i,:]‖²` for every step.
    pub per_step_variance: Vec<f64>,
}

/// The sensitivity and loss of a decoder as stored.
fn shipped(a: MatRef<'_, f64>, decoder: &BandedLowRank) -> Result<(f64, f64, Vec<f64>)> {
    let dense = decoder.to_dense();
    let encoder = encoder_for_decoder(a, dense.as_ref())?;
    let sensitivity = max_column_norm(encoder.as_ref());
    if !(sensitivity.is_finite() && sensitivity > 0.0) {
        return Err(Error::Numerical(format!(
            "the shipped encoder has sensitivity {sensitivity}"
        )));
    }
    Ok((
        sensitivity,
        loss(dense.as_ref(), sensitivity),
        per_step_variance(dense.as_ref(), sensitivity),
    ))
}

/// Compiles the optimal single-participation mechanism for `a`, compressed to `(band, rank)`.
pub fn compile_banded(
    a: MatRef<'_, f64>,
    band: usize,
    rank: usize,
    optimize: &OptimizeOptions,
    compression: &CompressOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<CompiledMechanism> {
    let n = a.nrows();
    if band == 0 || band > n {
        return Err(Error::InvalidOption(format!(
            "the band h must be in 1..={n}, got {band}"
        )));
    }
    let optimum = optimize_single_participation(a, optimize, progress)?;
    let factorization = streaming_factorization(a, optimum.x.as_ref())?;
    let compressed = compress(factorization.decoder.as_ref(), band, rank, compression)?;
    // Normalize so that B̂⁻¹A has sensitivity 1, then round to what the blob stores, then
    // measure the sensitivity again from the rounded coefficients: that is the value recorded.
    let (approximate, _, _) = shipped(a, &compressed)?;
    let stored = compressed.scaled(approximate).rounded_to_f32();
    let (sensitivity, shipped_loss, per_step_variance) = shipped(a, &stored)?;
    Ok(CompiledMechanism {
        optimal_sqrt_loss: optimum.loss.sqrt(),
        optimum,
        compressed: stored,
        sensitivity,
        sqrt_loss: shipped_loss.sqrt(),
        per_step_variance,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn compiled(n: usize, h: usize, r: usize) -> CompiledMechanism {
        let a = Workload::PrefixSum.matrix(n).unwrap();
        compile_banded(
            a.as_ref(),
            h,
            r,
            &OptimizeOptions::default(),
            &CompressOptions::default(),
            &mut |_| {},
        )
        .unwrap()
    }

    /// Denisov et al. 2022, App. H, Table 2: (4, 4) at n = 256 and (5, 4) at n = 512.
    #[test]
    fn compressed_mechanisms_match_the_paper() {
        for (n, h, r, bound) in [(256, 4, 4, 40.50), (512, 5, 4, 62.30)] {
            let c = compiled(n, h, r);
            assert!(
                c.sqrt_loss <= bound,
                "n = {n} ({h}, {r}): sqrt(L) = {}",
                c.sqrt_loss
            );
            assert!(c.sqrt_loss >= c.optimum.dual_bound.sqrt());
            assert!((c.sensitivity - 1.0).abs() < 1e-5, "{}", c.sensitivity);
        }
    }

    #[test]
    fn shipped_coefficients_are_f32_and_loss_is_consistent() {
        let c = compiled(40, 3, 2);
        let d = &c.compressed;
        assert!(
            d.diagonals
                .iter()
                .chain(&d.left)
                .chain(&d.right)
                .all(|&x| f64::from(x as f32) == x)
        );
        let total: f64 = c.per_step_variance.iter().sum();
        assert!((total.sqrt() - c.sqrt_loss).abs() <= 1e-12 * c.sqrt_loss);
        // The full band is exact: (h, r) = (n, 0) ships the optimum itself (up to f32 rounding).
        let exact = compiled(24, 24, 0);
        assert!(
            (exact.sqrt_loss - exact.optimal_sqrt_loss).abs() <= 1e-5 * exact.optimal_sqrt_loss
        );
    }
}
