//! BandMF (Choquette-Choo et al. 2023b; banded Toeplitz: McKenna 2025) fitted for the max error.
//!
//! A banded encoder `C` with `b̂ ≤ b` bands keeps one record's columns orthogonal, so its
//! sensitivity is exact, `sens² = max_π Σ_{j∈π} ν_j` (`ν_j = ‖c_j‖²`, [`crate::optimize::banded`]); the
//! max error is `sens·max_i ‖(AC⁻¹)[i,:]‖`, invariant under scaling `C`.
//!
//! - **Banded Toeplitz, prefix sum**: `B = S T(r)`, `r = 1/c`, is Toeplitz, so its rows never
//!   decrease (as a BLT's, [`super::blt`]) and the objective is
//!   `ln sens² + ln Σ_{k<n} Q_k²` with `Q_k = Σ_{t≤k} r_t` and `sens² = Σ_t m_t c_t²`
//!   (`m_t` the steps of the worst pattern `{0, b, 2b, …}` that column `t` of the band reaches,
//!   [`crate::optimize::banded::toeplitz`]). Its gradient in `O(n·b̂)`: `g_k = ∂E/∂r_k = 2Σ_{k'≥k} Q_{k'}`,
//!   `λ = T(c)⁻ᵀ g`, `∂E/∂c_l = −Σ_{k≥l} λ_k r_{k−l}` (`dr = −T(c)⁻¹T(dc)r`). L-BFGS with
//!   `c_0 = 1` fixed, from the truncated square root (the optimal Toeplitz mechanism for the max
//!   error, Dvijotham et al. 2024) and from the total-loss optimum, the better kept.
//! - **General banded, or Toeplitz for another workload**: the smooth surrogate
//!   `F = s̃(ν)·R̃(ρ)`, `ρ_i = ‖(AC⁻¹)[i,:]‖²`, with both maxima smoothed as [`crate::optimize::banded`]
//!   smooths the sensitivity (`κ·s_τ(x/κ)`, `κ` the mean, temperatures decreasing over three
//!   rounds; `R̃ ≥ max ρ`, so `F` bounds the squared max error from above). Its gradient
//!   reuses [`crate::optimize::banded`]'s: `∂R̃ = Σ_i ω_i ∂ρ_i` is the gradient of
//!   `‖diag(√ω) A C⁻¹‖_F²` for the fixed weights `ω_i = ∂R̃/∂ρ_i ≥ 0`. `O(n²·b̂)` per evaluation.
//!   The general form starts from the banded Toeplitz optimum; what is kept is judged by the
//!   exact max error.
//!
//! What ships is a [`CompiledBandMf`]: scaled to sensitivity 1, rounded to `f32`, its sensitivity
//! and per-step variances recomputed from the stored coefficients (as
//! [`crate::forms::bandmf::compile_bandmf`] does for the total loss).

use faer::{Mat, MatRef};
use mfc_formats::SensitivityMethod;

use crate::forms::bandmf::{AUTO_TOLERANCE, BandMfKind, Bands, CompiledBandMf};
use crate::optimize::banded::toeplitz::{ToeplitzOptions, ToeplitzProblem, optimize};
use crate::optimize::banded::{BandedEncoder, frobenius_and_gradient};
use crate::optimize::lbfgs::{Plateau, Point, minimize};
use crate::optimize::toeplitz::{inverse_series, square_root_coefficients};
use crate::privacy::participation::Participation;
use crate::request::option::{Opt, OptionError};
use crate::workload::Workload;
use crate::{Error, Result};

/// What [`compile_bandmf_max_error`] builds.
#[derive(Debug, Clone)]
pub struct BandMfMaxErrorOptions {
    /// The participation schema.
    pub participation: Participation,
    /// General or Toeplitz.
    pub kind: BandMfKind,
    /// `b̂`, or how to choose it (by max error, [`AUTO_TOLERANCE`]).
    pub bands: Bands,
    /// Most L-BFGS iterations per optimization (per round for the smoothed ones).
    pub iterations: usize,
    /// Temperatures of the smoothed maxima (rows and sensitivity), one round each.
    pub temperatures: Vec<f64>,
    /// A run stops when its objective improved by at most `tolerance` (relative) over `window`
    /// iterations.
    pub window: usize,
    /// See `window`.
    pub tolerance: f64,
}

impl Default for BandMfMaxErrorOptions {
    fn default() -> Self {
        Self {
            participation: Participation::Single,
            kind: BandMfKind::Toeplitz,
            bands: Bands::Auto { max: 256 },
            iterations: 1000,
            temperatures: vec![0.05, 0.005, 0.0005],
            window: 20,
            tolerance: 1e-7,
        }
    }
}

/// `m_t` for `t < bands` (module docs): how many steps of `{0, b, 2b, …}` (at most `k`) column
/// `t` of the band reaches below the horizon; all 1 for single participation.
fn multiplicity(n: usize, bands: usize, participation: &Participation) -> Vec<f64> {
    let (k, b) = match participation.separation() {
        Some(b) => (participation.max_participations(), b),
        None => (1, n),
    };
    let starts: Vec<usize> = (0..n).step_by(b.max(1)).take(k).collect();
    (0..bands)
        .map(|t| starts.iter().filter(|&&s| s + t < n).count() as f64)
        .collect()
}

/// A value and its gradient.
struct Evaluation {
    value: f64,
    gradient: Vec<f64>,
}

impl Point for Evaluation {
    fn value(&self) -> f64 {
        self.value
    }
    fn gradient(&self) -> &[f64] {
        &self.gradient
    }
}

/// `ln sens² + ln Σ_{k<n} Q_k²` of the prefix-sum Toeplitz encoder `c = (1, x)` and its
/// gradient with respect to `x` (module docs).
fn toeplitz_log_max_loss(x: &[f64], n: usize, multiplicity: &[f64]) -> Option<Evaluation> {
    let mut c = Vec::with_capacity(x.len() + 1);
    c.push(1.0);
    c.extend_from_slice(x);
    let p = c.len();
    let r = inverse_series(&c, n);
    let mut q = 0.0;
    let mut cumulative: Vec<f64> = r
        .iter()
        .map(|rk| {
            q += rk;
            q
        })
        .collect();
    let e: f64 = cumulative.iter().map(|v| v * v).sum();
    // g_k = 2 Σ_{k' ≥ k} Q_{k'}, in place.
    for k in (0..n).rev() {
        let next = if k + 1 < n { cumulative[k + 1] } else { 0.0 };
        cumulative[k] = 2.0 * cumulative[k] + next;
    }
    // λ = T(c)⁻ᵀ g: λ_j = g_j − Σ_{t≥1} c_t λ_{j+t} (c_0 = 1).
    let mut lambda = cumulative;
    for j in (0..n).rev() {
        let total: f64 = (1..p.min(n - j)).map(|t| c[t] * lambda[j + t]).sum();
        lambda[j] -= total;
    }
    let s2: f64 = multiplicity.iter().zip(&c).map(|(m, v)| m * v * v).sum();
    if !(e.is_finite() && e > 0.0 && s2 > 0.0) {
        return None;
    }
    let gradient: Vec<f64> = (1..p)
        .map(|l| {
            let de: f64 = -(l..n).map(|k| lambda[k] * r[k - l]).sum::<f64>();
            de / e + 2.0 * multiplicity[l] * c[l] / s2
        })
        .collect();
    gradient
        .iter()
        .all(|g| g.is_finite())
        .then_some(Evaluation {
            value: e.ln() + s2.ln(),
            gradient,
        })
}

/// The prefix-sum banded Toeplitz encoder with `bands` coefficients (`c_0 = 1`) minimizing the
/// max error over `n` steps under `participation`, from `start`.
fn optimize_toeplitz_series(
    n: usize,
    start: &[f64],
    participation: &Participation,
    options: &BandMfMaxErrorOptions,
) -> Result<Vec<f64>> {
    let bands = start.len();
    if bands == 1 {
        return Ok(vec![1.0]);
    }
    let m = multiplicity(n, bands, participation);
    let x0: Vec<f64> = start[1..].iter().map(|v| v / start[0]).collect();
    let first = toeplitz_log_max_loss(&x0, n, &m).ok_or_else(|| {
        Error::Numerical("the starting banded Toeplitz encoder has no finite max error".into())
    })?;
    let mut plateau = Plateau::new(options.window, options.tolerance);
    let (x, _, _) = minimize(
        x0,
        first,
        10,
        options.iterations,
        &mut |x| toeplitz_log_max_loss(x, n, &m),
        &mut |_, _, e| Ok(plateau.done(e.value)),
    )?;
    let mut c = vec![1.0];
    c.extend(x);
    Ok(c)
}

/// `κ·s_τ(x/κ)` with `κ = mean(x)` and its gradient, for a smoothed maximum `s_τ` with gradient
/// `g` at `u = x/κ`: `∂/∂x_i = g_i + (s − Σ g u)/n` (as [`crate::optimize::banded`]).
fn scaled(soft: f64, g: &[f64], u: &[f64], kappa: f64) -> (f64, Vec<f64>) {
    let n = u.len() as f64;
    let drift = (soft - g.iter().zip(u).map(|(g, u)| g * u).sum::<f64>()) / n;
    (kappa * soft, g.iter().map(|g| g + drift).collect())
}

/// `τ log Σ e^{u_i/τ}` (no empty term: rows are never all zero) and its softmax gradient.
fn log_sum_exp(u: &[f64], tau: f64) -> (f64, Vec<f64>) {
    let top = u.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = u.iter().map(|x| ((x - top) / tau).exp()).collect();
    let total: f64 = e.iter().sum();
    (
        top + tau * total.ln(),
        e.into_iter().map(|v| v / total).collect(),
    )
}

/// The surrogate `F = s̃(ν)·R̃(ρ)` of the module docs at the band `x` (the layout of
/// [`BandedEncoder::columns`]), and its gradient.
fn general_surrogate(
    a: MatRef<'_, f64>,
    shape: &BandedEncoder,
    participation: &Participation,
    tau: f64,
    x: &[f64],
) -> Option<Evaluation> {
    let n = shape.steps;
    let encoder = BandedEncoder {
        columns: x.to_vec(),
        ..shape.clone()
    };
    let b = encoder.decoder(a).ok()?;
    let rho: Vec<f64> = (0..n).map(|i| b.row(i).squared_norm_l2()).collect();
    let mean_rho = rho.iter().sum::<f64>() / n as f64;
    let nu = column_norms2(&encoder);
    let mean_nu = nu.iter().sum::<f64>() / n as f64;
    if !(mean_rho.is_finite() && mean_rho > 0.0 && mean_nu.is_finite() && mean_nu > 0.0) {
        return None;
    }
    let u_rho: Vec<f64> = rho.iter().map(|v| v / mean_rho).collect();
    let (soft_rho, g_rho) = log_sum_exp(&u_rho, tau);
    let (rows, omega) = scaled(soft_rho, &g_rho, &u_rho, mean_rho);
    let u_nu: Vec<f64> = nu.iter().map(|v| v / mean_nu).collect();
    let (soft_nu, g_nu) = participation.soft_max_pattern_sum(&u_nu, tau);
    let (sens, dnu) = scaled(soft_nu, &g_nu, &u_nu, mean_nu);
    let weighted = Mat::from_fn(n, n, |i, j| omega[i].max(0.0).sqrt() * a[(i, j)]);
    let (_, row_gradient) = frobenius_and_gradient(weighted.as_ref(), &encoder)?;
    let h = encoder.bands;
    let gradient: Vec<f64> = row_gradient
        .iter()
        .enumerate()
        .map(|(q, dr)| sens * dr + rows * dnu[q / h] * 2.0 * x[q])
        .collect();
    gradient
        .iter()
        .all(|g| g.is_finite())
        .then_some(Evaluation {
            value: sens * rows,
            gradient,
        })
}

/// `‖C[:,j]‖²` of every column of a banded encoder.
fn column_norms2(encoder: &BandedEncoder) -> Vec<f64> {
    (0..encoder.steps)
        .map(|j| {
            (0..encoder.bands)
                .map(|t| encoder.entry(j, t).powi(2))
                .sum()
        })
        .collect()
}

/// The exact sensitivity of a banded encoder under `participation`: with `b̂ ≤ b` the columns
/// of one record's steps do not overlap, so it is the largest pattern sum of the squared column
/// norms (Choquette-Choo et al. 2023b, Thm 2); refused when the bands reach past the separation.
fn exact_sensitivity(encoder: &BandedEncoder, participation: &Participation) -> Result<f64> {
    if let Some(b) = participation.separation()
        && encoder.bands > b
    {
        return Err(Error::Option(OptionError::new(
            Opt::Bands,
            encoder.bands,
            format!(
                "a banded encoder needs at most b = {b} bands under this schema: the columns of one record's steps must not overlap"
            ),
        )));
    }
    Ok(participation
        .max_pattern_sum(&column_norms2(encoder))
        .0
        .sqrt())
}

/// The exact max error `sens·max_i ‖(AC⁻¹)[i,:]‖` of a banded encoder.
pub fn banded_max_error(
    a: MatRef<'_, f64>,
    encoder: &BandedEncoder,
    participation: &Participation,
) -> Result<f64> {
    let sens = exact_sensitivity(encoder, participation)?;
    let b = encoder.decoder(a)?;
    let rows = (0..b.nrows())
        .map(|i| b.row(i).squared_norm_l2())
        .fold(0.0, f64::max);
    Ok(sens * rows.sqrt())
}

/// Minimizes the surrogate over the band of `start` (or over its Toeplitz coefficients when
/// `tied`, the gradient summed along each diagonal with `c_0` fixed), round by round; returns
/// the best encoder by the exact max error, never worse than `start`.
fn optimize_general(
    a: MatRef<'_, f64>,
    start: BandedEncoder,
    participation: &Participation,
    tied: bool,
    options: &BandMfMaxErrorOptions,
) -> Result<BandedEncoder> {
    let (n, h) = (start.steps, start.bands);
    let expand = |x: &[f64]| -> Vec<f64> {
        if tied {
            let mut c = vec![1.0];
            c.extend_from_slice(x);
            BandedEncoder::toeplitz(&c, n).columns
        } else {
            x.to_vec()
        }
    };
    let fold = |g: Vec<f64>| -> Vec<f64> {
        if tied {
            let mut out = vec![0.0; h.saturating_sub(1)];
            for (q, v) in g.iter().enumerate() {
                if q % h > 0 {
                    out[q % h - 1] += v;
                }
            }
            out
        } else {
            g
        }
    };
    let surrogate = |tau: f64, x: &[f64]| -> Option<Evaluation> {
        let e = general_surrogate(a, &start, participation, tau, &expand(x))?;
        Some(Evaluation {
            value: e.value,
            gradient: fold(e.gradient),
        })
    };
    let exact = |x: &[f64]| -> f64 {
        let encoder = BandedEncoder {
            columns: expand(x),
            ..start.clone()
        };
        banded_max_error(a, &encoder, participation).unwrap_or(f64::INFINITY)
    };
    let mut x: Vec<f64> = if tied {
        let c0 = start.columns[0];
        (1..h).map(|t| start.entry(0, t) / c0).collect()
    } else {
        start.columns.clone()
    };
    let mut best = (exact(&x), x.clone());
    for &tau in &options.temperatures {
        let Some(first) = surrogate(tau, &x) else {
            break;
        };
        let mut plateau = Plateau::new(options.window, options.tolerance);
        let (next, _, _) = minimize(
            x.clone(),
            first,
            10,
            options.iterations,
            &mut |x| surrogate(tau, x),
            &mut |_, _, p| Ok(plateau.done(p.value)),
        )?;
        let value = exact(&next);
        if value < best.0 {
            best = (value, next.clone());
        }
        x = next;
    }
    Ok(BandedEncoder {
        columns: expand(&best.1),
        ..start
    })
}

/// The max-error banded Toeplitz optimum with `bands` coefficients for `workload` over `steps`
/// steps: the series path for the prefix sum, the tied general path otherwise; started from the
/// truncated square root and from the total-loss optimum, the better kept.
fn toeplitz_optimum(
    workload: &Workload,
    a: &Mat<f64>,
    bands: usize,
    options: &BandMfMaxErrorOptions,
) -> Result<(Vec<f64>, f64)> {
    let n = a.nrows();
    let participation = &options.participation;
    let problem = ToeplitzProblem::new(workload, n, participation)?;
    problem.check_bands(bands)?;
    let mut starts = vec![square_root_coefficients(bands)];
    if let Ok(total) = optimize(
        &problem,
        bands,
        None,
        &ToeplitzOptions::default(),
        &mut |_, _| {},
    ) {
        starts.push(total);
    }
    let mut best: Option<(Vec<f64>, f64)> = None;
    for start in starts {
        let c = if matches!(workload, Workload::PrefixSum) {
            optimize_toeplitz_series(n, &start, participation, options)?
        } else {
            let encoder = optimize_general(
                a.as_ref(),
                BandedEncoder::toeplitz(&start, n),
                participation,
                true,
                options,
            )?;
            (0..bands).map(|t| encoder.entry(0, t)).collect()
        };
        let value = banded_max_error(a.as_ref(), &BandedEncoder::toeplitz(&c, n), participation)?;
        if best.as_ref().is_none_or(|(_, v)| value < *v) {
            best = Some((c, value));
        }
    }
    best.ok_or_else(|| Error::Numerical("no banded Toeplitz encoder converged".into()))
}

fn round(x: f64) -> f64 {
    f64::from(x as f32)
}

/// A BandMF encoder compiled for the max error.
#[derive(Debug, Clone)]
pub struct MaxErrorBandMf {
    /// What ships (its `tried` holds the chosen `b̂` and the `√L` of what ships; its
    /// `toeplitz_sqrt_loss` is `None`: the figures of the optimization are below).
    pub compiled: CompiledBandMf,
    /// `sens·max_i ‖B[i,:]‖` of the stored coefficients.
    pub max_error: f64,
    /// `(b̂, max error)` of every banded Toeplitz optimum computed, in the order tried.
    pub tried: Vec<(usize, f64)>,
    /// The max error of the banded Toeplitz encoder the general optimizer started from
    /// (general only).
    pub toeplitz_max_error: Option<f64>,
}

/// Optimizes a BandMF encoder for the max error of `workload` over `steps` steps, scales it to
/// sensitivity 1, rounds it to `f32` and measures exactly what is stored (module docs).
pub fn compile_bandmf_max_error(
    workload: &Workload,
    steps: usize,
    options: &BandMfMaxErrorOptions,
) -> Result<MaxErrorBandMf> {
    let participation = options.participation;
    let a = workload.matrix(steps)?;
    let n = a.nrows();
    let most = participation.separation().unwrap_or(n).min(n);
    let candidates: Vec<usize> = match options.bands {
        Bands::Fixed(bands) => vec![bands],
        Bands::Auto { max } => {
            if max == 0 {
                return Err(Error::Option(OptionError::new(
                    Opt::MaxBands,
                    0,
                    format!(
                        "expected an integer in 1..={}",
                        crate::request::option::MAX_STEPS
                    ),
                )));
            }
            let most = most.min(max);
            let mut out: Vec<usize> = std::iter::successors(Some(1usize), |b| b.checked_mul(2))
                .take_while(|&b| b < most)
                .collect();
            out.push(most);
            out
        }
    };
    let mut tried = Vec::new();
    let mut optima = Vec::new();
    for &bands in &candidates {
        let (c, value) = toeplitz_optimum(workload, &a, bands, options)?;
        tried.push((bands, value));
        optima.push(c);
    }
    let best = tried.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
    let pick = tried
        .iter()
        .position(|t| t.1 <= best * (1.0 + AUTO_TOLERANCE))
        .unwrap_or(tried.len() - 1);
    let (bands, toeplitz_value) = tried[pick];
    let c = optima.swap_remove(pick);
    let encoder = match options.kind {
        BandMfKind::Toeplitz => BandedEncoder::toeplitz(&c, n),
        BandMfKind::General => optimize_general(
            a.as_ref(),
            BandedEncoder::toeplitz(&c, n),
            &participation,
            false,
            options,
        )?,
    };
    let scale = exact_sensitivity(&encoder, &participation)?;
    let coefficients: Vec<f64> = match options.kind {
        BandMfKind::Toeplitz => (0..bands)
            .map(|t| round(encoder.entry(0, t) / scale))
            .collect(),
        BandMfKind::General => (0..n * bands)
            .map(|q| {
                let (i, l) = (q / bands, q % bands);
                if l > i {
                    0.0
                } else {
                    round(encoder.entry(i - l, l) / scale)
                }
            })
            .collect(),
    };
    let mut compiled = CompiledBandMf {
        kind: options.kind,
        steps: n,
        bands,
        coefficients,
        participation,
        sensitivity: 0.0,
        sensitivity_method: match participation {
            Participation::Single => SensitivityMethod::MaxColumnNorm,
            _ => SensitivityMethod::OrthogonalColumns,
        },
        sqrt_loss: 0.0,
        per_step_variance: Vec::new(),
        tried: Vec::new(),
        toeplitz_sqrt_loss: None,
        general_run: None,
    };
    let stored = compiled.banded();
    if stored.entry(0, 0) == 0.0 {
        return Err(Error::Numerical(
            "the BandMF encoder's c_0 rounds to zero".into(),
        ));
    }
    let sens = exact_sensitivity(&stored, &participation)?;
    let decoder = stored.decoder(a.as_ref())?;
    compiled.per_step_variance = (0..n)
        .map(|i| sens * sens * decoder.row(i).squared_norm_l2())
        .collect();
    compiled.sqrt_loss = compiled.per_step_variance.iter().sum::<f64>().sqrt();
    compiled.sensitivity = sens;
    compiled.tried = vec![(bands, compiled.sqrt_loss)];
    Ok(MaxErrorBandMf {
        max_error: super::max_step_stddev(&compiled.per_step_variance),
        compiled,
        tried,
        toeplitz_max_error: (options.kind == BandMfKind::General).then_some(toeplitz_value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forms::bandmf::{BandMfOptions, compile_bandmf};
    use crate::max_error::reference::{
        brute_force_sensitivity2, close, max_stddev, min_separation_patterns, per_step_variance,
        prefix, right_solve_lower, stored,
    };

    /// The schemas of the tests and every pattern of each over `n` steps.
    fn schemas(n: usize) -> Vec<(Participation, Vec<Vec<usize>>)> {
        vec![
            (Participation::Single, min_separation_patterns(n, 1, 1)),
            (
                Participation::min_separation(3, 8).unwrap(),
                min_separation_patterns(n, 3, 8),
            ),
        ]
    }

    /// The dense encoder from the stored coefficients, each read as an `f32` (the blob's layout:
    /// Toeplitz `c_0 … c_{b̂−1}`; general row-major `(i, l) = C[i, i−l]`).
    fn dense_encoder(compiled: &CompiledBandMf) -> Mat<f64> {
        let (n, h) = (compiled.steps, compiled.bands);
        let k = &compiled.coefficients;
        Mat::from_fn(n, n, |i, j| match i.checked_sub(j) {
            Some(l) if l < h => stored(match compiled.kind {
                BandMfKind::Toeplitz => k[l],
                BandMfKind::General => k[i * h + l],
            }),
            _ => 0.0,
        })
    }

    /// `(sens, per-step variances)` of the prefix sum with encoder `c`, by brute force over
    /// `patterns` (every sign vector; the absolute-Gram bound must agree, so the value holds for
    /// contributions of any dimension) and `B = S C⁻¹` by back substitution.
    fn dense_reference(c: &Mat<f64>, patterns: &[Vec<usize>]) -> (f64, Vec<f64>) {
        let (signed, absolute) = brute_force_sensitivity2(c.as_ref(), patterns);
        assert!(close(signed, absolute, 1e-12), "{signed} vs {absolute}");
        let sens = signed.sqrt();
        let b = right_solve_lower(prefix(c.nrows()).as_ref(), c.as_ref());
        (sens, per_step_variance(b.as_ref(), sens))
    }

    /// What ships, from its stored `f32` band: the sensitivity by enumeration of every pattern,
    /// the decoder `S C⁻¹`, the per-step variances and the max error equal the reported ones;
    /// and the max error is no larger than that of the total-loss BandMF with the same bands.
    #[test]
    fn the_shipped_max_error_is_that_of_the_stored_band() {
        let n = 24;
        let bands = 3;
        for (participation, patterns) in schemas(n) {
            for kind in [BandMfKind::Toeplitz, BandMfKind::General] {
                let options = BandMfMaxErrorOptions {
                    participation,
                    kind,
                    bands: Bands::Fixed(bands),
                    ..Default::default()
                };
                let ours = compile_bandmf_max_error(&Workload::PrefixSum, n, &options).unwrap();
                let compiled = &ours.compiled;
                assert_eq!((compiled.steps, compiled.bands), (n, bands));
                let c = dense_encoder(compiled);
                let (sens, variance) = dense_reference(&c, &patterns);
                let case = format!("{kind:?} {participation:?}");
                assert!(
                    close(compiled.sensitivity, sens, 1e-12),
                    "{case}: {} vs {sens}",
                    compiled.sensitivity
                );
                assert!((sens - 1.0).abs() < 1e-5, "{case}: not normalized: {sens}");
                for (x, y) in compiled.per_step_variance.iter().zip(&variance) {
                    assert!(close(*x, *y, 1e-10), "{case}: {x} vs {y}");
                }
                let max_error = max_stddev(&variance);
                assert!(
                    close(ours.max_error, max_error, 1e-10),
                    "{case}: {} vs {max_error}",
                    ours.max_error
                );
                let sqrt_loss = variance.iter().sum::<f64>().sqrt();
                assert!(close(compiled.sqrt_loss, sqrt_loss, 1e-10), "{case}");

                let total = compile_bandmf(
                    &Workload::PrefixSum,
                    n,
                    &BandMfOptions {
                        participation,
                        kind,
                        bands: Bands::Fixed(bands),
                        ..Default::default()
                    },
                    &mut |_, _| {},
                )
                .unwrap();
                let (total_sens, total_variance) =
                    dense_reference(&dense_encoder(&total), &patterns);
                assert!(close(total.sensitivity, total_sens, 1e-12), "{case}");
                let total_max = max_stddev(&total_variance);
                assert!(
                    max_error <= total_max * (1.0 + 1e-9),
                    "{case}: max-error BandMF {max_error} above the total-loss one {total_max}"
                );
            }
        }
    }

    /// [`banded_max_error`] against the dense reference, for Toeplitz and general bands with
    /// entries of both signs; refused when the bands reach past the separation.
    #[test]
    fn banded_max_error_matches_the_dense_computation() {
        let n = 24;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for (participation, patterns) in schemas(n) {
            for bands in [1, 4, 8] {
                let toeplitz = BandedEncoder::toeplitz(
                    &(0..bands)
                        .map(|t| if t == 0 { 1.0 } else { next() })
                        .collect::<Vec<_>>(),
                    n,
                );
                let mut general = toeplitz.clone();
                for j in 0..n {
                    general.columns[j * bands] = 1.0 + next().abs();
                    for t in 1..bands.min(n - j) {
                        general.columns[j * bands + t] = next();
                    }
                }
                for encoder in [toeplitz, general] {
                    let (sens, variance) = dense_reference(&encoder.to_dense(), &patterns);
                    let value =
                        banded_max_error(prefix(n).as_ref(), &encoder, &participation).unwrap();
                    let expected = max_stddev(&variance);
                    assert!(
                        close(value, expected, 1e-10),
                        "{participation:?} b̂ = {bands}: {value} vs {expected} (sens {sens})"
                    );
                }
            }
        }
        let too_wide = BandedEncoder::toeplitz(&[1.0; 9], n);
        assert!(
            banded_max_error(
                prefix(n).as_ref(),
                &too_wide,
                &Participation::min_separation(3, 8).unwrap()
            )
            .is_err()
        );
    }
}
