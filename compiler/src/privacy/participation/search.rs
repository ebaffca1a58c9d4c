//! `max_π Σ_{i,j∈π} W_ij` over `b`-min-separation patterns for a symmetric `W ≥ 0`, by branch
//! and bound: the sensitivity of an encoder whose Gram matrix `X = CᵀC` is non-negative on the
//! pairs a pattern can hold is `sqrt` of this for `W = X` (Choquette-Choo et al. 2023, Eq. 3:
//! the all-ones contribution is then the worst), and an upper bound on it for `W = |X|`.
//!
//! # Bounds
//!
//! Let `ρ_u(s)` be the largest `Σ_{j∈π, j≠u} W_uj` over patterns `π ⊂ [s, n)` containing `u`
//! (two dynamic programs, left and right of `u`; a suffix table on the left gives every start `s`
//! at once, `O(n·k)` per `u`) and `r_u(s) = W_uu + ρ_u(s)`. Every pattern `U ⊂ [s, n)` satisfies
//! `f(U) = Σ_{u∈U} (W_uu + Σ_{j∈U, j≠u} W_uj) ≤ Σ_{u∈U} r_u(s)`. The search extends a partial
//! pattern `S` (in increasing order) by steps `U` in `[s, n)`, `s` = its last step `+ b`; with
//! `v_u = r_u(s) + 2 Σ_{i∈S} W_iu`,
//!
//! ```text
//! f(S ∪ U) = f(S) + 2 Σ_{i∈S, u∈U} W_iu + f(U)  ≤  f(S) + Σ_{u∈U} v_u,
//! ```
//!
//! whose maximum over the admissible `U` is the linear dynamic program of
//! [`patterns`](super::patterns), `O(n·k)` per node. At the root this is the row-wise bound of
//! Choquette-Choo et al. 2023b, Alg. 4 (with `ρ_u` over patterns that contain `u`, so never
//! larger); deeper, the partners of the completion are confined to `[s, n)`, which keeps the
//! bound tight where the patterns are many and their values close (a dense Toeplitz encoder at
//! n = 2052 under (6, 342) needed this to finish). Memory: the `n²/2` values `r_u(s)`. Children whose bound does not exceed the best pattern found are pruned; when the work
//! budget runs out, the subtrees left are not expanded and their bounds are kept, so the result
//! is then still an upper bound ([`Search::complete`] says which). Bounds and sums are `f64`, so
//! a completed search is exact to rounding (the review of issue 15 saw 4e-16 relative), as the
//! other exact methods are; the runtime rounds the noise scale `σ·ζ·sens` up to `f32`, a margin
//! of 6e-8 that covers it.

use faer::MatRef;

/// The outcome of [`max_pattern_quadratic`].
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// The maximum when `complete`, else an upper bound on it.
    pub value: f64,
    /// Whether every pattern was accounted for, so `value` is the maximum itself.
    pub complete: bool,
    /// The best pattern found (`f(pattern) = value` when `complete`).
    pub pattern: Vec<usize>,
}

/// Work units (entries of the per-node dynamic programs and updates) a search may spend before
/// it settles for the bound of the subtrees it has not expanded: a few seconds.
pub const DEFAULT_BUDGET: usize = 2_000_000_000;

/// `F_c(0)` for `c = 0..=k`: the largest `Σ_{i∈π} w_i` over patterns inside `w` with at most
/// `c` steps, any two at least `b` apart (the recursion of [`patterns`](super::patterns)).
fn best_by_count(w: &[f64], k: usize, b: usize) -> Vec<f64> {
    let n = w.len();
    let mut previous = vec![0.0f64; n + b];
    let mut out = vec![0.0; k + 1];
    for slot in out.iter_mut().skip(1) {
        let mut current = vec![0.0f64; n + b];
        for i in (0..n).rev() {
            current[i] = current[i + 1].max(w[i] + previous[i + b]);
        }
        *slot = current[0];
        previous = current;
    }
    out
}

/// The suffix table `E_c(t)` over `v` (`(slots + 1) × (len + b)`, row-major): the best sum over
/// patterns inside `v[t..]` with at most `c` steps.
fn suffix_table(v: &[f64], slots: usize, b: usize) -> Vec<f64> {
    let n = v.len();
    let width = n + b;
    let mut e = vec![0.0f64; (slots + 1) * width];
    for c in 1..=slots {
        for t in (0..n).rev() {
            e[c * width + t] = e[c * width + t + 1].max(v[t] + e[(c - 1) * width + t + b]);
        }
    }
    e
}

struct State<'a> {
    w: MatRef<'a, f64>,
    /// `r_u(s)` of the module docs: `rows[u][s]` for `s ≤ u`.
    r: Vec<Vec<f64>>,
    b: usize,
    budget: usize,
    work: usize,
    best: f64,
    best_pattern: Vec<usize>,
    /// The largest bound of a subtree left unexpanded when the budget ran out.
    open: f64,
    pattern: Vec<usize>,
}

impl State<'_> {
    /// Visits the partial pattern `self.pattern` of value `value`; `v[t]` is `v_u` of the module
    /// docs for `u = start + t`, the steps that may follow it.
    fn visit(&mut self, value: f64, v: &[f64], start: usize, slots: usize) {
        if value > self.best {
            self.best = value;
            self.best_pattern.clone_from(&self.pattern);
        }
        if slots == 0 || v.is_empty() {
            return;
        }
        let b = self.b;
        let width = v.len() + b;
        let e = suffix_table(v, slots, b);
        self.work += v.len() * slots;
        let mut children: Vec<(f64, usize)> = (0..v.len())
            .map(|t| (value + v[t] + e[(slots - 1) * width + t + b], t))
            .filter(|&(bound, _)| bound > self.best)
            .collect();
        children.sort_by(|p, q| q.0.total_cmp(&p.0));
        let n = self.w.nrows();
        for (bound, t) in children {
            if bound <= self.best {
                break;
            }
            // An interrupt (`crate::interrupt`) ends the search as a spent budget does: what
            // it returns is then an upper bound, never less than the maximum.
            if self.work > self.budget || crate::interrupt::check().is_err() {
                self.open = self.open.max(bound);
                continue;
            }
            let q = start + t;
            let cross: f64 = self.pattern.iter().map(|&i| self.w[(i, q)]).sum();
            let child_value = value + self.w[(q, q)] + 2.0 * cross;
            let next = q + b;
            // The completion now lies in [next, n): its steps' partners too.
            let child_v: Vec<f64> = (next..n)
                .map(|u| v[u - start] - self.r[u][start] + self.r[u][next] + 2.0 * self.w[(q, u)])
                .collect();
            self.work += child_v.len() + self.pattern.len();
            self.pattern.push(q);
            self.visit(child_value, &child_v, next, slots - 1);
            self.pattern.pop();
        }
    }
}

/// `max_π Σ_{i,j∈π} W_ij` over patterns of at most `k` steps, any two at least `b` apart, for a
/// symmetric `W` with non-negative entries (only the diagonal and the entries `|i − j| ≥ b` are
/// read). Exact unless the work `budget` runs out (module docs).
pub fn max_pattern_quadratic(w: MatRef<'_, f64>, k: usize, b: usize, budget: usize) -> Search {
    let n = w.nrows();
    let b = b.max(1);
    // At most ⌈n/b⌉ steps fit.
    let k = k.min(n.div_ceil(b));
    // r_u(s) = W_uu + ρ_u(s): the best partners of u within [s, n) (left of u by a suffix table
    // over [s, u − b], right of u once), for every start s ≤ u.
    let r: Vec<Vec<f64>> = (0..n)
        .map(|u| {
            let row: Vec<f64> = (0..n).map(|j| w[(u, j)]).collect();
            let right = if u + b < n {
                best_by_count(&row[u + b..], k.saturating_sub(1), b)
            } else {
                vec![0.0; k]
            };
            let alone = w[(u, u)] + right[k - 1];
            if u < b {
                return vec![alone; u + 1];
            }
            let left = &row[..=u - b];
            let width = left.len() + b;
            let table = suffix_table(left, k - 1, b);
            (0..=u)
                .map(|start| {
                    if start > u - b {
                        return alone;
                    }
                    let rho = (0..k)
                        .map(|c| table[c * width + start] + right[k - 1 - c])
                        .fold(0.0, f64::max);
                    w[(u, u)] + rho
                })
                .collect()
        })
        .collect();
    let root: Vec<f64> = r.iter().map(|row| row[0]).collect();
    let mut state = State {
        w,
        r,
        b,
        budget,
        work: n * n * k,
        best: 0.0,
        best_pattern: Vec::new(),
        open: f64::NEG_INFINITY,
        pattern: Vec::with_capacity(k),
    };
    state.visit(0.0, &root, 0, k);
    let complete = state.open <= state.best;
    Search {
        value: state.best.max(state.open),
        complete,
        pattern: state.best_pattern,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;
    use proptest::prelude::*;

    /// The maximum over every pattern, by enumeration.
    fn enumerate(w: MatRef<'_, f64>, k: usize, b: usize) -> f64 {
        let n = w.nrows();
        (0u32..1 << n)
            .map(|mask| (0..n).filter(|i| mask >> i & 1 == 1).collect::<Vec<_>>())
            .filter(|s| s.len() <= k && s.windows(2).all(|p| p[1] - p[0] >= b))
            .map(|s| {
                s.iter()
                    .flat_map(|&i| s.iter().map(move |&j| w[(i, j)]))
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Exact when complete (and the pattern returned attains it); an upper bound when the
        /// budget is tiny.
        #[test]
        fn branch_and_bound_is_exact_or_an_upper_bound(
            n in 1usize..13,
            k in 1usize..6,
            b in 1usize..5,
            values in proptest::collection::vec(0.0f64..1.0, 144),
            decay in 0.0f64..1.0,
        ) {
            // Entries that decay away from the diagonal, as the Gram matrices of encoders do.
            let w = Mat::from_fn(n, n, |i, j| {
                let (i, j) = (i.min(j), i.max(j));
                values[i * 12 + j] * decay.powi((j - i) as i32) + if i == j { 1.0 } else { 0.0 }
            });
            let truth = enumerate(w.as_ref(), k, b);
            let s = max_pattern_quadratic(w.as_ref(), k, b, DEFAULT_BUDGET);
            prop_assert!(s.complete);
            prop_assert!((s.value - truth).abs() <= 1e-12 * truth.max(1.0), "{} vs {truth}", s.value);
            let attained: f64 = s.pattern.iter().flat_map(|&i| s.pattern.iter().map(move |&j| (i, j)))
                .map(|(i, j)| w[(i, j)]).sum();
            prop_assert!((attained - truth).abs() <= 1e-12 * truth.max(1.0));
            prop_assert!(s.pattern.len() <= k && s.pattern.windows(2).all(|p| p[1] - p[0] >= b));
            let cut = max_pattern_quadratic(w.as_ref(), k, b, 0);
            prop_assert!(cut.value >= truth * (1.0 - 1e-12), "{} < {truth}", cut.value);
        }
    }
}
