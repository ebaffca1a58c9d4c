//! The FFT mechanisms for prefix sums (Choquette-Choo et al. 2023, 001 §4, App. C, J, K): no
//! optimization, a closed-form encoder, and noise for a block of `m` steps in `O(m log m)`.
//!
//! With `v = (1,…,1, 0,…,0) ∈ ℝ^{2m}` (001 Eq. 37) the circulant `A_circ = F*ΣF`,
//! `Σ = diag(v^DFT)` (Thm J.1), contains the prefix sum `S` as its top-left block. The principal
//! square root `Y = F*√Σ F` is a real circulant (Lem. K.1) with first column `y`, the **kernel**;
//! its spectrum is known in closed form (001 Eq. 44–45): `v^DFT[0] = m`, zero at the other even
//! frequencies, and `e^{i(πk/2m − π/2)}/sin(πk/2m)` at odd `k`. Both mechanisms share the
//! encoder `C_F = Y E` (`2m × m`, the first `m` columns of `Y`):
//!
//! - **Mechanism 1** (App. K, the real form of Algorithm 1): `B_F = P Y`, the first `m` rows of
//!   `Y`; its noise `(B_F z)_r = Σ_j y_{(r−j) mod 2m} z_j` is a circular convolution.
//! - **Mechanism 2**, the optimal FFT decoder (App. K, Prop. K.2): `B = S C_F† = S T⁻¹ C_Fᵀ`
//!   with the symmetric positive-definite Toeplitz `T = C_FᵀC_F` (first column `t` = the circular
//!   autocorrelation of `y`). We solve `T` **exactly in `O(m²)`** by Levinson–Durbin (one step of
//!   iterative refinement), which yields the Gohberg–Semencul generator `x = T⁻¹e₀`:
//!   `T⁻¹ = (L(x)L(x)ᵀ − L(x̃)L(x̃)ᵀ)/x₀`, `x̃ = (0, x_{m−1}, …, x₁)`, with `L(·)` lower-triangular
//!   Toeplitz. That gives `T⁻¹u` in `O(m log m)` (four triangular Toeplitz products, each an FFT
//!   convolution) on the device, and every entry of `T⁻¹` by Trench's recursion
//!   `T⁻¹[i,j] = T⁻¹[i−1,j−1] + (x_i x_j − x̃_i x̃_j)/x₀` in `O(1)` here, so the error
//!   `‖B‖_F² = Σ_{a,b} (m − max(a,b)) T⁻¹[a,b]` costs `O(m²)` without storing `T⁻¹` (n = 10⁴: a
//!   few seconds; the paper reports 146 min for a dense pseudoinverse on a V100).
//!
//! **Stamping** `×s` (001 App. D.4): `n = s·m`, the encoder `blockdiag(C_F, …, C_F)`. For
//! Mechanism 2 the optimal decoder of the stamped encoder is `S_n·blockdiag(T⁻¹C_Fᵀ)`: each
//! block's noise `ξ = T⁻¹C_Fᵀz` is summed into one running prefix sum. Mechanism 1 is stamped with
//! its restarted decoder (each block's `B_F z` plus the last value of every earlier block): the
//! same "block noise plus carry" form, so the runtime replays both the same way.
//!
//! **Sensitivity.** Table 1 of 001 evaluates the exact (`f64`) mechanisms with the encoder `C_F`:
//! [`FftMechanism::paper_loss`]. What ships is the `f32` kernel `ŷ` (and generator `x̂`), and, as
//! for every blob, the recorded sensitivity is that of an encoder `Ĉ` with `B̂Ĉ = S` exactly for
//! the stored decoder `B̂`, under the declared participation, through
//! [`participation::sensitivity`](crate::privacy::participation::sensitivity) (001 Eq. 3 where it is exact,
//! else the smaller of the absolute-Gram and Thm 2.1 bounds):
//!
//! - Mechanism 1: `Ĉ = B̂†S` per block, Gram `SᵀT̂⁻¹S` with `T̂ = B̂B̂ᵀ` (the autocorrelation
//!   Toeplitz of `ŷ`); for single participation its largest diagonal entry is the largest
//!   leading-block sum of `T̂⁻¹` (persymmetry), in `O(m²)`.
//! - Mechanism 2: with `M̂` the Gohberg–Semencul matrix of the stored `x̂` and `E = M̂T̂ − I`,
//!   `Ĉ = ŶE(M̂T̂)⁻¹` has Gram `M̂⁻¹T̂⁻¹M̂⁻¹`, and for every `u`,
//!   `uᵀM̂⁻¹T̂⁻¹M̂⁻¹u ≤ uᵀT̂u / (1 − ρ(E))²` (`T̂^{1/2}M̂T̂^{1/2} − I` is symmetric and similar to
//!   `E`), so `sens(Ĉ) ≤ sens(ŶE)/(1 − ‖E‖₁)`: we compute `‖E‖₁` column by column with FFTs
//!   (`O(m² log m)`) and record the bound.
//!
//! Under `k` participations of any pattern, `sens ≤ k·sens₁` (001 Thm 4.1: `k²ρ`-zCDP):
//! [`k_participation_sensitivity`].

use faer::Mat;
use mfc_formats::SensitivityMethod;

use crate::privacy::participation::{Participation, sensitivity};
use crate::ship::blob::{BlobOptions, Shipped, Written, step_stddev, steps_u32, table, write};
use crate::{Error, Result};
use mfc_formats::{Decoder, Workload as StoredWorkload};

/// The two real-valued FFT mechanisms of 001 App. K.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FftKind {
    /// Mechanism 1: `B_F = P Y`, the real form of Algorithm 1; `O(m log m)` noise per block.
    Circulant,
    /// Mechanism 2: the optimal decoder `B = S C_F†` for the same encoder.
    OptimalDecoder,
}

/// `‖v^DFT‖₁ = m + Σ_{a=0}^{m−1} 1/sin(π(2a+1)/(2m))` (001 Cor. J.1, Eq. 45–46; the sum runs
/// over all `m` odd frequencies below `2m`).
pub fn dft_l1_norm(m: usize) -> f64 {
    let mf = m as f64;
    mf + (0..m)
        .map(|a| 1.0 / (core::f64::consts::PI * (2 * a + 1) as f64 / (2.0 * mf)).sin())
        .sum::<f64>()
}

/// The single-participation loss of Mechanism 1 in closed form, `L = ‖v^DFT‖₁²/(4m)`.
///
/// Every column of `C_F` and every row of `B_F` is a cyclic shift of `y`, and by Parseval
/// `‖y‖² = Σ_k |v^DFT[k]|/(2m) = ‖v^DFT‖₁/(2m)`, so `L = sens²·‖B_F‖_F² = m‖y‖⁴`. At a
/// `ρ`-zCDP calibration (`σ² = κ²sens²/(2ρ)`) the mean squared error per step of the released
/// real part is `κ²L/(2ρm) = κ²‖v^DFT‖₁²/(8ρm²)`: the quantity of 001 Thm J.3 / Cor. J.1, whose
/// constant is printed as `1/(2ρn²)`; for the complex noise of Algorithm 1 (real and imaginary
/// parts together, `σ² = κ²‖v^DFT‖₁/(4nρ)` per part) the same computation gives `1/(4ρn²)`.
pub fn closed_form_loss(m: usize) -> f64 {
    let l1 = dft_l1_norm(m);
    l1 * l1 / (4.0 * m as f64)
}

/// The kernel `y ∈ ℝ^{2m}`: the first column of `Y = F*√Σ F` (001 App. K, Lem. K.1), from the
/// closed-form spectrum (001 Eq. 44–45) with the principal square root:
/// `y_j = (√m + Σ_{k odd} sin(πk/2m)^{−1/2} cos(πk/4m − π/4 + πkj/m))/(2m)`. `O(m²)`, angles
/// from one exact table.
pub fn kernel(m: usize) -> Vec<f64> {
    use core::f64::consts::PI;
    let two_m = 2 * m;
    let mf = m as f64;
    let (cos, sin): (Vec<f64>, Vec<f64>) = (0..two_m)
        .map(|j| {
            let t = PI * j as f64 / mf;
            (t.cos(), t.sin())
        })
        .unzip();
    let coefficients: Vec<(usize, f64, f64)> = (1..two_m)
        .step_by(2)
        .map(|k| {
            let r = (PI * k as f64 / (2.0 * mf)).sin().powf(-0.5);
            let phase = PI * k as f64 / (4.0 * mf) - PI / 4.0;
            (k, r * phase.cos(), r * phase.sin())
        })
        .collect();
    (0..two_m)
        .map(|j| {
            let mut s = mf.sqrt();
            for &(k, a, b) in &coefficients {
                let index = (k * j) % two_m;
                s += a * cos[index] - b * sin[index];
            }
            s / two_m as f64
        })
        .collect()
}

/// `t_a = Σ_j y_j y_{(j+a) mod 2m}` for `a < m`: the first column of `T = C_FᵀC_F`
/// (`= B_F B_Fᵀ`; circulants commute).
pub fn autocorrelation(y: &[f64]) -> Vec<f64> {
    let two_m = y.len();
    (0..two_m / 2)
        .map(|a| (0..two_m).map(|j| y[j] * y[(j + a) % two_m]).sum())
        .collect()
}

/// `x = T⁻¹e₀` for the symmetric positive-definite Toeplitz `T` with first column `t`:
/// Levinson–Durbin in `O(m²)` (Golub & Van Loan, Alg. 4.7.1), then one step of iterative
/// refinement with the Gohberg–Semencul inverse of the first solution.
pub fn levinson(t: &[f64]) -> Result<Vec<f64>> {
    let m = t.len();
    if m == 0 || t[0].is_nan() || t[0] <= 0.0 {
        return Err(Error::Numerical(
            "Toeplitz matrix is not positive definite".into(),
        ));
    }
    // T_k [1; a] = [e; 0]: a is the order-k predictor, e its error.
    let mut a = vec![0.0; m];
    a[0] = 1.0;
    let mut e = t[0];
    let mut previous = vec![0.0; m];
    for k in 1..m {
        let dot: f64 = (0..k).map(|j| a[j] * t[k - j]).sum();
        let reflection = -dot / e;
        previous[..k].copy_from_slice(&a[..k]);
        for j in 1..=k {
            a[j] = previous[j] + reflection * previous[k - j];
        }
        e *= 1.0 - reflection * reflection;
        if !e.is_finite() || e <= 0.0 {
            return Err(Error::Numerical(format!(
                "Toeplitz matrix is not positive definite (Levinson step {k})"
            )));
        }
    }
    let mut x: Vec<f64> = a.iter().map(|v| v / e).collect();
    // Refinement: x += T⁻¹(e₀ − T x), T⁻¹ applied with the generator x itself.
    let residual: Vec<f64> = (0..m)
        .map(|i| {
            let tx: f64 = (0..m).map(|j| t[i.abs_diff(j)] * x[j]).sum();
            f64::from(u8::from(i == 0)) - tx
        })
        .collect();
    let correction = GsInverse::new(&x)?.apply(&residual);
    for (xi, c) in x.iter_mut().zip(&correction) {
        *xi += c;
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(Error::Numerical("Toeplitz solve is not finite".into()));
    }
    Ok(x)
}

/// Calls `row(i, T⁻¹[i, ..])` for `i = 0, 1, …` with the entries of the Gohberg–Semencul
/// matrix of `x` (`= T⁻¹` when `x = T⁻¹e₀`), by Trench's recursion: `O(m²)` time, `O(m)` memory.
pub fn for_each_inverse_row(x: &[f64], mut row: impl FnMut(usize, &[f64])) {
    let m = x.len();
    let tilde = |i: usize| if i == 0 { 0.0 } else { x[m - i] };
    let mut r = x.to_vec();
    row(0, &r);
    for i in 1..m {
        let (xi, ti) = (x[i], tilde(i));
        for j in (1..m).rev() {
            r[j] = r[j - 1] + (xi * x[j] - ti * tilde(j)) / x[0];
        }
        r[0] = xi;
        row(i, &r);
    }
}

/// `p_i = Σ_{a,b ≤ i} T⁻¹[a,b]` for every `i`: `‖(S T⁻¹ C_Fᵀ)[i,:]‖²`, the variance of step `i`
/// of Mechanism 2 (and, by persymmetry, the trailing-block sums `(SᵀT⁻¹S)[m−1−i, m−1−i]`).
pub fn leading_block_sums(x: &[f64]) -> Vec<f64> {
    let mut sums = Vec::with_capacity(x.len());
    let mut total = 0.0;
    for_each_inverse_row(x, |i, r| {
        // Row i contributes its diagonal once and its entries left of the diagonal twice.
        let left: f64 = r[..i].iter().sum();
        total += r[i] + 2.0 * left;
        sums.push(total);
    });
    sums
}

/// The Gohberg–Semencul matrix `(L(x)L(x)ᵀ − L(x̃)L(x̃)ᵀ)/x₀` applied by FFT in `O(m log m)`.
struct GsInverse {
    m: usize,
    size: usize,
    x0: f64,
    spectrum: Vec<(f64, f64)>,
    spectrum_tilde: Vec<(f64, f64)>,
}

impl GsInverse {
    fn new(x: &[f64]) -> Result<Self> {
        let m = x.len();
        if m == 0 || x[0] == 0.0 || !x[0].is_finite() {
            return Err(Error::Numerical(
                "Gohberg–Semencul generator has x₀ = 0".into(),
            ));
        }
        let size = (2 * m).next_power_of_two();
        let padded = |f: &dyn Fn(usize) -> f64| {
            let mut v: Vec<(f64, f64)> = (0..size)
                .map(|i| (if i < m { f(i) } else { 0.0 }, 0.0))
                .collect();
            fft64(&mut v, false);
            v
        };
        let spectrum = padded(&|i| x[i]);
        let spectrum_tilde = padded(&|i| if i == 0 { 0.0 } else { x[m - i] });
        Ok(Self {
            m,
            size,
            x0: x[0],
            spectrum,
            spectrum_tilde,
        })
    }

    fn apply(&self, v: &[f64]) -> Vec<f64> {
        let (m, size) = (self.m, self.size);
        let mut spectrum: Vec<(f64, f64)> = (0..size)
            .map(|i| (if i < m { v[i] } else { 0.0 }, 0.0))
            .collect();
        fft64(&mut spectrum, false);
        // L(g)ᵀv is a correlation: multiply by the conjugate spectrum, keep lags 0..m.
        let correlate = |g: &[(f64, f64)]| {
            let mut w: Vec<(f64, f64)> = spectrum
                .iter()
                .zip(g)
                .map(|(&(a, b), &(c, d))| (a * c + b * d, b * c - a * d))
                .collect();
            fft64(&mut w, true);
            for value in &mut w[m..] {
                *value = (0.0, 0.0);
            }
            fft64(&mut w, false);
            w
        };
        let first = correlate(&self.spectrum);
        let second = correlate(&self.spectrum_tilde);
        let mut combined: Vec<(f64, f64)> = (0..size)
            .map(|f| {
                let (p, q) = (first[f], self.spectrum[f]);
                let (r, s) = (second[f], self.spectrum_tilde[f]);
                (
                    p.0 * q.0 - p.1 * q.1 - (r.0 * s.0 - r.1 * s.1),
                    p.0 * q.1 + p.1 * q.0 - (r.0 * s.1 + r.1 * s.0),
                )
            })
            .collect();
        fft64(&mut combined, true);
        combined[..m].iter().map(|c| c.0 / self.x0).collect()
    }
}

/// In-place radix-2 complex FFT in `f64` (`inverse` includes the `1/N`); `N` a power of two.
fn fft64(a: &mut [(f64, f64)], inverse: bool) {
    let n = a.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            a.swap(i, j);
        }
    }
    let sign = if inverse { 1.0 } else { -1.0 };
    let mut len = 2;
    while len <= n {
        let half = len / 2;
        let twiddles: Vec<(f64, f64)> = (0..half)
            .map(|k| {
                let angle = sign * 2.0 * core::f64::consts::PI * k as f64 / len as f64;
                (angle.cos(), angle.sin())
            })
            .collect();
        for start in (0..n).step_by(len) {
            for (k, &(wr, wi)) in twiddles.iter().enumerate() {
                let (ur, ui) = a[start + k];
                let (vr, vi) = a[start + k + half];
                let (tr, ti) = (vr * wr - vi * wi, vr * wi + vi * wr);
                a[start + k] = (ur + tr, ui + ti);
                a[start + k + half] = (ur - tr, ui - ti);
            }
        }
        len <<= 1;
    }
    if inverse {
        let scale = 1.0 / n as f64;
        for v in a.iter_mut() {
            *v = (v.0 * scale, v.1 * scale);
        }
    }
}

/// `‖E‖₁ = max_j Σ_i |(M T − I)[i,j]|` for the Gohberg–Semencul matrix `M` of `x` and the
/// symmetric Toeplitz `T` with first column `t`: `O(m² log m)`, columns split over two threads.
pub fn inverse_residual_norm(x: &[f64], t: &[f64]) -> Result<f64> {
    let gs = GsInverse::new(x)?;
    let m = x.len();
    let column = |j: usize| -> f64 {
        let v: Vec<f64> = (0..m).map(|i| t[i.abs_diff(j)]).collect();
        gs.apply(&v)
            .iter()
            .enumerate()
            .map(|(i, w)| (w - f64::from(u8::from(i == j))).abs())
            .sum()
    };
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get().min(4));
    let norm = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                let column = &column;
                scope.spawn(move || (w..m).step_by(threads).map(column).fold(0.0f64, f64::max))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(f64::NAN))
            .fold(0.0f64, |a, b| if b.is_nan() { f64::NAN } else { a.max(b) })
    });
    if norm.is_finite() {
        Ok(norm)
    } else {
        Err(Error::Numerical(
            "Gohberg–Semencul residual is not finite".into(),
        ))
    }
}

/// `C_F = Y E`: the `2m × m` encoder, `C_F[i, j] = y_{(i−j) mod 2m}` (dense; for references and
/// for `(k, b)` sensitivities).
pub fn encoder(y: &[f64]) -> Mat<f64> {
    let two_m = y.len();
    Mat::from_fn(two_m, two_m / 2, |i, j| y[(i + two_m - j) % two_m])
}

/// `blockdiag(c, …, c)` (`copies` times): the stamped encoder (001 App. D.4).
pub fn stamp_encoder(c: &Mat<f64>, copies: usize) -> Mat<f64> {
    let (r, k) = (c.nrows(), c.ncols());
    Mat::from_fn(r * copies, k * copies, |i, j| {
        if i / r == j / k {
            c[(i % r, j % k)]
        } else {
            0.0
        }
    })
}

/// `sens ≤ k·sens₁` under any `k`-participation (001 Thm 4.1, `k²ρ`-zCDP; the triangle
/// inequality over the `k` columns).
pub fn k_participation_sensitivity(single: f64, k: usize) -> f64 {
    single * k as f64
}

/// What to compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FftOptions {
    /// The horizon `n = stamps · block`.
    pub steps: usize,
    /// `s`: the encoder for `n/s` steps is stamped `s` times.
    pub stamps: usize,
    /// Which decoder.
    pub kind: FftKind,
    /// The participation schema the sensitivity is computed for.
    pub participation: Participation,
}

/// A compiled FFT mechanism: what the blob stores and its privacy and error figures.
#[derive(Debug, Clone)]
pub struct FftMechanism {
    /// Which decoder.
    pub kind: FftKind,
    /// `m`, steps per block.
    pub block: usize,
    /// `s`, blocks (`n = s·m`).
    pub stamps: usize,
    /// The participation schema.
    pub participation: Participation,
    /// The stored kernel `ŷ` (`2m` values).
    pub kernel: Vec<f32>,
    /// The stored Gohberg–Semencul generator `x̂ ≈ T̂⁻¹e₀` (`m` values; Mechanism 2 only).
    pub generator: Vec<f32>,
    /// The sensitivity of the shipped encoder (module docs), for unit clip norm.
    pub sensitivity: f64,
    /// How [`sensitivity`](Self::sensitivity) was obtained.
    pub sensitivity_method: SensitivityMethod,
    /// `‖M̂T̂ − I‖₁` of the stored generator (Mechanism 2; 0 for Mechanism 1).
    pub generator_residual: f64,
    /// `sens²·‖B̂[i,:]‖²` for every step (Mechanism 2: with the exact `T̂⁻¹` in place of the
    /// stored `M̂`, which differ by `‖M̂T̂ − I‖₁`, see [`generator_residual`](Self::generator_residual)).
    pub per_step_variance: Vec<f64>,
    /// `sqrt(L)` of what ships.
    pub sqrt_loss: f64,
    /// `L` of the exact mechanism with encoder `C_F` (the convention of 001 Table 1).
    pub paper_loss: f64,
    /// The sensitivity of `C_F` (stamped) in that convention, and its method.
    pub paper_sensitivity: (f64, SensitivityMethod),
}

impl FftMechanism {
    /// `L = sens²·‖B̂‖_F²` of what ships.
    pub fn loss(&self) -> f64 {
        self.sqrt_loss * self.sqrt_loss
    }
}

/// `‖B‖_F²` per step for a stamped "block noise plus carry" decoder: step `r` of block `i` has
/// `i·last + row[r]`, where `row[r]` is the within-block row norm² and `last = row[m−1]`.
fn stamped_rows(row: &[f64], stamps: usize) -> Vec<f64> {
    let last = row.last().copied().unwrap_or(0.0);
    (0..stamps)
        .flat_map(|i| row.iter().map(move |r| i as f64 * last + r))
        .collect()
}

/// The sensitivity of an encoder given densely, under `participation`, stamped `stamps` times.
fn stamped_sensitivity(
    block_encoder: &Mat<f64>,
    stamps: usize,
    participation: &Participation,
) -> Result<(f64, SensitivityMethod)> {
    let c = stamp_encoder(block_encoder, stamps);
    let s = sensitivity(c.as_ref(), participation)?;
    Ok((s.value, s.method))
}

/// Compiles an FFT mechanism (module docs): the kernel, the generator for Mechanism 2, the
/// sensitivity of what ships and of the paper's exact mechanism, and the error profile.
pub fn compile_fft(options: &FftOptions) -> Result<FftMechanism> {
    let FftOptions {
        steps,
        stamps,
        kind,
        participation,
    } = *options;
    if steps == 0 || stamps == 0 || steps % stamps != 0 {
        return Err(Error::InvalidArgument(format!(
            "the FFT mechanism needs n = s·m with s ≥ 1, got n = {steps}, s = {stamps}"
        )));
    }
    let m = steps / stamps;
    if u32::try_from(2 * m).is_err() {
        return Err(Error::InvalidArgument(format!(
            "block of {m} steps is too long"
        )));
    }
    let y = kernel(m);
    let kernel32: Vec<f32> = y.iter().map(|&v| v as f32).collect();
    let y_hat: Vec<f64> = kernel32.iter().map(|&v| f64::from(v)).collect();
    let single = matches!(participation, Participation::Single);
    // The paper's convention: encoder C_F of the exact kernel.
    let t = autocorrelation(&y);
    let paper_sensitivity = if single {
        (t[0].sqrt(), SensitivityMethod::MaxColumnNorm)
    } else {
        stamped_sensitivity(&encoder(&y), stamps, &participation)?
    };
    let paper_rows: Vec<f64> = match kind {
        FftKind::Circulant => vec![t[0]; m],
        FftKind::OptimalDecoder => leading_block_sums(&levinson(&t)?),
    };
    let paper_error: f64 = stamped_rows(&paper_rows, stamps).iter().sum();
    let paper_loss = paper_sensitivity.0 * paper_sensitivity.0 * paper_error;

    // What ships: ŷ, T̂ = its autocorrelation Toeplitz, x from T̂.
    let t_hat = autocorrelation(&y_hat);
    let x = levinson(&t_hat)?;
    let (generator, generator_residual, rows, (value, method)) = match kind {
        FftKind::Circulant => {
            // Ĉ = B̂†S per block: Gram SᵀT̂⁻¹S.
            let sens = if single {
                let sums = leading_block_sums(&x);
                (
                    sums.iter().copied().fold(0.0, f64::max).sqrt(),
                    SensitivityMethod::MaxColumnNorm,
                )
            } else {
                stamped_sensitivity(&pseudo_inverse_encoder(&y_hat, &x), stamps, &participation)?
            };
            (Vec::new(), 0.0, vec![t_hat[0]; m], sens)
        }
        FftKind::OptimalDecoder => {
            let generator: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let x_hat: Vec<f64> = generator.iter().map(|&v| f64::from(v)).collect();
            let residual = inverse_residual_norm(&x_hat, &t_hat)?;
            if residual.is_nan() || residual >= 0.5 {
                return Err(Error::Numerical(format!(
                    "the f32 generator is too inaccurate (‖M̂T̂ − I‖₁ = {residual:e})"
                )));
            }
            let (base, method) = if single {
                (t_hat[0].sqrt(), SensitivityMethod::MaxColumnNorm)
            } else {
                stamped_sensitivity(&encoder(&y_hat), stamps, &participation)?
            };
            // The bound of the module docs: no longer the exact value of any one method.
            let method = if residual > 0.0 {
                SensitivityMethod::GeneratorResidualBound
            } else {
                method
            };
            (
                generator,
                residual,
                leading_block_sums(&x),
                (base / (1.0 - residual), method),
            )
        }
    };
    if !value.is_finite() || value <= 0.0 {
        return Err(Error::Numerical(format!(
            "FFT sensitivity {value} is not usable"
        )));
    }
    let per_step_variance: Vec<f64> = stamped_rows(&rows, stamps)
        .into_iter()
        .map(|r| value * value * r)
        .collect();
    let sqrt_loss = per_step_variance.iter().sum::<f64>().sqrt();
    Ok(FftMechanism {
        kind,
        block: m,
        stamps,
        participation,
        kernel: kernel32,
        generator,
        sensitivity: value,
        sensitivity_method: method,
        generator_residual,
        per_step_variance,
        sqrt_loss,
        paper_loss,
        paper_sensitivity,
    })
}

/// `B̂†S = ŶᵀPᵀT̂⁻¹S` (`2m × m`): the minimum-norm encoder of Mechanism 1's stored decoder
/// `B̂ = PŶ`, dense from the generator `x` of `T̂ = B̂B̂ᵀ`.
pub fn pseudo_inverse_encoder(y_hat: &[f64], x: &[f64]) -> Mat<f64> {
    let m = x.len();
    let two_m = 2 * m;
    // (T̂⁻¹S)[a, j] = Σ_{b ≥ j} T̂⁻¹[a, b].
    let mut w = Mat::<f64>::zeros(m, m);
    for_each_inverse_row(x, |a, r| {
        let mut suffix = 0.0;
        for j in (0..m).rev() {
            suffix += r[j];
            w[(a, j)] = suffix;
        }
    });
    let yt = Mat::from_fn(two_m, m, |i, j| y_hat[(j + two_m - i) % two_m]);
    yt * w
}

/// The dense decoder of a compiled mechanism, `n × 2n` (`z` has `2m` rows per block), exactly as
/// the runtime replays it from the stored `f32` values: for tests and audits.
pub fn dense_decoder(mechanism: &FftMechanism) -> Mat<f64> {
    stored_dense_decoder(
        mechanism.kind,
        mechanism.stamps,
        &mechanism.kernel,
        &mechanism.generator,
    )
}

/// [`dense_decoder`] from the values a blob stores: `stamps` blocks, the kernel `ŷ` (`2m`
/// values) and, for [`FftKind::OptimalDecoder`], the generator `x̂` (`m` values).
pub fn stored_dense_decoder(
    kind: FftKind,
    stamps: usize,
    kernel: &[f32],
    generator: &[f32],
) -> Mat<f64> {
    let m = kernel.len() / 2;
    let s = stamps;
    let two_m = 2 * m;
    let y: Vec<f64> = kernel.iter().map(|&v| f64::from(v)).collect();
    // One block: n_b × 2m.
    let block = match kind {
        FftKind::Circulant => Mat::from_fn(m, two_m, |r, j| y[(r + two_m - j) % two_m]),
        FftKind::OptimalDecoder => {
            let x: Vec<f64> = generator.iter().map(|&v| f64::from(v)).collect();
            let mut inverse = Mat::<f64>::zeros(m, m);
            for_each_inverse_row(&x, |i, r| {
                for (j, v) in r.iter().enumerate() {
                    inverse[(i, j)] = *v;
                }
            });
            let cft = Mat::from_fn(m, two_m, |r, j| y[(j + two_m - r) % two_m]);
            let mut b = &inverse * &cft;
            for r in 1..m {
                for j in 0..two_m {
                    let above = b[(r - 1, j)];
                    b[(r, j)] += above;
                }
            }
            b
        }
    };
    Mat::from_fn(s * m, s * two_m, |i, j| {
        let (bi, r) = (i / m, i % m);
        let (bj, c) = (j / two_m, j % two_m);
        if bj == bi {
            block[(r, c)]
        } else if bj < bi {
            block[(m - 1, c)]
        } else {
            0.0
        }
    })
}

/// Encodes a compiled FFT mechanism (001 §4, App. K; `formats/SPEC.md`, decoder 1) for the
/// prefix-sum workload ([`crate::ship::blob::write`]). The tables are the `f32` values the
/// sensitivity was computed from.
pub fn encode(compiled: &FftMechanism, options: &BlobOptions) -> Result<Written> {
    let block = steps_u32(compiled.block, "the block")?;
    let stamps = steps_u32(compiled.stamps, "the number of stamps")?;
    let steps = block
        .checked_mul(stamps)
        .ok_or_else(|| Error::Numerical("the horizon exceeds 2^32 − 1 steps".into()))?;
    let kernel = mfc_formats::encode_f32s(compiled.kernel.iter().copied());
    let generator = mfc_formats::encode_f32s(compiled.generator.iter().copied());
    let shipped = Shipped {
        participation: &compiled.participation,
        sensitivity: compiled.sensitivity,
        method: compiled.sensitivity_method,
        sqrt_loss: compiled.sqrt_loss,
        optimal_sqrt_loss: None,
        step_stddev: step_stddev(&compiled.per_step_variance),
    };
    let decoder = Decoder::Fft(mfc_formats::Fft {
        kind: match compiled.kind {
            FftKind::Circulant => mfc_formats::FftKind::Circulant,
            FftKind::OptimalDecoder => mfc_formats::FftKind::OptimalDecoder,
        },
        block,
        stamps,
        kernel: table(&kernel)?,
        generator: table(&generator)?,
    });
    write(StoredWorkload::PrefixSum, steps, shipped, decoder, options)
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // index loops mirror the matrix formulas
mod tests {
    use super::*;
    use crate::workload::Workload;
    use faer::Side;
    use faer::prelude::Solve;

    fn prefix(n: usize) -> Mat<f64> {
        Workload::PrefixSum.matrix(n).unwrap()
    }

    /// The kernel squares to v under circular convolution (Y² = A_circ), B_F C_F = S, and the
    /// closed form of 001 Cor. J.1 equals a brute-force DFT of v (Eq. 38) and the loss computed
    /// from dense B_F and C_F (sensitivity through participation::sensitivity), for several n.
    #[test]
    fn mechanism_one_matches_closed_form() {
        for m in [1, 2, 3, 7, 16, 33, 100] {
            let y = kernel(m);
            let two_m = 2 * m;
            for a in 0..two_m {
                let conv: f64 = (0..two_m).map(|j| y[j] * y[(a + two_m - j) % two_m]).sum();
                let v = if a < m { 1.0 } else { 0.0 };
                assert!((conv - v).abs() < 1e-12 * m as f64, "m={m} a={a} {conv}");
            }
            let c = encoder(&y);
            let b = Mat::from_fn(m, two_m, |r, j| y[(r + two_m - j) % two_m]);
            assert!((&b * &c - prefix(m)).norm_max() < 1e-12 * m as f64);
            let brute: f64 = (0..two_m)
                .map(|k| {
                    let (mut re, mut im) = (0.0f64, 0.0f64);
                    for a in 0..m {
                        let angle = -2.0 * core::f64::consts::PI * (k * a) as f64 / two_m as f64;
                        re += angle.cos();
                        im += angle.sin();
                    }
                    re.hypot(im)
                })
                .sum();
            assert!((brute - dft_l1_norm(m)).abs() < 1e-9 * brute, "m={m}");
            let sens = sensitivity(c.as_ref(), &Participation::Single)
                .unwrap()
                .value;
            let loss = sens * sens * b.squared_norm_l2();
            let closed = closed_form_loss(m);
            assert!(
                (loss - closed).abs() < 1e-10 * closed,
                "m={m}: {loss} vs {closed}"
            );
        }
    }

    /// Levinson–Durbin and the Gohberg–Semencul/Trench entries equal a dense inverse; the FFT
    /// application equals the dense product; the leading-block sums give ‖S C_F†‖_F² of a dense
    /// pseudoinverse (001 App. K, Mechanism 2).
    #[test]
    fn optimal_decoder_matches_dense_pseudoinverse() {
        for m in [1, 2, 5, 16, 40] {
            let y = kernel(m);
            let t = autocorrelation(&y);
            let dense_t = Mat::from_fn(m, m, |i, j| t[i.abs_diff(j)]);
            let c = encoder(&y);
            assert!((c.transpose() * &c - &dense_t).norm_max() < 1e-10 * m as f64);
            let x = levinson(&t).unwrap();
            let inverse = dense_t
                .llt(Side::Lower)
                .unwrap()
                .solve(Mat::<f64>::identity(m, m));
            let scale = inverse.norm_max();
            for_each_inverse_row(&x, |i, r| {
                for j in 0..m {
                    assert!(
                        (r[j] - inverse[(i, j)]).abs() < 1e-9 * scale,
                        "m={m} ({i},{j})"
                    );
                }
            });
            let v: Vec<f64> = (0..m).map(|i| ((i * 7 + 3) % 11) as f64 - 5.0).collect();
            let fast = GsInverse::new(&x).unwrap().apply(&v);
            for i in 0..m {
                let dense: f64 = (0..m).map(|j| inverse[(i, j)] * v[j]).sum();
                assert!((fast[i] - dense).abs() < 1e-9 * scale * 50.0, "m={m} i={i}");
            }
            // B = S C_F† with C_F† = (C_FᵀC_F)⁻¹C_Fᵀ; its row norms are the block sums.
            let b = prefix(m) * &inverse * c.transpose();
            assert!((&b * &c - prefix(m)).norm_max() < 1e-8 * m as f64);
            let sums = leading_block_sums(&x);
            for i in 0..m {
                let row = b.row(i).squared_norm_l2();
                assert!((row - sums[i]).abs() < 1e-9 * row.max(1.0), "m={m} i={i}");
            }
            assert!(inverse_residual_norm(&x, &t).unwrap() < 1e-9);
        }
    }

    /// The shipped sensitivity is at least the exact sensitivity of the minimum-norm encoder of
    /// the dense stored decoder (B̂†S), and for Mechanism 1 equal to it; the dense decoder with
    /// carries factorizes S_n with that encoder.
    #[test]
    fn shipped_sensitivity_covers_the_stored_decoder() {
        for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
            for (steps, stamps, participation) in [
                (12, 1, Participation::Single),
                (12, 3, Participation::Single),
                (24, 4, Participation::fixed_epoch_order(3, 8).unwrap()),
            ] {
                let compiled = compile_fft(&FftOptions {
                    steps,
                    stamps,
                    kind,
                    participation,
                })
                .unwrap();
                let b = dense_decoder(&compiled);
                let gram = &b * b.transpose();
                let llt = gram.llt(Side::Lower).unwrap();
                let c = b.transpose() * llt.solve(prefix(steps));
                assert!((&b * &c - prefix(steps)).norm_max() < 1e-9);
                let exact = sensitivity(c.as_ref(), &participation).unwrap().value;
                let shipped = compiled.sensitivity;
                assert!(
                    shipped >= exact * (1.0 - 1e-9),
                    "{kind:?} {steps}: {shipped} < {exact}"
                );
                if kind == FftKind::Circulant && stamps == 1 {
                    assert!(
                        (shipped - exact).abs() < 1e-9 * exact,
                        "{shipped} vs {exact}"
                    );
                } else {
                    assert!(shipped < exact * 1.01, "{kind:?}: {shipped} ≫ {exact}");
                }
                let loss = shipped * shipped * b.squared_norm_l2();
                assert!(
                    (loss - compiled.loss()).abs() < 1e-6 * loss,
                    "{loss} vs {}",
                    compiled.loss()
                );
            }
        }
    }

    /// Under (k, b) participation the sensitivity of C_F lies between the brute force over
    /// every sign pattern and the k-participation bound of 001 Thm 4.1.
    #[test]
    fn multi_participation_sensitivity_is_bracketed() {
        let schemas = |k, b| {
            [
                Participation::fixed_epoch_order(k, b).unwrap(),
                Participation::min_separation(k, b).unwrap(),
            ]
        };
        for (m, k, participation) in [(12, 3, 4), (10, 2, 5), (16, 4, 3)]
            .into_iter()
            .flat_map(|(m, k, b)| schemas(k, b).map(move |p| (m, k, p)))
        {
            let c = encoder(&kernel(m));
            let single = sensitivity(c.as_ref(), &Participation::Single)
                .unwrap()
                .value;
            let computed = sensitivity(c.as_ref(), &participation).unwrap().value;
            let brute =
                crate::privacy::participation::brute_force_sensitivity(c.as_ref(), &participation)
                    .unwrap();
            assert!(brute <= computed * (1.0 + 1e-12), "{brute} > {computed}");
            assert!(computed <= k_participation_sensitivity(single, k) * (1.0 + 1e-12));
            assert!(
                brute > single,
                "more participations cost more: {brute} vs {single}"
            );
        }
    }

    /// 001 Table 1, (k, b) = (20, 100), n = 2000, FFT sensitivities by the bounds of Thm 2.1.
    #[test]
    fn table_one_fft_rows() {
        let participation = Participation::fixed_epoch_order(20, 100).unwrap();
        for (stamps, kind, paper) in [
            (1, FftKind::Circulant, 2.3e6),
            (5, FftKind::Circulant, 1.6e6),
            (1, FftKind::OptimalDecoder, 2.2e6),
            (5, FftKind::OptimalDecoder, 1.1e6),
        ] {
            let compiled = compile_fft(&FftOptions {
                steps: 2000,
                stamps,
                kind,
                participation,
            })
            .unwrap();
            let ratio = compiled.paper_loss / paper;
            assert!(
                (ratio - 1.0).abs() < 0.05,
                "{kind:?}×{stamps}: {} vs {paper}",
                compiled.paper_loss
            );
        }
    }
}
