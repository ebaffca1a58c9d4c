//! Small dense helpers shared by the optimizer and the compressor (matrices of a few rows, where
//! calling into faer costs more than the arithmetic).

/// Solves `(G + ridge·I) y = b` for a small symmetric `G`; `None` if not positive definite.
pub(crate) fn cholesky_solve(g: &[f64], b: &[f64], ridge: f64) -> Option<Vec<f64>> {
    let m = b.len();
    let mut l = vec![0.0; m * m];
    for i in 0..m {
        for j in 0..=i {
            let mut s = g[i * m + j] + if i == j { ridge } else { 0.0 };
            for k in 0..j {
                s -= l[i * m + k] * l[j * m + k];
            }
            if i == j {
                if s.is_nan() || s <= 0.0 {
                    return None;
                }
                l[i * m + i] = s.sqrt();
            } else {
                l[i * m + j] = s / l[j * m + j];
            }
        }
    }
    let mut y = b.to_vec();
    for i in 0..m {
        for k in 0..i {
            y[i] -= l[i * m + k] * y[k];
        }
        y[i] /= l[i * m + i];
    }
    for i in (0..m).rev() {
        for k in i + 1..m {
            y[i] -= l[k * m + i] * y[k];
        }
        y[i] /= l[i * m + i];
    }
    y.iter().all(|x| x.is_finite()).then_some(y)
}

/// `Σ_m f_m` for `items` vectors of length `len`, each added by `add(acc, m)`, in parallel and
/// with the same bits on every run: the items are cut into at most 32 contiguous chunks, each
/// summed in order, and the chunks' sums are added in order (a rayon `fold`/`reduce` splits
/// where threads steal work, so its rounding, and a compiled blob's bytes, would vary from run
/// to run).
pub(crate) fn ordered_parallel_sum(
    items: usize,
    len: usize,
    add: impl Fn(&mut [f64], usize) + Sync,
) -> Vec<f64> {
    use rayon::prelude::*;
    const CHUNKS: usize = 32;
    let per = items.div_ceil(CHUNKS).max(1);
    let partials: Vec<Vec<f64>> = (0..items.div_ceil(per))
        .into_par_iter()
        .map(|chunk| {
            let mut acc = vec![0.0; len];
            for m in chunk * per..((chunk + 1) * per).min(items) {
                add(&mut acc, m);
            }
            acc
        })
        .collect();
    let mut total = vec![0.0; len];
    for partial in &partials {
        total.iter_mut().zip(partial).for_each(|(t, x)| *t += x);
    }
    total
}
