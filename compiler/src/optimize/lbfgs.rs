//! Limited-memory BFGS (Nocedal & Wright, *Numerical Optimization*, Algorithm 7.4 with the
//! two-loop recursion, Algorithm 7.5) with a backtracking Armijo line search, for the smooth
//! problems of this crate: the multi-epoch primal (`multi_epoch`) and the few parameters of
//! Toeplitz and BLT encoders (`toeplitz`).

use std::collections::VecDeque;

use crate::Result;

/// An evaluated point: the objective and its gradient.
pub(crate) trait Point {
    fn value(&self) -> f64;
    fn gradient(&self) -> &[f64];
}

/// Asked before every iteration with the iteration number (from 1), `x` and its evaluation;
/// returning `true` ends the run.
pub(crate) type Stop<'a, P> = dyn FnMut(usize, &[f64], &P) -> Result<bool> + 'a;

/// The stopping rule of the BandMF optimizers: stop once the objective has improved by at most
/// `tolerance` (relative) over the last `window` iterations. A rule on one iteration's change
/// stops too early on a plateau of small steps or, as `|Δ| ≤ 10⁻¹²·F`, far too late (1 900
/// L-BFGS iterations for a banded encoder at n = 512, most of them moving `F` in its eighth
/// digit).
#[derive(Debug, Clone)]
pub(crate) struct Plateau {
    window: usize,
    tolerance: f64,
    values: VecDeque<f64>,
}

impl Plateau {
    /// A rule over `window ≥ 1` iterations and a relative `tolerance`.
    pub(crate) fn new(window: usize, tolerance: f64) -> Self {
        Self {
            window: window.max(1),
            tolerance,
            values: VecDeque::new(),
        }
    }

    /// Records the objective of this iteration; `true` when it is within `tolerance` of the
    /// value `window` iterations ago (never before `window` iterations were seen).
    pub(crate) fn done(&mut self, value: f64) -> bool {
        self.values.push_back(value);
        if self.values.len() <= self.window {
            return false;
        }
        let old = self.values.pop_front().unwrap_or(f64::INFINITY);
        old - value <= self.tolerance * value.abs()
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Minimizes from `x` (already evaluated as `current`). `evaluate` returns `None` outside the
/// domain (the line search then shortens the step). `stop` is asked before every iteration
/// (iteration number from 1, the current point) and ends the run by returning `true`. Returns
/// the last point and the iterations run; stops early when no descent step can be found.
pub(crate) fn minimize<P: Point>(
    mut x: Vec<f64>,
    mut current: P,
    history: usize,
    max_iterations: usize,
    evaluate: &mut dyn FnMut(&[f64]) -> Option<P>,
    stop: &mut Stop<'_, P>,
) -> Result<(Vec<f64>, P, usize)> {
    let mut memory: VecDeque<(Vec<f64>, Vec<f64>, f64)> = VecDeque::new();
    let norm = |v: &[f64]| dot(v, v).sqrt();
    let mut step_scale = 1e-3 * norm(&x).max(1.0) / norm(current.gradient()).max(f64::MIN_POSITIVE);
    let mut iterations = 0;
    for iteration in 1..=max_iterations {
        iterations = iteration;
        crate::interrupt::check()?;
        if stop(iteration, &x, &current)? {
            break;
        }
        // Two-loop recursion: direction = −H g.
        let mut q = current.gradient().to_vec();
        let mut alphas = Vec::with_capacity(memory.len());
        for (s, y, rho) in memory.iter().rev() {
            let alpha = rho * dot(s, &q);
            q.iter_mut().zip(y).for_each(|(q, y)| *q -= alpha * y);
            alphas.push(alpha);
        }
        let gamma = memory
            .back()
            .map_or(step_scale, |(s, y, _)| dot(s, y) / dot(y, y));
        q.iter_mut().for_each(|q| *q *= gamma);
        for ((s, y, rho), alpha) in memory.iter().zip(alphas.iter().rev()) {
            let beta = rho * dot(y, &q);
            q.iter_mut()
                .zip(s)
                .for_each(|(q, s)| *q += (alpha - beta) * s);
        }
        let mut direction: Vec<f64> = q.iter().map(|q| -q).collect();
        let mut slope = dot(&direction, current.gradient());
        if slope.is_nan() || slope >= 0.0 {
            memory.clear();
            direction = current.gradient().iter().map(|g| -step_scale * g).collect();
            slope = dot(&direction, current.gradient());
        }
        // Backtracking (Armijo) line search from the unit step.
        let mut t = 1.0;
        let mut accepted = None;
        for _ in 0..40 {
            let candidate: Vec<f64> = x.iter().zip(&direction).map(|(x, d)| x + t * d).collect();
            if let Some(e) = evaluate(&candidate) {
                if e.value() <= current.value() + 1e-4 * t * slope {
                    accepted = Some((candidate, e));
                    break;
                }
            }
            t *= 0.5;
        }
        let Some((next, e)) = accepted else {
            if memory.is_empty() {
                break; // no descent even along the gradient: numerically converged
            }
            memory.clear();
            step_scale *= 0.1;
            continue;
        };
        let s: Vec<f64> = next.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = e
            .gradient()
            .iter()
            .zip(current.gradient())
            .map(|(a, b)| a - b)
            .collect();
        let sy = dot(&s, &y);
        if sy > 1e-12 * norm(&y) * norm(&s) {
            memory.push_back((s, y, 1.0 / sy));
            if memory.len() > history.max(1) {
                memory.pop_front();
            }
        }
        x = next;
        current = e;
    }
    Ok((x, current, iterations))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Evaluated(f64, Vec<f64>);

    impl Point for Evaluated {
        fn value(&self) -> f64 {
            self.0
        }
        fn gradient(&self) -> &[f64] {
            &self.1
        }
    }

    /// The plateau rule waits for a full window, then stops at the first iteration whose value
    /// is within the tolerance of the value a window before.
    #[test]
    fn plateau_waits_for_a_window_of_small_improvements() {
        let mut rule = Plateau::new(3, 0.01);
        // 100, 90, 80, 79.5, 79.4, 79.3, 79.2: 80 → 79.3 after three is under 1%.
        let stops: Vec<bool> = [100.0, 90.0, 80.0, 79.5, 79.4, 79.3, 79.2]
            .into_iter()
            .map(|v| rule.done(v))
            .collect();
        assert_eq!(stops, [false, false, false, false, false, true, true]);
    }

    /// The Rosenbrock function, minimum 0 at (1, 1).
    #[test]
    fn minimizes_rosenbrock() {
        let mut f = |x: &[f64]| {
            let (a, b) = (x[0], x[1]);
            Some(Evaluated(
                (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2),
                vec![
                    -2.0 * (1.0 - a) - 400.0 * a * (b - a * a),
                    200.0 * (b - a * a),
                ],
            ))
        };
        let x0 = vec![-1.2, 1.0];
        let first = f(&x0).unwrap();
        let (x, p, _) =
            minimize(x0, first, 10, 500, &mut f, &mut |_, _, p| Ok(p.0 < 1e-20)).unwrap();
        assert!(p.0 < 1e-12 && (x[0] - 1.0).abs() < 1e-5, "{x:?}");
    }
}
