//! Verification of the FFT forms (`formats/SPEC.md`, decoder 1; Choquette-Choo et al. 2023,
//! App. K) under single participation: an upper bound `U` on the sensitivity the compiler records
//! (`mfc_compiler::fft`), from the stored `f32` kernel `ŷ` (and generator `x̂`), with the rounding
//! of this computation bounded as in the parent module (`Bounded`, `UpperSum`, an a-posteriori
//! residual). Stamping does not change the single-participation value (the stamped encoder is
//! `blockdiag(Ĉ, …, Ĉ)`), so everything below is about one block of `m` steps.
//!
//! Both mechanisms need `T̂`, the symmetric Toeplitz with first column the circular
//! autocorrelation `t̂_a = Σ_{j<2m} ŷ_j ŷ_{(j+a) mod 2m}` (`= B̂B̂ᵀ` for Mechanism 1), and a bound
//! `ε ≥ ‖MT̂ − I‖₁` for the Gohberg–Semencul matrix `M = (L(x)L(x)ᵀ − L(x̃)L(x̃)ᵀ)/x₀` of a
//! generator `x` (Gohberg & Semencul 1972; `residual_norm`). For symmetric `M` with `ρ(MT̂ − I) ≤ ε < 1`, the symmetric
//! `T̂^{1/2}MT̂^{1/2}` is similar to `MT̂`, so `(1 − ε)T̂⁻¹ ≼ M ≼ (1 + ε)T̂⁻¹`.
//!
//! - **Mechanism 1** (Circulant): the compiler records `max_j (SᵀT̂⁻¹S)[j, j]^{1/2}`, the largest
//!   column norm of `Ĉ = B̂†S`. Here `x` solves `T̂x = e₀` by Levinson–Durbin in plain `f64`
//!   (Golub & Van Loan, Alg. 4.7.1), `ε` is its residual, and
//!   `(SᵀT̂⁻¹S)[j, j] ≤ q_j/(1 − ε)` with `q_j = 1_{≥j}ᵀM1_{≥j} = (‖L(x)ᵀ1_{≥j}‖² − ‖L(x̃)ᵀ1_{≥j}‖²)/x₀`,
//!   each entry of `L(x)ᵀ1_{≥j}` a difference of two prefix sums of `x`.
//! - **Mechanism 2** (OptimalDecoder): the compiler records `sens(ŶE)/(1 − ‖M̂T̂ − I‖₁)` with
//!   `M̂` the matrix of the stored `x̂` (the Gram of `Ĉ = ŶE(M̂T̂)⁻¹` is
//!   `M̂⁻¹T̂⁻¹M̂⁻¹ ≼ T̂/(1 − ε)²`, `formats/SPEC.md`); under single participation
//!   `sens(ŶE) = ‖ŷ‖ = t̂_0^{1/2}`, and `ε` bounds `‖M̂T̂ − I‖₁` for the stored `x̂` itself.
//!
//! `‖MT̂ − I‖₁` in `O(m²)` without storing a matrix: with Trench's recursion
//! `M[i, k] = M[i−1, k−1] + (x_i x_k − x̃_i x̃_k)/x₀` (Trench 1964), `P = MT̂` obeys, for
//! `i, j ≥ 1`,
//! `P[i, j] = P[i−1, j−1] + x_i t̂_j − M[i−1, m−1] t̂_{m−j} + x_i β_j − x̃_i β̃_j`,
//! `β_j = Σ_{k≥1} x_k t̂_{|k−j|}/x₀`, `β̃_j = Σ_{k≥1} x̃_k t̂_{|k−j|}/x₀`; its first row is
//! `x₀t̂_j + x₀β_j` and its first column `M t̂` (four triangular Toeplitz products). Every value
//! carries its running error bound, so `ε` bounds the exact `‖MT̂ − I‖₁` of the exact `T̂`.
//! The error bounds grow along a diagonal (`m` steps of `O(u)`); `U` stays within `2·10⁻⁷` of the
//! compiler's value up to `m = 10⁴` (`cargo bench -p mfc-compiler --bench fft -- verify 2048
//! 10000`), inside the `2·10⁻⁶` rounding allowance of `mfc_compiler::blob`.
//!
//! Mechanism 2's `ε` is part of the recorded value, not rounding: any `ε < 1/2` (the compiler's
//! own limit) gives a bound; above it the blob is [`Unverifiable::IllConditioned`]. Mechanism 1's
//! `ε` is the residual of the device's own solve and must stay below `10⁻⁶`, like the other
//! a-posteriori checks.
//!
//! Cost (multiply-adds, `m` the block): `t̂` `2m²`, `β, β̃` `2m²`, `M[:, m−1]` `m²`, `M t̂` `2m²`,
//! the recursion `4m²`: `11m²` for Mechanism 2; Mechanism 1 adds Levinson–Durbin (`m²`) and the
//! `q_j` (`2m²`): `14m²`. Scratch: `18m` `f64`s. Several participations are
//! [`Unverifiable::Schema`]: the compiler's value for them comes from the dense stamped encoder
//! (`participation::sensitivity`: a pattern search or the smaller of two bounds), which this
//! module does not reproduce.

use mfc_formats::{F32Table, Fft, FftKind};

use super::{Bounded, GROW, TINY, TWO_U, Unverifiable, solve_up, sqrt_up};

/// The `f64`s of scratch [`bound`] needs for a block of `m` steps.
pub(super) fn scratch_len(d: &Fft<'_>) -> usize {
    (d.block as usize).saturating_mul(18)
}

/// The multiply-adds [`bound`] spends (module docs).
pub(super) fn operations(d: &Fft<'_>) -> u64 {
    let m = u64::from(d.block);
    let per = match d.kind {
        FftKind::Circulant => 14,
        _ => 11,
    };
    m.saturating_mul(m).saturating_mul(per)
}

/// `a / d` for an exact `d ≠ 0`, bounded.
fn quotient(a: Bounded, d: f64) -> Bounded {
    let v = a.v / d;
    Bounded {
        v,
        e: (a.e / d.abs() + v.abs() * TWO_U + TINY) * GROW,
    }
}

/// An exact value (a stored `f32`, or a computed value taken as exact).
fn exact(v: f64) -> Bounded {
    Bounded::exact(v)
}

/// An upper bound on the single-participation sensitivity of the stored FFT decoder `d`
/// (module docs), before the neighbouring relation's factor.
pub(super) fn bound(d: &Fft<'_>, scratch: &mut [f64]) -> Result<f64, Unverifiable> {
    let m = d.block as usize;
    let (x, rest) = scratch.split_at_mut(m);
    let (t, work) = rest.split_at_mut(2 * m);
    autocorrelation(d.kernel, m, t);
    match d.kind {
        FftKind::Circulant => {
            levinson(t, x, work)?;
            let epsilon = residual_norm(x, t, work);
            let q = block_sums(x, work);
            Ok(sqrt_up(solve_up(q, epsilon)?))
        }
        FftKind::OptimalDecoder => {
            for (i, slot) in x.iter_mut().enumerate() {
                *slot = f64::from(d.generator.get(i).unwrap_or(0.0));
            }
            let epsilon = residual_norm(x, t, work);
            if !(epsilon.is_finite() && epsilon < 0.5) {
                return Err(Unverifiable::IllConditioned);
            }
            let norm = sqrt_up(Bounded::read(t, 0).abs_upper());
            Ok(norm / (1.0 - epsilon * GROW) * GROW * GROW)
        }
        // A kind a later format version adds: its decoder is not one of these two.
        _ => Err(Unverifiable::Form),
    }
}

/// `t̂_a = Σ_{j<2m} ŷ_j ŷ_{(j+a) mod 2m}` for `a < m`, bounded (`t`: `2m` values). The products
/// of two `f32` are exact in `f64`.
fn autocorrelation(kernel: F32Table<'_>, m: usize, t: &mut [f64]) {
    let y = |j: usize| f64::from(kernel.get(j).unwrap_or(0.0));
    for a in 0..m {
        let mut sum = exact(0.0);
        for j in 0..2 * m {
            sum = sum.add(exact(y(j) * y((j + a) % (2 * m))));
        }
        sum.write(t, a);
    }
}

/// `x ≈ T̂⁻¹e₀` by Levinson–Durbin in plain `f64` (checked afterwards by [`residual_norm`]);
/// `work` holds `2m` values. A non-positive prediction error is [`Unverifiable::IllConditioned`].
fn levinson(t: &[f64], x: &mut [f64], work: &mut [f64]) -> Result<(), Unverifiable> {
    let m = x.len();
    let tv = |a: usize| t[2 * a];
    let (a, previous) = work[..2 * m].split_at_mut(m);
    a.fill(0.0);
    a[0] = 1.0;
    let mut e = tv(0);
    for k in 1..m {
        if !(e.is_finite() && e > 0.0) {
            return Err(Unverifiable::IllConditioned);
        }
        let mut dot = 0.0;
        for (j, aj) in a.iter().enumerate().take(k) {
            dot += aj * tv(k - j);
        }
        let reflection = -dot / e;
        // a[k] = 0 before this step: copy it too, the scratch is not cleared.
        previous[..=k].copy_from_slice(&a[..=k]);
        for j in 1..=k {
            a[j] = previous[j] + reflection * previous[k - j];
        }
        e *= 1.0 - reflection * reflection;
    }
    if !(e.is_finite() && e > 0.0) {
        return Err(Unverifiable::IllConditioned);
    }
    for (xi, ai) in x.iter_mut().zip(a.iter()) {
        *xi = ai / e;
    }
    Ok(())
}

/// `x̃_k`: `0` for `k = 0`, else `x_{m−k}`.
fn tilde(x: &[f64], k: usize) -> f64 {
    if k == 0 { 0.0 } else { x[x.len() - k] }
}

/// An upper bound on `‖MT̂ − I‖₁` for the Gohberg–Semencul matrix `M` of `x` (taken exact) and
/// the Toeplitz `T̂` of the bounded `t` (module docs; `work` holds `15m` values). `NaN` or
/// infinite when a value overflows.
fn residual_norm(x: &[f64], t: &[f64], work: &mut [f64]) -> f64 {
    let m = x.len();
    let x0 = x[0];
    if !(x0.is_finite() && x0 > 0.0) {
        return f64::NAN;
    }
    let tb = |a: usize| Bounded::read(t, a);
    let (beta, work) = work.split_at_mut(2 * m);
    let (beta_tilde, work) = work.split_at_mut(2 * m);
    let (last, work) = work.split_at_mut(2 * m);
    let (first, work) = work.split_at_mut(2 * m);
    let (row, work) = work.split_at_mut(2 * m);
    let (u, work) = work.split_at_mut(2 * m);
    let (u_tilde, work) = work.split_at_mut(2 * m);
    let column = &mut work[..m];
    // β_j, β̃_j = Σ_{k≥1} (x_k, x̃_k) t̂_{|k−j|} / x₀.
    for j in 0..m {
        let (mut s, mut s_tilde) = (exact(0.0), exact(0.0));
        for k in 1..m {
            let tk = tb(k.abs_diff(j));
            s = s.add(exact(x[k]).mul(tk));
            s_tilde = s_tilde.add(exact(tilde(x, k)).mul(tk));
        }
        quotient(s, x0).write(beta, j);
        quotient(s_tilde, x0).write(beta_tilde, j);
    }
    // M[i, m−1] = Σ_{l≤i} (x_{i−l} x_{m−1−l} − x̃_{i−l} x̃_{m−1−l}) / x₀.
    for i in 0..m {
        let mut s = exact(0.0);
        for l in 0..=i {
            let p = exact(x[i - l]).mul(exact(x[m - 1 - l]));
            let q = exact(tilde(x, i - l)).mul(exact(tilde(x, m - 1 - l)));
            s = s.add(p.sub(q));
        }
        quotient(s, x0).write(last, i);
    }
    // First column: P[:, 0] = M t̂ = (L(x)(L(x)ᵀt̂) − L(x̃)(L(x̃)ᵀt̂)) / x₀.
    for k in 0..m {
        let (mut s, mut s_tilde) = (exact(0.0), exact(0.0));
        for i in k..m {
            s = s.add(exact(x[i - k]).mul(tb(i)));
            s_tilde = s_tilde.add(exact(tilde(x, i - k)).mul(tb(i)));
        }
        s.write(u, k);
        s_tilde.write(u_tilde, k);
    }
    for i in 0..m {
        let mut s = exact(0.0);
        for k in 0..=i {
            let p = exact(x[i - k]).mul(Bounded::read(u, k));
            let q = exact(tilde(x, i - k)).mul(Bounded::read(u_tilde, k));
            s = s.add(p.sub(q));
        }
        quotient(s, x0).write(first, i);
    }
    // Row 0: P[0, j] = x₀ t̂_j + x₀ β_j (= Σ_k x_k t̂_{|k−j|}); P[0, 0] from the first column.
    column.fill(0.0);
    for j in 0..m {
        let p = if j == 0 {
            Bounded::read(first, 0)
        } else {
            exact(x0)
                .mul(tb(j))
                .add(exact(x0).mul(Bounded::read(beta, j)))
        };
        p.write(row, j);
    }
    let entry = |p: Bounded, diagonal: bool| {
        if diagonal {
            p.sub(exact(1.0)).abs_upper()
        } else {
            p.abs_upper()
        }
    };
    for (j, c) in column.iter_mut().enumerate() {
        *c += entry(Bounded::read(row, j), j == 0);
    }
    for i in 1..m {
        let (xi, xti) = (exact(x[i]), exact(tilde(x, i)));
        let carry = Bounded::read(last, i - 1);
        for j in (1..m).rev() {
            let p = Bounded::read(row, j - 1)
                .add(xi.mul(tb(j)))
                .sub(carry.mul(tb(m - j)))
                .add(xi.mul(Bounded::read(beta, j)))
                .sub(xti.mul(Bounded::read(beta_tilde, j)));
            p.write(row, j);
            column[j] += entry(p, i == j);
        }
        Bounded::read(first, i).write(row, 0);
        column[0] += entry(Bounded::read(first, i), false);
    }
    // Each column is a sum of m non-negative upper bounds (the `UpperSum` factor).
    let worst = column.iter().copied().fold(0.0f64, |a, b| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.max(b)
        }
    });
    worst * (1.0 + (m as f64 + 2.0) * TWO_U) * GROW
}

/// `max_j q_j`, `q_j = 1_{≥j}ᵀM1_{≥j} = (‖L(x)ᵀ1_{≥j}‖² − ‖L(x̃)ᵀ1_{≥j}‖²)/x₀`, rounded up.
/// `(L(x)ᵀ1_{≥j})_k = X_{m−1−k} − X_{j−k−1}` (the second term for `k < j` only) with `X` the
/// prefix sums of `x` (bounded, in `work`: `4m` values).
fn block_sums(x: &[f64], work: &mut [f64]) -> f64 {
    let m = x.len();
    let (prefix, work) = work.split_at_mut(2 * m);
    let prefix_tilde = &mut work[..2 * m];
    let (mut s, mut s_tilde) = (exact(0.0), exact(0.0));
    for k in 0..m {
        s = s.add(exact(x[k]));
        s_tilde = s_tilde.add(exact(tilde(x, k)));
        s.write(prefix, k);
        s_tilde.write(prefix_tilde, k);
    }
    let mut best = 0.0f64;
    for j in 0..m {
        let mut q = exact(0.0);
        for k in 0..m {
            let (mut a, mut b) = (
                Bounded::read(prefix, m - 1 - k),
                Bounded::read(prefix_tilde, m - 1 - k),
            );
            if k < j {
                a = a.sub(Bounded::read(prefix, j - k - 1));
                b = b.sub(Bounded::read(prefix_tilde, j - k - 1));
            }
            q = q.add(a.mul(a).sub(b.mul(b)));
        }
        let q = quotient(q, x[0]).abs_upper();
        best = if best.is_nan() || q.is_nan() {
            f64::NAN
        } else {
            best.max(q)
        };
    }
    best
}
