//! `Mechanism.to_dense()`: the decoder `B̂` and the encoder `Ĉ` of a blob as dense `f64`
//! matrices, from the `f32` coefficients it stores (`formats/SPEC.md`), so that anyone can
//! recompute its sensitivity and error with numpy: `√L = sens(Ĉ)·‖B̂‖_F` (Denisov et al. 2022,
//! Eq. 4), `B̂ Ĉ = A`.
//!
//! - banded+low-rank: `B̂[i, j] = D[i, i−j]` for `i − j < h`, `(L Rᵀ)[i, j]` below the band;
//!   `Ĉ = B̂⁻¹A` by forward substitution.
//! - BandMF: `Ĉ` is stored (banded, `b̂` diagonals); `B̂ = A Ĉ⁻¹`.
//! - BLT: `Ĉ⁻¹` is Toeplitz with first column `r` (`r_0 = 1`, `r_k = Σ_j ω_j θ_j^{k−1}`,
//!   Dvijotham et al. 2024) and `Ĉ` Toeplitz with its inverse series, both as the compiler
//!   computes them ([`Blt::decoder_coefficients`], [`Blt::encoder_coefficients`]); `B̂ = S Ĉ⁻¹`,
//!   the Toeplitz matrix of `r`'s partial sums.
//! - FFT: `B̂` is `n × 2n` (`2m` noise rows per block of `m` steps, Choquette-Choo et al. 2023,
//!   App. K, [`stored_dense_decoder`]) and `Ĉ` (`2n × n`) block-diagonal with the encoder whose
//!   sensitivity the blob records: `B̂†S` for Mechanism 1, `Ŷ E` for the optimal decoder (whose
//!   recorded sensitivity is that of `Ŷ E` divided by `1 − ‖M̂T̂ − I‖₁`).
//!
//! `A` is the prefix sum for prefix-sum blobs; a blob of another workload stores only its label,
//! so its `A` must come from the compile that made it or from the caller.
//!
//! Memory: `n²` floats per matrix, a few at once ([`check_memory`] refuses, with `MemoryError`,
//! a blob whose matrices exceed the machine's memory — `n = 10⁵` needs about 320 GB — and the
//! matrices allocated here are allocated fallibly).

use faer::Mat;
use mfc_compiler::forms::fft::{
    FftKind, autocorrelation, encoder, levinson, pseudo_inverse_encoder, stamp_encoder,
    stored_dense_decoder,
};
use mfc_compiler::optimize::blt::Blt;
use mfc_formats::{BandMfKind, Decoder, F32Table, Validated};

use crate::error::{Error, Result};

fn values(table: F32Table<'_>) -> Vec<f64> {
    table.iter().map(f64::from).collect()
}

/// Dense `n × n` float64 matrices alive at once at the peak of [`to_dense`] for `mechanism`,
/// the two returned arrays included (an FFT blob's `n × 2n` matrices count twice), with one
/// of slack for the workload and the copies into numpy.
fn peak_matrices(mechanism: &Validated<'_>) -> u128 {
    match mechanism.decoder {
        Decoder::Fft(_) => 7,
        _ => 4,
    }
}

/// Refuses (`MemoryError`) a blob whose dense matrices would need more than `limit` bytes (the
/// machine's memory), before anything is allocated: `to_dense` on `n = 10⁵` steps needs about
/// 320 GB.
pub fn check_memory(mechanism: &Validated<'_>, limit: Option<u64>) -> Result<()> {
    let n = u128::from(mechanism.header.steps);
    let matrices = peak_matrices(mechanism);
    let bytes = matrices * n * n * 8;
    match limit {
        Some(limit) if bytes > u128::from(limit) => Err(Error::Memory(format!(
            "to_dense: the dense B̂ and Ĉ of n = {n} steps need about {} ({matrices} n × n \
             float64 matrices at the peak), more than this machine's {} of memory",
            crate::intake::bytes_text(bytes),
            crate::intake::bytes_text(u128::from(limit))
        ))),
        _ => Ok(()),
    }
}

/// `what` is `expected` entries long, else a refusal (a validated blob's tables are; this keeps
/// an indexing mistake from becoming a panic).
fn check_len(what: &str, len: usize, expected: Option<usize>) -> Result<()> {
    if Some(len) == expected {
        Ok(())
    } else {
        Err(Error::Value(format!(
            "to_dense: the blob's {what} has {len} entries, expected {expected:?}"
        )))
    }
}

/// `(B̂, Ĉ)` of `mechanism` for the workload `a` (`n × n`; `None`: the blob's prefix sum).
/// Every matrix this function allocates is allocated fallibly ([`matrix`]); call
/// [`check_memory`] first for the ones the compiler's functions allocate (FFT).
#[allow(non_snake_case)] // the matrices of the papers
pub fn to_dense(mechanism: &Validated<'_>, a: Option<Mat<f64>>) -> Result<(Mat<f64>, Mat<f64>)> {
    let n = mechanism.header.steps as usize;
    let workload = |a: Option<Mat<f64>>| -> Result<Mat<f64>> {
        match (a, mechanism.header.workload) {
            (Some(a), _) if a.nrows() == n && a.ncols() == n => Ok(a),
            (Some(a), _) => Err(Error::Value(format!(
                "workload: a {}×{} matrix, the blob has n = {n} steps",
                a.nrows(),
                a.ncols()
            ))),
            (None, mfc_formats::Workload::PrefixSum) => {
                matrix(n, n, "to_dense", |i, j| if i >= j { 1.0 } else { 0.0 })
            }
            (None, _) => Err(Error::Value(
                "to_dense: the blob's workload is not the prefix sum and a blob stores only its \
                 label; pass workload= (the n × n matrix A)"
                    .into(),
            )),
        }
    };
    match mechanism.decoder {
        Decoder::BandedLowRank(d) => {
            let (h, r) = (d.band as usize, d.rank as usize);
            let (diag, left, right) = (values(d.diagonals), values(d.left), values(d.right));
            check_len("decoder diagonals", diag.len(), n.checked_mul(h))?;
            check_len("decoder left factor", left.len(), n.checked_mul(r))?;
            check_len("decoder right factor", right.len(), n.checked_mul(r))?;
            let B = matrix(n, n, "to_dense", |i, j| {
                if j > i {
                    0.0
                } else if i - j < h {
                    diag[i * h + (i - j)]
                } else {
                    (0..r).map(|k| left[i * r + k] * right[j * r + k]).sum()
                }
            })?;
            let A = workload(a)?;
            let C = forward_solve(&B, &A)?;
            Ok((B, C))
        }
        Decoder::BandMf(d) => {
            let b = d.bands();
            let coefficients = values(d.encoder);
            let toeplitz = matches!(d.kind, BandMfKind::Toeplitz);
            check_len(
                "encoder",
                coefficients.len(),
                if toeplitz { Some(b) } else { n.checked_mul(b) },
            )?;
            let C = matrix(n, n, "to_dense", |i, j| {
                if j > i || i - j >= b {
                    0.0
                } else if toeplitz {
                    coefficients[i - j]
                } else {
                    coefficients[i * b + (i - j)]
                }
            })?;
            let A = workload(a)?;
            // B̂ = A Ĉ⁻¹, i.e. Ĉᵀ B̂ᵀ = Aᵀ: an upper-triangular solve, done as a lower one.
            let Bt = forward_solve_transposed(&C, &A)?;
            drop(A);
            let B = matrix(n, n, "to_dense", |i, j| Bt[(j, i)])?;
            Ok((B, C))
        }
        Decoder::Blt(d) => {
            let blt = Blt {
                theta: values(d.theta),
                omega: values(d.omega),
            };
            let (r, c) = (blt.decoder_coefficients(n), blt.encoder_coefficients(n));
            check_len("decoder series", r.len(), Some(n))?;
            check_len("encoder series", c.len(), Some(n))?;
            // B̂ = S Ĉ⁻¹ with Ĉ⁻¹ Toeplitz (first column r): B̂[i, j] = Σ_{l ≤ i−j} r_l, the
            // Toeplitz matrix of r's partial sums.
            let partial: Vec<f64> = r
                .iter()
                .scan(0.0, |sum, v| {
                    *sum += v;
                    Some(*sum)
                })
                .collect();
            let B = matrix(
                n,
                n,
                "to_dense",
                |i, j| {
                    if i >= j { partial[i - j] } else { 0.0 }
                },
            )?;
            let C = matrix(n, n, "to_dense", |i, j| if i >= j { c[i - j] } else { 0.0 })?;
            Ok((B, C))
        }
        Decoder::Fft(d) => {
            let kind = match d.kind {
                mfc_formats::FftKind::Circulant => FftKind::Circulant,
                _ => FftKind::OptimalDecoder,
            };
            let (kernel, generator): (Vec<f32>, Vec<f32>) =
                (d.kernel.iter().collect(), d.generator.iter().collect());
            let stamps = d.stamps as usize;
            // The compiler's functions allocate these (n × 2n and 2n × n): `check_memory` has
            // refused a blob whose matrices exceed the machine's memory.
            let B = stored_dense_decoder(kind, stamps, &kernel, &generator);
            let y = values(d.kernel);
            // The encoder whose sensitivity the blob records: for Mechanism 1 the minimum-norm
            // one of the stored decoder, B̂†S, from the generator of T̂ = B̂B̂ᵀ; for the optimal
            // decoder Ŷ E (its sensitivity then divided by 1 − ‖M̂T̂ − I‖₁).
            let block = match kind {
                FftKind::Circulant => {
                    let x = levinson(&autocorrelation(&y)).map_err(Error::Compiler)?;
                    pseudo_inverse_encoder(&y, &x)
                }
                _ => encoder(&y),
            };
            let C = stamp_encoder(&block, stamps);
            Ok((B, C))
        }
        _ => Err(Error::Runtime(mfc_runtime::Error::UnsupportedDecoder)),
    }
}

/// A `rows × cols` matrix filled by `f`, allocated fallibly ([`intake::matrix`]).
fn matrix(
    rows: usize,
    cols: usize,
    what: &str,
    f: impl FnMut(usize, usize) -> f64,
) -> Result<Mat<f64>> {
    crate::intake::matrix(rows, cols, what, None, f)
}

/// `X` with `L X = Y`, `L` lower triangular with a non-zero diagonal.
#[allow(non_snake_case)]
fn forward_solve(L: &Mat<f64>, Y: &Mat<f64>) -> Result<Mat<f64>> {
    let n = L.nrows();
    let mut X = matrix(n, Y.ncols(), "to_dense", |_, _| 0.0)?;
    for col in 0..Y.ncols() {
        for i in 0..n {
            let mut v = Y[(i, col)];
            for k in 0..i {
                v -= L[(i, k)] * X[(k, col)];
            }
            X[(i, col)] = v / L[(i, i)];
        }
    }
    Ok(X)
}

/// `X` with `Lᵀ X = Yᵀ`, i.e. `Xᵀ = Y L⁻¹`, for `L` lower triangular with a non-zero diagonal.
#[allow(non_snake_case)]
fn forward_solve_transposed(L: &Mat<f64>, Y: &Mat<f64>) -> Result<Mat<f64>> {
    let n = L.nrows();
    let rows = Y.nrows();
    // Row q of Y L⁻¹: x with xᵀ L = yᵀ, solved from the last column back.
    let mut X = matrix(n, rows, "to_dense", |_, _| 0.0)?;
    for q in 0..rows {
        for j in (0..n).rev() {
            let mut v = Y[(q, j)];
            for k in j + 1..n {
                v -= X[(k, q)] * L[(k, j)];
            }
            X[(j, q)] = v / L[(j, j)];
        }
    }
    Ok(X)
}
