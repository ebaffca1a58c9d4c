//! Buffered linear Toeplitz (BLT) strategies (Dvijotham, McMahan, Pillutla, Steinke, Thakurta
//! 2024): the *decoder side* `C⁻¹` has generating sequence `r_0 = 1`, `r_k = Σ_j ω_j θ_j^{k−1}`,
//! a sum of `m` geometric series, so `w = C⁻¹ z` streams with `m` buffers per coordinate
//! (`w_t = z_t + Σ_j ω_j s_j`, `s_j ← θ_j s_j + z_t`) and no horizon. With
//! `Q(x) = Π_j (1 − θ_j x)` and `P(x) = Q(x) + x Σ_j ω_j Π_{l≠j}(1 − θ_l x)`, `r = P/Q` and the
//! encoder is `c = Q/P`, computed in `O(n m)` by running the inverse filter (never from the
//! coefficients of `P`, which are ill-conditioned). The parameters are optimized for a horizon
//! `n` (total squared error) under the participation schema, starting from least-squares fits of
//! `ω` to the square root's `r` for several spreads of `θ`, and what is kept is judged by what
//! ships: `f32` parameters whose encoder decays. The form that ships them is
//! [`crate::forms::blt`].

mod analytic;

use crate::optimize::lbfgs::{Point, minimize};
use crate::optimize::toeplitz::{
    ToeplitzError, inverse_series, prefix_error, square_root_coefficients,
};
use crate::privacy::participation::Participation;
use crate::{Error, Result};

/// An objective value and its gradient (central differences here, analytic in [`analytic`]).
pub(super) struct Smooth {
    pub(super) value: f64,
    pub(super) gradient: Vec<f64>,
}

impl Point for Smooth {
    fn value(&self) -> f64 {
        self.value
    }
    fn gradient(&self) -> &[f64] {
        &self.gradient
    }
}

fn smooth(f: &dyn Fn(&[f64]) -> f64, x: &[f64]) -> Option<Smooth> {
    let value = f(x);
    if !value.is_finite() {
        return None;
    }
    let mut gradient = Vec::with_capacity(x.len());
    let mut probe = x.to_vec();
    for p in 0..x.len() {
        let h = 1e-6 * (1.0 + x[p].abs());
        probe[p] = x[p] + h;
        let up = f(&probe);
        probe[p] = x[p] - h;
        let down = f(&probe);
        probe[p] = x[p];
        gradient.push((up - down) / (2.0 * h));
    }
    gradient
        .iter()
        .all(|g| g.is_finite())
        .then_some(Smooth { value, gradient })
}

/// Minimizes `f` from `x0` (L-BFGS, finite-difference gradients).
pub(crate) fn minimize_smooth(f: &dyn Fn(&[f64]) -> f64, x0: Vec<f64>) -> Result<(Vec<f64>, f64)> {
    let first = smooth(f, &x0).ok_or_else(|| {
        Error::Numerical("the starting point of a Toeplitz optimization is not finite".into())
    })?;
    let mut previous = f64::INFINITY;
    let (x, point, _) = minimize(
        x0,
        first,
        10,
        2_000,
        &mut |x| smooth(f, x),
        &mut |_, _, p| {
            let done = (previous - p.value).abs() <= 1e-13 * p.value.abs();
            previous = p.value;
            Ok(done)
        },
    )?;
    Ok((x, point.value))
}

/// A buffered linear Toeplitz decoder side `C⁻¹`: `r_0 = 1`, `r_k = Σ_j ω_j θ_j^{k−1}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Blt {
    /// Decay of each buffer, in `(0, 1)`.
    pub theta: Vec<f64>,
    /// Output weight of each buffer.
    pub omega: Vec<f64>,
}

impl Blt {
    /// Buffers `m`.
    pub fn buffers(&self) -> usize {
        self.theta.len()
    }

    /// `r_0 … r_{n−1}`, the first column of `C⁻¹`.
    pub fn decoder_coefficients(&self, n: usize) -> Vec<f64> {
        let mut r = vec![0.0; n];
        let mut powers = vec![1.0; self.theta.len()];
        for (k, rk) in r.iter_mut().enumerate() {
            if k == 0 {
                *rk = 1.0;
                continue;
            }
            *rk = self.omega.iter().zip(&powers).map(|(w, p)| w * p).sum();
            for (p, t) in powers.iter_mut().zip(&self.theta) {
                *p *= t;
            }
        }
        r
    }

    /// `c_0 … c_{n−1}`, the first column of the encoder `C = T(r)⁻¹`: the impulse response of
    /// the inverse of the device's filter, run in state-space form. The device computes
    /// `w_t = z_t + Σ_j ω_j s_j`, `s_j ← θ_j s_j + z_t`; solving for `z` gives
    /// `z_t = w_t − Σ_j ω_j s_j` with the same update, and `w = e_0` yields `c`, in `O(n·m)`.
    /// (Expanding `c = Q/P` into polynomial coefficients and running their recurrence, as this
    /// crate once did, loses every digit for a dozen clustered decays: the same 13-buffer BLT
    /// padded with an idle 14th buffer scored √L 129.6 and 159.9.)
    pub fn encoder_coefficients(&self, n: usize) -> Vec<f64> {
        self.encoder_impulse(n, false)
    }

    /// [`Blt::encoder_coefficients`], stopping early (`stop_when_idle`) once the state is
    /// exactly zero: every later coefficient is then exactly zero.
    pub(crate) fn encoder_impulse(&self, n: usize, stop_when_idle: bool) -> Vec<f64> {
        let mut state = vec![0.0; self.theta.len()];
        let mut c = Vec::with_capacity(n.min(1 << 20));
        for t in 0..n {
            let input = if t == 0 { 1.0 } else { 0.0 };
            let z = input
                - self
                    .omega
                    .iter()
                    .zip(&state)
                    .map(|(w, s)| w * s)
                    .sum::<f64>();
            c.push(z);
            for (s, theta) in state.iter_mut().zip(&self.theta) {
                *s = theta * *s + z;
            }
            if stop_when_idle && state.iter().all(|&s| s == 0.0) {
                break;
            }
        }
        c
    }

    /// The state matrix of the encoder's filter, `A = diag(θ) − 1 ωᵀ` (`s ← A s` when the input
    /// is zero): its eigenvalues are the poles of `c(x)`.
    pub(crate) fn encoder_state_matrix(&self) -> faer::Mat<f64> {
        let m = self.theta.len();
        faer::Mat::from_fn(m, m, |i, j| {
            (if i == j { self.theta[i] } else { 0.0 }) - self.omega[j]
        })
    }

    /// The parameters rounded to the `f32` values a blob stores.
    pub fn rounded_to_f32(&self) -> Blt {
        Blt {
            theta: self.theta.iter().map(|&t| f64::from(t as f32)).collect(),
            omega: self.omega.iter().map(|&w| f64::from(w as f32)).collect(),
        }
    }

    /// Whether the encoder `c = Q/P` decays: every pole of `c(x)` (an eigenvalue of the
    /// encoder's state matrix, an inverse root of `P`) has modulus below 1. An encoder that grows past the horizon it was fitted for has a
    /// sensitivity growing with the horizon (a fit can reach one: at n = 512 under fixed epoch
    /// order, 11 buffers gave sensitivity 7.8 over 512 steps and 6333 over 4096).
    pub fn is_stable(&self) -> bool {
        let m = self.theta.len();
        if m == 0 || self.theta.iter().any(|t| !(*t > 0.0 && *t < 1.0)) {
            return m == 0;
        }
        self.encoder_state_matrix()
            .eigenvalues()
            .is_ok_and(|poles| poles.iter().all(|z| z.norm() < 1.0))
    }

    /// The inverse series `1/r` as a BLT of the same size, when the inverse roots of `P` are
    /// real and in `(0, 1)` (`c = Q/P = 1 + Σ_j ω'_j x/(1 − θ'_j x)`, residues fitted on `n`
    /// terms); `None` otherwise.
    pub(crate) fn inverse(&self, n: usize) -> Option<Blt> {
        let m = self.theta.len();
        // θ' are the poles of c(x), the eigenvalues of the encoder's state matrix.
        let roots = self.encoder_state_matrix().eigenvalues().ok()?;
        let mut theta = Vec::with_capacity(m);
        for z in roots {
            if z.im.abs() > 1e-10 || !(z.re > 0.0 && z.re < 1.0) {
                return None;
            }
            theta.push(z.re);
        }
        theta.sort_by(|a, b| b.total_cmp(a));
        let omega = fit_omega(&theta, &self.encoder_coefficients(n))?;
        Some(Blt { theta, omega })
    }

    /// The error over `n` steps under `participation` (sensitivity by
    /// [`super::toeplitz::toeplitz_sensitivity`]).
    pub fn error(&self, n: usize, participation: &Participation) -> ToeplitzError {
        prefix_error(
            &self.encoder_coefficients(n),
            &self.decoder_coefficients(n),
            n,
            participation,
        )
    }

    /// How the BLT optimized for `n` steps degrades past its horizon: `(N, √L_N, sens_N)` for
    /// `N = n, 2n, 4n, 8n` with the same parameters. The state stays `m + 1` floats per
    /// coordinate for any `N`; the sensitivity over `N` steps is what the noise must be
    /// calibrated for if the stream runs that long.
    pub fn beyond_horizon(
        &self,
        n: usize,
        participation: &Participation,
    ) -> Vec<(usize, f64, f64)> {
        [1, 2, 4, 8]
            .into_iter()
            .map(|f| {
                let e = self.error(f * n, participation);
                (f * n, e.loss.sqrt(), e.sensitivity)
            })
            .collect()
    }

    pub(crate) fn from_parameters(x: &[f64]) -> Self {
        let m = x.len() / 2;
        Self {
            theta: x[..m].iter().map(|a| 1.0 / (1.0 + (-a).exp())).collect(),
            omega: x[m..].to_vec(),
        }
    }

    pub(crate) fn parameters(&self) -> Vec<f64> {
        self.theta
            .iter()
            .map(|t| (t / (1.0 - t)).ln())
            .chain(self.omega.iter().copied())
            .collect()
    }
}

/// `ω` minimizing `Σ_{k=1}^{n−1} (Σ_j ω_j θ_j^{k−1} − target_k)²` for fixed `θ` (normal
/// equations, `m × m`).
pub(crate) fn fit_omega(theta: &[f64], target: &[f64]) -> Option<Vec<f64>> {
    let m = theta.len();
    let mut gram = vec![0.0; m * m];
    let mut rhs = vec![0.0; m];
    let mut powers = vec![1.0; m];
    for &t in target.iter().skip(1) {
        for p in 0..m {
            for q in 0..m {
                gram[p * m + q] += powers[p] * powers[q];
            }
            rhs[p] += powers[p] * t;
        }
        for (p, th) in powers.iter_mut().zip(theta) {
            *p *= th;
        }
    }
    let trace: f64 = (0..m).map(|p| gram[p * m + p]).sum();
    crate::optimize::linalg::cholesky_solve(&gram, &rhs, 1e-12 * trace)
}

/// The BLT with `buffers` buffers minimizing the loss over `n` steps under `participation`
/// (the last of [`optimize_blt_family`]).
pub fn optimize_blt(n: usize, buffers: usize, participation: &Participation) -> Result<Blt> {
    let mut family = optimize_blt_family(n, buffers, participation, &mut |_| {})?;
    family
        .pop()
        .ok_or_else(|| Error::Numerical(format!("no BLT with {buffers} buffers converged")))
}

/// The BLTs with `1, 2, …, max_buffers` buffers minimizing the loss over `n` steps under
/// `participation`, each never worse than the one before: buffer count `m` is fitted from the
/// starts of `fit_blt` and from the fit with `m − 1` buffers plus an idle buffer (`ω = 0`, the
/// same mechanism) at several decays, and the padded `m − 1` fit itself is kept if nothing
/// beats it. (A fit from fixed starts alone is not monotone: at n = 512 under (4, 128), 5
/// buffers did worse than 4.) `fitted(m)` is called after each buffer count.
pub fn optimize_blt_family(
    n: usize,
    max_buffers: usize,
    participation: &Participation,
    fitted: &mut dyn FnMut(usize),
) -> Result<Vec<Blt>> {
    if max_buffers == 0 || max_buffers > mfc_formats::MAX_BLT_BUFFERS as usize || n < 2 {
        return Err(Error::Option(crate::request::option::OptionError::new(
            crate::request::option::Opt::Buffers,
            max_buffers,
            format!(
                "a BLT needs 1 to {} buffers and at least two {{steps}} (n = {n})",
                mfc_formats::MAX_BLT_BUFFERS
            ),
        )));
    }
    if matches!(participation, Participation::MinSeparation { .. }) {
        // Central differences cost `4m + 1` evaluations a gradient, each `O(n·k)` under
        // min-separation: the analytic gradient is an order of magnitude faster there.
        return analytic::optimize_blt_family(n, max_buffers, participation, fitted);
    }
    let mut family: Vec<Blt> = Vec::with_capacity(max_buffers);
    for m in 1..=max_buffers {
        crate::interrupt::check()?;
        let warm: Vec<Blt> = family.last().map_or_else(Vec::new, idle_buffer_starts);
        // `warm[0]` is the previous (rounded, stable) fit padded with an idle buffer: the same
        // mechanism, so never do worse.
        let best = match (fit_blt(n, m, participation, &warm), warm.first()) {
            (Ok((value, fit)), Some(padded)) => {
                if shipped_score(padded, n, participation) <= value {
                    padded.rounded_to_f32()
                } else {
                    fit
                }
            }
            (Ok((_, fit)), None) => fit,
            (Err(_), Some(padded)) => padded.rounded_to_f32(),
            (Err(e), None) => return Err(e),
        };
        // A fit stopped by an interrupt fails (or ends early) like any other: say which it was.
        crate::interrupt::check()?;
        family.push(best);
        fitted(m);
    }
    Ok(family)
}

/// The BLT `previous` with one more buffer of weight `ω = 0` (the same mechanism), its decay
/// placed below, between (geometric means of `1 − θ`) and above the existing ones; the first
/// start is the one below the slowest.
pub(crate) fn idle_buffer_starts(previous: &Blt) -> Vec<Blt> {
    let mut gaps: Vec<f64> = previous.theta.iter().map(|t| 1.0 - t).collect();
    gaps.sort_by(|a, b| a.total_cmp(b));
    let mut new_gaps = vec![gaps[0] / 4.0];
    new_gaps.extend(gaps.windows(2).map(|w| (w[0] * w[1]).sqrt()));
    new_gaps.push((gaps[gaps.len() - 1] * 4.0).min(0.9));
    new_gaps
        .into_iter()
        .map(|gap| {
            let mut blt = previous.clone();
            blt.theta.push(1.0 - gap);
            blt.omega.push(0.0);
            blt
        })
        .collect()
}

/// `ln L` of what ships for `blt`: its parameters rounded to `f32`, over `n` steps under
/// `participation`; infinite when the rounded encoder does not decay ([`Blt::is_stable`]).
pub(super) fn shipped_score(blt: &Blt, n: usize, participation: &Participation) -> f64 {
    let rounded = blt.rounded_to_f32();
    if !rounded.is_stable() {
        return f64::INFINITY;
    }
    let loss = rounded.error(n, participation).loss.ln();
    if loss.is_nan() { f64::INFINITY } else { loss }
}

/// The best BLT with `buffers` buffers over `n` steps under `participation`: L-BFGS on
/// `(logit θ, ω)` from several starts (decays spread log-uniformly over three ranges, `ω`
/// fitted to the square root's `C⁻¹`, in both parametrizations) and from `extra_starts`,
/// keeping the best by what ships ([`shipped_score`]: rounded to `f32`, stable); returns it
/// rounded, with its score.
fn fit_blt(
    n: usize,
    buffers: usize,
    participation: &Participation,
    extra_starts: &[Blt],
) -> Result<(f64, Blt)> {
    let target = inverse_series(&square_root_coefficients(n), n);
    let objective = |x: &[f64]| {
        let blt = Blt::from_parameters(x);
        if blt.theta.iter().any(|t| !(*t > 0.0 && *t < 1.0)) {
            return f64::INFINITY;
        }
        blt.error(n, participation).loss.ln()
    };
    let mut starts: Vec<Vec<f64>> = Vec::new();
    for slowest in [0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0].map(|s| s / n as f64) {
        for fastest in [0.3f64, 0.5, 0.7] {
            // 1 − θ_j log-uniform between `slowest` and `1 − fastest`.
            starts.push(
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
                    .collect(),
            );
        }
    }
    // The same starts in the encoder-side parametrization (C itself a BLT, r = 1/c), whose
    // optima are converted back when their inverse is a real BLT: the two parametrizations
    // reach different local optima (at n = 2048, 4 buffers: 148.38 on the decoder side alone).
    let encoder_side = |x: &[f64]| {
        let blt = Blt::from_parameters(x);
        if blt.theta.iter().any(|t| !(*t > 0.0 && *t < 1.0)) {
            return f64::INFINITY;
        }
        let (c, r) = (blt.decoder_coefficients(n), blt.encoder_coefficients(n));
        prefix_error(&c, &r, n, participation).loss.ln()
    };
    let square_root = square_root_coefficients(n);
    let mut best: Option<(f64, Blt)> = None;
    let warm = extra_starts
        .iter()
        .map(|blt| (Vec::new(), Some(blt.clone())));
    let cold = starts.into_iter().map(|theta| (theta, None));
    for (theta, warm_start) in warm.chain(cold) {
        let mut candidates = Vec::new();
        if let Some(start) = warm_start {
            candidates.push(start);
        }
        if let Some(omega) = fit_omega(&theta, &target).filter(|_| !theta.is_empty()) {
            candidates.push(Blt {
                theta: theta.clone(),
                omega,
            });
        }
        if let Some(omega) = fit_omega(&theta, &square_root).filter(|_| !theta.is_empty()) {
            let start = Blt { theta, omega };
            if let Ok((x, _)) = minimize_smooth(&encoder_side, start.parameters()) {
                candidates.extend(Blt::from_parameters(&x).inverse(n));
            }
        }
        for start in candidates {
            let Ok((x, _)) = minimize_smooth(&objective, start.parameters()) else {
                continue;
            };
            let fitted = Blt::from_parameters(&x);
            let value = shipped_score(&fitted, n, participation);
            if value.is_finite() && best.as_ref().is_none_or(|(v, _)| value < *v) {
                best = Some((value, fitted));
            }
        }
    }
    // Polish the best: restarting L-BFGS (fresh curvature memory) until what ships stops
    // improving.
    if let Some((mut value, mut blt)) = best.take() {
        for _ in 0..20 {
            let Ok((x, _)) = minimize_smooth(&objective, blt.parameters()) else {
                break;
            };
            let polished = Blt::from_parameters(&x);
            let score = shipped_score(&polished, n, participation);
            if score >= value - 1e-12 {
                break;
            }
            (value, blt) = (score, polished);
        }
        best = Some((value, blt.rounded_to_f32()));
    }
    best.ok_or_else(|| Error::Numerical(format!("no stable BLT with {buffers} buffers converged")))
}
