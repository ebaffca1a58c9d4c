//! Workloads: the lower-triangular matrix `A` whose output `A x` is released.
//!
//! `PrefixSum` is `S`, the lower-triangular matrix of ones (Denisov et al. 2022, App. A, Eq. 10).
//! `Custom` is any square, lower-triangular, full-rank `A`, for example read from a `.npy` file
//! written by `numpy.save`.

use faer::Mat;

use crate::{Error, Result};

/// The linear map released by a mechanism.
#[derive(Debug, Clone)]
pub enum Workload {
    /// `A = S`: prefix sums.
    PrefixSum,
    /// Any lower-triangular full-rank `A`, with a label for reports and blobs.
    Custom {
        /// Where the matrix came from.
        label: String,
        /// `A`, `n × n`.
        matrix: Mat<f64>,
    },
}

impl Workload {
    /// The horizon `n` that [`matrix`](Self::matrix) accepts: the requested `n` for
    /// `PrefixSum` (defined for every horizon), the matrix size for `Custom` (fixed by the data).
    pub fn steps(&self, n: usize) -> usize {
        match self {
            Workload::PrefixSum => n,
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
    let a = Mat::from_fn(rows, cols, |i, j| {
        if fortran {
            values[j * rows + i]
        } else {
            values[i * cols + j]
        }
    });
    validate(&a).map_err(|e| bad(e.to_string()))?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

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
