//! Independent dense references for the max-error tests (test builds only): the encoder of a
//! decoder by forward substitution written out here, the sensitivity by enumerating every
//! participation pattern and every sign vector (no code of
//! [`crate::privacy::participation`]), and the max error `sens·max_i ‖B[i,:]‖` of a
//! factorization `A = BC` (module docs of [`super`]).

use faer::{Mat, MatRef};

/// `x` as the `f32` a blob stores it, back in `f64`; panics unless `x` is exactly such a value
/// (what ships must be `f32`).
pub fn stored(x: f64) -> f64 {
    let v = x as f32;
    assert_eq!(f64::from(v), x, "{x:e} is not an f32 value");
    f64::from(v)
}

/// `L⁻¹M` for a lower-triangular `L` with non-zero diagonal, by forward substitution column
/// by column.
pub fn solve_lower(l: MatRef<'_, f64>, m: MatRef<'_, f64>) -> Mat<f64> {
    let n = l.nrows();
    let mut x = Mat::<f64>::zeros(n, m.ncols());
    for j in 0..m.ncols() {
        for i in 0..n {
            let mut v = m[(i, j)];
            for t in 0..i {
                v -= l[(i, t)] * x[(t, j)];
            }
            x[(i, j)] = v / l[(i, i)];
        }
    }
    x
}

/// `M L⁻¹` for a lower-triangular `L`: `(L⁻ᵀMᵀ)ᵀ`, by back substitution on each row of `M`.
pub fn right_solve_lower(m: MatRef<'_, f64>, l: MatRef<'_, f64>) -> Mat<f64> {
    let n = l.nrows();
    let mut x = Mat::<f64>::zeros(m.nrows(), n);
    for i in 0..m.nrows() {
        // x L = m[i,:]: x_t = (m_t − Σ_{s>t} x_s L[s,t]) / L[t,t].
        for t in (0..n).rev() {
            let mut v = m[(i, t)];
            for s in t + 1..n {
                v -= x[(i, s)] * l[(s, t)];
            }
            x[(i, t)] = v / l[(t, t)];
        }
    }
    x
}

/// Every non-empty pattern of at most `k` steps below `n`, any two at least `b` apart
/// (min-separation; `k = 1` is single participation), by plain recursion.
pub fn min_separation_patterns(n: usize, k: usize, b: usize) -> Vec<Vec<usize>> {
    fn extend(
        n: usize,
        k: usize,
        b: usize,
        from: usize,
        current: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        for s in from..n {
            current.push(s);
            out.push(current.clone());
            if current.len() < k {
                extend(n, k, b, s + b, current, out);
            }
            current.pop();
        }
    }
    let mut out = Vec::new();
    extend(n, k, b.max(1), 0, &mut Vec::new(), &mut out);
    out
}

/// `(max_π max_{u∈{±1}^π} ‖Σ_{j∈π} u_j c_j‖², max_π Σ_{i,j∈π} |c_iᵀc_j|)` over `patterns`: the
/// squared sensitivity for scalar contributions, and an upper bound on it for contributions of
/// any dimension. When the two agree the sensitivity is determined exactly.
pub fn brute_force_sensitivity2(c: MatRef<'_, f64>, patterns: &[Vec<usize>]) -> (f64, f64) {
    let n = c.nrows();
    let (mut signed, mut absolute) = (0.0f64, 0.0f64);
    for pattern in patterns {
        let p = pattern.len();
        for signs in 0..(1u32 << p) {
            let mut v = vec![0.0; n];
            for (q, &j) in pattern.iter().enumerate() {
                let s = if signs >> q & 1 == 1 { -1.0 } else { 1.0 };
                for (i, vi) in v.iter_mut().enumerate() {
                    *vi += s * c[(i, j)];
                }
            }
            signed = signed.max(v.iter().map(|x| x * x).sum());
        }
        let mut total = 0.0;
        for &i in pattern {
            for &j in pattern {
                total += (0..n).map(|t| c[(t, i)] * c[(t, j)]).sum::<f64>().abs();
            }
        }
        absolute = absolute.max(total);
    }
    (signed, absolute)
}

/// The per-step variances `sens²‖B[i,:]‖²` of a decoder.
pub fn per_step_variance(b: MatRef<'_, f64>, sens: f64) -> Vec<f64> {
    (0..b.nrows())
        .map(|i| sens * sens * (0..b.ncols()).map(|j| b[(i, j)] * b[(i, j)]).sum::<f64>())
        .collect()
}

/// `√max_i v_i`.
pub fn max_stddev(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max).sqrt()
}

/// The prefix-sum matrix `S`.
pub fn prefix(n: usize) -> Mat<f64> {
    Mat::from_fn(n, n, |i, j| if j <= i { 1.0 } else { 0.0 })
}

/// `|x − y| ≤ rel·|y|`.
pub fn close(x: f64, y: f64, rel: f64) -> bool {
    (x - y).abs() <= rel * y.abs()
}
