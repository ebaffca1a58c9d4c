//! BLTs (Dvijotham, McMahan, Pillutla, Steinke, Thakurta 2024) fitted for the max error.
//!
//! For the prefix-sum decoder `B = S T(r)` of a BLT (`r = 1/c` the decoder side's coefficients,
//! [`Blt`]), `B` is lower-triangular Toeplitz with coefficients `b_k = Σ_{j≤k} r_j`, so row `i`
//! holds `b_i, …, b_0` and `‖B[i,:]‖² = Σ_{k≤i} b_k²` **never decreases** with `i`: the max error
//! over `n` steps is the last step's, `sens·(Σ_{k<n} b_k²)^{1/2}` (jax_privacy's
//! `buffered_toeplitz.max_error` says the same; [`toeplitz::horizon_error`] uses it; the tests
//! check it against the dense rows). The objectives, all in units of `σ·ζ`:
//!
//! - **finite horizon `n`**: `sens_n·‖B[n−1,:]‖` with `sens_n` the sensitivity of the encoder over
//!   `n` steps under the schema ([`toeplitz_sensitivity`]): what jax_privacy's max-error BLT
//!   minimizes (`LossFn.build_closed_form_single_participation`, `build_min_sep(error='max')`);
//! - **unbounded** (`--horizon unbounded`, single participation): `sens_∞·‖B[n−1,:]‖`, the max
//!   error over the design horizon `n` with the sensitivity over **every** horizon,
//!   `sens_∞² = Σ_{t≥0} c_t²` — the sensitivity an unbounded blob records (as the device's
//!   certified bound, [`compile_blt_unbounded`]).
//!
//! **Why not jax_privacy's `limit_max_error`.** jax_privacy defines
//! `limit_max_loss = lim_{N→∞} max_error_N²/N = sens_∞²·r(1)²` with
//! `r(1) = 1 + Σ_j ω_j/(1 − θ_j)` ([`limit_growth_rate`] is its square root): the rate at which
//! the variance grows once the stream runs far past the decays' time scales. It has no minimum
//! over stable BLTs: with one buffer whose encoder pole `φ = θ − ω` tends to 1, `1 − φ = a`,
//! `−ω = t√a`, it is `(1 + t²/(a(2 − a)))·(a/(a + t√a))² → 0` as `a → 0` — a counter with a
//! decay near 1 has a tiny growth rate and a large error at every horizon anyone runs
//! (`tools/max_error_reference.py degenerate`: `θ = 1 − 10⁻⁶` has a growth rate below every
//! optimized BLT's and a max error at n = 2048 above theirs). jax_privacy itself only evaluates
//! it; its optimizer minimizes the finite-horizon max error. So the unbounded objective here is
//! the max error over the design horizon with the horizon-free sensitivity, and the growth rate
//! is reported beside it: past the design horizon the error grows like `√N` times it, as for
//! every fixed BLT (no fixed BLT tracks the `log N` of the optimum, [`super::dense`]).
//!
//! `sens_∞²` in closed form: the encoder's filter (the device's, run backwards,
//! [`Blt::encoder_coefficients`]) has `c_0 = 1`, `c_t = −ωᵀs_t` with `s_1 = 1`,
//! `s_{t+1} = M s_t`, `M = diag(θ) − 1ωᵀ`, so `Σ_{t≥1} c_t² = 1ᵀP1` for the solution of the
//! Stein equation `P = MᵀPM + ωωᵀ` (stable `M`): an `m² × m²` linear system.
//!
//! The fit follows [`crate::optimize::blt`]'s: L-BFGS on `(logit θ, ω)` of the log objective from
//! starts spread log-uniformly with `ω` fitted to the square root's decoder (the square root is
//! the optimal Toeplitz mechanism for the max error, Dvijotham et al. 2024, so a BLT
//! approximating it is the natural start), in both parametrizations, from the total-loss BLT,
//! and from the fit with one buffer fewer plus an idle buffer (the same mechanism, so the family
//! never gets worse with more buffers); what is kept is judged by what ships: `f32` parameters
//! whose encoder decays.

use faer::Mat;
use faer::prelude::Solve;

use crate::forms::blt::{CompiledBlt, compile_blt, compile_blt_unbounded};
use crate::optimize::blt::{Blt, fit_omega, idle_buffer_starts, minimize_smooth, optimize_blt};
use crate::optimize::toeplitz::{inverse_series, square_root_coefficients, toeplitz_sensitivity};
use crate::privacy::participation::Participation;
use crate::request::option::{Opt, OptionError};
use crate::{Error, Result};

/// Which sensitivity the max error is taken with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BltHorizon {
    /// The blob stops after the design steps `n`: `sens_n` under the schema.
    Finite,
    /// The blob never stops (`--horizon unbounded`, single participation): `sens_∞`.
    Unbounded,
}

/// `Σ_{k<n} b_k²` with `b_k = Σ_{j≤k} r_j`: `‖B[n−1,:]‖²`, the largest row (module docs).
fn last_row(r: &[f64]) -> f64 {
    let mut b = 0.0;
    r.iter()
        .map(|x| {
            b += x;
            b * b
        })
        .sum()
}

/// `sens_∞² = Σ_{t≥0} c_t²` of the encoder `C = T(r)⁻¹` of `blt` in closed form (module docs:
/// the Stein equation of its filter); `None` when the filter does not decay or the system is
/// singular.
pub fn unbounded_sensitivity_squared(blt: &Blt) -> Option<f64> {
    let m = blt.buffers();
    if m == 0 {
        return Some(1.0);
    }
    if !blt.is_stable() {
        return None;
    }
    // (I − Mᵀ ⊗ Mᵀ) vec P = vec(ωωᵀ), M = diag(θ) − 1ωᵀ, P symmetric m × m.
    let state = |i: usize, j: usize| (if i == j { blt.theta[i] } else { 0.0 }) - blt.omega[j];
    let size = m * m;
    // vec index (i, j) ↦ i·m + j; (MᵀPM)_ij = Σ_{k,l} M_ki P_kl M_lj.
    let system = Mat::from_fn(size, size, |row, col| {
        let (i, j) = (row / m, row % m);
        let (k, l) = (col / m, col % m);
        f64::from(u8::from(row == col)) - state(k, i) * state(l, j)
    });
    let rhs = Mat::from_fn(size, 1, |row, _| blt.omega[row / m] * blt.omega[row % m]);
    let p = system.partial_piv_lu().solve(&rhs);
    let total: f64 = (0..size).map(|q| p[(q, 0)]).sum();
    (total.is_finite() && total >= 0.0).then_some(1.0 + total)
}

/// `sens_∞·|r(1)| = lim_{N→∞} max_error_N/√N` with `r(1) = 1 + Σ_j ω_j/(1 − θ_j)`: the square
/// root of jax_privacy's `buffered_toeplitz.limit_max_loss` (module docs); `None` when the
/// encoder does not decay.
pub fn limit_growth_rate(blt: &Blt) -> Option<f64> {
    let r1 = 1.0
        + blt
            .omega
            .iter()
            .zip(&blt.theta)
            .map(|(w, t)| w / (1.0 - t))
            .sum::<f64>();
    Some(unbounded_sensitivity_squared(blt)?.sqrt() * r1.abs())
}

/// `ln` of the squared max error of the decoder-side BLT `blt` (module docs); infinite outside
/// the domain.
fn log_objective(blt: &Blt, n: usize, participation: &Participation, horizon: BltHorizon) -> f64 {
    if blt.theta.iter().any(|t| !(*t > 0.0 && *t < 1.0)) {
        return f64::INFINITY;
    }
    let row = last_row(&blt.decoder_coefficients(n));
    let sens2 = match horizon {
        BltHorizon::Finite => toeplitz_sensitivity(&blt.encoder_coefficients(n), n, participation)
            .value
            .powi(2),
        BltHorizon::Unbounded => match unbounded_sensitivity_squared(blt) {
            Some(s) => s,
            None => return f64::INFINITY,
        },
    };
    let value = sens2.ln() + row.ln();
    if value.is_nan() { f64::INFINITY } else { value }
}

/// The log objective of what ships: `blt` rounded to `f32`, infinite unless its encoder decays.
fn shipped_score(blt: &Blt, n: usize, participation: &Participation, horizon: BltHorizon) -> f64 {
    let rounded = blt.rounded_to_f32();
    if !rounded.is_stable() {
        return f64::INFINITY;
    }
    log_objective(&rounded, n, participation, horizon)
}

/// The best BLT with `buffers` buffers for the max error (module docs) from the spread starts
/// and `extra_starts`, rounded to `f32`, with its shipped score.
fn fit(
    n: usize,
    buffers: usize,
    participation: &Participation,
    horizon: BltHorizon,
    extra_starts: &[Blt],
) -> Result<(f64, Blt)> {
    let square_root = square_root_coefficients(n);
    let target = inverse_series(&square_root, n);
    let objective = |x: &[f64]| log_objective(&Blt::from_parameters(x), n, participation, horizon);
    // The encoder side: the parameters describe C itself (its coefficients are the BLT's
    // decoder_coefficients), r = 1/c.
    let encoder_side = |x: &[f64]| {
        let blt = Blt::from_parameters(x);
        if blt.theta.iter().any(|t| !(*t > 0.0 && *t < 1.0)) {
            return f64::INFINITY;
        }
        let c = blt.decoder_coefficients(n);
        let row = last_row(&blt.encoder_coefficients(n));
        let sens2 = match horizon {
            BltHorizon::Finite => toeplitz_sensitivity(&c, n, participation).value.powi(2),
            // C's own coefficients are 1, Σ ω θ^{t−1}: Σ c_t² = 1 + Σ_{ij} ω_iω_j/(1 − θ_iθ_j).
            BltHorizon::Unbounded => {
                let mut total = 1.0;
                for (wi, ti) in blt.omega.iter().zip(&blt.theta) {
                    for (wj, tj) in blt.omega.iter().zip(&blt.theta) {
                        total += wi * wj / (1.0 - ti * tj);
                    }
                }
                total
            }
        };
        let value = sens2.ln() + row.ln();
        if value.is_nan() { f64::INFINITY } else { value }
    };
    // Decays spread log-uniformly, 1 − θ_j from `slowest` to `1 − fastest`; the smallest gaps
    // (an encoder pole within 10⁻⁹ of 1, a nearly flat tail of C, as jax_privacy's min-sep
    // optimum at n = 512 has) are only tried on the encoder side.
    let spread = |slowest: f64, fastest: f64| -> Vec<f64> {
        (0..buffers)
            .map(|j| {
                let t = if buffers == 1 {
                    0.5
                } else {
                    j as f64 / (buffers - 1) as f64
                };
                let (lo, hi) = (slowest.min(0.5).ln(), (1.0 - fastest).ln());
                1.0 - (lo + t * (hi - lo)).exp()
            })
            .collect()
    };
    let mut spreads: Vec<(Vec<f64>, bool)> = Vec::new();
    for fastest in [0.3f64, 0.5, 0.7] {
        for slowest in [0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0].map(|s| s / n as f64) {
            spreads.push((spread(slowest, fastest), true));
        }
        for slowest in [1e-9, 1e-7, 1e-5] {
            spreads.push((spread(slowest, fastest), false));
        }
    }
    let mut best: Option<(f64, Blt)> = None;
    let consider = |candidate: Blt, best: &mut Option<(f64, Blt)>| {
        let Ok((x, _)) = minimize_smooth(&objective, candidate.parameters()) else {
            return;
        };
        let fitted = Blt::from_parameters(&x);
        let value = shipped_score(&fitted, n, participation, horizon);
        if value.is_finite() && best.as_ref().is_none_or(|(v, _)| value < *v) {
            *best = Some((value, fitted));
        }
    };
    for start in extra_starts {
        consider(start.clone(), &mut best);
    }
    for (theta, decoder_side) in spreads {
        if let Some(omega) = fit_omega(&theta, &target).filter(|_| decoder_side) {
            consider(
                Blt {
                    theta: theta.clone(),
                    omega,
                },
                &mut best,
            );
        }
        if let Some(omega) = fit_omega(&theta, &square_root) {
            let start = Blt { theta, omega };
            if let Ok((x, _)) = minimize_smooth(&encoder_side, start.parameters()) {
                if let Some(inverse) = Blt::from_parameters(&x).inverse(n) {
                    consider(inverse, &mut best);
                }
            }
        }
    }
    // Polish the best, restarting L-BFGS until what ships stops improving.
    let (mut value, mut blt) = best.ok_or_else(|| {
        Error::Numerical(format!(
            "no stable BLT with {buffers} buffers converged for the max error"
        ))
    })?;
    for _ in 0..20 {
        let Ok((x, _)) = minimize_smooth(&objective, blt.parameters()) else {
            break;
        };
        let polished = Blt::from_parameters(&x);
        let score = shipped_score(&polished, n, participation, horizon);
        if score >= value - 1e-13 {
            break;
        }
        (value, blt) = (score, polished);
    }
    Ok((value, blt.rounded_to_f32()))
}

/// The BLTs with `1, …, max_buffers` buffers minimizing the max error over `n` steps
/// (module docs) under `participation` with the sensitivity of `horizon`, each rounded to `f32`
/// and never worse than the one before; `fitted(m)` is called after each.
pub fn optimize_blt_max_error_family(
    n: usize,
    max_buffers: usize,
    participation: &Participation,
    horizon: BltHorizon,
    fitted: &mut dyn FnMut(usize),
) -> Result<Vec<Blt>> {
    if max_buffers == 0 || max_buffers > mfc_formats::MAX_BLT_BUFFERS as usize || n < 2 {
        return Err(Error::Option(OptionError::new(
            Opt::Buffers,
            max_buffers,
            format!(
                "a BLT needs 1 to {} buffers and at least two steps (n = {n})",
                mfc_formats::MAX_BLT_BUFFERS
            ),
        )));
    }
    if horizon == BltHorizon::Unbounded && !matches!(participation, Participation::Single) {
        return Err(Error::Option(OptionError::new(
            Opt::Horizon,
            "unbounded",
            format!(
                "the bound for every horizon is proven for single participation only (the schema is {participation:?}; allowed: no {{min_sep}}, {{every}} or {{epochs}})"
            ),
        )));
    }
    let mut family: Vec<Blt> = Vec::with_capacity(max_buffers);
    for m in 1..=max_buffers {
        let mut warm: Vec<Blt> = family.last().map_or_else(Vec::new, idle_buffer_starts);
        // The total-loss fit is a good start too (it is close to the max-error one).
        if let Ok(total) = optimize_blt(n, m, participation) {
            warm.push(total);
        }
        let padded = family.last().map(|previous| {
            let mut blt = previous.clone();
            blt.theta.push(0.5);
            blt.omega.push(0.0);
            blt
        });
        let best = match (fit(n, m, participation, horizon, &warm), padded) {
            (Ok((value, blt)), Some(padded)) => {
                if shipped_score(&padded, n, participation, horizon) <= value {
                    padded
                } else {
                    blt
                }
            }
            (Ok((_, blt)), None) => blt,
            (Err(_), Some(padded)) => padded,
            (Err(e), None) => return Err(e),
        };
        family.push(best);
        fitted(m);
    }
    Ok(family)
}

/// Experiment hook: one L-BFGS run of the max-error objective from `start`.
pub fn polish_from(
    start: &Blt,
    n: usize,
    participation: &Participation,
    horizon: BltHorizon,
) -> (f64, Blt) {
    let objective = |x: &[f64]| log_objective(&Blt::from_parameters(x), n, participation, horizon);
    let (x, v) = minimize_smooth(&objective, start.parameters()).unwrap();
    ((v.exp()).sqrt(), Blt::from_parameters(&x))
}

/// A BLT compiled for the max error: the shipped parameters with the sensitivity of exactly
/// them ([`compile_blt`] or [`compile_blt_unbounded`]), its max error, and the growth rate past
/// the design horizon.
#[derive(Debug, Clone)]
pub struct MaxErrorBlt {
    /// What ships.
    pub compiled: CompiledBlt,
    /// `sens·max_{i<n} ‖B[i,:]‖` of the stored parameters (`compiled.horizon_error`).
    pub max_error: f64,
    /// `lim_{N→∞} max_error_N/√N` with `sens_∞` ([`limit_growth_rate`]).
    pub limit_growth_rate: Option<f64>,
}

/// Compiles `blt` for `n` design steps as a blob would store it (finite: the runtime stops at
/// `n`; unbounded: the certified horizon-free sensitivity), with its max error.
pub fn compile_max_error_blt(
    blt: &Blt,
    n: usize,
    participation: &Participation,
    horizon: BltHorizon,
) -> Result<MaxErrorBlt> {
    let compiled = match horizon {
        BltHorizon::Finite => compile_blt(blt, n, n, participation)?,
        BltHorizon::Unbounded => compile_blt_unbounded(blt, n, participation)?,
    };
    Ok(MaxErrorBlt {
        max_error: compiled.horizon_error.max_step_stddev,
        limit_growth_rate: limit_growth_rate(&compiled.blt),
        compiled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forms::blt::{horizon_errors, unbounded_sensitivity};

    fn dense_toeplitz(c: &[f64], n: usize) -> Mat<f64> {
        Mat::from_fn(n, n, |i, j| if j <= i { c[i - j] } else { 0.0 })
    }

    /// jax_privacy 2.0's max-error BLTs at n = 2048 (`tools/max_error_reference.py blt2048`),
    /// decoder side (mfc's convention): `(θ, ω, max error with sens over n, with sens_∞,
    /// √limit_max_loss)`.
    fn jax_blts() -> Vec<(Blt, f64, f64, f64)> {
        vec![
            (
                Blt {
                    theta: vec![0.990_262_328_232_059_2, 0.581_982_861_127_674_9],
                    omega: vec![-0.001_268_808_055_430_734_8, -0.355_676_079_312_660_4],
                },
                3.584_574_978,
                3.591_909_274,
                3.470_077e-2,
            ),
            (
                Blt {
                    theta: vec![
                        0.997_957_647_753_839_4,
                        0.980_466_551_990_884,
                        0.847_322_054_746_855_9,
                        0.236_153_932_131_824_56,
                    ],
                    omega: vec![
                        -7.554_940_037_874_554e-5,
                        -0.001_861_270_231_848_636_8,
                        -0.040_341_856_511_062_785,
                        -0.451_326_293_758_553_65,
                    ],
                },
                3.494_207_608,
                3.575_903_427,
                2.415_858e-2,
            ),
        ]
    }

    /// The rows of `B = S T(r)` never decrease, the last one is `Σ_{k<n} b_k²`, and the
    /// sensitivity of the encoder over `n` steps is the first column's norm: all against the
    /// dense matrices (`C = T(r)⁻¹` by a dense triangular solve).
    #[test]
    fn the_last_row_is_the_max_error() {
        for (blt, ..) in jax_blts() {
            let n = 300;
            let r = blt.decoder_coefficients(n);
            let s = Mat::from_fn(n, n, |i, j| f64::from(u8::from(j <= i)));
            let b = &s * dense_toeplitz(&r, n);
            let rows: Vec<f64> = (0..n).map(|i| b.row(i).squared_norm_l2()).collect();
            assert!(rows.windows(2).all(|w| w[1] >= w[0]));
            assert!((rows[n - 1] - last_row(&r)).abs() <= 1e-12 * rows[n - 1]);
            let mut c = Mat::<f64>::identity(n, n);
            dense_toeplitz(&r, n).solve_lower_triangular_in_place(c.as_mut());
            let sens = (0..n).map(|j| c.col(j).norm_l2()).fold(0.0, f64::max);
            let e = log_objective(&blt, n, &Participation::Single, BltHorizon::Finite);
            assert!(
                (e - (sens * sens * rows[n - 1]).ln()).abs() < 1e-12,
                "{e} vs dense"
            );
        }
    }

    /// `sens_∞²` from the Stein equation against the sum of `c_t²` over 10⁶ steps (the filter
    /// run step by step), and against the device's certified bound, which is at least it.
    #[test]
    fn the_stein_equation_gives_the_unbounded_sensitivity() {
        for (blt, ..) in jax_blts() {
            let closed = unbounded_sensitivity_squared(&blt).unwrap();
            let series: f64 = blt
                .encoder_coefficients(1_000_000)
                .iter()
                .map(|c| c * c)
                .sum();
            assert!(
                (closed - series).abs() <= 1e-10 * series,
                "{closed} vs {series}"
            );
            let stored = blt.rounded_to_f32();
            let certified = unbounded_sensitivity(&stored).unwrap().value;
            let exact = unbounded_sensitivity_squared(&stored).unwrap().sqrt();
            assert!(certified >= exact && certified <= exact * (1.0 + 1e-6));
        }
        let divergent = Blt {
            theta: vec![0.9, 0.3],
            omega: vec![-0.2, -0.1],
        };
        assert!(unbounded_sensitivity_squared(&divergent).is_none());
        assert_eq!(
            unbounded_sensitivity_squared(&Blt {
                theta: vec![],
                omega: vec![]
            }),
            Some(1.0)
        );
    }

    /// mfc's evaluation of jax_privacy's own BLTs gives jax_privacy's figures (its closed forms
    /// of arXiv 2404.16706, Lemmas 5.3–5.4, and `limit_max_loss`), and the growth rate is the
    /// limit of `max_error_N/√N` (the closed-form rows of [`horizon_errors`] at N = 10¹²).
    #[test]
    fn jax_privacy_figures_are_reproduced() {
        for (blt, finite, unbounded, growth) in jax_blts() {
            let n = 2048;
            let ours = log_objective(&blt, n, &Participation::Single, BltHorizon::Finite);
            assert!(
                (ours.exp().sqrt() - finite).abs() < 2e-9,
                "{}",
                ours.exp().sqrt()
            );
            let ours = log_objective(&blt, n, &Participation::Single, BltHorizon::Unbounded);
            assert!((ours.exp().sqrt() - unbounded).abs() < 2e-9);
            let rate = limit_growth_rate(&blt).unwrap();
            assert!((rate - growth).abs() <= 1e-6 * growth, "{rate} vs {growth}");
            let sens = unbounded_sensitivity_squared(&blt).unwrap().sqrt();
            let far: f64 = 1e12;
            let e = horizon_errors(&blt, &[far as usize], sens)[0];
            assert!((e.max_step_stddev / far.sqrt() - rate).abs() <= 1e-4 * rate);
        }
    }

    /// At n = 256: the max-error family is monotone in the buffers, never worse than the
    /// total-loss BLT in max error, and what ships is `f32`.
    #[test]
    fn the_family_is_monotone_and_beats_the_total_loss_fit() {
        let n = 256;
        let p = Participation::Single;
        for horizon in [BltHorizon::Finite, BltHorizon::Unbounded] {
            let family = optimize_blt_max_error_family(n, 3, &p, horizon, &mut |_| {}).unwrap();
            let mut previous = f64::INFINITY;
            for (m, blt) in family.iter().enumerate() {
                assert_eq!(blt, &blt.rounded_to_f32());
                let value = compile_max_error_blt(blt, n, &p, horizon)
                    .unwrap()
                    .max_error;
                assert!(
                    value <= previous * (1.0 + 1e-12),
                    "{horizon:?} m = {}",
                    m + 1
                );
                previous = value;
                let total = optimize_blt(n, m + 1, &p).unwrap();
                let total = compile_max_error_blt(&total, n, &p, horizon)
                    .unwrap()
                    .max_error;
                assert!(
                    value <= total * (1.0 + 1e-9),
                    "{horizon:?} m = {}: {value} > {total}",
                    m + 1
                );
            }
        }
        assert!(
            optimize_blt_max_error_family(
                n,
                2,
                &Participation::min_separation(2, 64).unwrap(),
                BltHorizon::Unbounded,
                &mut |_| {}
            )
            .is_err()
        );
    }
}
