//! The refinement of a banded-plus-low-rank decoder on the loss that ships, with every product
//! taken through the structure of `B̂` (`O(n²·(h + r))` per evaluation, no `O(n³)` step).
//!
//! The loss of a decoder `B̂` with the optimal encoder `Ĉ = B̂⁻¹A` (000 App. H) is
//! `sens(Ĉ)²‖B̂‖_F²`, the sensitivity a maximum over participation patterns `π` of
//! `q_π = Σ_{i,j∈π} |X_ij|`, `X = ĈᵀĈ` (exact for the orthogonal and non-negative cases, an upper
//! bound otherwise; for single participation `q_j = ‖ĉ_j‖²`, 003 Eq. 2). The surrogate replaces
//! the maximum by the `p`-norm `s_p² = (Σ_π q_π^p)^{1/p}` over a set `P` of patterns; its
//! gradient with respect to the lower triangle of `B̂` is
//! `−2‖B̂‖_F² B̂^{-T} Ĉ W Ĉᵀ + 2 s_p² B̂`, `W = Σ_π (q_π/s_p²)^{p−1} sign(X[π,π])`
//! (from `dq_π = 2⟨Ĉ sign(X[π,π]), dĈ⟩` and `dĈ = −B̂⁻¹ dB̂ Ĉ`).
//!
//! None of it needs a dense `n × n` product. With `Z = B̂^{-T}(ĈW)`:
//!
//! - `Ĉ` and `Z` are `n` triangular solves with `B̂` and `B̂ᵀ`, `O(n·(h + 2r))` each
//!   ([`BandedLowRank::solve_in_place`]: the recursion of Algorithm 3);
//! - `X` is needed on the pairs the patterns hold only (`n` for single participation,
//!   `n·(2k − 1)` for fixed epoch order), and `W` is supported there, so `ĈW` is sparse;
//! - the gradient with respect to the stored parameters contracts `ZĈᵀ` with the structure:
//!   `∂/∂D[i,k] = (ZĈᵀ)[i, i−k]`, `∂/∂L_i = Σ_{j ≤ i−h} (ZĈᵀ)[i,j] R_j` and
//!   `∂/∂R_j = Σ_{i ≥ j+h} (ZĈᵀ)[i,j] L_i`, each a running (prefix or suffix) sum over one
//!   column of `Z` and `Ĉ` at a time, and `‖B̂‖_F²` and its gradient are `O(n·r²)`
//!   ([`BandedLowRank::squared_frobenius`]).
//!
//! The dense formulation cost several `O(n³)` products per evaluation (about 40 GFlop at
//! n = 2048); this one is linear in the `n²` entries of `Ĉ`.

use std::collections::HashMap;

use faer::{Mat, MatRef};
use rayon::prelude::*;

use crate::forms::banded::compress::{BandedLowRank, add_outer_product};
use crate::privacy::participation::search::max_pattern_quadratic;
use crate::privacy::participation::{Participation, min_separation_search, sensitivity};
use crate::{Error, Result};

/// The pairs `(i, j)`, `i ≤ j`, of `X = ĈᵀĈ` a set of patterns reads, each once.
pub(crate) struct PatternPairs {
    /// The distinct pairs, `i ≤ j`.
    pairs: Vec<(usize, usize)>,
    /// For every pattern, its pairs as `(index into pairs, multiplicity in Σ_{i,j∈π})`.
    patterns: Vec<Vec<(usize, f64)>>,
    /// For every column `j` of `ĈW`: the columns `i` of `Ĉ` it adds, with the pair of `W_ij`.
    by_column: Vec<Vec<(usize, usize)>>,
}

impl PatternPairs {
    pub(crate) fn new(n: usize, patterns: &[Vec<usize>]) -> Self {
        let mut index: HashMap<(usize, usize), usize> = HashMap::new();
        let mut pairs = Vec::new();
        let patterns = patterns
            .iter()
            .map(|pattern| {
                let mut out = Vec::with_capacity(pattern.len() * (pattern.len() + 1) / 2);
                for (a, &p) in pattern.iter().enumerate() {
                    for &q in &pattern[a..] {
                        let key = (p.min(q), p.max(q));
                        let next = pairs.len();
                        let at = *index.entry(key).or_insert(next);
                        if at == next {
                            pairs.push(key);
                        }
                        out.push((at, if p == q { 1.0 } else { 2.0 }));
                    }
                }
                out
            })
            .collect();
        let mut by_column = vec![Vec::new(); n];
        for (at, &(i, j)) in pairs.iter().enumerate() {
            by_column[j].push((i, at));
            if i != j {
                by_column[i].push((j, at));
            }
        }
        Self {
            pairs,
            patterns,
            by_column,
        }
    }
}

/// The surrogate at one decoder.
pub(crate) struct Evaluation {
    /// `max_{π∈P} q_π·‖B̂‖_F²`: the shipped loss when `P` holds every maximal pattern.
    pub(crate) pattern_loss: f64,
    /// `s_p²‖B̂‖_F²`.
    pub(crate) value: f64,
    /// With respect to the parameters in the order of [`parameters`].
    pub(crate) gradient: Vec<f64>,
}

impl crate::optimize::lbfgs::Point for Evaluation {
    fn value(&self) -> f64 {
        self.value
    }
    fn gradient(&self) -> &[f64] {
        &self.gradient
    }
}

/// The stored parameters `(D, L, R)` as one vector.
pub(crate) fn parameters(d: &BandedLowRank) -> Vec<f64> {
    [&d.diagonals[..], &d.left, &d.right].concat()
}

/// The decoder of the same shape with parameters `x` (as [`parameters`]).
pub(crate) fn with_parameters(d: &BandedLowRank, x: &[f64]) -> BandedLowRank {
    let (diagonals, rest) = x.split_at(d.diagonals.len());
    let (left, right) = rest.split_at(d.left.len());
    BandedLowRank {
        diagonals: diagonals.to_vec(),
        left: left.to_vec(),
        right: right.to_vec(),
        ..d.clone()
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The smooth maximum `s_p²` of the sensitivity terms over the patterns of `pairs` and the
/// contraction of the module docs, `−½ ∂s_p²/∂θ` for the parameters `θ` in the order of
/// [`parameters`]: the part of [`evaluate`] that does not depend on the error term, also used
/// by [`crate::max_error::banded_low_rank`] with the max error in place of `‖B̂‖_F²`.
pub(crate) struct Surrogate {
    /// `max_{π∈P} q_π`.
    pub(crate) top: f64,
    /// `s_p²`.
    pub(crate) s2: f64,
    /// `−½ ∂s_p²/∂θ`.
    pub(crate) contraction: Vec<f64>,
}

/// The surrogate over the patterns of `pairs` with exponent `p`, its pattern loss and its
/// gradient (module docs).
pub(crate) fn evaluate(
    a: MatRef<'_, f64>,
    decoder: &BandedLowRank,
    pairs: &PatternPairs,
    p: f64,
) -> Result<Evaluation> {
    let (n, h, r) = (decoder.steps, decoder.band, decoder.rank);
    let frob = decoder.squared_frobenius();
    let Surrogate {
        top,
        s2,
        contraction,
    } = sensitivity_surrogate(a, decoder, pairs, p)?;
    if !(top * frob).is_finite() {
        return Err(Error::Numerical("the refined decoder is degenerate".into()));
    }
    let (nd, nl) = (n * h, n * r);

    // ∂‖B̂‖_F²/2: D itself, (Σ_{j ≤ i−h} R_j R_jᵀ) L_i and (Σ_{i ≥ j+h} L_i L_iᵀ) R_j.
    let mut own = vec![0.0; nd + 2 * nl];
    for i in 0..n {
        for k in 0..h.min(i + 1) {
            own[i * h + k] = decoder.diagonals[i * h + k];
        }
    }
    if r > 0 {
        let mut gram = vec![0.0; r * r];
        for i in h..n {
            add_outer_product(&mut gram, &decoder.right[(i - h) * r..(i - h + 1) * r]);
            let li = &decoder.left[i * r..(i + 1) * r];
            for p in 0..r {
                own[nd + i * r + p] = dot(&gram[p * r..(p + 1) * r], li);
            }
        }
        gram.fill(0.0);
        for j in (0..n.saturating_sub(h)).rev() {
            add_outer_product(&mut gram, &decoder.left[(j + h) * r..(j + h + 1) * r]);
            let rj = &decoder.right[j * r..(j + 1) * r];
            for p in 0..r {
                own[nd + nl + j * r + p] = dot(&gram[p * r..(p + 1) * r], rj);
            }
        }
    }
    let gradient: Vec<f64> = contraction
        .iter()
        .zip(&own)
        .map(|(g, o)| -2.0 * frob * g + 2.0 * s2 * o)
        .collect();
    if !gradient.iter().all(|g| g.is_finite()) {
        return Err(Error::Numerical("the refined decoder is degenerate".into()));
    }
    Ok(Evaluation {
        pattern_loss: top * frob,
        value: s2 * frob,
        gradient,
    })
}

/// [`Surrogate`] at `decoder`: `s_p²` over the patterns of `pairs` and its contraction
/// (module docs).
pub(crate) fn sensitivity_surrogate(
    a: MatRef<'_, f64>,
    decoder: &BandedLowRank,
    pairs: &PatternPairs,
    p: f64,
) -> Result<Surrogate> {
    let (n, h, r) = (decoder.steps, decoder.band, decoder.rank);
    let c = decoder.encoder(a)?;
    let column = |j: usize| &c[j * n..(j + 1) * n];
    let x: Vec<f64> = pairs
        .pairs
        .par_iter()
        .map(|&(i, j)| dot(column(i), column(j)))
        .collect();
    let q: Vec<f64> = pairs
        .patterns
        .iter()
        .map(|pattern| pattern.iter().map(|&(at, m)| m * x[at].abs()).sum())
        .collect();
    let top = q.iter().copied().fold(0.0, f64::max);
    let s2 = top
        * q.iter()
            .map(|v| (v / top).powf(p))
            .sum::<f64>()
            .powf(1.0 / p);
    if !top.is_finite() || top <= 0.0 || !s2.is_finite() {
        return Err(Error::Numerical("the refined decoder is degenerate".into()));
    }
    // W on the pairs: Σ over the patterns holding a pair of their weight, times sign(X_ij).
    let mut w = vec![0.0; pairs.pairs.len()];
    for (pattern, qp) in pairs.patterns.iter().zip(&q) {
        let weight = (qp / s2).powf(p - 1.0);
        if weight < 1e-300 {
            continue;
        }
        for &(at, _) in pattern {
            w[at] += weight;
        }
    }
    w.iter_mut().zip(&x).for_each(|(w, x)| *w *= x.signum());
    // Z = B̂^{-T} (Ĉ W), column by column.
    let mut z = vec![0.0; n * n];
    z.par_chunks_mut(n).enumerate().for_each(|(j, out)| {
        for &(i, at) in &pairs.by_column[j] {
            let weight = w[at];
            if weight != 0.0 {
                out.iter_mut()
                    .zip(column(i))
                    .for_each(|(o, c)| *o += weight * c);
            }
        }
        decoder.solve_transposed_in_place(out);
    });
    // The contraction of Z Ĉᵀ with the structure, one column m of Z and Ĉ at a time.
    let (nd, nl) = (n * h, n * r);
    let contraction = crate::optimize::linalg::ordered_parallel_sum(n, nd + 2 * nl, |acc, m| {
        let (zc, cc) = (&z[m * n..(m + 1) * n], column(m));
        let first = cc.iter().position(|&v| v != 0.0).unwrap_or(n);
        let (gd, rest) = acc.split_at_mut(nd);
        let (gl, gr) = rest.split_at_mut(nl);
        for i in first..n {
            let zi = zc[i];
            for k in 0..h.min(i - first + 1) {
                gd[i * h + k] += zi * cc[i - k];
            }
        }
        if r > 0 {
            let mut running = vec![0.0; r];
            for i in first + h..n {
                let j = i - h;
                let rj = &decoder.right[j * r..(j + 1) * r];
                running
                    .iter_mut()
                    .zip(rj)
                    .for_each(|(s, v)| *s += cc[j] * v);
                let zi = zc[i];
                gl[i * r..(i + 1) * r]
                    .iter_mut()
                    .zip(&running)
                    .for_each(|(g, s)| *g += zi * s);
            }
            running.fill(0.0);
            for j in (first..n).rev() {
                if j + h < n {
                    let i = j + h;
                    let li = &decoder.left[i * r..(i + 1) * r];
                    running
                        .iter_mut()
                        .zip(li)
                        .for_each(|(s, v)| *s += zc[i] * v);
                }
                let cj = cc[j];
                gr[j * r..(j + 1) * r]
                    .iter_mut()
                    .zip(&running)
                    .for_each(|(g, s)| *g += cj * s);
            }
        }
    });
    Ok(Surrogate {
        top,
        s2,
        contraction,
    })
}

/// A decoder measured for the refinement: its shipped loss and, under min-separation, the
/// worst pattern the search found.
pub(crate) struct Measured {
    /// `sens(Ĉ)²‖B̂‖_F²` under the schema, with `Ĉ` from the structured solve (for choosing
    /// between candidates; the compile measures what ships again, densely). Under
    /// min-separation the pattern search has
    /// [`REFINE_SEARCH_BUDGET`](super::REFINE_SEARCH_BUDGET) (an upper bound where it runs out).
    pub loss: f64,
    /// Under min-separation, the pattern of the largest `|X|`-quadratic the same search found
    /// (the next pattern of the refinement's active set); `None` for the other schemas.
    pub worst: Option<Vec<usize>>,
}

/// [`Measured`] for `decoder`: one solve for its encoder, one Gram matrix and, under
/// min-separation, one pattern search for both the loss and the worst pattern.
pub(crate) fn measure(
    a: MatRef<'_, f64>,
    decoder: &BandedLowRank,
    participation: &Participation,
) -> Result<Measured> {
    let n = decoder.steps;
    let c = decoder.encoder(a)?;
    let c = MatRef::from_column_major_slice(&c, n, n);
    let (s, worst) = match *participation {
        Participation::MinSeparation {
            max_participations: k,
            min_separation: b,
        } => {
            let x = c.transpose() * c;
            let (s, found) = min_separation_search(x.as_ref(), k, b, super::REFINE_SEARCH_BUDGET)?;
            // Orthogonal columns take the dynamic program, which names no pattern: search.
            let worst = found.unwrap_or_else(|| {
                let absolute = Mat::from_fn(n, n, |i, j| x[(i, j)].abs());
                max_pattern_quadratic(absolute.as_ref(), k, b, super::REFINE_SEARCH_BUDGET).pattern
            });
            (s, Some(worst))
        }
        _ => (sensitivity(c, participation)?, None),
    };
    if !(s.value.is_finite() && s.value > 0.0) {
        return Err(Error::Numerical(format!(
            "the decoder's encoder has sensitivity {}",
            s.value
        )));
    }
    Ok(Measured {
        loss: s.value * s.value * decoder.squared_frobenius(),
        worst,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::sensitivity::encoder_for_decoder;

    /// A seeded uniform generator on `[-0.5, 0.5)`.
    fn uniform(seed: u64) -> impl FnMut() -> f64 {
        let mut state = seed;
        move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        }
    }

    fn random_decoder(n: usize, h: usize, r: usize, seed: u64) -> BandedLowRank {
        let mut rand = uniform(seed);
        BandedLowRank {
            steps: n,
            band: h,
            rank: r,
            diagonals: (0..n * h)
                .map(|idx| match idx % h {
                    0 => 1.0 + rand().abs(),
                    k if k <= idx / h => 0.3 * rand(),
                    _ => 0.0,
                })
                .collect(),
            left: (0..n * r)
                .map(|idx| {
                    if idx / r.max(1) >= h {
                        0.2 * rand()
                    } else {
                        0.0
                    }
                })
                .collect(),
            right: (0..n * r)
                .map(|idx| {
                    if idx / r.max(1) + h < n {
                        0.2 * rand()
                    } else {
                        0.0
                    }
                })
                .collect(),
        }
    }

    /// The structured solves, encoder and Frobenius norm against the dense matrix `B̂`.
    #[test]
    fn structured_products_match_the_dense_decoder() {
        for (n, h, r) in [(1, 1, 0), (7, 1, 2), (12, 3, 2), (20, 4, 0), (33, 5, 4)] {
            let d = random_decoder(n, h, r, 3 + n as u64);
            let dense = d.to_dense();
            let a = Mat::from_fn(n, n, |i, j| {
                if j <= i {
                    1.0 + (i * j % 5) as f64
                } else {
                    0.0
                }
            });
            let c = d.encoder(a.as_ref()).unwrap();
            let reference = encoder_for_decoder(a.as_ref(), dense.as_ref()).unwrap();
            let scale = reference.norm_max().max(1.0) * n as f64 * f64::EPSILON * 64.0;
            for j in 0..n {
                for i in 0..n {
                    assert!(
                        (c[j * n + i] - reference[(i, j)]).abs() <= scale,
                        "({i}, {j})"
                    );
                }
            }
            let mut rand = uniform(9);
            let w: Vec<f64> = (0..n).map(|_| rand()).collect();
            let mut z = w.clone();
            d.solve_transposed_in_place(&mut z);
            let back = dense.transpose() * MatRef::from_column_major_slice(&z, n, 1);
            for i in 0..n {
                assert!((back[(i, 0)] - w[i]).abs() <= 1e-12 * (1.0 + w[i].abs()));
            }
            let frob = dense.squared_norm_l2();
            assert!((d.squared_frobenius() - frob).abs() <= 1e-12 * frob);
        }
    }

    /// The surrogate's gradient against central finite differences of its value, for single
    /// participation and fixed epoch order, and its pattern loss against the dense definition.
    #[test]
    fn gradient_matches_finite_differences() {
        let (n, h, r) = (14, 3, 2);
        let a = Mat::from_fn(n, n, |i, j| if j <= i { 1.0 } else { 0.0 });
        let start = random_decoder(n, h, r, 17);
        for participation in [
            Participation::Single,
            Participation::fixed_epoch_order(3, 4).unwrap(),
        ] {
            let patterns = participation.maximal_patterns(n, usize::MAX).unwrap();
            let pairs = PatternPairs::new(n, &patterns);
            let e = evaluate(a.as_ref(), &start, &pairs, 8.0).unwrap();
            let dense = start.to_dense();
            let c = encoder_for_decoder(a.as_ref(), dense.as_ref()).unwrap();
            let x = c.transpose() * &c;
            let worst = patterns
                .iter()
                .map(|pi| {
                    pi.iter()
                        .flat_map(|&i| pi.iter().map(move |&j| (i, j)))
                        .map(|(i, j)| x[(i, j)].abs())
                        .sum::<f64>()
                })
                .fold(0.0, f64::max);
            let expected = worst * dense.squared_norm_l2();
            assert!((e.pattern_loss - expected).abs() <= 1e-10 * expected);
            let x0 = parameters(&start);
            for p in [8.0, 256.0] {
                let e = evaluate(a.as_ref(), &start, &pairs, p).unwrap();
                for index in 0..x0.len() {
                    let step = 1e-6;
                    let value = |delta: f64| {
                        let mut y = x0.clone();
                        y[index] += delta;
                        evaluate(a.as_ref(), &with_parameters(&start, &y), &pairs, p)
                            .unwrap()
                            .value
                    };
                    let fd = (value(step) - value(-step)) / (2.0 * step);
                    assert!(
                        (fd - e.gradient[index]).abs() <= 1e-6 * (1.0 + fd.abs()),
                        "{participation:?}, p = {p}, parameter {index}: finite difference \
                         {fd}, gradient {}",
                        e.gradient[index]
                    );
                }
            }
        }
    }
}
