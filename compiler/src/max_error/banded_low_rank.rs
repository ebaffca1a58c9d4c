//! The banded-plus-low-rank `(h, r)` form compiled for the max error, single participation.
//!
//! The pipeline of [`crate::forms::banded::compile`] with the objective changed at each step:
//!
//! 1. the certified max-error optimum `X` ([`super::dense`]) and its streaming factorization
//!    `B = A C⁻¹`, whose rows all have (nearly) the same norm on the prefix sum;
//! 2. the ALS fit of `B` to `(h, r)` ([`crate::forms::banded::compress`], unchanged: it fits entries);
//! 3. a descent on the shipped max error itself: L-BFGS on the smooth surrogate
//!    `s_p²(Ĉ)·R_q(B̂)`, where `s_p²` is the `p`-norm of the squared column norms of
//!    `Ĉ = B̂⁻¹A` (`forms::banded::refine`'s surrogate of the sensitivity, shared code) and
//!    `R_q = (Σ_i ρ_i^q)^{1/q}` the `q`-norm of the squared row norms `ρ_i = ‖B̂[i,:]‖²`, both
//!    computed through the structure (`O(n²(h + r))` per evaluation); the iterate kept is the
//!    best by the exact `max_j ‖ĉ_j‖²·max_i ρ_i`;
//! 4. the optimal diagonal rescaling `(B̂S⁻¹, SĈ)` for the max error ([`rescale_for_max_error`],
//!    certified by its own dual), which equalizes the terms the smooth maxima left unequal;
//! 5. normalization to sensitivity 1, rounding to `f32`, and the dense measurement of what ships
//!    ([`super::measure_decoder`]).
//!
//! With `w_t = s_t²`, `ρ_i(w) = Σ_t B̂_it²/w_t` and `κ_j(w) = Σ_t w_t Ĉ_tj²` (the squared column
//! norms of `SĈ`), the rescaled max error is `√(max_i ρ_i(w)·max_j κ_j(w))`, log-convex in `w`.
//! Balancing the two maxima over the scale of `w`, its minimum is
//! `min_w max_{p,q∈Δ} ½(Σ_t β_t(p)/w_t + Σ_t w_t γ_t(q))` with `β_t(p) = Σ_i p_i B̂_it²` and
//! `γ_t(q) = Σ_j q_j Ĉ_tj²`, and by the minimax theorem it equals
//! `max_{p,q} Σ_t √(β_t(p)γ_t(q))`: every `(p, q)` gives a lower bound, and
//! `w_t = √(β_t/γ_t)` the primal point. The iteration is the multiplicative one of
//! [`crate::forms::banded::rescale`] applied to both distributions, `p_i ← p_i ρ_i(w)/Σ p ρ`,
//! `q_j ← q_j κ_j(w)/Σ q κ`; the best primal point seen is kept, the identity scaling among them.

use faer::MatRef;
use rayon::prelude::*;

use super::dense::{MaxErrorOptimum, MaxErrorOptions, optimize_max_error};
use super::{Measured, measure_decoder};
use crate::forms::banded::balanced;
use crate::forms::banded::compress::{
    BandedLowRank, CompressOptions, add_outer_product, add_quadratic_form,
};
use crate::forms::banded::refine::{self, PatternPairs, Surrogate, sensitivity_surrogate};
use crate::optimize::factorize::streaming_factorization;
use crate::privacy::participation::Participation;
use crate::{Error, Result};

/// Options of [`compile_banded_max_error`].
#[derive(Debug, Clone)]
pub struct BandedMaxErrorOptions {
    /// The dense optimizer.
    pub optimize: MaxErrorOptions,
    /// The ALS fit (its `refine_iterations` are those of the max-error descent).
    pub compression: CompressOptions,
    /// The exponents `p = q` of the smooth maxima of the descent, one stage each, each stage
    /// started from the previous one's best.
    pub exponents: Vec<f64>,
    /// Relative dual gap at which the rescaling stops, and its iteration cap.
    pub rescale_tolerance: f64,
    /// See `rescale_tolerance`.
    pub rescale_iterations: usize,
}

impl Default for BandedMaxErrorOptions {
    fn default() -> Self {
        Self {
            optimize: MaxErrorOptions::default(),
            compression: CompressOptions {
                refine_iterations: 100,
                ..CompressOptions::default()
            },
            exponents: vec![256.0],
            rescale_tolerance: 1e-7,
            rescale_iterations: 2000,
        }
    }
}

/// A compiled `(h, r)` mechanism for the max error, every coefficient an `f32`.
#[derive(Debug, Clone)]
pub struct CompiledBandedMaxError {
    /// The certified dense optimum the decoder approximates.
    pub optimum: MaxErrorOptimum,
    /// What ships: normalized to sensitivity ≈ 1, rounded to `f32`.
    pub compressed: BandedLowRank,
    /// What ships, measured densely from the stored coefficients ([`measure_decoder`]).
    pub measured: Measured,
    /// The max error after each stage, before rounding: ALS fit, descent, rescaling.
    pub stages: [f64; 3],
}

/// `ρ_i = ‖B̂[i,:]‖²` in `O(n(h + r²))`: the band, plus `L_iᵀ(Σ_{j≤i−h} R_jR_jᵀ)L_i`.
pub fn row_norms(decoder: &BandedLowRank) -> Vec<f64> {
    let (n, h, r) = (decoder.steps, decoder.band, decoder.rank);
    let mut rho: Vec<f64> = (0..n)
        .map(|i| {
            (0..h.min(i + 1))
                .map(|k| decoder.diagonals[i * h + k].powi(2))
                .sum()
        })
        .collect();
    let mut gram = vec![0.0; r * r];
    for (i, rho_i) in rho.iter_mut().enumerate().skip(h) {
        add_outer_product(&mut gram, &decoder.right[(i - h) * r..(i - h + 1) * r]);
        add_quadratic_form(rho_i, &gram, &decoder.left[i * r..(i + 1) * r]);
    }
    rho
}

/// The surrogate of step 3 at one decoder.
struct Evaluation {
    /// `max_j ‖ĉ_j‖² · max_i ρ_i`: the squared max error.
    max_loss: f64,
    /// `s_p² · R_q`.
    value: f64,
    gradient: Vec<f64>,
}

impl crate::optimize::lbfgs::Point for Evaluation {
    fn value(&self) -> f64 {
        self.value
    }
    fn gradient(&self) -> &[f64] {
        &self.gradient
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `R_q(ρ) = top·(Σ_i (ρ_i/top)^q)^{1/q}` and its weights `∂R_q/∂ρ_i = (ρ_i/R_q)^{q−1}`.
fn smooth_max(rho: &[f64], q: f64) -> (f64, f64, Vec<f64>) {
    let top = rho.iter().copied().fold(0.0, f64::max);
    let value = top
        * rho
            .iter()
            .map(|v| (v / top).powf(q))
            .sum::<f64>()
            .powf(1.0 / q);
    let weights = rho.iter().map(|v| (v / value).powf(q - 1.0)).collect();
    (top, value, weights)
}

/// The surrogate `s_p²·R_q` (module docs, step 3) and its gradient with respect to the stored
/// parameters (the layout of [`refine::parameters`]):
/// `∂(s_p²R_q) = R_q·∂s_p² + s_p²·Σ_i ω_i ∂ρ_i`, `ω_i = (ρ_i/R_q)^{q−1}`, with
/// `∂ρ_i/∂D[i,k] = 2D[i,k]`, `∂ρ_i/∂L_i = 2(Σ_{j≤i−h} R_jR_jᵀ)L_i` and
/// `Σ_i ω_i ∂ρ_i/∂R_j = 2(Σ_{i≥j+h} ω_i L_iL_iᵀ)R_j`.
fn evaluate(
    a: MatRef<'_, f64>,
    decoder: &BandedLowRank,
    pairs: &PatternPairs,
    p: f64,
    q: f64,
) -> Result<Evaluation> {
    let (n, h, r) = (decoder.steps, decoder.band, decoder.rank);
    let Surrogate {
        top,
        s2,
        contraction,
    } = sensitivity_surrogate(a, decoder, pairs, p)?;
    let rho = row_norms(decoder);
    let (rho_top, rows, omega) = smooth_max(&rho, q);
    if !(rows.is_finite() && rows > 0.0) {
        return Err(Error::Numerical("the refined decoder is degenerate".into()));
    }
    let (nd, nl) = (n * h, n * r);
    // ½ Σ_i ω_i ∂ρ_i.
    let mut own = vec![0.0; nd + 2 * nl];
    for i in 0..n {
        for k in 0..h.min(i + 1) {
            own[i * h + k] = omega[i] * decoder.diagonals[i * h + k];
        }
    }
    if r > 0 {
        let mut gram = vec![0.0; r * r];
        for i in h..n {
            add_outer_product(&mut gram, &decoder.right[(i - h) * r..(i - h + 1) * r]);
            let li = &decoder.left[i * r..(i + 1) * r];
            for t in 0..r {
                own[nd + i * r + t] = omega[i] * dot(&gram[t * r..(t + 1) * r], li);
            }
        }
        gram.fill(0.0);
        for j in (0..n.saturating_sub(h)).rev() {
            let li: Vec<f64> = decoder.left[(j + h) * r..(j + h + 1) * r]
                .iter()
                .map(|x| x * omega[j + h].sqrt())
                .collect();
            add_outer_product(&mut gram, &li);
            let rj = &decoder.right[j * r..(j + 1) * r];
            for t in 0..r {
                own[nd + nl + j * r + t] = dot(&gram[t * r..(t + 1) * r], rj);
            }
        }
    }
    let gradient: Vec<f64> = contraction
        .iter()
        .zip(&own)
        .map(|(g, o)| -2.0 * rows * g + 2.0 * s2 * o)
        .collect();
    if !gradient.iter().all(|g| g.is_finite()) {
        return Err(Error::Numerical("the refined decoder is degenerate".into()));
    }
    Ok(Evaluation {
        max_loss: top * rho_top,
        value: s2 * rows,
        gradient,
    })
}

/// The descent stops when the surrogate has not dropped by `STALL_TOLERANCE` in
/// `STALL_ITERATIONS` iterations (as [`crate::forms::banded`]'s).
const STALL_ITERATIONS: usize = 10;
const STALL_TOLERANCE: f64 = 1e-6;

/// Step 3 (module docs): L-BFGS on the surrogate from `start` over the single-participation
/// patterns (the columns), at most `iterations`; returns the iterate with the smallest exact
/// `max_j ‖ĉ_j‖²·max_i ρ_i` in balanced form, never worse than `start` by that measure.
pub fn refine_for_max_error(
    a: MatRef<'_, f64>,
    start: &BandedLowRank,
    iterations: usize,
    exponent: f64,
) -> Result<BandedLowRank> {
    let n = start.steps;
    let patterns: Vec<Vec<usize>> = (0..n).map(|j| vec![j]).collect();
    let pairs = PatternPairs::new(n, &patterns);
    let evaluate = |x: &[f64]| {
        evaluate(
            a,
            &refine::with_parameters(start, x),
            &pairs,
            exponent,
            exponent,
        )
        .ok()
        .filter(|e| e.value.is_finite())
    };
    let x0 = refine::parameters(start);
    let first = evaluate(&x0)
        .ok_or_else(|| Error::Numerical("the decoder to refine is degenerate".into()))?;
    let mut best = (first.max_loss, x0.clone());
    let mut improved = (0, first.value);
    let (x, last, _) = crate::optimize::lbfgs::minimize(
        x0,
        first,
        10,
        iterations,
        &mut |x| evaluate(x),
        &mut |iteration, x, p| {
            if p.max_loss < best.0 {
                best = (p.max_loss, x.to_vec());
            }
            if p.value < improved.1 * (1.0 - STALL_TOLERANCE) {
                improved = (iteration, p.value);
            }
            Ok(iteration >= improved.0 + STALL_ITERATIONS)
        },
    )?;
    if last.max_loss < best.0 {
        best = (last.max_loss, x);
    }
    balanced(&refine::with_parameters(start, &best.1))
}

/// A rescaled decoder and the certificate of its scaling (module docs).
#[derive(Debug, Clone)]
pub struct RescaledMaxError {
    /// `B̂S⁻¹`, with `S` normalized so that the largest squared column norm of `SĈ` is 1.
    pub decoder: BandedLowRank,
    /// Its squared max error `max_i ρ_i(w)·max_j κ_j(w)`.
    pub max_loss: f64,
    /// A lower bound on the squared max error of every diagonal rescaling of the decoder.
    pub dual_bound: f64,
    /// Iterations run.
    pub iterations: usize,
}

/// `B̂S⁻¹`: column `t` of the band and row `R_t` divided by `s_t`.
fn with_columns_divided(decoder: &BandedLowRank, s: &[f64]) -> BandedLowRank {
    let (n, h, r) = (decoder.steps, decoder.band, decoder.rank);
    let mut out = decoder.clone();
    for m in 0..n {
        for k in 0..h.min(m + 1) {
            out.diagonals[m * h + k] /= s[m - k];
        }
    }
    if r > 0 {
        for (row, st) in out.right.chunks_mut(r).zip(s) {
            row.iter_mut().for_each(|x| *x /= st);
        }
    }
    out
}

/// Step 4 (module docs): the diagonal rescaling `(B̂S⁻¹, SĈ)` minimizing the max error under
/// single participation, to a relative gap `tolerance` of the squared max error between the
/// best primal point and the dual bound, or after `max_iterations`. Dense: `O(n²)` memory and
/// time per iteration.
pub fn rescale_for_max_error(
    a: MatRef<'_, f64>,
    decoder: &BandedLowRank,
    tolerance: f64,
    max_iterations: usize,
) -> Result<RescaledMaxError> {
    let n = decoder.steps;
    // B̂² row-major (row i: B̂_it²), Ĉ² column-major (column j: Ĉ_tj²).
    let dense = decoder.to_dense();
    let b2: Vec<f64> = (0..n * n).map(|q| dense[(q / n, q % n)].powi(2)).collect();
    drop(dense);
    let mut c2 = decoder.encoder(a)?;
    c2.par_iter_mut().for_each(|x| *x *= *x);
    let rows = |w: &[f64]| -> Vec<f64> {
        b2.par_chunks(n)
            .map(|row| row.iter().zip(w).map(|(b, w)| b / w).sum())
            .collect()
    };
    let columns = |w: &[f64]| -> Vec<f64> {
        c2.par_chunks(n)
            .map(|column| column.iter().zip(w).map(|(c, w)| c * w).sum())
            .collect()
    };
    // β_t(p) = Σ_i p_i B̂_it² and γ_t(q) = Σ_j q_j Ĉ_tj², in a fixed order.
    let weighted = |m: &[f64], p: &[f64]| -> Vec<f64> {
        crate::optimize::linalg::ordered_parallel_sum(n, n, |acc, i| {
            let pi = p[i];
            if pi != 0.0 {
                acc.iter_mut()
                    .zip(&m[i * n..(i + 1) * n])
                    .for_each(|(a, x)| *a += pi * x);
            }
        })
    };
    let top = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let ones = vec![1.0; n];
    let identity = top(&rows(&ones)) * top(&columns(&ones));
    let mut best = (identity, ones);
    let mut dual_bound = 0.0f64;
    let (mut p, mut q) = (vec![1.0 / n as f64; n], vec![1.0 / n as f64; n]);
    let mut iterations = 0;
    while iterations < max_iterations {
        iterations += 1;
        let (beta, gamma) = (weighted(&b2, &p), weighted(&c2, &q));
        if beta
            .iter()
            .chain(&gamma)
            .any(|x| !(x.is_finite() && *x > 0.0))
        {
            return Err(Error::Numerical(
                "the max-error rescaling met a zero row or column weight".into(),
            ));
        }
        let w: Vec<f64> = beta
            .iter()
            .zip(&gamma)
            .map(|(b, g)| (b / g).sqrt())
            .collect();
        let dual: f64 = beta.iter().zip(&gamma).map(|(b, g)| (b * g).sqrt()).sum();
        dual_bound = dual_bound.max(dual * dual);
        let (rho, kappa) = (rows(&w), columns(&w));
        let loss = top(&rho) * top(&kappa);
        if loss < best.0 {
            best = (loss, w.clone());
        }
        if best.0 <= dual_bound * (1.0 + tolerance) {
            break;
        }
        let (mp, mq): (f64, f64) = (
            p.iter().zip(&rho).map(|(a, b)| a * b).sum(),
            q.iter().zip(&kappa).map(|(a, b)| a * b).sum(),
        );
        p.iter_mut().zip(&rho).for_each(|(x, r)| *x *= r / mp);
        q.iter_mut().zip(&kappa).for_each(|(x, k)| *x *= k / mq);
    }
    // s_t = √w_t, normalized so that max_j κ_j = 1.
    let kappa_top = top(&columns(&best.1));
    let s: Vec<f64> = best.1.iter().map(|w| (w / kappa_top).sqrt()).collect();
    let rescaled = with_columns_divided(decoder, &s);
    let finite = |v: &[f64]| v.iter().all(|x| x.is_finite());
    if !(s.iter().all(|&x| x > 0.0 && x.is_finite())
        && finite(&rescaled.diagonals)
        && finite(&rescaled.right))
    {
        return Err(Error::Numerical(
            "the max-error rescaling of the decoder is not finite".into(),
        ));
    }
    Ok(RescaledMaxError {
        decoder: rescaled,
        max_loss: best.0,
        dual_bound,
        iterations,
    })
}

/// `max_j ‖ĉ_j‖²·max_i ρ_i` of a decoder, through the structure.
fn structured_max_loss(a: MatRef<'_, f64>, decoder: &BandedLowRank) -> Result<f64> {
    let n = decoder.steps;
    let c = decoder.encoder(a)?;
    let sens2 = c
        .par_chunks(n)
        .map(|column| column.iter().map(|x| x * x).sum::<f64>())
        .reduce(|| 0.0, f64::max);
    let rows = row_norms(decoder).into_iter().fold(0.0, f64::max);
    Ok(sens2 * rows)
}

/// Compiles the max-error optimum of `a` under single participation compressed to
/// `(band, rank)` (module docs), from a certified `optimum` already computed
/// ([`optimize_max_error`]).
pub fn compile_banded_max_error_from(
    a: MatRef<'_, f64>,
    optimum: MaxErrorOptimum,
    band: usize,
    rank: usize,
    options: &BandedMaxErrorOptions,
) -> Result<CompiledBandedMaxError> {
    let participation = Participation::Single;
    let dense = streaming_factorization(a, optimum.x.as_ref())?;
    let fitted = crate::forms::banded::compress::compress(
        dense.decoder.as_ref(),
        band,
        rank,
        &options.compression,
    )?;
    let fit_loss = structured_max_loss(a, &fitted)?;
    let (mut best, mut best_loss) = (fitted, fit_loss);
    if options.compression.refine_iterations > 0 {
        for &exponent in &options.exponents {
            let refined =
                refine_for_max_error(a, &best, options.compression.refine_iterations, exponent)?;
            let loss = structured_max_loss(a, &refined)?;
            if loss < best_loss {
                (best, best_loss) = (refined, loss);
            }
        }
    }
    let refined_loss = best_loss;
    // `refine_iterations = 0` ships the fit, as the total-loss form does.
    if options.rescale_iterations > 0 && options.compression.refine_iterations > 0 {
        if let Ok(candidate) = rescale_for_max_error(
            a,
            &best,
            options.rescale_tolerance,
            options.rescale_iterations,
        )
        .and_then(|r| balanced(&r.decoder))
        {
            if let Ok(loss) = structured_max_loss(a, &candidate) {
                if loss < best_loss {
                    (best, best_loss) = (candidate, loss);
                }
            }
        }
    }
    // Normalize to sensitivity 1, round to what the blob stores, measure that densely.
    let first = measure_decoder(a, best.to_dense().as_ref(), &participation)?;
    let stored = best.scaled(first.sensitivity).rounded_to_f32();
    let measured = measure_decoder(a, stored.to_dense().as_ref(), &participation)?;
    Ok(CompiledBandedMaxError {
        optimum,
        compressed: stored,
        measured,
        stages: [fit_loss.sqrt(), refined_loss.sqrt(), best_loss.sqrt()],
    })
}

/// [`compile_banded_max_error_from`] after computing the optimum ([`optimize_max_error`]).
pub fn compile_banded_max_error(
    a: MatRef<'_, f64>,
    band: usize,
    rank: usize,
    options: &BandedMaxErrorOptions,
    progress: &mut dyn FnMut(&super::dense::MaxErrorProgress),
) -> Result<CompiledBandedMaxError> {
    let optimum = optimize_max_error(a, &options.optimize, progress)?;
    compile_banded_max_error_from(a, optimum, band, rank, options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forms::banded::compress::compress;
    use crate::max_error::reference::{
        close, max_stddev, per_step_variance, prefix, solve_lower, stored,
    };
    use faer::Mat;

    /// `B̂` rebuilt from its tables, every value read as the `f32` the blob stores.
    fn dense_from_tables(d: &BandedLowRank) -> Mat<f64> {
        let (h, r) = (d.band, d.rank);
        Mat::from_fn(d.steps, d.steps, |i, j| {
            if j > i {
                0.0
            } else if i - j < h {
                stored(d.diagonals[i * h + (i - j)])
            } else {
                (0..r)
                    .map(|q| stored(d.left[i * r + q]) * stored(d.right[j * r + q]))
                    .sum()
            }
        })
    }

    /// `(max_j ‖ĉ_j‖², max_i ‖B̂[i,:]‖²)` of `B̂` for the prefix sum, densely (`Ĉ = B̂⁻¹S`).
    fn dense_terms(b: &Mat<f64>) -> (f64, f64) {
        let n = b.nrows();
        let c = solve_lower(b.as_ref(), prefix(n).as_ref());
        let sens2 = (0..n)
            .map(|j| c.col(j).squared_norm_l2())
            .fold(0.0, f64::max);
        let rows = (0..n)
            .map(|i| b.row(i).squared_norm_l2())
            .fold(0.0, f64::max);
        (sens2, rows)
    }

    fn dense_max_error(d: &BandedLowRank) -> f64 {
        let (sens2, rows) = dense_terms(&d.to_dense());
        (sens2 * rows).sqrt()
    }

    /// What ships, rebuilt from its `f32` tables: the encoder by a dense triangular solve, the
    /// sensitivity as the largest column norm, the per-step variances and their maximum equal
    /// what the compiler measured; [`row_norms`] equals the dense rows; the max error lies
    /// between the certified dual bound and a few percent above the dense optimum.
    #[test]
    fn what_ships_is_measured_from_its_f32_tables() {
        let n = 48;
        let a = prefix(n);
        for (h, r) in [(4, 2), (2, 1)] {
            let compiled = compile_banded_max_error(
                a.as_ref(),
                h,
                r,
                &BandedMaxErrorOptions::default(),
                &mut |_| {},
            )
            .unwrap();
            let d = &compiled.compressed;
            assert_eq!((d.steps, d.band, d.rank), (n, h, r));
            let b = dense_from_tables(d);
            let c = solve_lower(b.as_ref(), a.as_ref());
            let sens = (0..n).map(|j| c.col(j).norm_l2()).fold(0.0, f64::max);
            let variance = per_step_variance(b.as_ref(), sens);
            let m = &compiled.measured;
            assert!(
                close(m.sensitivity, sens, 1e-10),
                "{} vs {sens}",
                m.sensitivity
            );
            assert!((sens - 1.0).abs() < 1e-5, "not normalized: {sens}");
            for (x, y) in m.per_step_variance.iter().zip(&variance) {
                assert!(close(*x, *y, 1e-10), "{x} vs {y}");
            }
            let max_error = max_stddev(&variance);
            assert!(
                close(m.max_error, max_error, 1e-10),
                "({h}, {r}): {} vs {max_error}",
                m.max_error
            );
            let rows = row_norms(d);
            assert_eq!(rows.len(), n);
            for (i, rho) in rows.iter().enumerate() {
                let dense = b.row(i).squared_norm_l2();
                assert!(close(*rho, dense, 1e-12), "row {i}: {rho} vs {dense}");
            }
            let o = &compiled.optimum;
            assert!(
                max_error >= o.dual_bound,
                "({h}, {r}): {max_error} below the lower bound {}",
                o.dual_bound
            );
            assert!(
                max_error <= o.max_error * 1.03,
                "({h}, {r}): {max_error} vs optimum {}",
                o.max_error
            );
        }
    }

    /// The descent improves on the bare ALS fit, measured densely; the rescaling never increases
    /// the max error, its reported value is that of the decoder it returns, and its dual bound is
    /// below the max error of every diagonal rescaling tried (the identity and pseudo-random
    /// ones).
    #[test]
    fn the_descent_and_the_rescaling_improve_and_are_certified() {
        let n = 40;
        let a = prefix(n);
        let options = BandedMaxErrorOptions::default();
        let optimum = optimize_max_error(a.as_ref(), &options.optimize, &mut |_| {}).unwrap();
        let (h, r) = (3, 1);
        let dense = streaming_factorization(a.as_ref(), optimum.x.as_ref()).unwrap();
        let fitted = compress(dense.decoder.as_ref(), h, r, &options.compression).unwrap();
        let fit = dense_max_error(&fitted);
        let refined = refine_for_max_error(a.as_ref(), &fitted, 100, 256.0).unwrap();
        let descent = dense_max_error(&refined);
        assert!(
            descent < fit * (1.0 - 1e-4),
            "descent {descent} vs fit {fit}"
        );

        let rescaled = rescale_for_max_error(a.as_ref(), &refined, 1e-7, 2000).unwrap();
        let (sens2, rows) = dense_terms(&rescaled.decoder.to_dense());
        assert!(
            close(rescaled.max_loss, sens2 * rows, 1e-9),
            "{} vs {}",
            rescaled.max_loss,
            sens2 * rows
        );
        assert!((sens2 - 1.0).abs() < 1e-9, "not normalized: {sens2}");
        assert!(rescaled.max_loss <= descent * descent * (1.0 + 1e-12));
        assert!(rescaled.dual_bound <= rescaled.max_loss);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for trial in 0..20 {
            let s: Vec<f64> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    if trial == 0 {
                        1.0
                    } else {
                        (((seed >> 11) as f64 / (1u64 << 53) as f64) - 0.5).exp()
                    }
                })
                .collect();
            let (sens2, rows) = dense_terms(&with_columns_divided(&refined, &s).to_dense());
            assert!(
                rescaled.dual_bound <= sens2 * rows * (1.0 + 1e-12),
                "trial {trial}: dual {} above {}",
                rescaled.dual_bound,
                sens2 * rows
            );
        }
        // The optimum's certificate bounds every rescaling from below too.
        assert!(optimum.dual_bound.powi(2) <= rescaled.max_loss);

        let compiled = compile_banded_max_error_from(a.as_ref(), optimum, h, r, &options).unwrap();
        assert!(
            compiled.measured.max_error < fit,
            "{} vs {fit}",
            compiled.measured.max_error
        );
    }
}
