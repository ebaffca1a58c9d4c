//! What a blob describes: the header (workload, horizon, participation, sensitivity, clipping,
//! calibration, error summary) and the decoder in one of its stored forms.
//!
//! Every released value of a mechanism is
//! `(A x)_i + noise_multiplier · clip_norm · sensitivity · (B̂ z)_i` with `z ~ N(0, I)`, where `A`
//! is the workload, `B̂` the stored decoder and `sensitivity` the sensitivity of the encoder
//! `Ĉ = B̂⁻¹ A` under the declared participation, computed by the compiler from the stored (f32)
//! coefficients. The field order here is the wire order: see `SPEC.md`.

use serde::{Deserialize, Serialize};

use crate::{Error, F32Table};

/// A whole mechanism: header and decoder, borrowing its tables from the blob.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Mechanism<'a> {
    /// Everything but the decoder's coefficients.
    #[serde(borrow)]
    pub header: Header<'a>,
    /// The decoder `B̂`.
    #[serde(borrow)]
    pub decoder: Decoder<'a>,
}

/// The mechanism's description and its privacy and error figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Header<'a> {
    /// The linear map `A` whose output is released.
    #[serde(borrow)]
    pub workload: Workload<'a>,
    /// The horizon `n`: the number of steps the mechanism can release.
    pub steps: u32,
    /// Which sets of steps one record may contribute to.
    pub participation: Participation,
    /// Which datasets are neighbours: what the `(ε, δ)` of [`calibration`](Self::calibration)
    /// protects. Not in the header's bytes: a trailing extension after the decoder, present only
    /// for [`Neighbouring::ReplaceOne`] (`SPEC.md`, "Extensions").
    #[serde(skip)]
    pub neighbouring: Neighbouring,
    /// The sensitivity of the encoder implied by the stored decoder, for the neighbouring
    /// relation: twice `sens(Ĉ)` for [`Neighbouring::ReplaceOne`].
    pub sensitivity: Sensitivity,
    /// `ζ`: every input row is clipped to this L2 norm by the runtime before use.
    pub clip_norm: f64,
    /// The noise multiplier `σ`, if the blob was calibrated for a privacy target.
    pub calibration: Option<Calibration>,
    /// Error of what ships, in units of `σ·ζ`.
    pub error: ErrorSummary,
    /// Name and version of the program that wrote the blob (informational).
    #[serde(borrow)]
    pub generator: &'a str,
}

/// The workload `A` (lower triangular, `n × n`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Workload<'a> {
    /// `A = S`, the lower-triangular matrix of ones: releases are prefix sums.
    PrefixSum,
    /// Any lower-triangular `A` supplied to the compiler. The runtime cannot stream `A x` for it
    /// in bounded memory, so it releases the correlated noise `(B̂ z)_i` only and the caller adds
    /// it to its own `(A x)_i`.
    Custom {
        /// A free-form description (for example the file the matrix came from).
        label: &'a str,
    },
}

/// The participation schema: which sets of steps one record may contribute to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Participation {
    /// Each record contributes to at most one step (single pass).
    Single,
    /// Fixed epoch order (001 §2, "(k, b)-participation"): at most
    /// `k` steps, any two adjacent ones **exactly** `b` steps apart (`{s, s+b, …}`).
    FixedEpochOrder {
        /// `k`, the maximum number of participations.
        max_participations: u32,
        /// `b`, the exact gap between adjacent participations.
        separation: u32,
    },
    /// `b`-min-separation (BandMF, BLT, jax_privacy's `min_sep`): at most `k` steps, any two of
    /// them **at least** `b` steps apart. Every fixed-epoch pattern is one of these, so its
    /// sensitivity is never below the fixed-epoch one.
    MinSeparation {
        /// `k`, the maximum number of participations.
        max_participations: u32,
        /// `b`, the least gap between two participations.
        min_separation: u32,
    },
    /// Cyclic Poisson sampling, the scheme of amplified BandMF (Choquette-Choo et al. 2023b,
    /// Algorithm 2; jax_privacy's `CyclicPoissonSampling`): every record is in one of `b̂ =
    /// cycle_length` groups, drawn independently of the other records, and step `i` includes
    /// each record of group `i mod b̂` independently with probability `q = sampling_prob`, no
    /// record of another group. A record therefore takes part in at most `⌈n/b̂⌉` steps, exactly
    /// `b̂` apart, and only a BandMF decoder with at most `b̂` bands is valid with it: the
    /// encoder columns of those steps do not overlap, the recorded sensitivity is the largest
    /// column norm (that of single participation), and the calibration's `σ` is that of the
    /// composition of `⌈n/b̂⌉` Poisson-subsampled Gaussian mechanisms of rate `q`
    /// (add-remove neighbouring only). `b̂ = 1` is DP-SGD.
    CyclicPoisson {
        /// `b̂`, the number of groups (and the most bands the encoder may have).
        cycle_length: u32,
        /// `q ∈ (0, 1]`, the probability that a record of the active group is in a step.
        sampling_prob: f64,
    },
}

/// The neighbouring relation: which pairs of datasets the `(ε, δ)` guarantee is stated for.
///
/// One record's contribution is the rows it adds at its participation steps, each clipped to
/// `ζ`. Adding or removing the record moves the input by that contribution, so by at most the
/// sensitivity `sens(Ĉ)`; replacing it by another record moves it by the difference of two
/// contributions, at most `2·sens(Ĉ)` (attained when the new record may take the same steps).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Neighbouring {
    /// Add or remove one record (unbounded DP): the recorded sensitivity is `sens(Ĉ)`.
    #[default]
    AddOrRemove,
    /// Replace one record by another (bounded DP): the recorded sensitivity is `2·sens(Ĉ)`.
    ReplaceOne,
}

impl Neighbouring {
    /// How much the relation scales the encoder's sensitivity, and so every noise figure: the
    /// input moves by one record's contribution under add/remove (`1`), by the difference of
    /// two under replace-one (`2`). The one place the factor is written: the compiler, the
    /// verifier, the lower bound and the accountant all read it here.
    pub const fn sensitivity_factor(self) -> f64 {
        match self {
            Neighbouring::AddOrRemove => 1.0,
            Neighbouring::ReplaceOne => 2.0,
        }
    }
}

/// The payload's trailing extensions (`SPEC.md`, "Extensions"): each is written only when its
/// value differs from the default, in increasing variant order, so a mechanism keeps exactly one
/// encoding and a blob without extensions reads as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Extension {
    /// `header.neighbouring`, when it is not [`Neighbouring::AddOrRemove`].
    Neighbouring(Neighbouring),
}

impl Extension {
    /// The extensions `header` needs, in wire order.
    pub(crate) fn of(header: &Header<'_>) -> Option<Extension> {
        (header.neighbouring != Neighbouring::AddOrRemove)
            .then_some(Extension::Neighbouring(header.neighbouring))
    }

    /// Applies a decoded extension to `header`; `Err` for a default value or one already given
    /// (both would give a second encoding of the same mechanism).
    pub(crate) fn apply(self, header: &mut Header<'_>) -> Result<(), Error> {
        match self {
            Extension::Neighbouring(relation) => {
                if relation == Neighbouring::AddOrRemove
                    || header.neighbouring != Neighbouring::AddOrRemove
                {
                    return Err(Error::MalformedPayload);
                }
                header.neighbouring = relation;
            }
        }
        Ok(())
    }
}

/// The L2 sensitivity of the encoder and how it was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sensitivity {
    /// `sens(Ĉ)` for unit clip norm; the noise is scaled by it.
    pub value: f64,
    /// The method that produced `value`.
    pub method: SensitivityMethod,
}

/// How a sensitivity was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SensitivityMethod {
    /// Exact: the maximum column norm of `Ĉ` (single participation).
    MaxColumnNorm,
    /// Exact for `ĈᵀĈ ≥ 0` elementwise: the maximum over participation patterns of
    /// `sqrt(1ᵀ X[π,π] 1)` (001 Eq. 3).
    NonnegativeGram,
    /// An upper bound: `λ·sqrt(k)` with `λ` the largest spectral norm of `Ĉ[:, π]`
    /// (001 Thm 2.1).
    SpectralBound,
    /// An upper bound, exact when every `X[π,π] ≥ 0`: the maximum over participation patterns of
    /// `sqrt(Σ_{i,j∈π} |X_ij|)` with `X = ĈᵀĈ` (001 Eq. 3 with the
    /// triangle inequality; valid for contributions of any dimension).
    AbsoluteGramBound,
    /// An upper bound for the optimal FFT decoder ([`Fft`] with [`FftKind::OptimalDecoder`]):
    /// `sens(ŶE)/(1 − ‖M̂T̂ − I‖₁)`, where `sens(ŶE)` is computed by one of the methods above
    /// and `M̂` is the Gohberg–Semencul matrix of the stored generator (see `SPEC.md`).
    GeneratorResidualBound,
    /// Exact: every two steps a participation pattern can hold have orthogonal encoder columns
    /// (`X_ij = 0`, e.g. a banded encoder with at most `b` bands under `b`-min-separation), so
    /// `sens² = max_π Σ_{i∈π} X_ii`, found by dynamic programming over the patterns
    /// (Choquette-Choo et al. 2023b, Alg. 3).
    OrthogonalColumns,
    /// Exact: a lower-triangular Toeplitz encoder whose first column is non-negative and
    /// non-increasing, for which the earliest, tightest pattern `{0, b, 2b, …}` is the worst:
    /// `sens² = Σ_{p,q} X_{pb,qb}` over its at most `k` steps.
    NonincreasingToeplitz,
    /// An upper bound: `max_π sqrt(Σ_{i,j∈π} |X_ij|)` (as [`AbsoluteGramBound`]) by a branch and
    /// bound over the patterns that stopped at its budget; the value is the largest bound of the
    /// patterns it left open, never above the row-wise bound of Choquette-Choo et al. 2023b,
    /// Alg. 4.
    ///
    /// [`AbsoluteGramBound`]: SensitivityMethod::AbsoluteGramBound
    PatternSearchBound,
    /// An upper bound for a Toeplitz encoder under `b`-min-separation: the
    /// [`NonincreasingToeplitz`] value of the smallest non-increasing majorant of `|c|`, the
    /// absolute first column (entrywise `|X_ij|` is at most the majorant's Gram entry).
    ///
    /// [`NonincreasingToeplitz`]: SensitivityMethod::NonincreasingToeplitz
    ToeplitzMajorantBound,
    /// An upper bound valid for **every** horizon, for a BLT ([`Blt`]) under single
    /// participation: `sqrt(Σ_{t<T} c_t² + τ)`, the exact head of the encoder's first column
    /// `c = 1/r` from the stored `f32` parameters and a bound `τ` on its tail (`SPEC.md`,
    /// "Unbounded horizon"). A blob with it has no horizon: its `steps` is the horizon its
    /// parameters and error figures are for, and the runtime does not stop there.
    BltTailBound,
}

impl SensitivityMethod {
    /// Whether the recorded sensitivity holds for every number of steps, not only the blob's
    /// `steps` ([`SensitivityMethod::BltTailBound`]): the stream then has no horizon.
    pub fn covers_every_horizon(&self) -> bool {
        matches!(self, SensitivityMethod::BltTailBound)
    }

    /// Whether the recorded value is the sensitivity itself rather than an upper bound on it.
    pub fn is_exact(&self) -> bool {
        matches!(
            self,
            SensitivityMethod::MaxColumnNorm
                | SensitivityMethod::NonnegativeGram
                | SensitivityMethod::OrthogonalColumns
                | SensitivityMethod::NonincreasingToeplitz
        )
    }
}

/// The calibrated noise multiplier and the privacy target it was derived from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Calibration {
    /// `σ`: the noise of the normalized mechanism is `N(0, σ²ζ²sens²)` per coordinate.
    pub noise_multiplier: f64,
    /// `(ε, δ)` the multiplier achieves, if it was calibrated for one.
    pub target: Option<PrivacyTarget>,
}

/// An `(ε, δ)` differential-privacy target.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PrivacyTarget {
    /// `ε > 0`.
    pub epsilon: f64,
    /// `0 < δ < 1`.
    pub delta: f64,
}

/// The error of the shipped mechanism for `σ = ζ = 1`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ErrorSummary {
    /// `sqrt(L) = sens·‖B̂‖_F`: root of the total squared error over all steps.
    pub sqrt_loss: f64,
    /// `sqrt(L)` of the uncompressed optimum the decoder approximates, if known.
    pub optimal_sqrt_loss: Option<f64>,
    /// The largest per-step standard deviation, `max_i sens·‖B̂[i,:]‖`.
    pub max_step_stddev: f64,
    /// The standard deviation of the last step, `sens·‖B̂[n-1,:]‖`.
    pub final_step_stddev: f64,
}

/// The stored decoder `B̂`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Decoder<'a> {
    /// Banded plus low rank: `B̂ = (L Rᵀ) ⊙ U⁽ʰ⁾ + D⁽ʰ⁾` (003 App. H).
    #[serde(borrow)]
    BandedLowRank(BandedLowRank<'a>),
    /// An FFT mechanism (001 §4 and App. K), stamped `s` times.
    #[serde(borrow)]
    Fft(Fft<'a>),
    /// Buffered linear Toeplitz (Dvijotham et al. 2024): `C⁻¹` is Toeplitz with `r_0 = 1`,
    /// `r_k = Σ_j ω_j θ_j^{k−1}`, replayed with `m` buffers per coordinate.
    #[serde(borrow)]
    Blt(Blt<'a>),
    /// BandMF (Choquette-Choo et al. 2023b; McKenna 2025): the banded lower-triangular
    /// *encoder* `C` with `b̂` bands, general or Toeplitz; the runtime adds `w = C⁻¹z` to the
    /// clipped inputs by forward substitution (`SPEC.md`, decoder 3).
    #[serde(borrow)]
    BandMf(BandMf<'a>),
}

/// Which banded encoder a [`BandMf`] form stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum BandMfKind {
    /// `n × b̂` coefficients: row `i` holds `C[i, i], C[i, i−1], …, C[i, i−b̂+1]`.
    General,
    /// `b̂` coefficients `c_0 … c_{b̂−1}` shared by every row: `C[i, i−l] = c_l`.
    Toeplitz,
}

/// The BandMF form: a lower-triangular banded encoder `C` (`C[i, j] = 0` unless
/// `0 ≤ i − j < b̂`). Step `t` computes `w_t = (z_t − Σ_{l=1}^{b̂−1} C[t, t−l] w_{t−l}) / C[t, t]`
/// and releases the running sum of `clip(x) + σζ·sens·w` for the prefix sum, or
/// `clip(x_t) + σζ·sens·w_t` for another workload (the caller applies `A`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BandMf<'a> {
    /// General or Toeplitz.
    pub kind: BandMfKind,
    /// `b̂`, `1 ≤ b̂ ≤ n`: diagonals of `C`, the main one included.
    pub bands: u32,
    /// General: `n × b̂` row-major, entry `(i, l) = C[i, i−l]`, `+0.0` where `l > i`;
    /// Toeplitz: `c_0 … c_{b̂−1}`. Every `C[i, i]` is non-zero.
    #[serde(borrow)]
    pub encoder: F32Table<'a>,
}

impl<'a> BandMf<'a> {
    /// `b̂`.
    pub fn bands(&self) -> usize {
        self.bands as usize
    }

    /// The `b̂` coefficients of row `i`: `C[i, i], C[i, i−1], …, C[i, i−b̂+1]` (entries left of
    /// column 0 are zero in the general form; the Toeplitz form has the same row everywhere).
    #[inline]
    pub fn row(&self, step: usize) -> Option<F32Table<'a>> {
        let h = self.bands();
        match self.kind {
            BandMfKind::General => self.encoder.slice(step.checked_mul(h)?, h),
            BandMfKind::Toeplitz => Some(self.encoder),
        }
    }

    fn validate(&self, steps: u32) -> Result<(), Error> {
        if self.bands == 0 || self.bands > steps {
            return Err(Error::InvalidField {
                field: "decoder.bands",
            });
        }
        match self.kind {
            BandMfKind::Toeplitz => {
                check_table("decoder.encoder", self.encoder, self.bands, 1)?;
                if self
                    .encoder
                    .get(0)
                    .is_some_and(|c| c.to_bits() & F32_EXPONENT == 0)
                {
                    return Err(Error::SingularEncoder { step: 0 });
                }
            }
            BandMfKind::General => {
                check_table("decoder.encoder", self.encoder, steps, self.bands)?;
                check_band_rows(self.encoder, self.bands(), true)?;
            }
        }
        Ok(())
    }
}

/// The BLT form: the noise of step `t` is `Σ_{u ≤ t} w_u` with `w = C⁻¹ z`, computed as
/// `w_t = z_t + Σ_j ω_j s_j`, then `s_j ← θ_j s_j + z_t` (buffers start at zero).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Blt<'a> {
    /// `θ_j ∈ (0, 1)`, `m ≥ 1` values.
    #[serde(borrow)]
    pub theta: F32Table<'a>,
    /// `ω_j`, finite, as many as `theta`.
    #[serde(borrow)]
    pub omega: F32Table<'a>,
}

impl Blt<'_> {
    /// Buffers `m`.
    pub fn buffers(&self) -> usize {
        self.theta.as_bytes().len() / 4
    }

    fn validate(&self) -> Result<(), Error> {
        let m = u32::try_from(self.buffers()).map_err(|_| Error::InvalidField {
            field: "decoder.theta",
        })?;
        if m == 0 || m > MAX_BLT_BUFFERS {
            return Err(Error::InvalidField {
                field: "decoder.theta",
            });
        }
        check_table("decoder.theta", self.theta, m, 1)?;
        check_table("decoder.omega", self.omega, m, 1)?;
        if self.theta.iter().any(|t| t <= 0.0 || t >= 1.0) {
            return Err(Error::InvalidField {
                field: "decoder.theta",
            });
        }
        Ok(())
    }
}

/// The most buffers a [`Blt`] form may have.
pub const MAX_BLT_BUFFERS: u32 = 64;

/// Which decoder an [`Fft`] form replays (001 App. K).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum FftKind {
    /// Mechanism 1: `B̂ = P Ŷ`, the first `m` rows of the circulant with first column `ŷ`.
    Circulant,
    /// Mechanism 2, the optimal decoder `B̂ = S M̂ Eᵀ Ŷᵀ`, `M̂` the Gohberg–Semencul matrix of the
    /// generator `x̂`: `M̂ = (L(x̂)L(x̂)ᵀ − L(x̃)L(x̃)ᵀ)/x̂₀`, `x̃ = (0, x̂_{m−1}, …, x̂₁)`.
    OptimalDecoder,
}

/// The FFT form: blocks of `m` steps, each block's noise a function of `2m` fresh noise rows
/// `z`; step `r` of block `i` releases `(B̂_m z_i)_r + Σ_{i' < i} (B̂_m z_{i'})_{m−1}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Fft<'a> {
    /// Which decoder `B̂_m` (`m × 2m`) the blocks use.
    pub kind: FftKind,
    /// `m ≥ 1`: steps per block.
    pub block: u32,
    /// `s ≥ 1`: blocks; `s·m` is the horizon `n`.
    pub stamps: u32,
    /// `ŷ`, `2m` values: the first column of the real circulant `Ŷ ≈ F*√Σ F`.
    #[serde(borrow)]
    pub kernel: F32Table<'a>,
    /// `x̂ ≈ T̂⁻¹e₀` (`m` values, `x̂₀ > 0`) for [`FftKind::OptimalDecoder`], empty otherwise.
    #[serde(borrow)]
    pub generator: F32Table<'a>,
}

impl Fft<'_> {
    fn validate(&self, steps: u32) -> Result<(), Error> {
        if self.block == 0 || self.stamps == 0 {
            return Err(Error::InvalidField {
                field: "decoder.block",
            });
        }
        if self.block.checked_mul(self.stamps) != Some(steps) {
            return Err(Error::InvalidField {
                field: "decoder.stamps",
            });
        }
        let Some(two_m) = self.block.checked_mul(2) else {
            return Err(Error::InvalidField {
                field: "decoder.block",
            });
        };
        check_table("decoder.kernel", self.kernel, two_m, 1)?;
        match self.kind {
            FftKind::Circulant => check_table("decoder.generator", self.generator, 0, 0)?,
            FftKind::OptimalDecoder => {
                check_table("decoder.generator", self.generator, self.block, 1)?;
                if !self.generator.get(0).is_some_and(|x0| x0 > 0.0) {
                    return Err(Error::InvalidField {
                        field: "decoder.generator",
                    });
                }
            }
        }
        Ok(())
    }
}

/// `B̂[i, j] = D[i, i−j]` for `0 ≤ i − j < h`, `(L Rᵀ)[i, j]` for `i − j ≥ h`, zero above the
/// diagonal.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BandedLowRank<'a> {
    /// `h ≥ 1`: the number of diagonals stored exactly (the main diagonal included).
    pub band: u32,
    /// `r`: the rank of the part below the band.
    pub rank: u32,
    /// `n × h`, row-major: `diagonals[i·h + k] = B̂[i, i−k]`; zero where `k > i`.
    #[serde(borrow)]
    pub diagonals: F32Table<'a>,
    /// `L`, `n × r`, row-major.
    #[serde(borrow)]
    pub left: F32Table<'a>,
    /// `R`, `n × r`, row-major.
    #[serde(borrow)]
    pub right: F32Table<'a>,
}

impl<'a> BandedLowRank<'a> {
    /// The `h` band coefficients of row `i`: `B̂[i, i], B̂[i, i−1], …, B̂[i, i−h+1]`.
    #[inline]
    pub fn diagonal_row(&self, step: usize) -> Option<F32Table<'a>> {
        let h = self.band as usize;
        self.diagonals.slice(step.checked_mul(h)?, h)
    }

    /// Row `i` of `L`.
    #[inline]
    pub fn left_row(&self, step: usize) -> Option<F32Table<'a>> {
        let r = self.rank as usize;
        self.left.slice(step.checked_mul(r)?, r)
    }

    /// Row `j` of `R`.
    #[inline]
    pub fn right_row(&self, step: usize) -> Option<F32Table<'a>> {
        let r = self.rank as usize;
        self.right.slice(step.checked_mul(r)?, r)
    }

    fn validate(&self, steps: u32) -> Result<(), Error> {
        if self.band == 0 || self.band > steps {
            return Err(Error::InvalidField {
                field: "decoder.band",
            });
        }
        if self.rank > steps {
            return Err(Error::InvalidField {
                field: "decoder.rank",
            });
        }
        check_table("decoder.diagonals", self.diagonals, steps, self.band)?;
        check_table("decoder.left", self.left, steps, self.rank)?;
        check_table("decoder.right", self.right, steps, self.rank)?;
        check_band_rows(self.diagonals, self.band as usize, false)
    }
}

/// The rows of an `n × h` row-major band table (decoder 0's diagonals, decoder 3's general
/// encoder), whose entry `(i, k)` is the matrix's `[i, i−k]`: the diagonal entry `(i, 0)` is
/// non-zero ([`Error::SingularEncoder`] for an encoder, else [`Error::SingularDecoder`]) and the
/// entries left of column 0 (`k > i`) are `+0.0` ([`Error::NonZeroPadding`]).
/// The exponent bits of an `f32`: zero for ±0.0 and the subnormals.
const F32_EXPONENT: u32 = 0x7f80_0000;

fn check_band_rows(table: F32Table<'_>, h: usize, encoder: bool) -> Result<(), Error> {
    for (i, row) in table.as_bytes().chunks_exact(4 * h).enumerate() {
        // Word `k < h` of the row (the row has `4h` bytes).
        let word = |k: usize| {
            row.get(4 * k..4 * k + 4)
                .and_then(|w| w.try_into().ok())
                .map_or(0, u32::from_le_bytes)
        };
        let step = i as u32;
        // ±0.0 are the words whose only possible bit is the sign; an encoder's diagonal must
        // also be normal (a subnormal divisor overflows `w = C⁻¹z` at once). A normal diagonal
        // does not make the recursion stable: a small one, or off-diagonal terms that grow `w`
        // geometrically, still overflow it within a few steps. That costs utility, not privacy
        // (the sensitivity is `C`'s own, and the noise only grows); the runtime refuses the
        // first step whose release would not be finite, state unchanged (SPEC, "Unstable
        // encoders"), and the compiler's encoders are stable.
        let singular = if encoder {
            word(0) & F32_EXPONENT == 0
        } else {
            word(0) << 1 == 0
        };
        if singular {
            return Err(if encoder {
                Error::SingularEncoder { step }
            } else {
                Error::SingularDecoder { step }
            });
        }
        if (i + 1..h).any(|k| word(k) != 0) {
            return Err(Error::NonZeroPadding { step });
        }
    }
    Ok(())
}

fn check_table(table: &'static str, t: F32Table<'_>, rows: u32, cols: u32) -> Result<(), Error> {
    // u32 × u32 × 4 can exceed u64: an overflowing size is a length no table can have.
    let expected = u64::from(rows)
        .checked_mul(u64::from(cols))
        .and_then(|x| x.checked_mul(4));
    if expected != Some(t.as_bytes().len() as u64) {
        let expected = expected.unwrap_or(u64::MAX);
        return Err(Error::TableLength {
            table,
            expected: u32::try_from(expected).unwrap_or(u32::MAX),
            found: u32::try_from(t.as_bytes().len()).unwrap_or(u32::MAX),
        });
    }
    match t.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(Error::NonFiniteCoefficient {
            table,
            index: index as u32,
        }),
        None => Ok(()),
    }
}

/// `x > 0` and finite, decided on the bits: positive finite `f64`s are exactly the bit patterns
/// in `1 ..= 0x7fef…f`, ordered as their values (no `f64` arithmetic, which a Cortex-M4F lacks).
fn is_positive_finite(x: f64) -> bool {
    (1..f64::INFINITY.to_bits()).contains(&x.to_bits())
}

fn positive_finite(field: &'static str, x: f64) -> Result<(), Error> {
    if is_positive_finite(x) {
        Ok(())
    } else {
        Err(Error::InvalidField { field })
    }
}

impl<'a> Mechanism<'a> {
    /// The horizon `n`.
    pub fn steps(&self) -> u32 {
        self.header.steps
    }

    /// The standard deviation of each coordinate of `z` before decoding, `σ·ζ·sens`, if the blob
    /// is calibrated.
    pub fn noise_stddev(&self) -> Option<f64> {
        self.header
            .calibration
            .map(|c| c.noise_multiplier * self.header.clip_norm * self.header.sensitivity.value)
    }

    /// Checks every field against the ranges in `SPEC.md` (done by [`Mechanism::from_bytes`] and
    /// before writing) and returns the mechanism as a [`Validated`] one, the only kind the
    /// runtime's streams accept.
    ///
    /// [`Mechanism::from_bytes`]: crate::Mechanism::from_bytes
    pub fn validate(self) -> Result<Validated<'a>, Error> {
        self.check()?;
        Ok(Validated(self))
    }

    /// The checks of [`validate`](Self::validate), in the order `SPEC.md` lists the fields.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let h = &self.header;
        if h.steps == 0 {
            return Err(Error::InvalidField { field: "steps" });
        }
        if let Participation::FixedEpochOrder {
            max_participations,
            separation: gap,
        }
        | Participation::MinSeparation {
            max_participations,
            min_separation: gap,
        } = h.participation
        {
            if max_participations == 0 || gap == 0 || gap > h.steps {
                return Err(Error::InvalidField {
                    field: "participation",
                });
            }
        }
        if let Participation::CyclicPoisson {
            cycle_length,
            sampling_prob,
        } = h.participation
        {
            // The amplified analysis needs non-overlapping encoder columns (a BandMF decoder of
            // at most `b̂` bands), add-remove neighbours, and a rate that is a probability.
            let bands_fit = matches!(self.decoder, Decoder::BandMf(d) if d.bands <= cycle_length);
            if cycle_length == 0
                || cycle_length > h.steps
                || !(is_positive_finite(sampling_prob) && sampling_prob <= 1.0)
                || h.neighbouring != Neighbouring::AddOrRemove
                || !bands_fit
            {
                return Err(Error::InvalidField {
                    field: "participation",
                });
            }
        }
        positive_finite("sensitivity.value", h.sensitivity.value)?;
        // A bound for every horizon is proven for a BLT under single participation only.
        if h.sensitivity.method.covers_every_horizon()
            && !(matches!(self.decoder, Decoder::Blt(_))
                && matches!(h.participation, Participation::Single))
        {
            return Err(Error::InvalidField {
                field: "sensitivity.method",
            });
        }
        positive_finite("clip_norm", h.clip_norm)?;
        if let Some(c) = h.calibration {
            positive_finite("calibration.noise_multiplier", c.noise_multiplier)?;
            if let Some(t) = c.target {
                positive_finite("calibration.target.epsilon", t.epsilon)?;
                if !(is_positive_finite(t.delta) && t.delta.to_bits() < 1f64.to_bits()) {
                    return Err(Error::InvalidField {
                        field: "calibration.target.delta",
                    });
                }
            }
        }
        let e = &h.error;
        positive_finite("error.sqrt_loss", e.sqrt_loss)?;
        positive_finite("error.max_step_stddev", e.max_step_stddev)?;
        positive_finite("error.final_step_stddev", e.final_step_stddev)?;
        if let Some(x) = e.optimal_sqrt_loss {
            positive_finite("error.optimal_sqrt_loss", x)?;
        }
        match &self.decoder {
            Decoder::BandedLowRank(d) => d.validate(h.steps),
            Decoder::Fft(d) => d.validate(h.steps),
            Decoder::Blt(d) => d.validate(),
            Decoder::BandMf(d) => {
                d.validate(h.steps)?;
                self.check_orthogonal_bands(d)
            }
        }
    }

    /// A BandMF encoder's exact method `OrthogonalColumns` holds only when the columns one
    /// record can touch do not overlap: with participations at least (or exactly) `b` apart,
    /// columns `b` apart share no row only if `b̂ ≤ b`. A blob that claims the method with more
    /// bands, whenever a record may take part more than once, records a sensitivity that may be
    /// far too small, so it is refused.
    fn check_orthogonal_bands(&self, d: &BandMf<'_>) -> Result<(), Error> {
        let h = &self.header;
        let gap = match h.participation {
            Participation::FixedEpochOrder {
                max_participations,
                separation,
            } if max_participations > 1 => separation,
            Participation::MinSeparation {
                max_participations,
                min_separation,
            } if max_participations > 1 => min_separation,
            _ => return Ok(()),
        };
        if h.sensitivity.method == SensitivityMethod::OrthogonalColumns && d.bands > gap {
            return Err(Error::InvalidField {
                field: "decoder.bands",
            });
        }
        Ok(())
    }
}

/// A [`Mechanism`] whose every field has been checked against `SPEC.md`: only
/// [`Mechanism::from_bytes`](crate::Mechanism::from_bytes) and [`Mechanism::validate`] make one
/// (its field is private), so code that takes a `Validated` — every stream constructor of the
/// runtime — never sees an unchecked mechanism, such as one with `band: 0` built in code. It
/// dereferences to the mechanism for reading.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Validated<'a>(Mechanism<'a>);

impl<'a> Validated<'a> {
    /// The mechanism, e.g. to change a field and validate it again.
    pub fn into_inner(self) -> Mechanism<'a> {
        self.0
    }
}

impl<'a> core::ops::Deref for Validated<'a> {
    type Target = Mechanism<'a>;
    fn deref(&self) -> &Mechanism<'a> {
        &self.0
    }
}

impl<'a> PartialEq<Mechanism<'a>> for Validated<'a> {
    fn eq(&self, other: &Mechanism<'a>) -> bool {
        self.0 == *other
    }
}
