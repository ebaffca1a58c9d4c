//! `f(C) = ‖A C⁻¹‖_F²` and its gradient with respect to the band of a banded lower-triangular
//! encoder `C`, without an `n × n` matrix when `A⁻¹` is banded.
//!
//! # Banded `A⁻¹`: a recurrence on the band of `K = W Wᵀ`
//!
//! With `M = C A⁻¹` (lower triangular, `p = b̂ + a − 1` bands) the decoder is
//! `B = A C⁻¹ = M⁻¹ =: W`, so `f = tr K` with `K = W Wᵀ` and `‖B[i, :]‖² = K_ii`. Row `t` of
//! `M W = I` reads `W[t, :] = (e_tᵀ − Σ_{l ≥ 1} M_{t,t−l} W[t−l, :]) / M_tt`; since `W` is lower
//! triangular (`W[u, t] = 0` for `u < t`, `W_tt = 1/M_tt`), taking inner products with the rows
//! `u ≤ t` gives
//!
//! ```text
//! K(t, u) = −Σ_{l=1}^{p−1} M_{t,t−l} K(t−l, u) / M_tt                 (t − p < u < t),
//! K(t, t) = (1/M_tt − Σ_{l=1}^{p−1} M_{t,t−l} K(t, t−l)) / M_tt,
//! ```
//!
//! which only reads entries of `K` within `p − 1` of the diagonal: the band of `K` is computed
//! row by row in `O(p²)` per row, `O(n·p²)` time and `O(n·p)` memory in all (the
//! selected-inversion recurrence of Takahashi, Fagan and Chin 1973, here for `(MᵀM)⁻¹`; the same
//! numbers are the state covariance of the filter `w = C⁻¹z` run on white noise). The gradient is
//! the reverse-mode derivative of this recurrence, row by row from the last (the adjoint of a
//! row of `K` is complete once every later row has been processed, and only the last `p` rows'
//! adjoints are alive: a ring of `p × p`), `O(n·p²)` again, and
//! `∂f/∂C = (∂f/∂M) A⁻ᵀ` row by row (`M = C A⁻¹` mixes entries within a row only). No `n × n`
//! matrix: memory `8·n·p` bytes for the band of `K` besides the encoder and its gradient.
//!
//! # Dense `A` (custom workloads)
//!
//! Row `i` of `B` solves `b C = a_i` (back substitution), row `i` of `E = B C⁻ᵀ` solves
//! `C eᵀ = bᵀ` (forward substitution), and `∂f/∂C_{r, r−t} = −2 Σ_i B_{i,r} E_{i,r−t}`
//! (from `dB = −B dC C⁻¹`): `O(n²·b̂)` time, `A` itself plus `O(n·b̂)` per parallel chunk of
//! rows. The chunks are fixed (not the threads' schedule), so the sums have the same bits on
//! every run.

use faer::MatRef;
use rayon::prelude::*;

use super::operator::{BandRows, Operator};

/// `Σ a_i b_i` with sixteen accumulators: the compiler keeps them in eight SSE2 registers, so
/// the additions do not wait on each other (four accumulators ran at a third of the speed).
/// Differs from a plain sum by rounding only.
#[inline]
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    const LANES: usize = 16;
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let mut acc = [0.0; LANES];
    for (x, y) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let tail = len / LANES * LANES;
    let rest: f64 = a[tail..].iter().zip(&b[tail..]).map(|(x, y)| x * y).sum();
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            acc[i] += acc[i + width];
        }
    }
    acc[0] + rest
}

/// `y += α x`.
#[inline]
fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += alpha * x;
    }
}

/// Scratch of [`frobenius`]: the band of `K`, reused across evaluations.
#[derive(Debug, Default)]
pub struct Workspace {
    band: Vec<f64>,
}

impl Workspace {
    /// Bytes the band of `K` takes for `steps` steps and `width = p` bands of `C A⁻¹`.
    pub fn bytes(steps: usize, width: usize) -> f64 {
        8.0 * (steps * width + 2 * width * width) as f64
    }
}

/// Row `t` of `M = C A⁻¹` into `m` (`m[l] = M_{t,t−l}`, `l < p`).
#[inline]
fn m_row(c: &BandRows, inverse: &BandRows, t: usize, m: &mut [f64]) {
    let (h, a) = (c.width, inverse.width);
    let crow = c.row(t);
    m.fill(0.0);
    for (l, ml) in m.iter_mut().enumerate().take(t + 1) {
        let mut total = 0.0;
        // C[t, t−l+d] A⁻¹[t−l+d, t−l], d < a, l − d < b̂.
        for d in l.saturating_sub(h - 1)..a.min(l + 1) {
            total += crow[l - d] * inverse.get(t - l + d, d);
        }
        *ml = total;
    }
}

/// `∂f/∂C` of row `t` from `∂f/∂M` of row `t` (`C̄ = M̄ A⁻ᵀ`, within the row).
#[inline]
fn to_encoder_row(mbar: &[f64], inverse: &BandRows, t: usize, out: &mut [f64]) {
    let a = inverse.width;
    for (tau, o) in out.iter_mut().enumerate() {
        if tau > t {
            *o = 0.0;
            continue;
        }
        let mut total = 0.0;
        for d in 0..a {
            if tau + d < mbar.len() {
                total += mbar[tau + d] * inverse.get(t - tau, d);
            }
        }
        *o = total;
    }
}

/// `‖A C⁻¹‖_F²`, the per-row norms `‖B[i, :]‖²` when `rows` is given, and the gradient with
/// respect to `c`'s band (same layout) when `gradient` is given (module docs). `None` when `C`
/// has a zero diagonal entry or a result is not finite.
pub fn frobenius(
    operator: &Operator,
    c: &BandRows,
    workspace: &mut Workspace,
    rows: Option<&mut [f64]>,
    gradient: Option<&mut [f64]>,
) -> Option<f64> {
    let value = match operator {
        Operator::BandedInverse(inverse) => banded(inverse, c, workspace, rows, gradient),
        Operator::Dense(a) => dense(a.as_ref(), c, rows, gradient),
    }?;
    value.is_finite().then_some(value)
}

fn banded(
    inverse: &BandRows,
    c: &BandRows,
    workspace: &mut Workspace,
    rows: Option<&mut [f64]>,
    gradient: Option<&mut [f64]>,
) -> Option<f64> {
    let n = c.steps;
    let p = c.width + inverse.width - 1;
    // Row t of K's band at `band[t·p ..]`: K(t, t − a) at `a`.
    let band = &mut workspace.band;
    band.clear();
    band.resize(n * p, 0.0);
    // The last p rows of K, dense and symmetric, by time modulo p: `ring[slot(u)·p + slot(v)]
    // = K(u, v)`; `mm` holds m_l at slot(t − l), so Σ_l m_l K(t − l, u) is one dot product of
    // length p (the slot of t itself holds zero in `mm`).
    let slot = |t: usize| t % p;
    let mut ring = vec![0.0; p * p];
    let mut m = vec![0.0; p];
    let mut mm = vec![0.0; p];
    let mut value = 0.0;
    let mut rows = rows;
    for t in 0..n {
        m_row(c, inverse, t, &mut m);
        let d = m[0];
        if !(d.is_finite() && d != 0.0) {
            return None;
        }
        let top = (p - 1).min(t);
        mm.fill(0.0);
        for l in 1..=top {
            mm[slot(t - l)] = m[l];
        }
        let inverse_d = 1.0 / d;
        let here = t * p;
        // K(t, t − a) = −(ring row of t − a)·mm/d: one dot product per a. On one thread: split
        // over two (`rayon::join` per step) it ran 2.5× slower at n = 2000, b̂ = 100 and no
        // faster at b̂ = 256, the hand-over costing as much as a step.
        for (a, o) in band[here + 1..=here + top].iter_mut().enumerate() {
            let r = slot(t - (a + 1)) * p;
            *o = -dot(&ring[r..r + p], &mm) * inverse_d;
        }
        let s = dot(&m[1..=top], &band[here + 1..=here + top]);
        let diagonal = (inverse_d - s) * inverse_d;
        band[here] = diagonal;
        value += diagonal;
        if let Some(rows) = rows.as_deref_mut() {
            rows[t] = diagonal;
        }
        let st = slot(t);
        for a in 0..=top {
            let sa = slot(t - a);
            let k = band[here + a];
            ring[st * p + sa] = k;
            ring[sa * p + st] = k;
        }
    }
    if !value.is_finite() {
        return None;
    }
    let Some(gradient) = gradient else {
        return Some(value);
    };
    // Reverse sweep. `ring` again holds the p rows of K before t (refilled from the band as t
    // goes down); `adjoint` accumulates ∂f/∂K(u, v) at [slot(u)][slot(v)] without symmetrizing:
    // the adjoint of K(t, t − a) is the sum of its two entries, complete when t is reached.
    let low = n.saturating_sub(p);
    ring.fill(0.0);
    for u in low..n {
        for x in 0..p.min(u - low + 1) {
            let k = band[u * p + x];
            ring[slot(u) * p + slot(u - x)] = k;
            ring[slot(u - x) * p + slot(u)] = k;
        }
    }
    let mut adjoint = vec![0.0; p * p];
    let mut kbar = vec![0.0; p];
    let mut vv = vec![0.0; p];
    let mut mbar = vec![0.0; p];
    let mut dots = vec![0.0; p];
    for t in (0..n).rev() {
        m_row(c, inverse, t, &mut m);
        let d = m[0];
        let inverse_d = 1.0 / d;
        let top = (p - 1).min(t);
        let here = t * p;
        let st = slot(t);
        kbar[0] = adjoint[st * p + st];
        for (a, kb) in kbar.iter_mut().enumerate().take(top + 1).skip(1) {
            let sa = slot(t - a);
            *kb = adjoint[st * p + sa] + adjoint[sa * p + st];
        }
        for x in 0..p {
            adjoint[st * p + x] = 0.0;
            adjoint[x * p + st] = 0.0;
        }
        let k = &band[here..here + p];
        // K(t, t) = (1/d − Σ_a m_a K(t, t−a))/d, weight 1 in f.
        let g0 = kbar[0] + 1.0;
        let mut dbar = g0 * (-inverse_d * inverse_d * inverse_d - k[0] * inverse_d);
        mbar.fill(0.0);
        for a in 1..=top {
            mbar[a] = -g0 * k[a] * inverse_d;
            kbar[a] -= g0 * m[a] * inverse_d;
        }
        // K(t, t−a) = −v_a/d, v_a = Σ_l m_l K(t−l, t−a).
        vv.fill(0.0);
        for a in 1..=top {
            dbar -= kbar[a] * k[a] * inverse_d;
            vv[slot(t - a)] = -kbar[a] * inverse_d;
        }
        // Per ring row (slot σ, time t − l): mbar[l] += row·vv, adjoint row += m_l·vv.
        dots.fill(0.0);
        for (sigma, (adjoint_row, d)) in
            adjoint.chunks_exact_mut(p).zip(dots.iter_mut()).enumerate()
        {
            let l = (st + p - sigma) % p;
            if l == 0 || l > top {
                continue;
            }
            let r = sigma * p;
            *d = dot(&ring[r..r + p], &vv);
            axpy(m[l], &vv, adjoint_row);
        }
        for l in 1..=top {
            mbar[l] += dots[slot(t - l)];
        }
        mbar[0] = dbar;
        let h = c.width;
        to_encoder_row(&mbar, inverse, t, &mut gradient[t * h..(t + 1) * h]);
        // Step back: time t − p takes the slot of t.
        if t >= p {
            let u = t - p;
            let su = slot(u);
            for x in 0..p {
                let k = band[(u + x) * p + x];
                ring[su * p + slot(u + x)] = k;
                ring[slot(u + x) * p + su] = k;
            }
        } else {
            for x in 0..p {
                ring[st * p + x] = 0.0;
                ring[x * p + st] = 0.0;
            }
        }
    }
    gradient.iter().all(|g| g.is_finite()).then_some(value)
}

/// Rows per parallel chunk of the dense path: fixed, so the sums do not depend on the threads.
const DENSE_CHUNKS: usize = 8;

fn dense(
    a: MatRef<'_, f64>,
    c: &BandRows,
    rows: Option<&mut [f64]>,
    gradient: Option<&mut [f64]>,
) -> Option<f64> {
    let n = c.steps;
    let h = c.width;
    if (0..n).any(|j| !(c.get(j, 0).is_finite() && c.get(j, 0) != 0.0)) {
        return None;
    }
    // Column layout for the back substitution: cols[j·h + t] = C[j + t, j].
    let mut cols = vec![0.0; n * h];
    for i in 0..n {
        for t in 0..h.min(i + 1) {
            cols[(i - t) * h + t] = c.rows[i * h + t];
        }
    }
    let want_gradient = gradient.is_some();
    let per = n.div_ceil(DENSE_CHUNKS).max(1);
    let chunks: Vec<(Vec<f64>, Vec<f64>)> = (0..n.div_ceil(per))
        .into_par_iter()
        .map(|chunk| {
            let mut g = if want_gradient {
                vec![0.0; n * h]
            } else {
                Vec::new()
            };
            let mut norms = Vec::with_capacity(per);
            let mut b = vec![0.0; n];
            let mut e = vec![0.0; n];
            for i in chunk * per..((chunk + 1) * per).min(n) {
                // b C = a_i, j from i down (a_i vanishes beyond i).
                for j in (0..=i).rev() {
                    let m = (h - 1).min(i - j);
                    let total = a[(i, j)] - dot(&cols[j * h + 1..j * h + 1 + m], &b[j + 1..]);
                    b[j] = total / cols[j * h];
                }
                norms.push(dot(&b[..=i], &b[..=i]));
                if want_gradient {
                    // C eᵀ = bᵀ: e_j = (b_j − Σ_{t≥1} C[j, j−t] e_{j−t}) / C[j, j].
                    for j in 0..=i {
                        let row = c.row(j);
                        let mut total = b[j];
                        for t in 1..h.min(j + 1) {
                            total -= row[t] * e[j - t];
                        }
                        e[j] = total / row[0];
                    }
                    for r in 0..=i {
                        let br = -2.0 * b[r];
                        let row = &mut g[r * h..(r + 1) * h];
                        for (t, gt) in row.iter_mut().enumerate().take(r + 1) {
                            *gt += br * e[r - t];
                        }
                    }
                }
            }
            (norms, g)
        })
        .collect();
    let mut value = 0.0;
    let mut all_rows = Vec::with_capacity(n);
    for (norms, _) in &chunks {
        for x in norms {
            value += x;
            all_rows.push(*x);
        }
    }
    if let Some(rows) = rows {
        rows.copy_from_slice(&all_rows);
    }
    if let Some(gradient) = gradient {
        gradient.fill(0.0);
        for (_, g) in &chunks {
            gradient.iter_mut().zip(g).for_each(|(x, y)| *x += y);
        }
        if !gradient.iter().all(|g| g.is_finite()) {
            return None;
        }
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Schedule, Workload};
    use faer::Mat;

    /// A deterministic generator, uniform in `[0, 1)`.
    pub(crate) fn uniform(seed: &mut u64) -> f64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    }

    fn random_band(n: usize, h: usize, seed: &mut u64) -> BandRows {
        let mut c = BandRows::zeros(n, h);
        for i in 0..n {
            for t in 0..h.min(i + 1) {
                c.rows[i * h + t] = if t == 0 {
                    1.0 + uniform(seed)
                } else {
                    0.6 * (uniform(seed) - 0.5)
                };
            }
        }
        c
    }

    fn workloads() -> Vec<Workload> {
        vec![
            Workload::PrefixSum,
            Workload::Momentum {
                momentum: 0.9,
                schedule: Schedule::Constant,
            },
            Workload::Momentum {
                momentum: 0.95,
                schedule: Schedule::Cooldown {
                    steps: 5,
                    final_rate: 0.1,
                },
            },
        ]
    }

    /// Against a dense solve: `‖A C⁻¹‖_F²` and its row norms for the banded-inverse path and
    /// the dense path (the same matrix as a custom workload), over sizes and bands; the
    /// gradient against central differences of the value.
    #[test]
    fn value_rows_and_gradient_match_dense_references() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for workload in workloads() {
            for (n, h) in [(5, 1), (6, 2), (7, 1), (9, 3), (13, 5), (20, 20)] {
                let c = random_band(n, h, &mut seed);
                let a = workload.matrix(n).unwrap();
                let mut inverse = Mat::<f64>::identity(n, n);
                c.to_dense()
                    .solve_lower_triangular_in_place(inverse.as_mut());
                let b = &a * &inverse;
                let custom = Workload::Custom {
                    label: "same".into(),
                    matrix: a.clone(),
                };
                for op in [
                    Operator::new(&workload, n).unwrap(),
                    Operator::new(&custom, n).unwrap(),
                ] {
                    let mut rows = vec![0.0; n];
                    let mut gradient = vec![0.0; n * h];
                    let mut ws = Workspace::default();
                    let value =
                        frobenius(&op, &c, &mut ws, Some(&mut rows), Some(&mut gradient)).unwrap();
                    let expected = b.squared_norm_l2();
                    assert!(
                        (value - expected).abs() <= 1e-10 * expected,
                        "{} n = {n}, h = {h}: {value} vs {expected}",
                        workload.label()
                    );
                    for (i, row) in rows.iter().enumerate() {
                        let e = b.row(i).squared_norm_l2();
                        assert!((row - e).abs() <= 1e-10 * e.max(1.0), "row {i}");
                    }
                    for q in (0..n * h).filter(|q| q % h <= q / h) {
                        let step = 1e-6 * (1.0 + c.rows[q].abs());
                        let mut up = c.clone();
                        up.rows[q] += step;
                        let mut down = c.clone();
                        down.rows[q] -= step;
                        let fu = frobenius(&op, &up, &mut ws, None, None).unwrap();
                        let fd = frobenius(&op, &down, &mut ws, None, None).unwrap();
                        let numeric = (fu - fd) / (2.0 * step);
                        assert!(
                            (numeric - gradient[q]).abs() <= 1e-5 * (1.0 + numeric.abs()),
                            "{} n = {n}, h = {h}, entry {q}: {numeric} vs {}",
                            workload.label(),
                            gradient[q]
                        );
                    }
                    // Entries above the matrix (t > i) have no gradient.
                    assert!(
                        (0..n * h)
                            .filter(|q| q % h > q / h)
                            .all(|q| gradient[q] == 0.0)
                    );
                }
            }
        }
    }

    /// A zero on the diagonal is a refusal, not a number.
    #[test]
    fn a_zero_diagonal_has_no_value() {
        let mut c = random_band(6, 2, &mut 7);
        c.rows[3 * 2] = 0.0;
        for op in [
            Operator::new(&Workload::PrefixSum, 6).unwrap(),
            Operator::Dense(Workload::PrefixSum.matrix(6).unwrap()),
        ] {
            assert!(frobenius(&op, &c, &mut Workspace::default(), None, None).is_none());
        }
    }
}
