//! Verification of the banded-plus-low-rank form (decoder 0) for the prefix-sum workload: the
//! sensitivity of the encoder `Ĉ = B̂⁻¹S` from the stored `f32` coefficients of `B̂`, under
//! single participation and fixed epoch order, with the rounding of this computation bounded
//! (the soundness rule of [`super`]). The encoder is not stored: each column `ŷ_j ≈ Ĉ e_j`
//! solves `B̂ y_j = S e_j` by forward substitution with the bands and the low-rank factors
//! (Denisov et al. 2022, App. H) in plain `f64`, and is checked **a posteriori** by its residual
//! `ρ_j = S e_j − B̂ ŷ_j`, computed with running error bounds, `ŷ_j` taken as exact (one dot
//! product per row: the bounds never compound). Then `y_j − ŷ_j = B̂⁻¹ρ_j = Ĉ S⁻¹ρ_j` and
//! `‖S⁻¹v‖₁ ≤ 2‖v‖₁` (first differences), so with `Y = max_j ‖y_j‖` and `ε_j = 2‖ρ_j‖₁`:
//! `‖y_j − ŷ_j‖ ≤ ε_j·Y`.
//!
//! | schema | bound (same quantity the compiler records) | operations | scratch (`f64`) |
//! |---|---|---|---|
//! | single | `Y = max_j ‖y_j‖` (`MaxColumnNorm`): `Y ≤ max_j ‖ŷ_j‖ / (1 − max_j ε_j)` | `n(n+1)/2 · (h + 2r)` | `h + 2r` |
//! | fixed epoch order `(k, b)` | `max_π Σ_{i,j∈π} \|X_ij\|`, `X = ĈᵀĈ`, over the windows `π = {s, s+b, …}` of `k'` steps (`NonnegativeGram`, `AbsoluteGramBound`) | `n(n+1)/2 · (h + 2r + k')` | `⌈n/b⌉ · (h + 2r + 1 + k')` |
//!
//! with `k' = min(k, ⌈n/b⌉)`. Under fixed epoch order the columns of one residue class
//! `s mod b` are solved together, row by row, and the entries `X_pq` of the pairs a window can
//! hold (`|p − q| < k'` in class positions) accumulate as the rows go: `n` columns in all, each
//! once. The absolute-Gram value is the sensitivity itself when `X[π,π] ≥ 0` (Choquette-Choo et
//! al. 2023, Eq. 3), and an upper bound for any `X` and contributions of any dimension
//! (`Σ X_ij⟨u_i,u_j⟩ ≤ Σ |X_ij|` for `‖u_i‖ ≤ 1`); the compiler records it for this form under
//! fixed epoch order, never the spectral bound (001 Thm 2.1), which would need eigenvalues here.
//! Rounding: `|X_pq − fl⟨ŷ_p, ŷ_q⟩| ≤ γ‖ŷ_p‖‖ŷ_q‖ + ‖y_p − ŷ_p‖‖y_q‖ + ‖ŷ_p‖‖y_q − ŷ_q‖ ≤
//! γŶ² + 3εY²` (`γ = (n + 2)·2u`, Higham 2002, §3.1; `ε = max_j ε_j ≤ 1`), added for each of
//! the `k'²` pairs of a window.
//!
//! **Not verified here.** Min separation (`--min-sep b`): the compiler's value is a branch and
//! bound over the exponentially many patterns on the whole `n × n` matrix `|X|` (Choquette-Choo
//! et al. 2023b, Alg. 4 at its root), which neither fits a device's scratch nor its time; it is
//! [`Unverifiable::Schema`](super::Unverifiable::Schema). A custom workload: the sensitivity is
//! that of `B̂⁻¹A` and the blob stores only the label of `A`
//! ([`Unverifiable::WorkloadNotStored`](super::Unverifiable::WorkloadNotStored)).

use mfc_formats::{BandedLowRank, F32Table};

use super::{Bounded, GROW, LOOSENESS, TWO_U, Unverifiable, UpperSum, solve_up, sqrt_up};

/// `⌈n/b⌉`, the most columns one residue class `s mod b` holds.
fn class_len(steps: usize, b: usize) -> usize {
    steps.div_ceil(b.max(1))
}

/// The `f64`s of scratch for `(h, r)` over `steps` (`ks` = `(k', b)` of fixed epoch order).
pub(super) fn scratch_len(
    d: &BandedLowRank<'_>,
    steps: usize,
    ks: Option<(usize, usize)>,
) -> usize {
    let per_column = (d.band as usize).saturating_add((d.rank as usize).saturating_mul(2));
    match ks {
        None => per_column,
        Some((k, b)) => {
            class_len(steps, b).saturating_mul(per_column.saturating_add(1).saturating_add(k))
        }
    }
}

/// The operations for `(h, r)` over `steps`: every column's forward substitution, and under
/// fixed epoch order `k'` products of each column's row with its partners'.
pub(super) fn operations(d: &BandedLowRank<'_>, steps: usize, ks: Option<(usize, usize)>) -> u64 {
    let n = steps as u64;
    let per_row = u64::from(d.band) + 2 * u64::from(d.rank) + ks.map_or(0, |(k, _)| k as u64);
    (n * (n + 1) / 2).saturating_mul(per_row)
}

/// An upper bound on the sensitivity of `Ĉ = B̂⁻¹S` (module docs), or why it cannot be certified.
pub(super) fn bound(
    d: BandedLowRank<'_>,
    steps: usize,
    ks: Option<(usize, usize)>,
    scratch: &mut [f64],
) -> Result<f64, Unverifiable> {
    match ks {
        None => single(d, steps, scratch),
        Some((k, b)) => fixed_epoch_order(d, steps, k, b, scratch),
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
        let y = Bounded::exact(ring[q % h]);
        for c in 0..r {
            let updated = Bounded::read(beta, c).add(entry(d.right, q * r + c).mul(y));
            updated.write(beta, c);
        }
    }
    let mut partial = Bounded::exact(0.0);
    for l in 1..h.min(i - j + 1) {
        let y = Bounded::exact(ring[(i - l) % h]);
        partial = partial.add(entry(d.diagonals, i * h + l).mul(y));
    }
    for c in 0..r {
        partial = partial.add(entry(d.left, i * r + c).mul(Bounded::read(beta, c)));
    }
    let pivot = entry(d.diagonals, i * h);
    let y = (1.0 - partial.v) / pivot.v;
    let row = partial.add(pivot.mul(Bounded::exact(y)));
    ring[i % h] = y;
    (y, Bounded::exact(1.0).sub(row).abs_upper())
}

/// Single participation: `Y = max_j ‖y_j‖ ≤ max_j ‖ŷ_j‖ / (1 − max_j ε_j)`.
fn single(d: BandedLowRank<'_>, steps: usize, scratch: &mut [f64]) -> Result<f64, Unverifiable> {
    let (h, r) = (d.band as usize, d.rank as usize);
    let (ring, beta) = scratch.split_at_mut(h);
    let beta = &mut beta[..2 * r];
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
        best = best.max(norm.value());
        worst_residual = worst_residual.max(residual.value());
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
        let used = &mut scratch[..columns * stride];
        used.fill(0.0);
        for i in class..steps {
            let active = ((i - class) / b + 1).min(columns);
            for p in 0..active {
                let column = &mut used[p * stride..(p + 1) * stride];
                let (ring, rest) = column.split_at_mut(h);
                let (beta, rest) = rest.split_at_mut(2 * r);
                let (_, rho) = advance(&d, class + p * b, i, ring, beta);
                rest[0] += rho;
            }
            let slot = i % h;
            for p in 0..active {
                let y_p = used[p * stride + slot];
                for lag in 0..k.min(p + 1) {
                    let y_q = used[(p - lag) * stride + slot];
                    used[p * stride + h + 2 * r + 1 + lag] += y_p * y_q;
                }
            }
        }
        for p in 0..columns {
            let column = &used[p * stride..(p + 1) * stride];
            let gram = &column[h + 2 * r + 1..];
            squared_norm = squared_norm.max(gram[0]);
            // The residual's running sum has at most n terms.
            let residual = UpperSum {
                sum: column[h + 2 * r],
                terms: steps as u64,
            };
            worst_residual = worst_residual.max(residual.value());
        }
        for start in 0..columns {
            let mut window = UpperSum::default();
            for p in start..columns.min(start + k) {
                let gram = &used[p * stride + h + 2 * r + 1..(p + 1) * stride];
                window.add(gram[0].abs());
                for x in gram.iter().take(p - start + 1).skip(1) {
                    window.add(2.0 * x.abs());
                }
            }
            windows = windows.max(window.value());
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
