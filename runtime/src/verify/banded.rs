//! Verification of the banded-plus-low-rank form (decoder 0) for the prefix-sum workload: the
//! sensitivity of the encoder `Ĉ = B̂⁻¹S` from the stored `f32` coefficients of `B̂`, under
//! single participation, fixed epoch order and min separation, with the rounding of this
//! computation bounded (the soundness rule of [`super`]). The encoder is not stored: each column
//! `ŷ_j ≈ Ĉ e_j` solves `B̂ y_j = S e_j` by forward substitution with the bands and the low-rank
//! factors (003 App. H) in plain `f64`, and is checked **a posteriori** by its
//! residual `ρ_j = S e_j − B̂ ŷ_j`, computed with running error bounds, `ŷ_j` taken as exact (one
//! dot product per row: the bounds never compound). Then `y_j − ŷ_j = B̂⁻¹ρ_j = Ĉ S⁻¹ρ_j` and
//! `‖S⁻¹v‖₁ ≤ 2‖v‖₁` (first differences), so with `Y = max_j ‖y_j‖` and `ε_j = 2‖ρ_j‖₁`:
//! `‖y_j − ŷ_j‖ ≤ ε_j·Y`.
//!
//! | schema | bound (same quantity the compiler records) | operations | scratch (`f64`) |
//! |---|---|---|---|
//! | single | `Y = max_j ‖y_j‖` (`MaxColumnNorm`): `Y ≤ max_j ‖ŷ_j‖ / (1 − max_j ε_j)` | `n(n+1)/2 · (h + 2r)` | `h + 2r` |
//! | fixed epoch order `(k, b)` | `max_π Σ_{i,j∈π} \|X_ij\|`, `X = ĈᵀĈ`, over the windows `π = {s, s+b, …}` of `k'` steps (`NonnegativeGram`, `AbsoluteGramBound`) | `n(n+1)/2 · (h + 2r + k')` | `⌈n/b⌉ · (h + 2r + 1 + k')` |
//! | min separation `(k, b)` | row-wise bound `max_π Σ_{i∈π} r_i`, `r_i = max_{π∋i} Σ_{j∈π} \|X_ij\|`, over patterns of at most `k'` steps at least `b` apart (`PatternSearchBound`; the exact method when it is exact); for `k' ≤ 2` the absolute-Gram value `max_π Σ_{i,j∈π} \|X_ij\|` itself (`NonnegativeGram`, `AbsoluteGramBound`) | `n(n+1)/2 · (h + 2r) + n²(h + 2r + k') + n·k'` | `4n + k' + 1 + 2(h + 2r)` |
//!
//! with `k' = min(k, ⌈n/b⌉)`. Under fixed epoch order the columns of one residue class `s mod b`
//! are solved together, row by row, and the entries `X_pq` of the pairs a window can hold
//! (`|p − q| < k'` in class positions) accumulate as the rows go: `n` columns in all, each once.
//! The absolute-Gram value is the sensitivity itself when `X[π,π] ≥ 0` (001 Eq. 3), and an upper
//! bound for any `X` and contributions of any dimension (`Σ X_ij⟨u_i,u_j⟩ ≤ Σ |X_ij|` for
//! `‖u_i‖ ≤ 1`); the compiler records it for this form under fixed epoch order, never the spectral
//! bound (001 Thm 2.1), which would need eigenvalues here. Rounding:
//! `|X_pq − fl⟨ŷ_p, ŷ_q⟩| ≤ γ‖ŷ_p‖‖ŷ_q‖ + ‖y_p − ŷ_p‖‖y_q‖ + ‖ŷ_p‖‖y_q − ŷ_q‖ ≤ γŶ² + 3εY²`
//! (`γ = (n + 2)·2u`, Higham 2002, §3.1; `ε = max_j ε_j ≤ 1`), added for each of the `k'²` pairs of
//! a window.
//!
//! **Min separation** (`--min-sep b`). The exact value is a branch and bound over the exponentially
//! many patterns on the whole `n × n` matrix `|X|`, which fits neither a device's scratch nor its
//! time. The compiler records instead, for this form, that search stopped at its root: the row-wise
//! bound of Choquette-Choo et al. 2023b, Alg. 4
//! (`Σ_{i,j∈π} |X_ij| = Σ_{i∈π} Σ_{j∈π} |X_ij| ≤ Σ_{i∈π} r_i`), a bound for contributions of any
//! dimension as above (`mfc_compiler::participation::device_verifiable_sensitivity`), above the
//! exact value only where a row's best partners differ between patterns. The device needs one row
//! of `X` at a time, `X e_i = Ĉᵀŷ_i = SᵀB̂⁻ᵀŷ_i`: the column `ŷ_i` as above (residual `ρ_i`,
//! `ε_i = 2‖ρ_i‖₁`), then `ŵ ≈ B̂⁻ᵀŷ_i` by backward substitution with the bands and the low-rank
//! factors transposed, checked by its residual `σ = ŷ_i − B̂ᵀŵ` (running error bounds, `ŵ` taken as
//! exact), and `ẑ = Sᵀŵ` by suffix sums with a running error bound `e`. Since `Sᵀŵ − Ĉᵀŷ_i = −Ĉᵀσ`
//! and `(Ĉᵀŷ_i)_j = ⟨y_j, ŷ_i⟩`, `|X_ij − ẑ_j| ≤ e + Y‖σ‖₁ + ε_iY²`. The best partners of `i` (at
//! most `k' − 1`, at least `b` from `i` and from each other) left and right come from the dynamic
//! programme of Alg. 3 on `|ẑ|`, `O(n·k')` per row over two levels of `n`, and the same programme
//! over the rows gives `max_π Σ_{i∈π} r̂_i`; the `k'²` entries of a pattern add `k'²` times the
//! entry error. Every sum of at most `k'` non-negative terms is rounded up by `1 + (k' + 2)·2u`.
//! With at most two participations (`k' ≤ 2`) the pairs are scanned instead,
//! `X_ii + X_jj + 2|X_ij|` for `j ≤ i − b` as row `i` comes (`O(n)` per row, `X̂_jj` kept from row
//! `j`): the absolute-Gram value itself, which the compiler records, since the row-wise bound can
//! be well above it there (+1.7% at `n = 200`, `(k, b) = (2, 50)`, `(h, r) = (4, 4)`,
//! `tests/tests/spine.rs`).
//!
//! **Not verified here.** A custom workload: the sensitivity is that of `B̂⁻¹A` and the blob stores
//! only the label of `A`
//! ([`super::Unverifiable::WorkloadNotStored`]).

use mfc_formats::{BandedLowRank, F32Table, Participation};

use super::{
    Bounded, GROW, LOOSENESS, TWO_U, Unverifiable, UpperSum, bound_at, forms, solve_up, sqrt_up,
    store, upper, value,
};

/// `⌈n/b⌉`, the most columns one residue class `s mod b` holds.
fn class_len(steps: usize, b: usize) -> usize {
    steps.div_ceil(b.max(1))
}

/// The participation schema as this module computes it: `k' = min(k, ⌈n/b⌉)` and `b`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shape {
    /// Single participation.
    Single,
    /// Fixed epoch order: windows of `k'` steps exactly `b` apart.
    Windows(usize, usize),
    /// Min separation: at most `k'` steps, any two at least `b` apart.
    MinSeparated(usize, usize),
}

impl Shape {
    pub(super) fn of(participation: Participation, ks: Option<(usize, usize)>) -> Self {
        match (participation, ks) {
            (Participation::MinSeparation { .. }, Some((k, b))) => Shape::MinSeparated(k, b),
            (_, Some((k, b))) => Shape::Windows(k, b),
            (_, None) => Shape::Single,
        }
    }
}

/// The `f64`s of scratch for `(h, r)` over `steps` under `shape` (module docs).
pub(super) fn scratch_len(d: &BandedLowRank<'_>, steps: usize, shape: Shape) -> usize {
    let per_column = (d.band as usize).saturating_add((d.rank as usize).saturating_mul(2));
    match shape {
        Shape::Single => per_column,
        Shape::Windows(k, b) => {
            class_len(steps, b).saturating_mul(per_column.saturating_add(1).saturating_add(k))
        }
        // ŷ_i, then row i of X̂ in its place (n), the row bounds r̂ (n), two levels of the
        // pattern programme (2n), its best sums by count (k' + 1), and a ring and β for each of
        // the two solves (2(h + 2r)).
        Shape::MinSeparated(k, _) => steps
            .saturating_mul(4)
            .saturating_add(k.saturating_add(1))
            .saturating_add(per_column.saturating_mul(2)),
    }
}

/// The operations for `(h, r)` over `steps`: every column's forward substitution; under fixed
/// epoch order `k'` products of each column's row with its partners'; under min separation,
/// per row `i` also one transposed solve over all `n` steps and the pattern programmes (fewer
/// than `k'` levels over at most `n` steps), then the last programme over the rows.
pub(super) fn operations(d: &BandedLowRank<'_>, steps: usize, shape: Shape) -> u64 {
    let n = steps as u64;
    let solve = u64::from(d.band) + 2 * u64::from(d.rank);
    let triangle = n * (n + 1) / 2;
    match shape {
        Shape::Single => triangle.saturating_mul(solve),
        Shape::Windows(k, _) => triangle.saturating_mul(solve + k as u64),
        Shape::MinSeparated(k, _) => triangle
            .saturating_mul(solve)
            .saturating_add((n * n).saturating_mul(solve + k as u64))
            .saturating_add(n.saturating_mul(k as u64)),
    }
}

/// An upper bound on the sensitivity of `Ĉ = B̂⁻¹S` (module docs), or why it cannot be certified.
/// Only the schemas of `FORMS` are linked ([`super::forms`]); another is
/// [`Unverifiable::Form`].
pub(super) fn bound<const FORMS: u8>(
    d: BandedLowRank<'_>,
    steps: usize,
    shape: Shape,
    scratch: &mut [f64],
) -> Result<f64, Unverifiable> {
    match shape {
        Shape::Single if FORMS & forms::SINGLE != 0 => single(d, steps, scratch),
        Shape::Windows(k, b) if FORMS & forms::FIXED_EPOCH_ORDER != 0 => {
            fixed_epoch_order(d, steps, k, b, scratch)
        }
        Shape::MinSeparated(k, b) if FORMS & forms::MIN_SEPARATION != 0 => {
            min_separation(d, steps, k, b, scratch)
        }
        _ => Err(Unverifiable::Form),
    }
}

fn entry(t: F32Table<'_>, i: usize) -> Bounded {
    Bounded::exact(f64::from(t.get(i).unwrap_or(0.0)))
}

/// Row `i ≥ j` of the forward substitution for column `j` (`ŷ_i = 0` for `i < j`):
/// `ŷ_i = (1 − Σ_{0<l<h} D[i, l] ŷ_{i−l} − L_i · β_i) / D[i, 0]`, `β_i = Σ_{j ≤ q ≤ i−h} R_q ŷ_q`.
/// `ring` holds `ŷ` at the last `h` rows (slot `i mod h`), `beta` the bounded `β` (`2r`).
/// Writes `ŷ_i` into the ring and returns it with an upper bound on `|ρ_i|`, the residual of the
/// row (`1 − B̂[i, :]·ŷ` with bounded arithmetic, `ŷ` taken as exact).
fn advance(
    d: &BandedLowRank<'_>,
    j: usize,
    i: usize,
    ring: &mut [f64],
    beta: &mut [f64],
) -> (f64, f64) {
    let (h, r) = (d.band as usize, d.rank as usize);
    if i >= j + h {
        // ŷ_{i−h} leaves the band: β += R_{i−h} ŷ_{i−h}.
        let q = i - h;
        let y = Bounded::exact(value(ring, q % h));
        for c in 0..r {
            let updated = Bounded::read(beta, c).add(entry(d.right, q * r + c).mul(y));
            updated.write(beta, c);
        }
    }
    let mut partial = Bounded::exact(0.0);
    for l in 1..h.min(i - j + 1) {
        let y = Bounded::exact(value(ring, (i - l) % h));
        partial = partial.add(entry(d.diagonals, i * h + l).mul(y));
    }
    for c in 0..r {
        partial = partial.add(entry(d.left, i * r + c).mul(Bounded::read(beta, c)));
    }
    let pivot = entry(d.diagonals, i * h);
    let y = (1.0 - partial.v) / pivot.v;
    let row = partial.add(pivot.mul(Bounded::exact(y)));
    store(ring, i % h, y);
    (y, Bounded::exact(1.0).sub(row).abs_upper())
}

/// Single participation: `Y = max_j ‖y_j‖ ≤ max_j ‖ŷ_j‖ / (1 − max_j ε_j)`.
fn single(d: BandedLowRank<'_>, steps: usize, scratch: &mut [f64]) -> Result<f64, Unverifiable> {
    let (h, r) = (d.band as usize, d.rank as usize);
    let needed = h + 2 * r;
    let Some((ring, beta)) = scratch.split_at_mut_checked(h) else {
        return Err(Unverifiable::ScratchTooSmall { needed });
    };
    let Some(beta) = beta.get_mut(..2 * r) else {
        return Err(Unverifiable::ScratchTooSmall { needed });
    };
    let (mut best, mut worst_residual) = (0.0f64, 0.0f64);
    for j in 0..steps {
        ring.fill(0.0);
        beta.fill(0.0);
        let mut norm = UpperSum::default();
        let mut residual = UpperSum::default();
        for i in j..steps {
            let (y, rho) = advance(&d, j, i, ring, beta);
            residual.add(rho);
            norm.add(y * y);
        }
        best = upper(best, norm.value());
        worst_residual = upper(worst_residual, residual.value());
    }
    solve_up(sqrt_up(best), 2.0 * worst_residual * GROW)
}

/// Fixed epoch order `(k', b)`: the absolute-Gram value over the windows of `k'` columns `b`
/// apart, one residue class at a time (module docs). Scratch per column of the class: its ring
/// (`h`), `β` (`2r`), its residual's running sum (1) and `X_pq` for its `k'` partners
/// `q = p, p − 1, …` (`k'`).
fn fixed_epoch_order(
    d: BandedLowRank<'_>,
    steps: usize,
    k: usize,
    b: usize,
    scratch: &mut [f64],
) -> Result<f64, Unverifiable> {
    let (h, r) = (d.band as usize, d.rank as usize);
    let stride = h + 2 * r + 1 + k;
    // γ = (n + 2)·2u: the error of a dot product of length n, relative to ‖ŷ_p‖‖ŷ_q‖.
    let gamma = (steps as f64 + 2.0) * TWO_U * GROW;
    let (mut squared_norm, mut worst_residual, mut windows) = (0.0f64, 0.0f64, 0.0f64);
    for class in 0..b.min(steps) {
        let columns = (steps - class).div_ceil(b);
        let Some(used) = scratch.get_mut(..columns * stride) else {
            return Err(Unverifiable::ScratchTooSmall {
                needed: class_len(steps, b) * stride,
            });
        };
        used.fill(0.0);
        // Column p of the class: its ring, β, residual sum and X_pq for q = p, p − 1, ….
        let gram = h + 2 * r + 1;
        for i in class..steps {
            let active = ((i - class) / b + 1).min(columns);
            for (p, column) in used.chunks_exact_mut(stride).take(active).enumerate() {
                let (ring, rest) = column.split_at_mut(h);
                let (beta, rest) = rest.split_at_mut(2 * r);
                let (_, rho) = advance(&d, class + p * b, i, ring, beta);
                if let Some(residual) = rest.first_mut() {
                    *residual += rho;
                }
            }
            let slot = i % h;
            for p in 0..active {
                let y_p = value(used, p * stride + slot);
                for lag in 0..k.min(p + 1) {
                    let y_q = value(used, (p - lag) * stride + slot);
                    if let Some(x) = used.get_mut(p * stride + gram + lag) {
                        *x += y_p * y_q;
                    }
                }
            }
        }
        for column in used.chunks_exact(stride) {
            squared_norm = upper(squared_norm, value(column, gram));
            // The residual's running sum has at most n terms.
            let residual = UpperSum {
                sum: value(column, gram - 1),
                terms: steps as u64,
            };
            worst_residual = upper(worst_residual, residual.value());
        }
        for start in 0..columns {
            let mut window = UpperSum::default();
            // Columns p = start + lag of the window, each with X_pq for q = p, …, start.
            for (lag, column) in used.chunks_exact(stride).skip(start).take(k).enumerate() {
                let entries = column.get(gram..).unwrap_or(&[]);
                window.add(bound_at(entries, 0).abs());
                for x in entries.iter().take(lag + 1).skip(1) {
                    window.add(2.0 * x.abs());
                }
            }
            windows = upper(windows, window.value());
        }
    }
    // Ŷ² ≥ max_j ‖ŷ_j‖² (computed ‖ŷ‖² ≥ (1 − γ)‖ŷ‖²; γ < 10⁻⁶ for n < 2³²), Y ≤ Ŷ/(1 − ε).
    let y_hat_squared = squared_norm / (1.0 - gamma) * GROW;
    let epsilon = 2.0 * worst_residual * GROW;
    let y = solve_up(sqrt_up(y_hat_squared), epsilon)?;
    let pairs = k as f64 * k as f64;
    let correction = pairs * (gamma * y_hat_squared + 3.0 * epsilon * y * y * GROW) * GROW * GROW;
    if !(correction.is_finite() && correction <= LOOSENESS * windows) {
        return Err(Unverifiable::IllConditioned);
    }
    Ok(sqrt_up((windows + correction) * GROW))
}

/// Row `q` of the transposed solve `B̂ᵀ w = v`, run for `q = n − 1, …, 0`:
/// `ŵ_q = (v_q − Σ_{0<l<h} D[q + l, l] ŵ_{q+l} − R_q · γ_q) / D[q, 0]`,
/// `γ_q = Σ_{i ≥ q+h} L_i ŵ_i`. `ring` holds `ŵ` at the next `h` rows (slot `q mod h`),
/// `gamma` the bounded `γ` (`2r`). Returns `ŵ_q` and an upper bound on `|σ_q|`, the residual
/// `v_q − (B̂ᵀŵ)_q` with bounded arithmetic, `ŵ` taken as exact.
fn retreat(
    d: &BandedLowRank<'_>,
    steps: usize,
    q: usize,
    v: f64,
    ring: &mut [f64],
    gamma: &mut [f64],
) -> (f64, f64) {
    let (h, r) = (d.band as usize, d.rank as usize);
    if q + h < steps {
        // ŵ_{q+h} leaves the band: γ += L_{q+h} ŵ_{q+h}.
        let i = q + h;
        let w = Bounded::exact(value(ring, i % h));
        for c in 0..r {
            let updated = Bounded::read(gamma, c).add(entry(d.left, i * r + c).mul(w));
            updated.write(gamma, c);
        }
    }
    let mut partial = Bounded::exact(0.0);
    for l in 1..h.min(steps - q) {
        let w = Bounded::exact(value(ring, (q + l) % h));
        partial = partial.add(entry(d.diagonals, (q + l) * h + l).mul(w));
    }
    for c in 0..r {
        partial = partial.add(entry(d.right, q * r + c).mul(Bounded::read(gamma, c)));
    }
    let pivot = entry(d.diagonals, q * h);
    let w = (v - partial.v) / pivot.v;
    let row = partial.add(pivot.mul(Bounded::exact(w)));
    store(ring, q % h, w);
    (w, Bounded::exact(v).sub(row).abs_upper())
}

/// `F_c(lo)` for `c = 0..=levels`, passed to `each(c, F_c(lo))` in increasing `c`: the largest
/// `Σ_{t∈π} |x_t|` over patterns `π` inside `[lo, hi)` of at most `c` steps, any two at least
/// `b` apart, by `F_c(t) = max(F_c(t + 1), |x_t| + F_{c−1}(t + b))` (`F = 0` past `hi`;
/// Choquette-Choo et al. 2023b, Alg. 3). `prev` and `cur` hold two levels over `[lo, hi)`.
/// Each value is a computed sum of at most `c` terms, so the exact sum of the same terms
/// exceeds it by at most a factor `1 + (c + 2)·2u`.
fn best_by_count<'a>(
    x: &[f64],
    (lo, hi): (usize, usize),
    levels: usize,
    b: usize,
    (mut prev, mut cur): (&'a mut [f64], &'a mut [f64]),
    mut each: impl FnMut(usize, f64),
) {
    each(0, 0.0);
    if lo >= hi {
        (1..=levels).for_each(|c| each(c, 0.0));
        return;
    }
    if let Some(level) = prev.get_mut(lo..hi) {
        level.fill(0.0);
    }
    for c in 1..=levels {
        for t in (lo..hi).rev() {
            let skip = if t + 1 < hi {
                bound_at(cur, t + 1)
            } else {
                0.0
            };
            let take = value(x, t).abs()
                + if t + b < hi {
                    bound_at(prev, t + b)
                } else {
                    0.0
                };
            store(cur, t, upper(skip, take));
        }
        each(c, bound_at(cur, lo));
        core::mem::swap(&mut prev, &mut cur);
    }
}

/// Min separation `(k', b)`: the row-wise bound of Choquette-Choo et al. 2023b, Alg. 4 on
/// `|X|`, `X = ĈᵀĈ` (module docs). Row `i` of `X` is `Ĉᵀŷ_i = SᵀB̂⁻ᵀŷ_i`: the column `ŷ_i`
/// by forward substitution, then `ŵ ≈ B̂⁻ᵀŷ_i` by backward substitution checked by its
/// residual `σ`, and the suffix sums of `ŵ` (`Sᵀ`) with running error bounds, written over
/// `ŷ_i` as the solve retreats. Then `r̂_i = |X̂_ii| + max_c (left_c + right_{k'−1−c})`, the
/// best partners of `i` left and right by [`best_by_count`], and `sens² ≤ max_π Σ_{i∈π} r_i`
/// by the same programme over the rows. For `k' ≤ 2` the absolute-Gram value itself instead,
/// `max_{j ≤ i−b} X_ii + X_jj + 2|X_ij|` as the rows come (`X̂_jj` kept in place of `r̂_j`).
#[inline(never)]
fn min_separation(
    d: BandedLowRank<'_>,
    steps: usize,
    k: usize,
    b: usize,
    scratch: &mut [f64],
) -> Result<f64, Unverifiable> {
    let (h, r) = (d.band as usize, d.rank as usize);
    let n = steps;
    let (row, rest) = scratch.split_at_mut(n);
    let (bounds, rest) = rest.split_at_mut(n);
    let (prev, rest) = rest.split_at_mut(n);
    let (cur, rest) = rest.split_at_mut(n);
    let (counts, rest) = rest.split_at_mut(k + 1);
    let (ring, rest) = rest.split_at_mut(h);
    let (beta, rest) = rest.split_at_mut(2 * r);
    let (back_ring, rest) = rest.split_at_mut(h);
    let Some(gamma) = rest.get_mut(..2 * r) else {
        return Err(Unverifiable::ScratchTooSmall {
            needed: scratch_len(&d, steps, Shape::MinSeparated(k, b)),
        });
    };
    // A sum of at most k' computed non-negative terms (four for a pair), rounded up to the
    // exact sum's bound.
    let sum_up = (1.0 + (k.max(4) as f64 + 2.0) * TWO_U) * GROW;
    let (mut squared_norm, mut worst_residual) = (0.0f64, 0.0f64);
    let (mut worst_back, mut worst_sum) = (0.0f64, 0.0f64);
    let mut pairs = 0.0f64;
    for i in 0..n {
        // ŷ_i = B̂⁻¹ S e_i by forward substitution (zero above row i).
        ring.fill(0.0);
        beta.fill(0.0);
        if let Some(above) = row.get_mut(..i) {
            above.fill(0.0);
        }
        let mut norm = UpperSum::default();
        let mut residual = UpperSum::default();
        for (t, slot) in row.iter_mut().enumerate().skip(i) {
            let (y, rho) = advance(&d, i, t, ring, beta);
            residual.add(rho);
            norm.add(y * y);
            *slot = y;
        }
        squared_norm = upper(squared_norm, norm.value());
        worst_residual = upper(worst_residual, residual.value());
        // Row i of X̂: (Sᵀŵ)_j = Σ_{t ≥ j} ŵ_t, ŵ = B̂⁻ᵀŷ_i by backward substitution.
        back_ring.fill(0.0);
        gamma.fill(0.0);
        let mut back = UpperSum::default();
        let mut suffix = Bounded::exact(0.0);
        for (q, x) in row.iter_mut().enumerate().rev() {
            let (w, sigma) = retreat(&d, n, q, *x, back_ring, gamma);
            back.add(sigma);
            suffix = suffix.add(Bounded::exact(w));
            *x = suffix.v;
        }
        // The running bound of the suffix sums only grows: its last value bounds them all.
        worst_sum = upper(worst_sum, suffix.e);
        worst_back = upper(worst_back, back.value());
        if k <= 2 {
            // At most two steps: the absolute-Gram value itself, max(X_ii, X_ii + X_jj + 2|X_ij|)
            // over the pairs j ≤ i − b, with X̂_jj kept from row j.
            let diagonal = value(row, i).abs();
            store(bounds, i, diagonal);
            pairs = upper(pairs, diagonal);
            if k == 2 {
                let earlier = row.iter().zip(bounds.iter());
                for (x, bound) in earlier.take((i + 1).saturating_sub(b)) {
                    pairs = upper(pairs, diagonal + bound + 2.0 * x.abs());
                }
            }
            continue;
        }
        // r̂_i: |X̂_ii| and the best k' − 1 partners at least b away, left and right.
        let levels = k.saturating_sub(1);
        let left = (0, (i + 1).saturating_sub(b));
        best_by_count(row, left, levels, b, (prev, cur), |c, v| {
            store(counts, c, v)
        });
        let mut partners = 0.0f64;
        let right = ((i + b).min(n), n);
        best_by_count(row, right, levels, b, (prev, cur), |c, v| {
            partners = upper(partners, bound_at(counts, levels - c) + v);
        });
        store(bounds, i, (value(row, i).abs() + partners) * sum_up);
    }
    let mut rows = pairs;
    if k > 2 {
        best_by_count(bounds, (0, n), k, b, (prev, cur), |_, v| rows = v);
    }
    let rows = rows * sum_up;
    // Per entry, |X_ij − X̂_ij| ≤ e + Y‖σ‖₁ + εY² (module docs); k'² entries in a pattern.
    let epsilon = 2.0 * worst_residual * GROW;
    let y = solve_up(sqrt_up(squared_norm), epsilon)?;
    let entry_error = (worst_sum + y * worst_back * GROW + epsilon * y * y * GROW) * GROW * GROW;
    let correction = k as f64 * k as f64 * entry_error * GROW;
    if !(correction.is_finite() && correction <= LOOSENESS * rows) {
        return Err(Unverifiable::IllConditioned);
    }
    Ok(sqrt_up((rows + correction) * GROW))
}
