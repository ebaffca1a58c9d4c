//! Verification of the FFT forms (`formats/SPEC.md`, decoder 1; 001 App. K) under single
//! participation and fixed epoch order: an upper bound `U` on the sensitivity the compiler records
//! (`mfc_compiler::fft`), from the stored `f32` kernel `ŷ` (and generator `x̂`), with the rounding
//! of this computation bounded as in the parent module (`Bounded`, `UpperSum`, an a-posteriori
//! residual). The stamped encoder is `blockdiag(Ĉ, …, Ĉ)`: stamping does not change the
//! single-participation value, and its Gram `X = ĈᵀĈ` is block diagonal.
//!
//! Both mechanisms need `T̂`, the symmetric Toeplitz with first column the circular autocorrelation
//! `t̂_a = Σ_{j<2m} ŷ_j ŷ_{(j+a) mod 2m}` (`= B̂B̂ᵀ` for Mechanism 1), and a bound `ε ≥ ‖MT̂ − I‖₁`
//! for the Gohberg–Semencul matrix `M = (L(x)L(x)ᵀ − L(x̃)L(x̃)ᵀ)/x₀` of a generator `x` (Gohberg &
//! Semencul 1972; `residual_norm`). For symmetric `M` with `ρ(MT̂ − I) ≤ ε < 1`, the symmetric
//! `T̂^{1/2}MT̂^{1/2}` is similar to `MT̂`, so `(1 − ε)T̂⁻¹ ≼ M ≼ (1 + ε)T̂⁻¹`.
//!
//! - **Mechanism 1** (Circulant): the compiler records `max_j (SᵀT̂⁻¹S)[j, j]^{1/2}`, the largest
//!   column norm of `Ĉ = B̂†S`. Here `x` solves `T̂x = e₀` by Levinson–Durbin in plain `f64` (Golub
//!   & Van Loan 2013, §4.7), `ε` is its residual, and `(SᵀT̂⁻¹S)[j, j] ≤ q_j/(1 − ε)` with
//!   `q_j = 1_{≥j}ᵀM1_{≥j} = (‖L(x)ᵀ1_{≥j}‖² − ‖L(x̃)ᵀ1_{≥j}‖²)/x₀`, each entry of `L(x)ᵀ1_{≥j}` a
//!   difference of two prefix sums of `x`.
//! - **Mechanism 2** (OptimalDecoder): the compiler records `sens(ŶE)/(1 − ‖M̂T̂ − I‖₁)` with
//!   `M̂` the matrix of the stored `x̂` (the Gram of `Ĉ = ŶE(M̂T̂)⁻¹` is
//!   `M̂⁻¹T̂⁻¹M̂⁻¹ ≼ T̂/(1 − ε)²`, `formats/SPEC.md`); under single participation
//!   `sens(ŶE) = ‖ŷ‖ = t̂_0^{1/2}`, and `ε` bounds `‖M̂T̂ − I‖₁` for the stored `x̂` itself.
//!
//! `‖MT̂ − I‖₁` in `O(m²)` without storing a matrix: with Trench's recursion
//! `M[i, k] = M[i−1, k−1] + (x_i x_k − x̃_i x̃_k)/x₀` (Trench 1964), `P = MT̂` obeys, for
//! `i, j ≥ 1`, `P[i, j] = P[i−1, j−1] + x_i t̂_j − M[i−1, m−1] t̂_{m−j} + x_i β_j − x̃_i β̃_j`,
//! `β_j = Σ_{k≥1} x_k t̂_{|k−j|}/x₀`, `β̃_j = Σ_{k≥1} x̃_k t̂_{|k−j|}/x₀`; its first row is
//! `x₀t̂_j + x₀β_j` and its first column `M t̂` (four triangular Toeplitz products). Every value
//! carries its running error bound, so `ε` bounds the exact `‖MT̂ − I‖₁` of the exact `T̂`. The
//! error bounds grow along a diagonal (`m` steps of `O(u)`); `U` stays within `2·10⁻⁷` of the
//! compiler's value up to `m = 10⁴`
//! (`cargo bench -p mfc-compiler --bench fft -- verify 2048 10000`), inside the `2·10⁻⁶` rounding
//! allowance of `mfc_compiler::blob`.
//!
//! **Fixed epoch order** `(k, b)` (participations exactly `b` apart; `k' = min(k, ⌈n/b⌉)`): the
//! compiler records `max_π (1ᵀX[π, π]1)^{1/2}` over the patterns `π = {s, s + b, …}` when `X ≥ 0`
//! on every pattern (001 Eq. 3, `NonnegativeGram`), else the smaller of two bounds. Here the
//! pattern sums of `|X|` are bounded from above and the signs certified from below (`patterns`;
//! a Circulant blob that records `AbsoluteGramBound` is checked against the sums of `|X|`):
//! `X = SᵀT̂⁻¹S` for Mechanism 1, each entry `1_{≥i}ᵀM1_{≥j}` within `ε·max_j X[j, j]` of
//! `1_{≥i}ᵀT̂⁻¹1_{≥j}` (`T̂^{1/2}MT̂^{1/2} − I` has norm at most `ε`); `X = T̂` (then divided by
//! `1 − ε`) for Mechanism 2. A Gram not certified non-negative on a pattern, and min separation,
//! are [`Unverifiable::Schema`]: the compiler's value may then come from a spectral bound or a
//! pattern search that this module does not reproduce.
//!
//! Mechanism 2's `ε` is part of the recorded value, not rounding: any `ε < 1/2` (the compiler's
//! own limit) gives a bound; above it the blob is [`Unverifiable::IllConditioned`]. Mechanism 1's
//! `ε` is the residual of the device's own solve and must stay below `10⁻⁶`, like the other
//! a-posteriori checks.
//!
//! Cost (multiply-adds, `m` the block): `t̂` `2m²`, `β, β̃` `2m²`, `M[:, m−1]` `m²`, `M t̂` `2m²`,
//! the recursion `4m²`: `11m²` for Mechanism 2; Mechanism 1 adds Levinson–Durbin (`m²`) and the
//! `q_j` (`2m²`): `14m²`. Fixed epoch order adds at most `n·k'²` Gram entries (pairs in one
//! stamp only), `2m` operations each for Mechanism 1 and one for Mechanism 2. Scratch: `18m`
//! `f64`s.

use mfc_formats::{F32Table, Fft, FftKind, SensitivityMethod};

use super::{
    Bounded, GROW, TINY, TWO_U, Unverifiable, UpperSum, forms, larger, solve_up, sqrt_up, value,
};

/// The `f64`s of scratch [`bound`] needs for a block of `m` steps.
pub(super) fn scratch_len(d: &Fft<'_>) -> usize {
    (d.block as usize).saturating_mul(18)
}

/// The multiply-adds [`bound`] spends (module docs), with `epochs = Some(k')` under fixed epoch
/// order.
pub(super) fn operations(d: &Fft<'_>, epochs: Option<usize>) -> u64 {
    let m = u64::from(d.block);
    let (per, per_entry) = match d.kind {
        FftKind::Circulant => (14, 2 * m),
        _ => (11, 1),
    };
    let base = m.saturating_mul(m).saturating_mul(per);
    let Some(k) = epochs else {
        return base;
    };
    let n = m.saturating_mul(u64::from(d.stamps));
    let k = k as u64;
    base.saturating_add(
        n.saturating_mul(k.saturating_mul(k))
            .saturating_mul(per_entry),
    )
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

/// An upper bound on the sensitivity of the stored FFT decoder `d` (module docs), before the
/// neighbouring relation's factor: single participation for `epochs = None`, fixed epoch order
/// `(k', b)` otherwise, where the blob's recorded `method` decides whether the absolute-Gram
/// bound is the quantity to check. Only the schemas of `FORMS` are linked ([`super::forms`]);
/// another is [`Unverifiable::Form`].
pub(super) fn bound<const FORMS: u8>(
    d: &Fft<'_>,
    epochs: Option<(usize, usize)>,
    method: SensitivityMethod,
    scratch: &mut [f64],
) -> Result<f64, Unverifiable> {
    let linked = match epochs {
        None => FORMS & forms::SINGLE != 0,
        Some(_) => FORMS & forms::FIXED_EPOCH_ORDER != 0,
    };
    if !linked {
        return Err(Unverifiable::Form);
    }
    let epochs = epochs.filter(|_| FORMS & forms::FIXED_EPOCH_ORDER != 0);
    let m = d.block as usize;
    let n = m.saturating_mul(d.stamps as usize);
    let (x, rest) = scratch.split_at_mut(m);
    let (t, work) = rest.split_at_mut(2 * m);
    autocorrelation(d.kernel, m, t);
    match d.kind {
        FftKind::Circulant => {
            levinson(t, x, work)?;
            let epsilon = residual_norm(x, t, work);
            prefix_sums(x, work);
            let q = block_sums(x, work);
            let single = solve_up(q, epsilon)?;
            let Some((k, b)) = epochs else {
                return Ok(sqrt_up(single));
            };
            // X − X' = 1_{≥i}ᵀ(T̂⁻¹ − M)1_{≥j}, at most ε·√(X[i, i]·X[j, j]) ≤ ε·single
            // (module docs); one more factor 1/(1 − ε) to spare.
            let slack = solve_up(epsilon * single * GROW, epsilon)?;
            let entry = |i: usize, j: usize| {
                let g = gram_entry(x, work, i, j);
                // X ≥ g.v − g.e − slack ≥ 0; |X| ≤ |g.v| + g.e + slack, the sums rounded up.
                (g.v >= (g.e + slack) * GROW, (g.abs_upper() + slack) * GROW)
            };
            // The compiler records the absolute-Gram bound when it is below the spectral one.
            let absolute = method == SensitivityMethod::AbsoluteGramBound;
            Ok(sqrt_up(patterns(n, m, k, b, absolute, entry)?))
        }
        FftKind::OptimalDecoder => {
            for (i, slot) in x.iter_mut().enumerate() {
                *slot = f64::from(d.generator.get(i).unwrap_or(0.0));
            }
            let epsilon = residual_norm(x, t, work);
            if !(epsilon.is_finite() && epsilon < 0.5) {
                return Err(Unverifiable::IllConditioned);
            }
            let gram = match epochs {
                None => Bounded::read(t, 0).abs_upper(),
                Some((k, b)) => {
                    let entry = |i: usize, j: usize| {
                        let g = Bounded::read(t, i.abs_diff(j));
                        (g.v >= g.e, g.abs_upper())
                    };
                    // The recorded method (`GeneratorResidualBound`) does not say which bound
                    // the compiler divided by `1 − ε`: only the exact case is checked.
                    patterns(n, m, k, b, false, entry)?
                }
            };
            Ok(sqrt_up(gram) / (1.0 - epsilon * GROW) * GROW * GROW)
        }
        // A kind a later format version adds: its decoder is not one of these two.
        _ => Err(Unverifiable::Form),
    }
}

/// Fixed epoch order `(k', b)` over the `n` steps of the stamped encoder, whose Gram `X` is
/// block diagonal with `m × m` blocks: `entry(i, j) = (certified, upper)` (local indices) says
/// whether `X[i, j] ≥ 0` is certified and bounds `|X[i, j]|`. Returns
/// `max_s Σ_{i, j ∈ π_s} |X[i, j]|`, rounded up, over the patterns `π_s = {s, s + b, …}` (`k'`
/// steps at most, within the horizon): `sens²` when `X ≥ 0` on every pattern (001 Eq. 3), and
/// otherwise an upper bound on it (the absolute-Gram bound), used only when `absolute` says the
/// blob records that bound; else the compiler's value may come from a smaller one
/// (`SpectralBound`) and the blob is [`Unverifiable::Schema`].
fn patterns(
    n: usize,
    m: usize,
    k: usize,
    b: usize,
    absolute: bool,
    mut entry: impl FnMut(usize, usize) -> (bool, f64),
) -> Result<f64, Unverifiable> {
    let mut best = 0.0f64;
    for start in 0..n {
        let mut sum = UpperSum::default();
        for i in (start..n).step_by(b).take(k) {
            for j in (start..n).step_by(b).take(k) {
                if i / m != j / m {
                    continue; // different stamps: X[i, j] = 0 exactly
                }
                let (certified, upper) = entry(i % m, j % m);
                if !((certified || absolute) && upper.is_finite()) {
                    return Err(Unverifiable::Schema);
                }
                sum.add(upper);
            }
        }
        best = larger(best, sum.value());
    }
    Ok(best)
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
    let tv = |a: usize| value(t, 2 * a);
    let Some((a, previous)) = work.get_mut(..2 * m).map(|w| w.split_at_mut(m)) else {
        return Err(Unverifiable::ScratchTooSmall { needed: 18 * m });
    };
    a.fill(0.0);
    if let Some(a0) = a.first_mut() {
        *a0 = 1.0;
    }
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
        for (p, &q) in previous.iter_mut().zip(a.iter()).take(k + 1) {
            *p = q;
        }
        for (j, aj) in a.iter_mut().enumerate().take(k + 1).skip(1) {
            *aj = value(previous, j) + reflection * value(previous, k - j);
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
    match x.len().checked_sub(k) {
        _ if k == 0 => 0.0,
        Some(at) => value(x, at),
        None => f64::NAN,
    }
}

/// An upper bound on `‖MT̂ − I‖₁` for the Gohberg–Semencul matrix `M` of `x` (taken exact) and
/// the Toeplitz `T̂` of the bounded `t` (module docs; `work` holds `15m` values). `NaN` or
/// infinite when a value overflows.
fn residual_norm(x: &[f64], t: &[f64], work: &mut [f64]) -> f64 {
    let m = x.len();
    let x0 = value(x, 0);
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
    let Some(column) = work.get_mut(..m) else {
        return f64::NAN;
    };
    // β_j, β̃_j = Σ_{k≥1} (x_k, x̃_k) t̂_{|k−j|} / x₀.
    for j in 0..m {
        let (mut s, mut s_tilde) = (exact(0.0), exact(0.0));
        for k in 1..m {
            let tk = tb(k.abs_diff(j));
            s = s.add(exact(value(x, k)).mul(tk));
            s_tilde = s_tilde.add(exact(tilde(x, k)).mul(tk));
        }
        quotient(s, x0).write(beta, j);
        quotient(s_tilde, x0).write(beta_tilde, j);
    }
    // M[i, m−1] = Σ_{l≤i} (x_{i−l} x_{m−1−l} − x̃_{i−l} x̃_{m−1−l}) / x₀.
    for i in 0..m {
        let mut s = exact(0.0);
        for l in 0..=i {
            let p = exact(value(x, i - l)).mul(exact(value(x, m - 1 - l)));
            let q = exact(tilde(x, i - l)).mul(exact(tilde(x, m - 1 - l)));
            s = s.add(p.sub(q));
        }
        quotient(s, x0).write(last, i);
    }
    // First column: P[:, 0] = M t̂ = (L(x)(L(x)ᵀt̂) − L(x̃)(L(x̃)ᵀt̂)) / x₀.
    for k in 0..m {
        let (mut s, mut s_tilde) = (exact(0.0), exact(0.0));
        for i in k..m {
            s = s.add(exact(value(x, i - k)).mul(tb(i)));
            s_tilde = s_tilde.add(exact(tilde(x, i - k)).mul(tb(i)));
        }
        s.write(u, k);
        s_tilde.write(u_tilde, k);
    }
    for i in 0..m {
        let mut s = exact(0.0);
        for k in 0..=i {
            let p = exact(value(x, i - k)).mul(Bounded::read(u, k));
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
        let (xi, xti) = (exact(value(x, i)), exact(tilde(x, i)));
        let carry = Bounded::read(last, i - 1);
        // Right to left: row j − 1 is still the previous row's.
        for (j, c) in column.iter_mut().enumerate().skip(1).rev() {
            let p = Bounded::read(row, j - 1)
                .add(xi.mul(tb(j)))
                .sub(carry.mul(tb(m - j)))
                .add(xi.mul(Bounded::read(beta, j)))
                .sub(xti.mul(Bounded::read(beta_tilde, j)));
            p.write(row, j);
            *c += entry(p, i == j);
        }
        Bounded::read(first, i).write(row, 0);
        if let Some(c) = column.first_mut() {
            *c += entry(Bounded::read(first, i), false);
        }
    }
    // Each column is a sum of m non-negative upper bounds (the `UpperSum` factor).
    let worst = column.iter().copied().fold(0.0f64, |a, b| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            larger(a, b)
        }
    });
    worst * (1.0 + (m as f64 + 2.0) * TWO_U) * GROW
}

/// The prefix sums of `x` and of `x̃` (bounded), in `work[..2m]` and `work[2m..4m]`.
fn prefix_sums(x: &[f64], work: &mut [f64]) {
    let m = x.len();
    let (prefix, rest) = work.split_at_mut(2 * m);
    let (mut s, mut s_tilde) = (exact(0.0), exact(0.0));
    for (k, &xk) in x.iter().enumerate() {
        s = s.add(exact(xk));
        s_tilde = s_tilde.add(exact(tilde(x, k)));
        s.write(prefix, k);
        s_tilde.write(rest, k);
    }
}

/// `1_{≥i}ᵀM1_{≥j} = ((L(x)ᵀ1_{≥i})·(L(x)ᵀ1_{≥j}) − (L(x̃)ᵀ1_{≥i})·(L(x̃)ᵀ1_{≥j}))/x₀`, bounded;
/// `(L(x)ᵀ1_{≥i})_k = X_{m−1−k} − X_{i−k−1}` (the second term for `k < i` only) with `X` the
/// prefix sums of [`prefix_sums`].
fn gram_entry(x: &[f64], prefixes: &[f64], i: usize, j: usize) -> Bounded {
    let m = x.len();
    let (prefix, prefix_tilde) = prefixes
        .get(..4 * m)
        .map_or((&[][..], &[][..]), |p| p.split_at(2 * m));
    let column = |p: &[f64], c: usize, k: usize| {
        let full = Bounded::read(p, m - 1 - k);
        if k < c {
            full.sub(Bounded::read(p, c - k - 1))
        } else {
            full
        }
    };
    let mut sum = exact(0.0);
    for k in 0..m {
        let (a, a_tilde) = (column(prefix, i, k), column(prefix_tilde, i, k));
        let (b, b_tilde) = if i == j {
            (a, a_tilde) // the diagonal: each column once (soft-float devices)
        } else {
            (column(prefix, j, k), column(prefix_tilde, j, k))
        };
        sum = sum.add(a.mul(b).sub(a_tilde.mul(b_tilde)));
    }
    quotient(sum, value(x, 0))
}

/// `max_j q_j`, `q_j = 1_{≥j}ᵀM1_{≥j}`, rounded up (`work`: the `4m` prefix sums).
fn block_sums(x: &[f64], prefixes: &[f64]) -> f64 {
    (0..x.len())
        .map(|j| gram_entry(x, prefixes, j, j).abs_upper())
        .fold(0.0f64, |best, q| {
            if best.is_nan() || q.is_nan() {
                f64::NAN
            } else {
                larger(best, q)
            }
        })
}
