//! L-BFGS for tens of millions of unknowns (Nocedal & Wright, *Numerical Optimization*,
//! Algorithm 7.4 with the two-loop recursion, Algorithm 7.5, and a backtracking Armijo line
//! search): the same method as `crate::lbfgs`, but in place, with its curvature pairs stored in
//! `f32`. A general banded encoder at n = 10⁵ with 256 bands has 2.6·10⁷ entries (205 MB per
//! `f64` vector); `crate::lbfgs` allocates fresh vectors every iteration and would hold
//! `10 + 2m` of them, 4.1 GB for a history of `m = 10` pairs. Here five `f64` vectors (the
//! point, its gradient, the direction, the trial point and its gradient) and `m` pairs of `f32`
//! vectors are allocated once. The pairs only shape the direction; each step is still a descent
//! step of the `f64` objective, checked by the line search.

use std::collections::VecDeque;

/// `Σ a_i b_i` over an `f64` and an `f32` vector.
fn dot_mixed(a: &[f64], b: &[f32]) -> f64 {
    let mut acc = [0.0f64; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * f64::from(y[i]);
        }
    }
    let tail = a.len().min(b.len()) / 8 * 8;
    let rest: f64 = a[tail..]
        .iter()
        .zip(&b[tail..])
        .map(|(x, y)| x * f64::from(*y))
        .sum();
    acc.iter().sum::<f64>() + rest
}

fn norm(a: &[f64]) -> f64 {
    super::frobenius::dot(a, a).sqrt()
}

/// One curvature pair `(s, y, 1/sᵀy)`.
struct Pair {
    s: Vec<f32>,
    y: Vec<f32>,
    rho: f64,
}

/// `f(x)` into the gradient's buffer, `None` where `f` is not finite.
pub(crate) type Evaluate<'a> = dyn FnMut(&[f64], &mut [f64]) -> Option<f64> + 'a;

/// Minimizes `evaluate` from `x` (updated in place). `evaluate(x, gradient)` returns the value and
/// writes the gradient, or `None` outside the domain (the line search then shortens the step).
/// `stop(iteration, value)` is asked before every iteration, from 1, and ends the run by
/// returning `true`. Returns the value at `x` and the iterations run; stops early when no
/// descent step can be found. `None` when `x` itself cannot be evaluated.
pub(crate) fn minimize(
    x: &mut Vec<f64>,
    history: usize,
    max_iterations: usize,
    evaluate: &mut Evaluate<'_>,
    stop: &mut dyn FnMut(usize, f64) -> bool,
) -> Option<(f64, usize)> {
    let len = x.len();
    let mut gradient = vec![0.0; len];
    let mut value = evaluate(x, &mut gradient)?;
    let mut direction = vec![0.0; len];
    let mut trial = vec![0.0; len];
    let mut trial_gradient = vec![0.0; len];
    let mut pairs: VecDeque<Pair> = VecDeque::with_capacity(history.max(1));
    let mut alphas = vec![0.0; history.max(1)];
    let mut step_scale = 1e-3 * norm(x).max(1.0) / norm(&gradient).max(f64::MIN_POSITIVE);
    let mut iterations = 0;
    for iteration in 1..=max_iterations {
        iterations = iteration;
        if stop(iteration, value) {
            break;
        }
        // Two-loop recursion: direction = −H g.
        direction.copy_from_slice(&gradient);
        for (p, alpha) in pairs.iter().rev().zip(alphas.iter_mut()) {
            *alpha = p.rho * dot_mixed(&direction, &p.s);
            direction
                .iter_mut()
                .zip(&p.y)
                .for_each(|(q, y)| *q -= *alpha * f64::from(*y));
        }
        let gamma = pairs.back().map_or(step_scale, |p| {
            let yy: f64 = p.y.iter().map(|y| f64::from(*y).powi(2)).sum();
            1.0 / (p.rho * yy)
        });
        direction.iter_mut().for_each(|q| *q *= gamma);
        let used = pairs.len();
        for (p, alpha) in pairs.iter().zip(alphas[..used].iter().rev()) {
            let beta = p.rho * dot_mixed(&direction, &p.y);
            direction
                .iter_mut()
                .zip(&p.s)
                .for_each(|(q, s)| *q += (alpha - beta) * f64::from(*s));
        }
        direction.iter_mut().for_each(|q| *q = -*q);
        let mut slope = super::frobenius::dot(&direction, &gradient);
        if slope.is_nan() || slope >= 0.0 {
            pairs.clear();
            direction
                .iter_mut()
                .zip(&gradient)
                .for_each(|(d, g)| *d = -step_scale * g);
            slope = super::frobenius::dot(&direction, &gradient);
        }
        // Backtracking (Armijo) from the unit step.
        let mut t = 1.0;
        let mut accepted = None;
        for _ in 0..40 {
            trial
                .iter_mut()
                .zip(x.iter().zip(&direction))
                .for_each(|(y, (x, d))| *y = x + t * d);
            if let Some(v) = evaluate(&trial, &mut trial_gradient) {
                if v <= value + 1e-4 * t * slope {
                    accepted = Some(v);
                    break;
                }
            }
            t *= 0.5;
        }
        let Some(next) = accepted else {
            if pairs.is_empty() {
                break; // no descent even along the gradient: numerically converged
            }
            pairs.clear();
            step_scale *= 0.1;
            continue;
        };
        // The pair as stored (f32), its curvature from the stored values.
        let mut pair = if pairs.len() >= history.max(1) {
            pairs.pop_front().unwrap_or(Pair {
                s: vec![0.0; len],
                y: vec![0.0; len],
                rho: 0.0,
            })
        } else {
            Pair {
                s: vec![0.0; len],
                y: vec![0.0; len],
                rho: 0.0,
            }
        };
        for i in 0..len {
            pair.s[i] = (trial[i] - x[i]) as f32;
            pair.y[i] = (trial_gradient[i] - gradient[i]) as f32;
        }
        let (mut sy, mut ss, mut yy) = (0.0, 0.0, 0.0);
        for (s, y) in pair.s.iter().zip(&pair.y) {
            let (s, y) = (f64::from(*s), f64::from(*y));
            sy += s * y;
            ss += s * s;
            yy += y * y;
        }
        if sy > 1e-12 * (ss * yy).sqrt() {
            pair.rho = 1.0 / sy;
            pairs.push_back(pair);
        }
        std::mem::swap(x, &mut trial);
        std::mem::swap(&mut gradient, &mut trial_gradient);
        value = next;
    }
    Some((value, iterations))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Rosenbrock function, minimum 0 at (1, 1), and a badly scaled quadratic in 50
    /// unknowns, minimum 0 at 0.
    #[test]
    fn minimizes_rosenbrock_and_a_scaled_quadratic() {
        let mut x = vec![-1.2, 1.0];
        let (value, _) = minimize(
            &mut x,
            5,
            500,
            &mut |x, g| {
                let (a, b) = (x[0], x[1]);
                g[0] = -2.0 * (1.0 - a) - 400.0 * a * (b - a * a);
                g[1] = 200.0 * (b - a * a);
                Some((1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2))
            },
            &mut |_, v| v < 1e-16,
        )
        .unwrap();
        assert!(value < 1e-12 && (x[0] - 1.0).abs() < 1e-5, "{x:?}");
        let mut x: Vec<f64> = (0..50).map(|i| 1.0 + i as f64).collect();
        let (value, iterations) = minimize(
            &mut x,
            8,
            1000,
            &mut |x, g| {
                let mut v = 0.0;
                for (i, (x, g)) in x.iter().zip(g.iter_mut()).enumerate() {
                    let w = 1.0 + i as f64 * i as f64;
                    v += w * x * x;
                    *g = 2.0 * w * x;
                }
                Some(v)
            },
            &mut |_, v| v < 1e-20,
        )
        .unwrap();
        assert!(value < 1e-18, "{value} after {iterations}");
    }
}
