//! Workloads: the lower-triangular matrix `A` whose output `A x` is released.
//!
//! `PrefixSum` is `S`, the lower-triangular matrix of ones (Denisov et al. 2022, App. A, Eq. 10).
//! `Momentum` is heavy-ball momentum SGD with per-step learning rates, `M = M^(η) M^(β)`
//! (003 Prop. 4.2, Eq. 9): the iterates are `θ = −M G` for the gradients `G`. `Custom` is any
//! square, lower-triangular, full-rank `A`, for example read from a `.npy` file written by
//! `numpy.save`. [`post_processed_decoder`] turns a prefix-sum mechanism into one for another
//! workload (003 Table 1, "Opt Prefix Sum": `B̂ = M S⁻¹ B`).

use faer::Mat;

use crate::{Error, Result};

/// The linear map released by a mechanism.
#[derive(Debug, Clone)]
pub enum Workload {
    /// `A = S`: prefix sums.
    PrefixSum,
    /// Heavy-ball momentum with per-step learning rates: `M = M^(η) M^(β)` with
    /// `M^(η)[i,j] = η_j` and `M^(β)[i,j] = β^{i−j}` for `i ≥ j` (003 Prop. 4.2, Eq. 9).
    Momentum {
        /// `β ∈ [0, 1)`.
        momentum: f64,
        /// The learning rates `η_1..η_n` relative to the base rate.
        schedule: Schedule,
    },
    /// Any lower-triangular full-rank `A`, with a label for reports and blobs.
    Custom {
        /// Where the matrix came from.
        label: String,
        /// `A`, `n × n`.
        matrix: Mat<f64>,
    },
}

/// A learning-rate schedule, relative to the base rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// `η_i = 1`.
    Constant,
    /// `η_i = 1` except over the last `steps` steps, where it falls linearly to `final_rate`
    /// (reached at the last step), as in 001 §5 and App. E ("linear cooldown").
    Cooldown {
        /// The number of cooldown steps `m ≥ 1`.
        steps: usize,
        /// The last learning rate, in `(0, 1]`.
        final_rate: f64,
    },
}

impl Schedule {
    /// `η_0..η_{n−1}`.
    pub fn rates(&self, n: usize) -> Result<Vec<f64>> {
        match *self {
            Schedule::Constant => Ok(vec![1.0; n]),
            Schedule::Cooldown { steps, final_rate } => {
                if steps == 0 || steps > n || !(final_rate > 0.0 && final_rate <= 1.0) {
                    return Err(Error::InvalidWorkload(format!(
                        "a cooldown needs 1 ≤ steps ≤ n = {n} and a final rate in (0, 1], got {steps} steps to {final_rate}"
                    )));
                }
                let start = n - steps;
                Ok((0..n)
                    .map(|i| {
                        if i < start {
                            1.0
                        } else {
                            1.0 - (1.0 - final_rate) * (i - start + 1) as f64 / steps as f64
                        }
                    })
                    .collect())
            }
        }
    }
}

impl Workload {
    /// A short description for reports and the blob's label.
    pub fn label(&self) -> String {
        match self {
            Workload::PrefixSum => "prefix sum".into(),
            Workload::Momentum { momentum, schedule } => match schedule {
                Schedule::Constant => format!("momentum {momentum}"),
                Schedule::Cooldown { steps, final_rate } => {
                    format!("momentum {momentum}, cooldown {steps}:{final_rate}")
                }
            },
            Workload::Custom { label, .. } => label.clone(),
        }
    }

    /// The horizon `n` that [`matrix`](Self::matrix) accepts: the requested `n` for
    /// `PrefixSum` (defined for every horizon), the matrix size for `Custom` (fixed by the data).
    pub fn steps(&self, n: usize) -> usize {
        match self {
            Workload::PrefixSum | Workload::Momentum { .. } => n,
            Workload::Custom { matrix, .. } => matrix.nrows(),
        }
    }

    /// `A` for a horizon of `n` steps (for `Custom`, `n` must be its size). Validated.
    pub fn matrix(&self, n: usize) -> Result<Mat<f64>> {
        if n == 0 {
            return Err(Error::InvalidWorkload(
                "the horizon must be at least one step".into(),
            ));
        }
        match self {
            Workload::PrefixSum => Ok(Mat::from_fn(n, n, |i, j| if j <= i { 1.0 } else { 0.0 })),
            Workload::Momentum { momentum, schedule } => {
                if !(0.0..1.0).contains(momentum) {
                    return Err(Error::InvalidWorkload(format!(
                        "momentum must be in [0, 1), got {momentum}"
                    )));
                }
                let rates = schedule.rates(n)?;
                // M[i,j] = Σ_{l=j}^{i} η_l β^{l−j}, column by column: M[i,j] = M[i−1,j] + η_i β^{i−j}.
                let mut m = Mat::zeros(n, n);
                for j in 0..n {
                    let mut power = 1.0;
                    let mut total = 0.0;
                    for i in j..n {
                        total += rates[i] * power;
                        m[(i, j)] = total;
                        power *= momentum;
                    }
                }
                validate(&m)?;
                Ok(m)
            }
            Workload::Custom { matrix, .. } => {
                if matrix.nrows() != n {
                    return Err(Error::InvalidWorkload(format!(
                        "the matrix is {}×{}, not {n}×{n}",
                        matrix.nrows(),
                        matrix.ncols()
                    )));
                }
                validate(matrix)?;
                Ok(matrix.clone())
            }
        }
    }
}

/// The decoder `B̂ = A S⁻¹ B` that releases `A x` from a prefix-sum mechanism `S = B C` with the
/// same encoder (003 §4 and Table 1, "Opt Prefix Sum"): post-processing the private prefix sums.
/// `S⁻¹` is the first-difference operator, so `A S⁻¹` has columns `A[:,j] − A[:,j+1]`.
pub fn post_processed_decoder(a: &Mat<f64>, prefix_decoder: &Mat<f64>) -> Mat<f64> {
    let n = a.nrows();
    let a_s_inverse = Mat::from_fn(n, n, |i, j| {
        a[(i, j)] - if j + 1 < n { a[(i, j + 1)] } else { 0.0 }
    });
    &a_s_inverse * prefix_decoder
}

/// Checks that `a` is square, finite, lower triangular and has a nonzero diagonal (full rank).
pub fn validate(a: &Mat<f64>) -> Result<()> {
    let n = a.nrows();
    if a.ncols() != n || n == 0 {
        return Err(Error::InvalidWorkload(format!(
            "the workload must be square and non-empty, got {}×{}",
            a.nrows(),
            a.ncols()
        )));
    }
    for j in 0..n {
        for i in 0..n {
            let x = a[(i, j)];
            if !x.is_finite() {
                return Err(Error::InvalidWorkload(format!(
                    "entry ({i}, {j}) is not finite"
                )));
            }
            if j > i && x != 0.0 {
                return Err(Error::InvalidWorkload(format!(
                    "entry ({i}, {j}) is above the diagonal: a streaming workload must be lower triangular"
                )));
            }
        }
        if a[(j, j)] == 0.0 {
            return Err(Error::InvalidWorkload(format!(
                "diagonal entry ({j}, {j}) is zero: the workload must be full rank"
            )));
        }
    }
    Ok(())
}

/// Reads a 2-D `float64` or `float32` matrix (C or Fortran order) from a `.npy` file and
/// validates it as a workload.
pub fn read_npy(path: impl AsRef<std::path::Path>) -> Result<Mat<f64>> {
    let path = path.as_ref();
    let a = read_npy_matrix(path)?;
    validate(&a).map_err(|e| Error::InvalidWorkload(format!("{}: {e}", path.display())))?;
    Ok(a)
}

/// Reads a 2-D `float64` or `float32` matrix (C or Fortran order) from a `.npy` file.
pub fn read_npy_matrix(path: impl AsRef<std::path::Path>) -> Result<Mat<f64>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ))
    })?;
    let bad = |why: String| Error::InvalidWorkload(format!("{}: {why}", path.display()));
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| bad(e.to_string()))?;
    let shape = npy.shape().to_vec();
    let [rows, cols] = shape[..] else {
        return Err(bad(format!("expected a 2-D array, got shape {shape:?}")));
    };
    let (rows, cols) = (rows as usize, cols as usize);
    let fortran = npy.order() == npyz::Order::Fortran;
    let values: Vec<f64> = match npy.dtype() {
        npyz::DType::Plain(t) if t.type_char() == npyz::TypeChar::Float && t.size_field() == 8 => {
            npy.into_vec::<f64>().map_err(|e| bad(e.to_string()))?
        }
        npyz::DType::Plain(t) if t.type_char() == npyz::TypeChar::Float && t.size_field() == 4 => {
            npy.into_vec::<f32>()
                .map_err(|e| bad(e.to_string()))?
                .into_iter()
                .map(f64::from)
                .collect()
        }
        other => return Err(bad(format!("expected float64 or float32, got {other:?}"))),
    };
    if values.len() != rows * cols {
        return Err(bad("the data is truncated".into()));
    }
    Ok(Mat::from_fn(rows, cols, |i, j| {
        if fortran {
            values[j * rows + i]
        } else {
            values[i * cols + j]
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::factorize::streaming_factorization;
    use crate::optimize::single::{OptimizeOptions, optimize_single_participation};

    /// `θ = −M G` equals running heavy-ball momentum (003 Algorithm 2) on the same gradients.
    #[test]
    fn momentum_matrix_replays_algorithm_2() {
        let n = 37;
        let workload = Workload::Momentum {
            momentum: 0.9,
            schedule: Schedule::Cooldown {
                steps: 10,
                final_rate: 0.05,
            },
        };
        let m = workload.matrix(n).unwrap();
        let rates = Schedule::Cooldown {
            steps: 10,
            final_rate: 0.05,
        }
        .rates(n)
        .unwrap();
        assert_eq!(rates[26], 1.0);
        assert!((rates[n - 1] - 0.05).abs() < 1e-15 && rates[27] < 1.0);
        let gradients: Vec<f64> = (0..n).map(|i| ((i * 7919) % 13) as f64 - 6.0).collect();
        let (mut velocity, mut theta) = (0.0, 0.0);
        for i in 0..n {
            velocity = 0.9 * velocity + gradients[i];
            theta -= rates[i] * velocity;
            let linear: f64 = (0..n).map(|j| m[(i, j)] * gradients[j]).sum();
            assert!(
                (theta + linear).abs() <= 1e-9 * (1.0 + theta.abs()),
                "step {i}"
            );
        }
        // β = 0 with a constant rate is the prefix sum.
        let s = Workload::Momentum {
            momentum: 0.0,
            schedule: Schedule::Constant,
        }
        .matrix(5)
        .unwrap();
        assert_eq!(s, Workload::PrefixSum.matrix(5).unwrap());
        assert!(
            Workload::Momentum {
                momentum: 1.0,
                schedule: Schedule::Constant
            }
            .matrix(4)
            .is_err()
        );
    }

    /// 003 Fig. 1 (right): for momentum 0.95 the optimal factorization of M beats the optimal
    /// prefix-sum mechanism post-processed into momentum iterates (Table 1, "Opt Prefix Sum"),
    /// by more than the optimizer's certified gap.
    #[test]
    fn optimal_momentum_beats_post_processed_prefix_sums() {
        let n = 512;
        let m = Workload::Momentum {
            momentum: 0.95,
            schedule: Schedule::Constant,
        }
        .matrix(n)
        .unwrap();
        let s = Workload::PrefixSum.matrix(n).unwrap();
        let options = OptimizeOptions::default();
        let optimal = optimize_single_participation(m.as_ref(), &options, &mut |_| {}).unwrap();
        let prefix = optimize_single_participation(s.as_ref(), &options, &mut |_| {}).unwrap();
        // Both X have unit diagonal: sensitivity 1, loss = ‖B‖_F².
        let prefix_decoder = streaming_factorization(s.as_ref(), prefix.x.as_ref())
            .unwrap()
            .decoder;
        let post_processed = post_processed_decoder(&m, &prefix_decoder);
        let post_loss = post_processed.squared_norm_l2();
        // Post-processing is a valid factorization of M: B̂ C = M S⁻¹ B C = M.
        let encoder = streaming_factorization(s.as_ref(), prefix.x.as_ref())
            .unwrap()
            .encoder;
        let product = &post_processed * &encoder;
        assert!((&product - &m).norm_max() <= 1e-8 * m.norm_max());
        eprintln!(
            "momentum 0.95, n = {n}: optimal loss {:.6e} (gap {:.1e}), post-processed prefix sum {post_loss:.6e}",
            optimal.loss, optimal.relative_gap
        );
        assert!(optimal.relative_gap <= 1e-6);
        assert!(optimal.loss * (1.0 + optimal.relative_gap) < post_loss);
        assert!(optimal.dual_bound < post_loss);
    }

    fn npy_bytes(descr: &str, fortran: bool, data: &[u8]) -> Vec<u8> {
        let mut header = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': (2, 2), }}",
            if fortran { "True" } else { "False" }
        );
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn reads_float64_and_float32_in_both_orders() {
        let dir = std::env::temp_dir().join(format!("mfc-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f64s: Vec<u8> = [1.0f64, 0.0, 0.5, 2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let f32s: Vec<u8> = [1.0f32, 0.5, 0.0, 2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        for (name, bytes) in [
            ("c.npy", npy_bytes("<f8", false, &f64s)),
            ("f.npy", npy_bytes("<f4", true, &f32s)),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            let a = read_npy(&path).unwrap();
            assert_eq!(
                (a[(0, 0)], a[(0, 1)], a[(1, 0)], a[(1, 1)]),
                (1.0, 0.0, 0.5, 2.0)
            );
        }
        let upper: Vec<u8> = [1.0f64, 3.0, 0.5, 2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let path = dir.join("upper.npy");
        std::fs::write(&path, npy_bytes("<f8", false, &upper)).unwrap();
        assert!(matches!(read_npy(&path), Err(Error::InvalidWorkload(_))));
        let path = dir.join("short.npy");
        std::fs::write(&path, npy_bytes("<f8", false, &f64s[..20])).unwrap();
        assert!(read_npy(&path).is_err());
        let path = dir.join("ints.npy");
        std::fs::write(&path, npy_bytes("<i8", false, &f64s)).unwrap();
        assert!(read_npy(&path).is_err());
    }

    #[test]
    fn prefix_sum_is_lower_triangular_ones() {
        let s = Workload::PrefixSum.matrix(4).unwrap();
        assert_eq!(s[(3, 0)], 1.0);
        assert_eq!(s[(0, 3)], 0.0);
        assert!(Workload::PrefixSum.matrix(0).is_err());
        assert_eq!(Workload::PrefixSum.steps(7), 7);
        let custom = Workload::Custom {
            label: "diagonal".into(),
            matrix: Mat::identity(3, 3),
        };
        assert_eq!(custom.steps(7), 3);
        assert!(custom.matrix(3).is_ok());
        assert!(custom.matrix(4).is_err());
        let singular = Mat::from_fn(2, 2, |i, j| if (i, j) == (1, 0) { 1.0 } else { 0.0 });
        assert!(matches!(
            validate(&singular),
            Err(Error::InvalidWorkload(_))
        ));
        let mut infinite = Mat::<f64>::identity(2, 2);
        infinite[(1, 0)] = f64::NAN;
        assert!(validate(&infinite).is_err());
        assert!(validate(&Mat::<f64>::zeros(2, 3)).is_err());
    }
}
