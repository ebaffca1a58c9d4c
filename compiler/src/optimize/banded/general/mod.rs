//! The general banded optimizer: L-BFGS over the `n·b̂` band entries of `C` (and, for free
//! column norms, the dual weights below) on `log F = log ‖A C⁻¹‖_F² + log s`, each evaluation by
//! [`frobenius()`] in `O(n·p²)` time and `O(n·p)` memory for a workload whose inverse is banded
//! (`p = b̂ + 1` for the prefix sum, `b̂ + 2` for momentum with any learning-rate schedule:
//! [`operator`]); no `n × n` matrix is formed (McKenna 2025, "Scaling up the Banded Matrix
//! Factorization Mechanism", is the anchor). A custom workload is held as its matrix,
//! `O(n²·b̂)` per evaluation.
//!
//! With `b̂ ≤ b` one record's columns are orthogonal and `sens² = max_π Σ_{j∈π} ν_j`,
//! `ν_j = ‖C[:, j]‖²` (BandMF, Choquette-Choo et al. 2023b, Thm 2). Three ways to hold it:
//!
//! - **Free norms, min-separation and single participation: exact and smooth.** The patterns of
//!   `b`-min-separation with at most `k` steps are the 0/1 points of
//!   `P = {x ≥ 0 : Σ_{j∈[s, s+b)} x_j ≤ 1 for every window s ≤ n − b, Σ_j x_j ≤ k}`, and `P` has
//!   no other vertices (its rows are intervals: the matrix is totally unimodular), so
//!   `sens² = max_{x∈P} ⟨ν, x⟩`, and by LP duality `sens² ≤ Σ_s y_s + k z` whenever
//!   `ν ≤ d := W y + z 1` (`(W y)_j = Σ_{s ≤ j < s+b} y_s`, `y, z ≥ 0`), with equality at the
//!   dual optimum. At the optimum of the convex problem `min tr(AᵀA X⁻¹)` over banded `X = CᵀC`
//!   every such constraint is tight (raising a diagonal entry of `X` lowers the objective), so
//!   nothing is lost by setting `ν = d` exactly: `C[:, j] = √d_j · Ĉ[:, j]/‖Ĉ[:, j]‖` over free
//!   `Ĉ`, `y = θ²`, `z = θ_z²`, and
//!   `F = ‖A C⁻¹‖_F² · (Σ_s y_s + k z)`, a smooth upper bound on the loss of `C`, equal to it at
//!   the optimum. No maximum is smoothed: at n = 512, (4, 128), b̂ = 128, this reaches √L
//!   130.35 in about 60 evaluations where the smoothed maximum over three temperatures (the
//!   dense optimizer this one replaced) took 300 for 130.40. Single participation is `b = n`, `k = 1`.
//! - **Free norms, fixed epoch order**: its patterns are subsets of `n` windows
//!   `{s, s+b, …}`, whose hull has no such interval description; `s = κ·s_τ(ν/κ)`,
//!   `κ = mean ν`, the smoothed maximum of [`Participation::soft_max_pattern_sum`]
//!   (`s ≥ sens²`), with `τ` lowered over rounds.
//! - [`Columns::Normalized`] (jax_privacy's `banded.ColumnNormalizedBanded`, McKenna 2025):
//!   `C[:, j] = Ĉ[:, j]/‖Ĉ[:, j]‖`, so `sens²` is the most steps a pattern holds and
//!   `log F = log ‖A C⁻¹‖_F² + const`.
//!
//! For every column scaled as `C_j = σ_j Ĉ_j`, `∂/∂Ĉ_j = σ_j (ḡ_j − ĉ_j⟨ĉ_j, ḡ_j⟩)` with
//! `ĉ_j = C_j/‖C_j‖`, `ḡ = ∂/∂C`, and `∂ log F/∂d_j = ⟨C_j, ḡ_j⟩/(2 d_j)`.
//!
//! Free norms contain every normalized encoder, so their optimum is never worse, and they are
//! the default: at n = 512, (4, 128) normalized columns stop at 132.26 (jax_privacy's
//! `banded.optimize` figure), free ones reach 130.35. The result is judged by its exact loss and
//! is never worse than the start.

mod descent;
pub mod frobenius;
pub mod operator;

use std::ops::ControlFlow;
use std::time::Instant;

use crate::optimize::lbfgs::Plateau;
use crate::optimize::single::{Optimum, Progress};
use crate::privacy::participation::Participation;
use crate::{Error, Result};
use descent::minimize;
use faer::{Mat, MatRef};
use frobenius::{Workspace, frobenius};
use operator::{BandRows, Operator};

/// How the sensitivity enters the objective (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Columns {
    /// Column norms free: the sensitivity in its exact dual form under single participation
    /// and min-separation, a smoothed maximum over patterns under fixed epoch order (module
    /// docs).
    Free,
    /// Every column of norm 1 (jax_privacy's column normalization).
    Normalized,
}

/// Stopping rules and budgets of [`optimize_general`].
#[derive(Debug, Clone)]
pub struct GeneralOptions {
    /// Free or normalized column norms.
    pub columns: Columns,
    /// [`Columns::Free`] under fixed epoch order: temperatures of the smoothed maximum (on norms
    /// scaled to mean 1), one round each. The other formulations run one round.
    pub temperatures: Vec<f64>,
    /// Most L-BFGS iterations per round.
    pub iterations: usize,
    /// A round stops when `log F` improved by at most `tolerance·|log F|` over `window`
    /// iterations (`Plateau`: with `10⁻⁵`, a relative change of `F` of about `10⁻⁴` at `F ≈ 10⁴`).
    pub window: usize,
    /// See `window` (a relative change of `F`).
    pub tolerance: f64,
    /// L-BFGS history; `0` chooses the most that fits `memory_limit` (at most 10).
    pub history: usize,
    /// Bytes the optimizer may hold (the band of `K`, the L-BFGS vectors).
    pub memory_limit: f64,
    /// Bounds [`iterations`](Self::iterations) by the estimated time: at most
    /// `seconds / (seconds per evaluation)` iterations ([`estimate`]'s rate), and at least
    /// [`MIN_BUDGET_ITERATIONS`]. Deterministic, unlike a clock: the same request gives
    /// the same encoder on any machine. The compile's front doors set it
    /// ([`SECONDS_BUDGET`]).
    pub seconds_budget: Option<f64>,
}

/// The iteration budget the compile's front doors give the general optimizer, in seconds of its
/// estimated time on a 2-core machine ([`GeneralOptions::seconds_budget`]: an iteration count
/// fixed before any work, so a compile is reproducible). At n = 10⁵ with 256 bands it allows
/// 25 iterations; n ≤ 10⁴ converges first (BENCHMARKS, "General BandMF at training scale").
pub const SECONDS_BUDGET: f64 = 240.0;

/// The fewest iterations [`GeneralOptions::seconds_budget`] leaves a round.
pub const MIN_BUDGET_ITERATIONS: usize = 20;

/// Seconds per evaluation of the loss and its gradient on the repository's 2-core machine (one
/// thread). For a banded `A⁻¹` (`p` the band of `C A⁻¹`) the recurrence makes `3·p²`
/// multiply-adds per step in dot products of length `p`: `n·p·(1.2·10⁻⁹·p + 6·10⁻⁸)` seconds,
/// fitted to `cargo bench --bench banded_general -- eval` at n = 5·10⁴, b̂ ∈ {8, 32, 64, 128}
/// (0–20% above) and above the measured time at n = 2000, b̂ = 100 (0.026 s) and n = 10⁵,
/// b̂ = 256 (7.7 s). For a dense `A`, `1.5·10⁻⁹·n²·b̂`.
fn seconds_per_evaluation(steps: usize, bands: usize, width: usize) -> f64 {
    let (n, h, p) = (steps as f64, bands as f64, width as f64);
    if width == 0 {
        1.5e-9 * n * n * h
    } else {
        n * p * (1.2e-9 * p + 6e-8)
    }
}

/// The iterations a budget of `seconds` allows when an evaluation takes `per_evaluation`
/// seconds (estimated): `seconds / per_evaluation`, at least [`MIN_BUDGET_ITERATIONS`] and at
/// most `iterations` ([`GeneralOptions::seconds_budget`]).
pub fn budgeted_iterations(iterations: usize, seconds: f64, per_evaluation: f64) -> usize {
    iterations.min(((seconds / per_evaluation) as usize).max(MIN_BUDGET_ITERATIONS))
}

/// The rounds [`optimize_general`] runs: one per temperature for free norms under fixed epoch
/// order, else one.
fn round_count(options: &GeneralOptions, participation: &Participation, steps: usize) -> usize {
    match (options.columns, windows(participation, steps)) {
        (Columns::Free, None) => options.temperatures.len().max(1),
        _ => 1,
    }
}

/// The most iterations of one round of [`optimize_general`]: `options.iterations`, or under a
/// [`seconds_budget`](GeneralOptions::seconds_budget) its share of the budget (the rounds share
/// it) at `per_evaluation` seconds an evaluation ([`budgeted_iterations`]).
fn round_iteration_cap(
    options: &GeneralOptions,
    participation: &Participation,
    steps: usize,
    per_evaluation: f64,
) -> usize {
    match options.seconds_budget {
        Some(seconds) => {
            let rounds = round_count(options, participation, steps) as f64;
            budgeted_iterations(options.iterations, seconds / rounds, per_evaluation)
        }
        None => options.iterations,
    }
}

/// The most iterations [`optimize_general`] runs over all its rounds under `options` and
/// `participation`, at `per_evaluation` seconds an evaluation (as [`estimate`] gives it): what
/// a compile's estimate multiplies by the time of an evaluation. The optimizer stops earlier
/// when it converges.
pub fn iteration_cap(
    options: &GeneralOptions,
    participation: &Participation,
    steps: usize,
    per_evaluation: f64,
) -> usize {
    round_count(options, participation, steps)
        * round_iteration_cap(options, participation, steps, per_evaluation)
}

impl Default for GeneralOptions {
    fn default() -> Self {
        Self {
            columns: Columns::Free,
            temperatures: vec![0.05, 0.005, 0.0005],
            iterations: 1000,
            window: 20,
            tolerance: 1e-5,
            history: 0,
            memory_limit: 2.5e9,
            seconds_budget: None,
        }
    }
}

/// What the optimizer reports once per iteration.
#[derive(Debug, Clone, Copy)]
pub struct GeneralProgress {
    /// Round (temperature) from 0.
    pub round: usize,
    /// Iterations so far, all rounds.
    pub iteration: usize,
    /// Evaluations of the loss and its gradient so far.
    pub evaluations: usize,
    /// The objective `F`: with free columns an upper bound on the loss `L` of the current
    /// encoder; with normalized columns `‖A C⁻¹‖_F²` (the sensitivity a constant factor).
    pub objective: f64,
    /// Seconds since the start.
    pub seconds: f64,
}

/// Why [`optimize_general`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Every round reached its plateau (or could not descend further).
    Converged,
    /// A round ran out of iterations ([`GeneralOptions::iterations`], or fewer under
    /// [`GeneralOptions::seconds_budget`]) before its plateau.
    IterationBudget,
    /// The progress callback asked to stop.
    Interrupted,
}

/// The optimizer's result.
#[derive(Debug, Clone)]
pub struct Optimized {
    /// The encoder (any scale; its sensitivity is not normalized).
    pub encoder: BandRows,
    /// Its exact loss `‖A C⁻¹‖_F²·sens²`.
    pub loss: f64,
    /// L-BFGS iterations, all rounds.
    pub iterations: usize,
    /// Evaluations of the loss and its gradient.
    pub evaluations: usize,
    /// Why it stopped.
    pub stopped: Stopped,
}

/// A general banded problem: the workload's operator, the participation schema and `b̂`.
#[derive(Debug, Clone)]
pub struct BandedProblem {
    operator: Operator,
    participation: Participation,
    bands: usize,
}

impl BandedProblem {
    /// The problem of `bands` bands for `operator` under `participation`; refuses `b̂` outside
    /// `1..=min(b, n)`, where one record's columns would overlap.
    pub fn new(operator: Operator, participation: Participation, bands: usize) -> Result<Self> {
        let n = operator.steps();
        let most = participation.separation().unwrap_or(n).min(n);
        if bands == 0 || bands > most {
            return Err(Error::InvalidArgument(format!(
                "the number of bands b̂ must be in 1..={most} (at most the separation and the n = {n} steps, so that one record's columns do not overlap), got {bands}"
            )));
        }
        Ok(Self {
            operator,
            participation,
            bands,
        })
    }

    /// `n`.
    pub fn steps(&self) -> usize {
        self.operator.steps()
    }

    /// `b̂`.
    pub fn bands(&self) -> usize {
        self.bands
    }

    /// The participation schema.
    pub fn participation(&self) -> &Participation {
        &self.participation
    }

    /// The workload's operator.
    pub fn operator(&self) -> &Operator {
        &self.operator
    }

    /// `p`, the bands of `C A⁻¹` (the width of the band of `K`).
    fn width(&self) -> usize {
        match &self.operator {
            Operator::BandedInverse(inverse) => self.bands + inverse.width - 1,
            Operator::Dense(_) => 0,
        }
    }

    fn check_shape(&self, c: &BandRows) -> Result<()> {
        if c.steps != self.steps() || c.width != self.bands {
            return Err(Error::InvalidArgument(format!(
                "the encoder has {} steps and {} bands, the problem {} and {}",
                c.steps,
                c.width,
                self.steps(),
                self.bands
            )));
        }
        Ok(())
    }

    /// `sens(C)²`, exact: `max_π Σ_{j∈π} ν_j` (columns of one pattern are orthogonal).
    pub fn sensitivity_squared(&self, c: &BandRows) -> Result<f64> {
        self.check_shape(c)?;
        let nu = column_norms2(c);
        if !nu.iter().all(|v| v.is_finite()) {
            return Err(Error::Numerical("the encoder is not finite".into()));
        }
        Ok(self.participation.max_pattern_sum(&nu).0)
    }

    /// `(‖A C⁻¹‖_F², sens², ‖B[i, :]‖² for every step)`.
    pub fn error(&self, c: &BandRows) -> Result<(f64, f64, Vec<f64>)> {
        let s2 = self.sensitivity_squared(c)?;
        let mut rows = vec![0.0; c.steps];
        let f = frobenius(
            &self.operator,
            c,
            &mut Workspace::default(),
            Some(&mut rows),
            None,
        )
        .ok_or_else(|| Error::Numerical("the decoder A C⁻¹ is not finite".into()))?;
        Ok((f, s2, rows))
    }

    /// The exact loss `‖A C⁻¹‖_F²·sens²`.
    pub fn loss(&self, c: &BandRows) -> Result<f64> {
        let s2 = self.sensitivity_squared(c)?;
        let f = frobenius(&self.operator, c, &mut Workspace::default(), None, None)
            .ok_or_else(|| Error::Numerical("the decoder A C⁻¹ is not finite".into()))?;
        Ok(f * s2)
    }
}

/// `ν_j = ‖C[:, j]‖²` from the row layout (`C[i, i−t]` at `i·b̂ + t`).
pub fn column_norms2(c: &BandRows) -> Vec<f64> {
    let (n, h) = (c.steps, c.width);
    let mut nu = vec![0.0; n];
    for i in 0..n {
        for t in 0..h.min(i + 1) {
            let x = c.rows[i * h + t];
            nu[i - t] += x * x;
        }
    }
    nu
}

/// The windows `[s, s + b)` of the pattern polytope of `b`-min-separation with at most `k`
/// steps (`k = 1`, `b = n` for single participation); `None` for fixed epoch order.
fn windows(participation: &Participation, n: usize) -> Option<(usize, usize)> {
    match *participation {
        Participation::Single => Some((n, 1)),
        Participation::MinSeparation {
            max_participations,
            min_separation,
        } => Some((min_separation.clamp(1, n), max_participations)),
        Participation::FixedEpochOrder { .. } => None,
    }
}

/// How the objective holds the sensitivity (module docs).
#[derive(Debug, Clone, Copy)]
enum Formulation {
    /// Free norms under min-separation or single participation: `ν = d = W y + z 1` with the
    /// dual variables of the pattern polytope, exact (module docs); parameters `[band | θ_y | θ_z]`.
    Dual { window: usize, k: usize },
    /// Free norms under fixed epoch order: the smoothed maximum at temperature `tau`.
    Smoothed { tau: f64 },
    /// Every column of norm 1.
    Normalized,
}

impl Formulation {
    /// Parameters beyond the `n·b̂` band.
    fn extra(&self, n: usize) -> usize {
        match *self {
            Formulation::Dual { window, .. } => n - window + 2,
            _ => 0,
        }
    }
}

/// `d_j = z + Σ_{s ≤ j < s + b} y_s` over the windows `s ≤ n − b`.
fn dual_diagonal(y: &[f64], z: f64, n: usize, window: usize) -> Vec<f64> {
    let mut d = vec![z; n];
    // Window s adds y_s to [s, s + window): a difference array.
    let mut delta = vec![0.0; n + 1];
    for (s, ys) in y.iter().enumerate() {
        delta[s] += ys;
        delta[(s + window).min(n)] -= ys;
    }
    let mut running = 0.0;
    for j in 0..n {
        running += delta[j];
        d[j] += running;
    }
    d
}

/// The encoder the parameters `x` stand for: columns of the band scaled to norm `√d_j` (dual),
/// to norm 1 (normalized), or the band itself (smoothed). `None` on a zero column.
fn encoder_of(
    formulation: Formulation,
    x: &[f64],
    n: usize,
    h: usize,
    out: &mut BandRows,
) -> Option<Vec<f64>> {
    out.rows.copy_from_slice(&x[..n * h]);
    let scale: Vec<f64> = match formulation {
        Formulation::Smoothed { .. } => return Some(Vec::new()),
        Formulation::Normalized => column_norms2(out).iter().map(|v| 1.0 / v.sqrt()).collect(),
        Formulation::Dual { window, .. } => {
            let extra = &x[n * h..];
            let y: Vec<f64> = extra[..extra.len() - 1].iter().map(|t| t * t).collect();
            let z = extra[extra.len() - 1].powi(2);
            let d = dual_diagonal(&y, z, n, window);
            column_norms2(out)
                .iter()
                .zip(&d)
                .map(|(v, d)| (d / v).sqrt())
                .collect()
        }
    };
    if !scale.iter().all(|s| s.is_finite() && *s > 0.0) {
        return None;
    }
    for i in 0..n {
        for t in 0..h.min(i + 1) {
            out.rows[i * h + t] *= scale[i - t];
        }
    }
    Some(scale)
}

/// `log F` at the parameters `x`, its gradient written to `gradient` (module docs).
fn evaluate(
    problem: &BandedProblem,
    formulation: Formulation,
    x: &[f64],
    gradient: &mut [f64],
    scratch: &mut BandRows,
    workspace: &mut Workspace,
) -> Option<f64> {
    let (n, h) = (problem.steps(), problem.bands);
    let scale = encoder_of(formulation, x, n, h, scratch)?;
    let f = frobenius(
        &problem.operator,
        scratch,
        workspace,
        None,
        Some(&mut gradient[..n * h]),
    )?;
    if f.is_nan() || f <= 0.0 {
        return None;
    }
    let c = &scratch.rows;
    let value = match formulation {
        Formulation::Smoothed { tau } => {
            let nu = column_norms2(scratch);
            let kappa = nu.iter().sum::<f64>() / n as f64;
            if !(kappa.is_finite() && kappa > 0.0) {
                return None;
            }
            let u: Vec<f64> = nu.iter().map(|v| v / kappa).collect();
            let (soft, g) = problem.participation.soft_max_pattern_sum(&u, tau);
            let drift = (soft - g.iter().zip(&u).map(|(g, u)| g * u).sum::<f64>()) / n as f64;
            // s = κ·soft(ν/κ): ∂s/∂ν_j = g_j + drift.
            let scale = 1.0 / (kappa * soft);
            for i in 0..n {
                for t in 0..h.min(i + 1) {
                    let q = i * h + t;
                    gradient[q] = gradient[q] / f + 2.0 * c[q] * (g[i - t] + drift) * scale;
                }
            }
            f.ln() + (kappa * soft).ln()
        }
        Formulation::Normalized | Formulation::Dual { .. } => {
            // C_j = Ĉ_j·σ_j with σ_j = (norm wanted)/‖Ĉ_j‖: ∂/∂Ĉ_j = σ_j (ḡ_j − ĉ_j⟨ĉ_j, ḡ_j⟩)
            // with ĉ_j = C_j/‖C_j‖, and ⟨C_j, ḡ_j⟩ is what the column's norm receives.
            let mut inner = vec![0.0; n];
            let mut norm2 = vec![0.0; n];
            for i in 0..n {
                for t in 0..h.min(i + 1) {
                    let q = i * h + t;
                    inner[i - t] += c[q] * gradient[q];
                    norm2[i - t] += c[q] * c[q];
                }
            }
            for i in 0..n {
                for t in 0..h.min(i + 1) {
                    let (q, j) = (i * h + t, i - t);
                    gradient[q] = scale[j] * (gradient[q] - c[q] * inner[j] / norm2[j]) / f;
                }
            }
            match formulation {
                Formulation::Dual { window, k } => {
                    let extra = x.len() - n * h;
                    let theta = &x[n * h..];
                    let y: Vec<f64> = theta[..extra - 1].iter().map(|t| t * t).collect();
                    let z = theta[extra - 1].powi(2);
                    let budget = y.iter().sum::<f64>() + k as f64 * z;
                    // ∂ log F/∂d_j = ⟨C_j, ḡ_j⟩/(2 d_j f), d_j = ‖C_j‖².
                    let dd: Vec<f64> = (0..n).map(|j| inner[j] / (2.0 * norm2[j] * f)).collect();
                    let mut prefix = vec![0.0; n + 1];
                    for j in 0..n {
                        prefix[j + 1] = prefix[j] + dd[j];
                    }
                    for s in 0..y.len() {
                        let covered = prefix[(s + window).min(n)] - prefix[s];
                        gradient[n * h + s] = 2.0 * theta[s] * (covered + 1.0 / budget);
                    }
                    gradient[n * h + extra - 1] =
                        2.0 * theta[extra - 1] * (prefix[n] + k as f64 / budget);
                    f.ln() + budget.ln()
                }
                _ => f.ln(),
            }
        }
    };
    (value.is_finite() && gradient.iter().all(|g| g.is_finite())).then_some(value)
}

/// The L-BFGS history that fits `memory_limit`, and the bytes the optimizer then holds: the
/// operator (`operator_bytes`), the band of `K` (`width = p` bands), eight `f64` vectors of
/// `n·b̂` (the start, the scratch encoder, the result, and the five of
/// [`descent`](super::descent)) and per curvature pair two `f32` vectors (history 2 to 10, or
/// `options.history`).
pub(crate) fn plan(
    steps: usize,
    bands: usize,
    width: usize,
    operator_bytes: f64,
    options: &GeneralOptions,
) -> (usize, f64) {
    let vector = 8.0 * (steps * bands) as f64;
    let fixed = Workspace::bytes(steps, width) + operator_bytes + 8.0 * vector;
    let history = if options.history > 0 {
        options.history
    } else {
        ((options.memory_limit - fixed) / vector)
            .floor()
            .clamp(2.0, 10.0) as usize
    };
    (history, fixed + history as f64 * vector)
}

/// The cost of [`optimize_general`] for `workload` over `steps` steps with `bands` bands, known
/// before any work: `(bytes, seconds per evaluation)`. The bytes hold on any machine (the
/// operator, the band of `K`, the L-BFGS vectors: `plan`); the seconds are for the
/// repository's 2-core machine (`seconds_per_evaluation`: `O(n·p²)` for a banded `A⁻¹`,
/// `p = b̂ + 1` for the prefix sum and `b̂ + 2` for momentum; `O(n²·b̂)` for a custom `A`),
/// measured with `cargo bench --bench banded_general -- eval`. Up to n = 10⁴ an optimization
/// converges in 60 to 150 evaluations; [`iteration_cap`] bounds it (BENCHMARKS, "General BandMF
/// at training scale").
pub fn estimate(
    workload: &crate::workload::Workload,
    steps: usize,
    bands: usize,
    options: &GeneralOptions,
) -> (f64, f64) {
    use crate::workload::Workload;
    let n = steps as f64;
    let (width, operator_bytes) = match workload {
        Workload::PrefixSum => (bands + 1, 16.0 * n),
        Workload::Momentum { momentum, .. } => {
            (bands + if *momentum == 0.0 { 1 } else { 2 }, 24.0 * n)
        }
        // The matrix in the operator and in the Toeplitz start, whose dense loss also holds the
        // decoder, its adjoint and their row buffers: five n × n matrices in all.
        Workload::Custom { .. } => (0, 5.0 * 8.0 * n * n),
    };
    let (_, bytes) = plan(steps, bands, width, operator_bytes, options);
    (bytes, seconds_per_evaluation(steps, bands, width))
}

fn history_for(problem: &BandedProblem, options: &GeneralOptions) -> usize {
    plan(
        problem.steps(),
        problem.bands,
        problem.width(),
        problem.operator.bytes(),
        options,
    )
    .0
}

/// The parameters of `formulation` at the encoder `c`: its band, and for the dual form the
/// square roots of window weights `y` and of `z` covering `ν(c)`: the greedy cover (from the
/// left, each uncovered deficit paid by the window that starts there or, past `n − b`, the
/// last one), optimal for covering by intervals of one length, so its budget `Σ y` is the
/// exact `sens²` of `c` when the pattern size does not bind; then every weight is raised to at
/// least `mean ν/b` (as if every window carried an equal share), so that every window starts
/// alive (`y = θ²` has no gradient at 0). Against the greedy cover alone (floor `10⁻⁶·mean
/// ν/b`) this reached a lower loss in fewer evaluations: at n = 512, (4, 128), 130.3466 in 62
/// against 130.3681 in 87; at n = 2000, (20, 100), 864.785 in 90 against 864.923 in 116. `z`
/// starts at `10⁻⁶·mean ν`.
fn parameters_of(formulation: Formulation, c: &BandRows) -> Vec<f64> {
    let n = c.steps;
    let mut x = c.rows.clone();
    if let Formulation::Dual { window, .. } = formulation {
        let nu = column_norms2(c);
        let mean = nu.iter().sum::<f64>() / n as f64;
        let floor = mean / window as f64;
        let windows = n - window + 1;
        let mut y = vec![0.0; windows];
        // `ends[j]`: coverage that stops before j (difference array of the chosen windows).
        let mut ends = vec![0.0; n + 1];
        let mut covered = 0.0;
        for j in 0..n {
            covered -= ends[j];
            let deficit = nu[j] - covered;
            if deficit > 0.0 {
                let s = j.min(windows - 1);
                y[s] += deficit;
                covered += deficit;
                ends[s + window] += deficit;
            }
        }
        x.extend(y.iter().map(|v| v.max(floor).sqrt()));
        x.push((1e-6 * mean).sqrt());
    }
    x
}

/// Minimizes the loss of a banded encoder from `start` (module docs); the result is never worse
/// than `start` by the exact loss. `progress` is called once per iteration and stops the run
/// (keeping the best so far) by returning `Break`.
pub fn optimize_general(
    problem: &BandedProblem,
    start: BandRows,
    options: &GeneralOptions,
    progress: &mut dyn FnMut(&GeneralProgress) -> ControlFlow<()>,
) -> Result<Optimized> {
    problem.check_shape(&start)?;
    let started = Instant::now();
    let (n, h) = (problem.steps(), problem.bands);
    let start_loss = problem.loss(&start)?;
    let history = history_for(problem, options);
    let max_iterations = round_iteration_cap(
        options,
        &problem.participation,
        n,
        seconds_per_evaluation(n, h, problem.width()),
    );
    let mut scratch = start.clone();
    let mut workspace = Workspace::default();
    let rounds: Vec<Formulation> = match (options.columns, windows(&problem.participation, n)) {
        (Columns::Normalized, _) => vec![Formulation::Normalized],
        (Columns::Free, Some((window, k))) => vec![Formulation::Dual { window, k }],
        (Columns::Free, None) => options
            .temperatures
            .iter()
            .map(|&tau| Formulation::Smoothed { tau })
            .collect(),
    };
    let mut iterations = 0usize;
    let evaluations = std::cell::Cell::new(0usize);
    let mut stopped = Stopped::Converged;
    let mut budget_reached = false;
    let mut current: Option<BandRows> = None;
    for (round, &formulation) in rounds.iter().enumerate() {
        let mut x = parameters_of(formulation, current.as_ref().unwrap_or(&start));
        debug_assert_eq!(x.len(), n * h + formulation.extra(n));
        let mut plateau = Plateau::new(options.window, options.tolerance);
        let mut plateaued = false;
        let (_, ran) = minimize(
            &mut x,
            history,
            max_iterations,
            &mut |x, gradient| {
                // An interrupt fails the evaluation: the line search gives up at once and the
                // next iteration's check stops the run.
                crate::interrupt::check().ok()?;
                evaluations.set(evaluations.get() + 1);
                evaluate(
                    problem,
                    formulation,
                    x,
                    gradient,
                    &mut scratch,
                    &mut workspace,
                )
            },
            &mut |_, value| {
                iterations += 1;
                let seconds = started.elapsed().as_secs_f64();
                let report = GeneralProgress {
                    round,
                    iteration: iterations,
                    evaluations: evaluations.get(),
                    objective: value.exp(),
                    seconds,
                };
                if progress(&report).is_break() {
                    stopped = Stopped::Interrupted;
                    return true;
                }
                if crate::interrupt::check().is_err() {
                    stopped = Stopped::Interrupted;
                    return true;
                }
                // log F: an absolute change is a relative change of F.
                plateaued = plateau.done(value);
                plateaued
            },
        )
        .ok_or_else(|| {
            crate::interrupt::check().err().unwrap_or_else(|| {
                Error::Numerical("the starting banded encoder is degenerate".into())
            })
        })?;
        budget_reached |= stopped == Stopped::Converged && !plateaued && ran >= max_iterations;
        let encoder = current.get_or_insert_with(|| start.clone());
        encoder_of(formulation, &x, n, h, encoder).ok_or_else(|| {
            Error::Numerical("the optimized banded encoder has a zero column".into())
        })?;
        if stopped != Stopped::Converged {
            break;
        }
    }
    drop(scratch);
    crate::interrupt::check()?;
    if budget_reached && stopped == Stopped::Converged {
        stopped = Stopped::IterationBudget;
    }
    let (encoder, loss) = match current {
        Some(encoder) => {
            let loss = problem.loss(&encoder).unwrap_or(f64::INFINITY);
            if loss < start_loss {
                (encoder, loss)
            } else {
                (start, start_loss)
            }
        }
        None => (start, start_loss),
    };
    Ok(Optimized {
        encoder,
        loss,
        iterations,
        evaluations: evaluations.get(),
        stopped,
    })
}

/// The optimum over banded encoders with `b̂ = min(b, n)` bands under `b`-min-separation: the
/// largest band whose columns stay orthogonal within every pattern (with `b̂ = b` this is the
/// min-separation recipe of jax_privacy's `dense.optimize(bands=min_sep)`), started from the
/// banded Toeplitz optimum ([`super::toeplitz`], of the prefix sum when `A⁻¹` is banded) and
/// optimized by [`optimize_general`] on the operator of `a` ([`Operator::from_matrix`]: banded
/// `A⁻¹` for the prefix sum and momentum).
/// Returned as an [`Optimum`] normalized to sensitivity 1, with no certificate
/// (`dual_bound = 0`, `relative_gap = 1`): no dual bound holds under min-separation.
/// `progress` gets each iteration's loss (`relative_gap` NaN: there is none) and stops the run,
/// keeping the best encoder so far, by returning `Break`.
pub fn optimize_min_separation(
    a: MatRef<'_, f64>,
    participation: &Participation,
    options: &GeneralOptions,
    progress: &mut dyn FnMut(&Progress) -> ControlFlow<()>,
) -> Result<Optimum> {
    let n = a.nrows();
    let bands = participation.separation().unwrap_or(n).min(n);
    let operator = Operator::from_matrix(a)?;
    // The start: the banded Toeplitz optimum, in `O(n·b̂)` per evaluation for the prefix sum
    // (a good start for any banded inverse: momentum's optimum is near it), through the matrix
    // for a custom workload.
    let toeplitz_problem = match &operator {
        Operator::BandedInverse(_) => super::toeplitz::ToeplitzProblem::new(
            &crate::workload::Workload::PrefixSum,
            n,
            participation,
        )?,
        Operator::Dense(_) => super::toeplitz::ToeplitzProblem::for_matrix(a, participation)?,
    };
    let toeplitz = super::toeplitz::optimize(
        &toeplitz_problem,
        bands,
        None,
        &super::toeplitz::ToeplitzOptions::default(),
        &mut |_, _| {},
    )?;
    let problem = BandedProblem::new(operator, *participation, bands)?;
    let optimized = optimize_general(
        &problem,
        BandRows::toeplitz(&toeplitz, n),
        options,
        &mut |p| {
            progress(&Progress {
                iteration: p.iteration,
                primal: p.objective,
                dual: 0.0,
                relative_gap: f64::NAN,
            })
        },
    )?;
    let scale2 = problem.sensitivity_squared(&optimized.encoder)?;
    // X = CᵀC from the band, O(n·b̂²): X[i, j] = Σ_l C[l, i]·C[l, j].
    let c = &optimized.encoder;
    let mut x = Mat::<f64>::zeros(n, n);
    for l in 0..n {
        let row = c.row(l);
        for t in 0..bands.min(l + 1) {
            for u in 0..bands.min(l + 1) {
                x[(l - t, l - u)] += row[t] * row[u] / scale2;
            }
        }
    }
    Ok(Optimum {
        v: (0..n).map(|i| x[(i, i)]).collect(),
        x,
        loss: optimized.loss,
        dual_bound: 0.0,
        relative_gap: 1.0,
        iterations: optimized.iterations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Schedule, Workload};

    fn uniform(seed: &mut u64) -> f64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Every formulation's gradient equals central differences of its value, for the banded
    /// inverse and the dense path, under each schema.
    #[test]
    fn gradients_match_central_differences() {
        let (n, h) = (14, 3);
        let mut seed = 0x2545_f491_4f6c_dd1d;
        let momentum = Workload::Momentum {
            momentum: 0.8,
            schedule: Schedule::Cooldown {
                steps: 4,
                final_rate: 0.2,
            },
        };
        for workload in [Workload::PrefixSum, momentum] {
            let dense = Workload::Custom {
                label: "dense".into(),
                matrix: workload.matrix(n).unwrap(),
            };
            for w in [&workload, &dense] {
                for participation in [
                    Participation::Single,
                    Participation::min_separation(3, 4).unwrap(),
                    Participation::fixed_epoch_order(3, 4).unwrap(),
                ] {
                    let problem =
                        BandedProblem::new(Operator::new(w, n).unwrap(), participation, h).unwrap();
                    let mut c = BandRows::zeros(n, h);
                    for i in 0..n {
                        for t in 0..h.min(i + 1) {
                            c.rows[i * h + t] = if t == 0 {
                                1.0 + uniform(&mut seed)
                            } else {
                                0.5 * (uniform(&mut seed) - 0.5)
                            };
                        }
                    }
                    let mut formulations =
                        vec![Formulation::Normalized, Formulation::Smoothed { tau: 0.1 }];
                    if let Some((window, k)) = windows(&participation, n) {
                        formulations.push(Formulation::Dual { window, k });
                    }
                    for formulation in formulations {
                        let mut x = parameters_of(formulation, &c);
                        for v in &mut x[n * h..] {
                            *v += 0.3 * (uniform(&mut seed) - 0.5);
                        }
                        let mut scratch = c.clone();
                        let mut ws = Workspace::default();
                        let mut gradient = vec![0.0; x.len()];
                        let mut other = vec![0.0; x.len()];
                        evaluate(
                            &problem,
                            formulation,
                            &x,
                            &mut gradient,
                            &mut scratch,
                            &mut ws,
                        )
                        .unwrap();
                        for q in (0..x.len()).filter(|&q| q >= n * h || q % h <= q / h) {
                            let step = 1e-6 * (1.0 + x[q].abs());
                            let mut up = x.clone();
                            up[q] += step;
                            let mut down = x.clone();
                            down[q] -= step;
                            let fu = evaluate(
                                &problem,
                                formulation,
                                &up,
                                &mut other,
                                &mut scratch,
                                &mut ws,
                            )
                            .unwrap();
                            let fd = evaluate(
                                &problem,
                                formulation,
                                &down,
                                &mut other,
                                &mut scratch,
                                &mut ws,
                            )
                            .unwrap();
                            let numeric = (fu - fd) / (2.0 * step);
                            assert!(
                                (numeric - gradient[q]).abs() <= 1e-6 * (1.0 + numeric.abs()),
                                "{} {participation:?} {formulation:?} parameter {q}: {numeric} vs {}",
                                w.label(),
                                gradient[q]
                            );
                        }
                    }
                }
            }
        }
    }

    /// The seconds budget caps the iterations at
    /// `max(MIN_BUDGET_ITERATIONS, seconds / seconds per evaluation)`,
    /// reports a cap reached as `IterationBudget`, and is deterministic: the same request gives
    /// the same encoder; without it the same problem converges (no cap reached).
    #[test]
    fn the_seconds_budget_caps_iterations_deterministically() {
        let n = 200;
        let participation = Participation::min_separation(4, 50).unwrap();
        let problem = BandedProblem::new(
            Operator::new(&Workload::PrefixSum, n).unwrap(),
            participation,
            50,
        )
        .unwrap();
        let start = BandRows::toeplitz(&crate::optimize::toeplitz::square_root_coefficients(50), n);
        let run = |budget: Option<f64>| {
            optimize_general(
                &problem,
                start.clone(),
                &GeneralOptions {
                    seconds_budget: budget,
                    ..GeneralOptions::default()
                },
                &mut |_| ControlFlow::Continue(()),
            )
            .unwrap()
        };
        let free = run(None);
        assert_ne!(free.stopped, Stopped::IterationBudget);
        assert!(
            free.iterations > MIN_BUDGET_ITERATIONS,
            "{}",
            free.iterations
        );
        // A budget of a microsecond leaves the floor of MIN_BUDGET_ITERATIONS.
        let capped = run(Some(1e-6));
        assert_eq!(capped.stopped, Stopped::IterationBudget);
        assert_eq!(capped.iterations, MIN_BUDGET_ITERATIONS);
        assert!(capped.loss >= free.loss);
        let again = run(Some(1e-6));
        assert_eq!(again.encoder, capped.encoder);
    }
}
