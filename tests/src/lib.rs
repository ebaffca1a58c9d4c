//! End-to-end tests live in `tests/tests/`; this library holds what several of them share, and
//! the forged-blob suite every front door is tested with ([`forge`]).

pub mod forge;

/// The clip factor the runtime applies to `x` for clip norm `ζ`, checked against the exact
/// `min(1, ζ/‖x‖)`: the runtime's factor is shrunk by at most `2⁻¹⁵` so that rounding can never
/// lift a clipped row above `ζ` (proven in `runtime/src/clip.rs`, tested against an `f64`
/// reference in `runtime/tests/clip.rs`). Dense references use it so that their comparisons
/// test the decoder, not that margin.
pub fn runtime_clip_factor(x: &[f32], zeta: f64) -> f64 {
    let norm = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>().sqrt();
    let exact = if norm > zeta { zeta / norm } else { 1.0 };
    let factor = f64::from(mfc_runtime::clip_factor(x, zeta as f32));
    assert!(
        factor <= exact && factor >= exact * (1.0 - 2f64.powi(-15)),
        "clip factor {factor} for exact {exact}"
    );
    factor
}

/// The scalar sensitivity of the encoder `c` (given by its rows) under `b`-min-separation with
/// at most `k` participations, by brute force: every set of at most `k` steps any two at least
/// `b` apart, every sign vector on it, and `‖C u‖` formed explicitly — independent of the
/// compiler's dynamic programs, branch and bound and closed forms.
pub fn brute_force_min_separation(c: &[Vec<f64>], k: usize, b: usize) -> f64 {
    let n = c.first().map_or(0, Vec::len);
    let columns: Vec<Vec<f64>> = (0..n)
        .map(|j| c.iter().map(|row| row[j]).collect())
        .collect();
    fn visit(pattern: &mut Vec<usize>, columns: &[Vec<f64>], k: usize, b: usize, worst: &mut f64) {
        if !pattern.is_empty() {
            // u and −u give the same norm: the first sign is +.
            for signs in 0..1u32 << (pattern.len() - 1) {
                let mut image = columns[pattern[0]].clone();
                for (p, &j) in pattern.iter().enumerate().skip(1) {
                    let sign = if signs >> (p - 1) & 1 == 1 { -1.0 } else { 1.0 };
                    for (y, x) in image.iter_mut().zip(&columns[j]) {
                        *y += sign * x;
                    }
                }
                *worst = worst.max(image.iter().map(|y| y * y).sum());
            }
        }
        if pattern.len() == k {
            return;
        }
        let next = pattern.last().map_or(0, |&l| l + b);
        for q in next..columns.len() {
            pattern.push(q);
            visit(pattern, columns, k, b, worst);
            pattern.pop();
        }
    }
    let mut worst = 0.0;
    visit(&mut Vec::new(), &columns, k, b, &mut worst);
    f64::sqrt(worst)
}
