//! BLT fits with an analytic gradient (Dvijotham, McMahan, Pillutla, Steinke, Thakurta 2024;
//! the parametrization and the loss of [`super`]): the loss `L = sens(c)²·‖S T(r)‖_F²`
//! of a BLT `r_0 = 1`, `r_k = Σ_j ω_j θ_j^{k−1}` over `n` steps, with `sens` exactly as
//! [`toeplitz_sensitivity`] computes it for the encoder `c = 1/r` (under min-separation from the
//! non-increasing majorant `ĉ_t = max_{t' ≥ t} |c_{t'}|`), and its gradient with respect to
//! `(logit θ, ω)` in `O(n·(m + k))`, the cost of one evaluation.
//!
//! [`super::optimize_blt`] otherwise takes central differences (`4m + 1` evaluations a gradient)
//! from 21 spreads of decays in two parametrizations, for every buffer count up to `m`, and stops
//! a run on a relative change of `10⁻¹³`: 13.8 s of CPU at n = 2000, (20, 100), 4 buffers. Here:
//!
//! - `‖B‖_F² = Σ_k (n − k) R_k²`, `R = cumsum r`: `∂/∂r_k = Σ_{k' ≥ k} 2(n − k')R_{k'}`, then
//!   `∂r_k/∂ω_j = θ_j^{k−1}`, `∂r_k/∂θ_j = (k − 1) ω_j θ_j^{k−2}`;
//! - `sens² = Σ_t (Σ_{s ∈ starts} ĉ_{t−s})²`: `∂/∂ĉ_u = Σ_s 2 sum_{s+u}`, carried to the `c_t` that
//!   attains each running maximum (with its sign), then back through the encoder's filter
//!   `z_t = δ_{t0} − Σ_j ω_j s_j`, `s_j ← θ_j s_j + z_t` by reverse mode, its states stored every
//!   `CHECKPOINT` steps and recomputed in between (`O(n·m/CHECKPOINT + CHECKPOINT·m)` memory);
//! - L-BFGS on `log L` stops when `log L` improved by less than `10⁻⁹` over 10 iterations.
//!
//! Buffer counts `1, …, m` are fitted in turn, each from the previous fit plus an idle buffer
//! (`ω = 0`: the same mechanism, so never worse) at several decays and from a few cold starts
//! (decays log-spread, `ω` by least squares on the square root's `C⁻¹`), and the best is kept by
//! what ships: parameters rounded to `f32`, the encoder stable ([`Blt::is_stable`]), the loss
//! recomputed by [`Blt::error`].

use super::{Blt, Smooth, fit_omega, idle_buffer_starts, shipped_score};
use crate::optimize::lbfgs::{Plateau, minimize};
#[cfg(test)]
use crate::optimize::toeplitz::toeplitz_sensitivity;
use crate::optimize::toeplitz::{inverse_series, square_root_coefficients};
use crate::privacy::participation::Participation;
use crate::{Error, Result};

/// Steps between stored filter states in the reverse sweep.
const CHECKPOINT: usize = 512;

/// `(k, b)` of the schema for the sensitivity sum: `None` for single participation.
fn schema(participation: &Participation) -> Option<(usize, usize, bool)> {
    match *participation {
        Participation::Single => None,
        Participation::FixedEpochOrder { epochs, separation } => {
            Some((epochs, separation.max(1), false))
        }
        Participation::MinSeparation {
            max_participations,
            min_separation,
        } => Some((max_participations, min_separation.max(1), true)),
    }
}

/// The encoder's impulse response `c_0 … c_{n−1}` and the filter state before every
/// `CHECKPOINT`-th step.
fn encoder(blt: &Blt, n: usize) -> (Vec<f64>, Vec<f64>) {
    let m = blt.theta.len();
    let mut state = vec![0.0; m];
    let mut c = Vec::with_capacity(n);
    let mut checkpoints = Vec::with_capacity(n.div_ceil(CHECKPOINT) * m);
    for t in 0..n {
        if t % CHECKPOINT == 0 {
            checkpoints.extend_from_slice(&state);
        }
        let z = f64::from(u8::from(t == 0))
            - blt
                .omega
                .iter()
                .zip(&state)
                .map(|(w, s)| w * s)
                .sum::<f64>();
        c.push(z);
        for (s, theta) in state.iter_mut().zip(&blt.theta) {
            *s = theta * *s + z;
        }
    }
    (c, checkpoints)
}

/// `sens²` as [`toeplitz_sensitivity`] computes it from `c` (length `n`), and `∂sens²/∂c`.
fn sensitivity2(c: &[f64], participation: &Participation) -> (f64, Vec<f64>) {
    let n = c.len();
    let mut gradient = vec![0.0; n];
    let Some((k, b, majorant)) = schema(participation) else {
        for (g, x) in gradient.iter_mut().zip(c) {
            *g = 2.0 * x;
        }
        return (c.iter().map(|x| x * x).sum(), gradient);
    };
    let starts: Vec<usize> = (0..n).step_by(b).take(k).collect();
    // The column and, for each entry, the index of c it is the absolute value of.
    let mut column: Vec<f64> = c.iter().map(|x| x.abs()).collect();
    let mut source: Vec<usize> = (0..n).collect();
    if n <= b {
        // One start: Σ c² (toeplitz_sensitivity's orthogonal-columns branch).
        let value = c.iter().map(|x| x * x).sum();
        for (g, x) in gradient.iter_mut().zip(c) {
            *g = 2.0 * x;
        }
        return (value, gradient);
    }
    if majorant {
        for t in (0..n.saturating_sub(1)).rev() {
            if column[t + 1] > column[t] {
                column[t] = column[t + 1];
                source[t] = source[t + 1];
            }
        }
    }
    let mut sum = vec![0.0; n];
    for &s in &starts {
        for (t, x) in column[..n - s].iter().enumerate() {
            sum[s + t] += x;
        }
    }
    let value = sum.iter().map(|x| x * x).sum();
    for u in 0..n {
        let mut g = 0.0;
        for &s in &starts {
            if s + u < n {
                g += 2.0 * sum[s + u];
            }
        }
        let i = source[u];
        gradient[i] += g * c[i].signum();
    }
    (value, gradient)
}

/// `log L` and its gradient at `x = (logit θ, ω)`; `None` outside the domain.
fn evaluate(x: &[f64], n: usize, participation: &Participation) -> Option<Smooth> {
    let m = x.len() / 2;
    let theta: Vec<f64> = x[..m].iter().map(|a| 1.0 / (1.0 + (-a).exp())).collect();
    if theta.iter().any(|t| !(*t > 0.0 && *t < 1.0)) {
        return None;
    }
    let blt = Blt {
        theta,
        omega: x[m..].to_vec(),
    };
    let mut gradient = vec![0.0; 2 * m];
    // The error: r, R = cumsum r, ‖B‖² = Σ (n − k) R_k².
    let r = blt.decoder_coefficients(n);
    let mut error = 0.0;
    let mut running = 0.0;
    let mut weighted = vec![0.0; n];
    for k in 0..n {
        running += r[k];
        let w = (n - k) as f64;
        error += w * running * running;
        weighted[k] = 2.0 * w * running;
    }
    // r̄_k = Σ_{k' ≥ k} weighted_{k'}.
    for k in (0..n.saturating_sub(1)).rev() {
        weighted[k] += weighted[k + 1];
    }
    let rbar = weighted;
    let (c, checkpoints) = encoder(&blt, n);
    let (s2, cbar) = sensitivity2(&c, participation);
    if !(error > 0.0 && s2 > 0.0 && error.is_finite() && s2.is_finite()) {
        return None;
    }
    // ∂ log ‖B‖²: through r_k = Σ_j ω_j θ_j^{k−1}.
    for j in 0..m {
        let (t, w) = (blt.theta[j], blt.omega[j]);
        let (mut power, mut dpower) = (1.0, 0.0); // θ^{k−1}, (k − 1)θ^{k−2}
        let (mut go, mut gt) = (0.0, 0.0);
        for rb in &rbar[1..] {
            go += rb * power;
            gt += rb * w * dpower;
            dpower = dpower * t + power;
            power *= t;
        }
        gradient[m + j] += go / error;
        gradient[j] += gt * t * (1.0 - t) / error;
    }
    // ∂ log sens²: reverse mode through the filter, segment by segment from the end.
    let mut sbar = vec![0.0; m];
    let (mut theta_bar, mut omega_bar) = (vec![0.0; m], vec![0.0; m]);
    let mut states = vec![0.0; CHECKPOINT * m];
    for segment in (0..n.div_ceil(CHECKPOINT)).rev() {
        let first = segment * CHECKPOINT;
        let last = n.min(first + CHECKPOINT);
        let mut state = checkpoints[segment * m..(segment + 1) * m].to_vec();
        for t in first..last {
            states[(t - first) * m..(t - first + 1) * m].copy_from_slice(&state);
            let z = c[t];
            for (s, theta) in state.iter_mut().zip(&blt.theta) {
                *s = theta * *s + z;
            }
        }
        for t in (first..last).rev() {
            let before = &states[(t - first) * m..(t - first + 1) * m];
            // s' = θ s + z_t.
            let zbar = cbar[t] + sbar.iter().sum::<f64>();
            for j in 0..m {
                theta_bar[j] += sbar[j] * before[j];
                sbar[j] *= blt.theta[j];
            }
            // z_t = δ − Σ ω_j s_j.
            for j in 0..m {
                omega_bar[j] -= zbar * before[j];
                sbar[j] -= blt.omega[j] * zbar;
            }
        }
    }
    for j in 0..m {
        let t = blt.theta[j];
        gradient[j] += theta_bar[j] * t * (1.0 - t) / s2;
        gradient[m + j] += omega_bar[j] / s2;
    }
    let value = error.ln() + s2.ln();
    (value.is_finite() && gradient.iter().all(|g| g.is_finite()))
        .then_some(Smooth { value, gradient })
}

/// L-BFGS on `log L` from `start`; `None` if the start has no finite loss.
fn descend(start: &Blt, n: usize, participation: &Participation) -> Option<Blt> {
    let x0 = start.parameters();
    let first = evaluate(&x0, n, participation)?;
    let mut plateau = Plateau::new(10, 1e-9);
    let (x, _, _) = minimize(
        x0,
        first,
        10,
        1000,
        &mut |x| evaluate(x, n, participation),
        &mut |_, _, p| Ok(plateau.done(p.value)),
    )
    .ok()?;
    Some(Blt::from_parameters(&x))
}

/// Cold starts for `m` buffers: decays with `1 − θ` log-spread from `slowest/n` to `0.5`, `ω`
/// fitted to the square root's `C⁻¹`.
fn cold_starts(n: usize, m: usize) -> Vec<Blt> {
    let target = inverse_series(&square_root_coefficients(n), n);
    [0.1, 1.0, 10.0]
        .iter()
        .filter_map(|slowest| {
            let lo = (slowest / n as f64).min(0.5).ln();
            let hi = 0.5f64.ln();
            let theta: Vec<f64> = (0..m)
                .map(|j| {
                    let t = if m == 1 {
                        0.5
                    } else {
                        j as f64 / (m - 1) as f64
                    };
                    1.0 - (lo + t * (hi - lo)).exp()
                })
                .collect();
            let omega = fit_omega(&theta, &target)?;
            Some(Blt { theta, omega })
        })
        .collect()
}

/// The BLTs with `1, …, max_buffers` buffers minimizing the loss over `n` steps under
/// `participation` (module docs), each rounded to `f32`, stable, and never worse than the one
/// before. `fitted(m)` is called after each buffer count.
pub(super) fn optimize_blt_family(
    n: usize,
    max_buffers: usize,
    participation: &Participation,
    fitted: &mut dyn FnMut(usize),
) -> Result<Vec<Blt>> {
    let mut family: Vec<Blt> = Vec::with_capacity(max_buffers);
    for m in 1..=max_buffers {
        crate::interrupt::check()?;
        let warm = family.last().map_or_else(Vec::new, idle_buffer_starts);
        let mut best: Option<(f64, Blt)> = warm
            .first()
            .map(|padded| (shipped_score(padded, n, participation), padded.clone()));
        for start in warm.iter().chain(cold_starts(n, m).iter()) {
            let Some(fit) = descend(start, n, participation) else {
                continue;
            };
            let score = shipped_score(&fit, n, participation);
            if score.is_finite() && best.as_ref().is_none_or(|(v, _)| score < *v) {
                best = Some((score, fit));
            }
        }
        // A fit stopped by an interrupt fails like a diverging one: say which it was.
        crate::interrupt::check()?;
        let (_, blt) = best
            .ok_or_else(|| Error::Numerical(format!("no stable BLT with {m} buffers converged")))?;
        family.push(blt.rounded_to_f32());
        fitted(m);
    }
    Ok(family)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value equals `ln` of [`Blt::error`]'s loss (the sensitivity of
    /// [`toeplitz_sensitivity`]) and the gradient equals central differences, under every schema,
    /// for an encoder that is monotone and one that is not (the majorant's argmax path).
    #[test]
    fn loss_and_gradient_match_the_reference() {
        for (n, blt) in [
            (
                700,
                Blt {
                    theta: vec![0.99, 0.9, 0.5],
                    omega: vec![-0.05, -0.1, -0.2],
                },
            ),
            (
                600,
                Blt {
                    theta: vec![0.95, 0.7],
                    omega: vec![0.3, -0.9],
                },
            ),
        ] {
            for participation in [
                Participation::Single,
                Participation::min_separation(5, 100).unwrap(),
                Participation::fixed_epoch_order(5, 100).unwrap(),
                Participation::min_separation(2, 700).unwrap(),
            ] {
                let x = blt.parameters();
                let e = evaluate(&x, n, &participation).unwrap();
                let reference = blt.error(n, &participation).loss.ln();
                assert!(
                    (e.value - reference).abs() < 1e-10,
                    "{participation:?}: {} vs {reference}",
                    e.value
                );
                let c = blt.encoder_coefficients(n);
                let s = toeplitz_sensitivity(&c, n, &participation).value;
                assert!((sensitivity2(&c, &participation).0 - s * s).abs() < 1e-10 * s * s);
                for q in 0..x.len() {
                    let h = 1e-6;
                    let mut up = x.clone();
                    up[q] += h;
                    let mut down = x.clone();
                    down[q] -= h;
                    let fd = (evaluate(&up, n, &participation).unwrap().value
                        - evaluate(&down, n, &participation).unwrap().value)
                        / (2.0 * h);
                    assert!(
                        (fd - e.gradient[q]).abs() <= 1e-5 * (1.0 + fd.abs()),
                        "{participation:?} parameter {q}: {fd} vs {}",
                        e.gradient[q]
                    );
                }
            }
        }
    }
}
