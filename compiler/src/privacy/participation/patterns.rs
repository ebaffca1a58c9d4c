//! Linear functions over participation patterns: `max_π Σ_{i∈π} w_i` and its smoothed form.
//!
//! Under `b`-min-separation a pattern is a set of at most `k` steps, any two at least `b` apart.
//! The largest `Σ_{i∈π} w_i` is found by the dynamic program of Choquette-Choo et al. 2023b
//! ("(Amplified) Banded Matrix Factorizations", Alg. 3, VecSens):
//!
//! ```text
//! F_c(i) = max( F_c(i+1),  w_i + F_{c−1}(i+b) ),   F_0 ≡ 0,  F_c(i) = 0 for i ≥ n,
//! ```
//!
//! `F_c(i)` being the best sum over patterns inside `[i, n)` with at most `c` steps; `O(n·k)`.
//! With `max` replaced by `τ·logsumexp(·/τ)` the same recursion gives the smoothed maximum
//! `s_τ(w) = τ log Σ_π exp(Σ_{i∈π} w_i / τ)` over every pattern (the empty one included), with
//! `max ≤ s_τ ≤ max + τ log |patterns|`, and its gradient, the probability that step `i` is in
//! the pattern under the Gibbs distribution, by reverse-mode differentiation of the recursion.
//! The optimizers minimize losses built on `s_τ`; what ships is always measured with the exact
//! maximum.
//!
//! For fixed epoch order the patterns are the windows `{s, s+b, …}` (at most `k` steps), so the
//! same two functions are a maximum and a `logsumexp` over the `n` windows.

use super::Participation;

/// `log(e^a + e^b)` without overflow (`-∞` is the identity).
fn log_add_exp(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        hi
    } else {
        hi + (lo - hi).exp().ln_1p()
    }
}

/// The table `F_c(i)` of the module docs, `(k + 1) × (n + b)` (zero beyond `n`), row-major.
fn min_separation_table(w: &[f64], k: usize, b: usize) -> Vec<f64> {
    let n = w.len();
    let width = n + b;
    let mut f = vec![0.0; (k + 1) * width];
    for c in 1..=k {
        for i in (0..n).rev() {
            let skip = f[c * width + i + 1];
            let take = w[i] + f[(c - 1) * width + i + b];
            f[c * width + i] = skip.max(take);
        }
    }
    f
}

/// The windows `{s, s+b, …}` of fixed epoch order with at most `k` steps inside `[0, n)`.
fn windows(n: usize, k: usize, b: usize) -> impl Iterator<Item = impl Iterator<Item = usize>> {
    (0..n).map(move |s| (s..n).step_by(b.max(1)).take(k))
}

/// `(k, b)` as the dynamic programs use them: `b ≥ 1` (steps are distinct, so "at least 0
/// apart" is "at least 1 apart") and `k` at most the `⌈n/b⌉` steps that fit, so no table is
/// larger than the patterns need, whatever a hand-built schema says.
fn effective(n: usize, k: usize, b: usize) -> (usize, usize) {
    let b = b.max(1);
    (k.min(n.div_ceil(b)), b)
}

impl Participation {
    /// `max_π Σ_{i∈π} w_i` over the participation patterns inside `[0, w.len())` (the empty
    /// pattern included, so never below 0), and a pattern attaining it, in increasing order.
    pub fn max_pattern_sum(&self, w: &[f64]) -> (f64, Vec<usize>) {
        let n = w.len();
        match *self {
            Participation::Single => match (0..n).max_by(|&i, &j| w[i].total_cmp(&w[j])) {
                Some(i) if w[i] > 0.0 => (w[i], vec![i]),
                _ => (0.0, Vec::new()),
            },
            Participation::FixedEpochOrder { epochs, separation } => {
                let mut best = (0.0, Vec::new());
                for window in windows(n, epochs, separation) {
                    let pattern: Vec<usize> = window.filter(|&i| w[i] > 0.0).collect();
                    let total: f64 = pattern.iter().map(|&i| w[i]).sum();
                    if total > best.0 {
                        best = (total, pattern);
                    }
                }
                best
            }
            Participation::MinSeparation {
                max_participations,
                min_separation,
            } => {
                let (k, b) = effective(n, max_participations, min_separation);
                let f = min_separation_table(w, k, b);
                let width = n + b;
                let mut pattern = Vec::new();
                let (mut i, mut c) = (0, k);
                while i < n && c > 0 {
                    if f[c * width + i] == f[c * width + i + 1] {
                        i += 1;
                    } else {
                        pattern.push(i);
                        i += b;
                        c -= 1;
                    }
                }
                (f[k * width], pattern)
            }
        }
    }

    /// The smoothed maximum `s_τ(w)` of the module docs and its gradient `∂s_τ/∂w_i` (each in
    /// `[0, 1]`: the probability that step `i` is in the pattern).
    pub fn soft_max_pattern_sum(&self, w: &[f64], tau: f64) -> (f64, Vec<f64>) {
        let n = w.len();
        let mut gradient = vec![0.0; n];
        match *self {
            Participation::Single => {
                // Patterns {i} and the empty one: τ log(1 + Σ e^{w_i/τ}).
                let top = w.iter().copied().fold(0.0, f64::max) / tau;
                let total = (-top).exp() + w.iter().map(|x| (x / tau - top).exp()).sum::<f64>();
                for (g, x) in gradient.iter_mut().zip(w) {
                    *g = (x / tau - top).exp() / total;
                }
                (tau * (top + total.ln()), gradient)
            }
            Participation::FixedEpochOrder { epochs, separation } => {
                let sums: Vec<f64> = windows(n, epochs, separation)
                    .map(|window| window.map(|i| w[i]).sum::<f64>() / tau)
                    .collect();
                let top = sums.iter().copied().fold(0.0, f64::max);
                let total = (-top).exp() + sums.iter().map(|x| (x - top).exp()).sum::<f64>();
                for (window, x) in windows(n, epochs, separation).zip(&sums) {
                    let p = (x - top).exp() / total;
                    window.for_each(|i| gradient[i] += p);
                }
                (tau * (top + total.ln()), gradient)
            }
            Participation::MinSeparation {
                max_participations,
                min_separation,
            } => {
                let (k, b) = effective(n, max_participations, min_separation);
                // Forward: G_c(i) = log-sum over patterns in [i, n) with ≤ c steps of e^{Σ w/τ}.
                let width = n + b;
                let mut g = vec![0.0; (k + 1) * width];
                for c in 1..=k {
                    for i in (0..n).rev() {
                        g[c * width + i] = log_add_exp(
                            g[c * width + i + 1],
                            w[i] / tau + g[(c - 1) * width + i + b],
                        );
                    }
                }
                // Reverse: the adjoint of each entry, from G_k(0) down (entries depend only on
                // entries with a larger index or a smaller count, so increasing i is reverse
                // order for every c).
                let mut adjoint = vec![0.0; (k + 1) * width];
                adjoint[k * width] = 1.0;
                for i in 0..n {
                    for c in (1..=k).rev() {
                        let a = adjoint[c * width + i];
                        if a == 0.0 {
                            continue;
                        }
                        let here = g[c * width + i];
                        let skip = (g[c * width + i + 1] - here).exp();
                        let take = (w[i] / tau + g[(c - 1) * width + i + b] - here).exp();
                        adjoint[c * width + i + 1] += a * skip;
                        adjoint[(c - 1) * width + i + b] += a * take;
                        gradient[i] += a * take;
                    }
                }
                (tau * g[k * width], gradient)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every pattern (not only maximal ones) of a schema over `n` steps, by enumeration.
    fn all_patterns(p: &Participation, n: usize) -> Vec<Vec<usize>> {
        let (k, b, exact) = match *p {
            Participation::Single => (1, 1, false),
            Participation::FixedEpochOrder { epochs, separation } => (epochs, separation, true),
            Participation::MinSeparation {
                max_participations,
                min_separation,
            } => (max_participations, min_separation, false),
        };
        (0u32..1 << n)
            .map(|mask| (0..n).filter(|i| mask >> i & 1 == 1).collect::<Vec<_>>())
            .filter(|s| {
                // Fixed epoch order: any subset of a window {s, s+b, …} of k steps.
                let fits = match (s.first(), s.last()) {
                    (Some(first), Some(last)) if exact => last - first <= (k - 1) * b,
                    _ => true,
                };
                s.len() <= k
                    && fits
                    && s.windows(2).all(|w| {
                        let gap = w[1] - w[0];
                        if exact { gap % b == 0 } else { gap >= b }
                    })
            })
            .collect()
    }

    fn schemas(k: usize, b: usize) -> [Participation; 3] {
        [
            Participation::Single,
            Participation::FixedEpochOrder {
                epochs: k,
                separation: b,
            },
            Participation::MinSeparation {
                max_participations: k,
                min_separation: b,
            },
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The dynamic program and the window scan equal a maximum over every pattern, their
        /// argmax is a pattern of the schema attaining it, and the smoothed maximum lies within
        /// `τ log |patterns|` above it with the gradient of central differences.
        #[test]
        fn pattern_sums_match_enumeration(
            n in 1usize..11,
            k in 1usize..5,
            b in 1usize..5,
            w in proptest::collection::vec(-1.0f64..2.0, 11),
        ) {
            let w = &w[..n];
            for p in schemas(k, b) {
                let patterns = all_patterns(&p, n);
                let sum = |s: &[usize]| s.iter().map(|&i| w[i]).sum::<f64>();
                let truth = patterns.iter().map(|s| sum(s)).fold(f64::NEG_INFINITY, f64::max);
                let (value, argmax) = p.max_pattern_sum(w);
                prop_assert!((value - truth).abs() < 1e-12, "{p:?}: {value} vs {truth}");
                prop_assert!(patterns.contains(&argmax), "{p:?}: {argmax:?}");
                prop_assert!((sum(&argmax) - value).abs() < 1e-12);

                // Fixed epoch order smooths over whole windows: exact for non-negative weights,
                // which is how the optimizers use it.
                let fixed = matches!(p, Participation::FixedEpochOrder { .. });
                let nonnegative: Vec<f64> = w.iter().map(|x| x.abs()).collect();
                let w = if fixed { &nonnegative[..] } else { w };
                let sum = |s: &[usize]| s.iter().map(|&i| w[i]).sum::<f64>();
                let value = p.max_pattern_sum(w).0;
                let tau = 0.3;
                let (soft, gradient) = p.soft_max_pattern_sum(w, tau);
                let brute = tau * patterns.iter().map(|s| (sum(s) / tau).exp()).sum::<f64>().ln();
                if !fixed {
                    prop_assert!((soft - brute).abs() < 1e-9, "{p:?}: {soft} vs {brute}");
                }
                prop_assert!(soft >= value - 1e-12);
                prop_assert!(soft <= value + tau * ((patterns.len() + 1) as f64).ln() + 1e-12);
                for i in 0..n {
                    let h = 1e-6;
                    let mut up = w.to_vec();
                    up[i] += h;
                    let mut down = w.to_vec();
                    down[i] -= h;
                    let fd = (p.soft_max_pattern_sum(&up, tau).0
                        - p.soft_max_pattern_sum(&down, tau).0) / (2.0 * h);
                    prop_assert!((fd - gradient[i]).abs() < 1e-6, "{p:?} step {i}: {fd} vs {}", gradient[i]);
                }
            }
        }
    }
}
