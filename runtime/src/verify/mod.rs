//! Verification on the device: recompute a blob's sensitivity from the stored `f32` coefficients
//! under its declared participation schema, bound the rounding of this computation, and refuse a
//! blob whose recorded sensitivity is below that bound ([`Error::SensitivityUnderstated`]), so a
//! device does not take the server's word for the noise it adds. `no_std`, no allocation: the
//! caller provides the scratch ([`scratch_len`]) and a budget of operations ([`operations`]).
//!
//! **Soundness rule.** The device computes an upper bound `U` on the true sensitivity of the stored
//! coefficients, its own rounding included, and accepts the blob only if the recorded sensitivity
//! is at least `U`. Sums of non-negative terms are rounded up (`N` terms in `f64`: a factor
//! `1 + (N + 2)·2⁻⁵²`, Higham 2002, §4.2), square roots are correctly rounded and rounded up by
//! `1 + 2⁻⁴⁸`. Where the encoder is not stored but solved for (the banded form's `Ĉ = B̂⁻¹S`, the
//! BLT's `c = 1/r`), the solution `ŷ` is computed in plain `f64` and checked **a posteriori**: its
//! residual `ρ` is computed with running error bounds (Wilkinson's standard model, Higham 2002,
//! §2.2: `fl(a ∘ b) = (a ∘ b)(1 + δ)`, `|δ| ≤ u = 2⁻⁵³`, each bound doubled to `2u` and multiplied
//! by `1 + 2⁻⁴⁸` for the rounding of the bound's own arithmetic), `ŷ` taken as exact, so the bounds
//! never compound along the solve; then `y − ŷ` is the encoder applied to `ρ`, which gives
//! `Y ≤ Ŷ/(1 − a)` with `a` a multiple of `‖ρ‖₁` (the module [`banded`] and the function `blt`
//! below; the FFT forms' Toeplitz inverse in [`fft`]). When `a` exceeds `10⁻⁶` the blob is
//! [`Unverifiable::IllConditioned`] rather than refused. The compiler records `max(sens, U)`
//! (`mfc_compiler::blob`): the arithmetic is IEEE `+ − × ÷` and a correctly rounded square root,
//! without fused multiply-adds, so host and device compute the same `U` bit for bit, and every blob
//! the compiler writes verifies. Blobs written before this check existed record the compiler's
//! value, which may be below `U` by rounding (`10⁻¹⁵`; the FFT forms' `U` is up to `2·10⁻⁷` above
//! it at `m = 10⁴`, `fft`): they are refused, with a message that says to recompile them.
//!
//! **What is verified, exactly (each the same value as the compiler's method, up to rounding).**
//!
//! | form | schema | computation | operations | scratch (`f64`) |
//! |---|---|---|---|---|
//! | BandMF Toeplitz | any, `b̂ ≤ b` | `Σ_{p<k'} ‖Ĉ[:, pb]‖²` (columns orthogonal, norms non-increasing) | `b̂ + k'` | 0 |
//! | BandMF general | single | `max_j ‖Ĉ[:, j]‖²` | `n·b̂` | 0 |
//! | BandMF general | fixed epoch order, `b̂ ≤ b` | max over windows of `k'` columns `b` apart | `n·k'·b̂` | 0 |
//! | BandMF general | min separation, `b̂ ≤ b` | dynamic programme over patterns (Choquette-Choo et al. 2023b, Alg. 3) | `n·(b̂ + k')` | `k'·b` |
//! | BLT | single | `Σ_{t<n} c_t²`, `c` by the inverse filter, checked by its residual | `n·m` | `2m` |
//! | BLT | fixed epoch order | `Σ_t (Σ_{p<k'} \|c_{t−pb}\|)²`, `k'` filters `b` steps apart | `n·m·k'` | `2m + m(k' − 1)` |
//! | BLT | min separation | the same for the non-increasing majorant of `\|c\|`, stored | `n·(m + k')` | `2m + n` |
//! | BLT, every horizon (`BltTailBound`) | single | `Σ_{t<T} c_t²` as above plus a tail through `‖A^k‖_∞ ≤ ½` ([`blt_tail`]) | `k·(2m² + 2m) + T·m`, counted as it runs | `m² + 3m` |
//! | banded + low rank, prefix sum | single | `max_j ‖B̂⁻¹ S e_j‖²`, forward substitution per column, checked by its residual ([`banded`]) | `n(n + 1)/2 · (h + 2r)` | `h + 2r` |
//! | banded + low rank, prefix sum | fixed epoch order | `max_π Σ_{i,j∈π} \|X_ij\|`, `X = ĈᵀĈ`, over the windows of `k'` columns `b` apart ([`banded`]) | `n(n + 1)/2 · (h + 2r + k')` | `⌈n/b⌉(h + 2r + 1 + k')` |
//! | banded + low rank, prefix sum | min separation | row-wise bound `max_π Σ_{i∈π} r_i`, `r_i = max_{π∋i} Σ_{j∈π} \|X_ij\|` (Choquette-Choo et al. 2023b, Alg. 4), a row of `X` per transposed solve (`verify/banded.rs`) | `n(n + 1)/2 · (h + 2r) + n²(h + 2r + k') + n·k'` | `4n + k' + 1 + 2(h + 2r)` |
//! | FFT Circulant, `s` stamps | single | `max_j (SᵀT̂⁻¹S)[j, j]` of one block, `T̂⁻¹` by Levinson–Durbin checked by its Gohberg–Semencul residual ([`fft`]) | `14m²` | `18m` |
//! | FFT OptimalDecoder, `s` stamps | single | `‖ŷ‖/(1 − ‖M̂T̂ − I‖₁)`, the residual of the stored generator bounded in `O(m²)` ([`fft`]) | `11m²` | `18m` |
//! | FFT, both kinds | fixed epoch order, Gram `≥ 0` on the patterns (Circulant: or `AbsoluteGramBound` recorded) | `max_π 1ᵀ\|X[π, π]\|1` of the block-diagonal Gram, signs certified ([`fft`]) | the above `+ n·k'²·2m` (Circulant), `+ n·k'²` (OptimalDecoder) | `18m` |
//!
//! with `k' = min(k, ⌈n/b⌉)` and `m` the FFT block; a schema with `k' = 1` (at most one
//! participation fits in the `n` steps) is single participation and verified as such. Everything
//! else is [`Unverifiable`]: the FFT
//! forms under min separation or with a Gram not certified non-negative on a pattern (the
//! compiler's value then comes from a search or a spectral bound on the dense encoder), the
//! banded form for a custom workload (the blob does not store `A`), a BandMF encoder with more
//! bands than the separation, a residual too large to certify, and any case whose operations
//! exceed the caller's budget or whose scratch is short. Refusing or accepting such a blob is the
//! caller's policy
//! ([`Verdict::Unverifiable`], [`crate::policy`]), after one more check: the recorded value must
//! be at least the certified **lower** bound of [`lower`] (a column, a pivot, the head of a BLT's
//! encoder), which refuses gross understatement even where no upper bound can be certified.
//!
//! **Paying only for the forms a program verifies.** [`verify`] dispatches on the blob's decoder
//! at run time, so a program that calls it links every form's verifier (about 31 KB of a
//! Cortex-M4F's flash, `examples/firmware/verify-budget.sh`). [`verify_only`] takes the forms as
//! a const parameter (a bit set of [`forms`]): the other forms' verifiers are dead code in its
//! monomorphised copy and the linker drops them, whatever the build's features (link-time
//! selection, so every crate of a workspace keeps the one `verify` and Cargo's feature
//! unification cannot add or remove a verifier behind a firmware's back). A blob of a form the
//! program did not link is refused with [`Error::VerifierNotLinked`], never admitted unverified.

use mfc_formats::{
    BandMfKind, Decoder, F32Table, Participation, SensitivityMethod, Validated, Workload,
};

use crate::error::Error;

pub mod banded;
pub mod blt_tail;
pub mod fft;
pub mod lower;
mod sqrt;

/// The verifiers a program links: bits of the const parameter of [`verify_only`] (and
/// [`crate::policy::admit_only`]), combined with `|`: the forms (a decoder; the BLT's bound over
/// every horizon, `BltTailBound` with [`blt_tail`], has its own bit, as it is another
/// computation) and, orthogonal to them, the participation schemas (each form's rows of the
/// table in the module docs). A blob is verified when both its form's bit and its schema's bit
/// are set, e.g. `BANDED | SINGLE` for a banded blob under single participation. The schema is
/// the one verified: a schema under which a record takes part in at most one of the `n` steps
/// (`k' = 1`) and cyclic Poisson sampling are [`SINGLE`](forms::SINGLE); a schema this version
/// does not know has no bit (it is [`Unverifiable::Schema`] whatever the bits).
pub mod forms {
    use mfc_formats::{Decoder, Participation, Validated};

    /// Banded + low rank ([`super::banded`]).
    pub const BANDED: u8 = 1 << 0;
    /// BLT over the blob's horizon (its encoder's residual).
    pub const BLT: u8 = 1 << 1;
    /// BLT over every horizon (`SensitivityMethod::BltTailBound`, [`super::blt_tail`]).
    pub const BLT_EVERY_HORIZON: u8 = 1 << 2;
    /// BandMF, Toeplitz and general.
    pub const BANDMF: u8 = 1 << 3;
    /// FFT, Circulant and OptimalDecoder ([`super::fft`]).
    pub const FFT: u8 = 1 << 4;
    /// Single participation (and every schema with `k' = 1`, and cyclic Poisson sampling).
    pub const SINGLE: u8 = 1 << 5;
    /// Fixed epoch order with `k' ≥ 2`.
    pub const FIXED_EPOCH_ORDER: u8 = 1 << 6;
    /// Min separation with `k' ≥ 2`.
    pub const MIN_SEPARATION: u8 = 1 << 7;
    /// Every form under every schema: what [`super::verify`] links.
    pub const ALL: u8 = u8::MAX;

    /// The bits whose verifier `m` needs: its form's and its schema's (no form bit for a decoder
    /// this version does not know, no schema bit for a schema it does not know).
    pub fn of(m: &Validated<'_>) -> u8 {
        let form = match m.decoder {
            Decoder::Blt(_) if m.header.sensitivity.method.covers_every_horizon() => {
                BLT_EVERY_HORIZON
            }
            Decoder::BandedLowRank(_) => BANDED,
            Decoder::Blt(_) => BLT,
            Decoder::BandMf(_) => BANDMF,
            Decoder::Fft(_) => FFT,
            _ => 0,
        };
        let participation = m.header.participation;
        let schema = match (
            participation,
            super::schema(participation, m.header.steps as usize),
        ) {
            (_, Ok(None)) => SINGLE,
            (Participation::FixedEpochOrder { .. }, Ok(Some(_))) => FIXED_EPOCH_ORDER,
            (Participation::MinSeparation { .. }, Ok(Some(_))) => MIN_SEPARATION,
            _ => 0,
        };
        form | schema
    }

    /// Whether a program that links `forms` verifies `m`: its form's bit is set, and so is its
    /// schema's (a schema without a bit passes, to be found [`super::Unverifiable::Schema`]).
    pub fn links(forms: u8, m: &Validated<'_>) -> bool {
        let needed = of(m);
        let form = needed & (BANDED | BLT | BLT_EVERY_HORIZON | BANDMF | FFT);
        form != 0 && forms & needed == needed
    }
}

/// Why a blob's sensitivity could not be checked within what the caller allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Unverifiable {
    /// The decoder form has no verification here (a form a later format version adds; every
    /// form of this version has one). From [`sensitivity_bound`]; [`verify`] and
    /// [`verify_only`] refuse such a blob before, with [`Error::VerifierNotLinked`], as a form
    /// the program does not link.
    Form,
    /// The participation schema has no exact verification for this form (the FFT forms under
    /// min separation, or under fixed epoch order with a Gram not non-negative on a pattern; a
    /// BandMF encoder with more bands than the separation).
    Schema,
    /// The workload is custom and the blob does not store it (the banded form's sensitivity is
    /// that of `B̂⁻¹A`).
    WorkloadNotStored,
    /// The computation needs more operations than the budget.
    OverBudget {
        /// Operations it needs ([`operations`]).
        operations: u64,
    },
    /// The scratch is shorter than [`scratch_len`].
    ScratchTooSmall {
        /// `f64`s it needs.
        needed: usize,
    },
    /// The residual of a solved encoder (banded `B̂⁻¹S`, BLT `1/r`) is too large to certify the
    /// value to a relative `10⁻⁶`, or a bound is not finite; for a bound over every horizon
    /// (`BltTailBound`), also a BLT state matrix with no power `A^k`, `k ≤ 16384`, provably of
    /// norm at most `½` ([`blt_tail`]): its encoder may not decay.
    IllConditioned,
}

/// The outcome of [`verify`] for a blob it did not refuse.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// The recorded sensitivity is at least the bound `U` computed from the stored coefficients.
    Verified {
        /// The blob's recorded sensitivity (for its neighbouring relation).
        recorded: f64,
        /// `U`, the upper bound on the true sensitivity (for the same relation).
        bound: f64,
    },
    /// The sensitivity could not be checked; the caller's policy decides.
    Unverifiable(Unverifiable),
}

/// `1 + 2⁻⁴⁸`: multiplies every error bound, covering the rounding of the bound's arithmetic.
const GROW: f64 = 1.0 + 1.0 / (1u64 << 48) as f64;
/// `2u = 2⁻⁵²`: the relative rounding error of one operation, with a factor 2 to spare.
const TWO_U: f64 = 1.0 / (1u64 << 52) as f64;
/// The absolute error of an underflowing product or quotient.
const TINY: f64 = f64::MIN_POSITIVE;

/// A computed value `v` and a bound `e` on its distance to the exact value.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bounded {
    v: f64,
    e: f64,
}

impl Bounded {
    const fn exact(v: f64) -> Self {
        Self { v, e: 0.0 }
    }

    #[inline(never)]
    fn add(self, o: Self) -> Self {
        let v = self.v + o.v;
        Self {
            v,
            e: (self.e + o.e + v.abs() * TWO_U) * GROW,
        }
    }

    fn sub(self, o: Self) -> Self {
        self.add(Self { v: -o.v, e: o.e })
    }

    #[inline(never)]
    fn mul(self, o: Self) -> Self {
        let v = self.v * o.v;
        Self {
            v,
            e: (self.v.abs() * o.e + o.v.abs() * self.e + self.e * o.e + v.abs() * TWO_U + TINY)
                * GROW,
        }
    }

    /// An upper bound on `|exact|`.
    #[inline(never)]
    fn abs_upper(self) -> f64 {
        (self.v.abs() + self.e) * GROW
    }

    /// Value `i` of a scratch of pairs `(v, e)`; NaN past the end ([`value`]).
    fn read(scratch: &[f64], i: usize) -> Self {
        Self {
            v: value(scratch, 2 * i),
            e: value(scratch, 2 * i + 1),
        }
    }

    fn write(self, scratch: &mut [f64], i: usize) {
        store(scratch, 2 * i, self.v);
        store(scratch, 2 * i + 1, self.e);
    }
}

/// `scratch[i]`, or NaN past its end — which no bound survives (`upper` keeps it, `solve_up` and
/// the final `is_finite` make it [`Unverifiable::IllConditioned`]). Never past the end: every
/// computation runs in the [`scratch_len`] floats `sensitivity_bound` checked.
fn value(scratch: &[f64], i: usize) -> f64 {
    scratch.get(i).copied().unwrap_or(f64::NAN)
}

/// `scratch[i]` of a table of upper bounds, or `+∞` past its end: a maximum (`f64::max`) would
/// drop a NaN, never an infinity.
fn bound_at(scratch: &[f64], i: usize) -> f64 {
    scratch.get(i).copied().unwrap_or(f64::INFINITY)
}

/// `scratch[i] = x` (nothing past the end, where [`value`] and [`bound_at`] read no number).
fn store(scratch: &mut [f64], i: usize, x: f64) {
    if let Some(slot) = scratch.get_mut(i) {
        *slot = x;
    }
}

/// The larger of two upper bounds, `NaN` when either is (`f64::max` returns the other operand,
/// which would drop a column whose computation overflowed into `NaN` from the maximum; a `NaN`
/// bound ends as [`Unverifiable::IllConditioned`]).
fn upper(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        larger(a, b)
    }
}

/// `f64::max(a, b)` (the other operand when one is NaN, as IEEE maxNum), in comparisons the
/// verifier links anyway: `f64::max` calls `fmax` on a Cortex-M4F (no `f64` unit).
#[inline(never)]
fn larger(a: f64, b: f64) -> f64 {
    if a.is_nan() || a < b { b } else { a }
}

/// `f64::min(a, b)` (the other operand when one is NaN), as [`larger`].
#[inline(never)]
fn smaller(a: f64, b: f64) -> f64 {
    if a.is_nan() || b < a { b } else { a }
}

/// An upper bound on a sum of non-negative upper bounds, added in `f64`: the recursive sum of
/// `N` terms is within a factor `(1 + u)^N` of the exact one.
#[derive(Debug, Clone, Copy, Default)]
struct UpperSum {
    sum: f64,
    terms: u64,
}

/// The largest relative correction [`solve_up`] applies for rounding (a few units of `10⁻¹⁶`
/// times the horizon in practice): beyond it the rounding is not small and
/// [`Unverifiable::IllConditioned`] is reported instead of a bound that would refuse an honest
/// blob. The compiler raises a recorded value by at most `2·10⁻⁶` (`mfc_compiler::blob`), far
/// below the 1% a lowered sensitivity is caught at.
const LOOSENESS: f64 = 1e-6;

impl UpperSum {
    /// Adds a non-negative upper bound.
    fn add(&mut self, x: f64) {
        self.sum += x;
        self.terms += 1;
    }

    fn value(self) -> f64 {
        self.sum * (1.0 + (self.terms as f64 + 2.0) * TWO_U) * GROW
    }
}

/// `k' = min(k, ⌈n/b⌉)` and `b` of a multi-participation schema; `None` for single
/// participation and for every schema under which a record can take part in at most one of the
/// `n` steps (`k ≤ 1`, or `b ≥ n`): its patterns are those of single participation, so is its
/// sensitivity, and so is the method that checks it. Cyclic Poisson sampling records the
/// single-participation sensitivity (the largest column norm) by definition: the format admits
/// it only with a BandMF decoder of at most `b̂` bands, whose columns at one record's steps
/// (exactly `b̂` apart) do not overlap, and its amplification is in the calibration's `σ`.
fn schema(
    participation: Participation,
    steps: usize,
) -> Result<Option<(usize, usize)>, Unverifiable> {
    let (k, b) = match participation {
        Participation::Single | Participation::CyclicPoisson { .. } => return Ok(None),
        Participation::FixedEpochOrder {
            max_participations,
            separation,
        } => (max_participations, separation),
        Participation::MinSeparation {
            max_participations,
            min_separation,
        } => (max_participations, min_separation),
        _ => return Err(Unverifiable::Schema),
    };
    let b = (b as usize).max(1);
    let k = (k as usize).min(steps.div_ceil(b));
    Ok(if k <= 1 { None } else { Some((k, b)) })
}

/// The `f64`s of scratch [`verify`] needs for `m` (0 for forms it does not verify).
pub fn scratch_len(m: &Validated<'_>) -> usize {
    scratch_len_of::<{ forms::ALL }>(m)
}

/// [`scratch_len`] for the forms of `FORMS` ([`forms`]; 0 for the others).
fn scratch_len_of<const FORMS: u8>(m: &Validated<'_>) -> usize {
    let steps = m.header.steps as usize;
    match m.decoder {
        Decoder::Blt(d)
            if FORMS & forms::BLT_EVERY_HORIZON != 0
                && m.header.sensitivity.method.covers_every_horizon() =>
        {
            blt_tail::scratch_len(d.buffers())
        }
        Decoder::Blt(_) if m.header.sensitivity.method.covers_every_horizon() => 0,
        Decoder::BandedLowRank(d) if FORMS & forms::BANDED != 0 => {
            match schema(m.header.participation, steps) {
                Err(_) => 0,
                Ok(ks) => {
                    banded::scratch_len(&d, steps, banded::Shape::of(m.header.participation, ks))
                }
            }
        }
        Decoder::Blt(d) if FORMS & forms::BLT != 0 => match (
            m.header.participation,
            schema(m.header.participation, steps),
        ) {
            (Participation::FixedEpochOrder { .. }, Ok(Some((k, _)))) => {
                2 * d.buffers() + d.buffers().saturating_mul(k - 1)
            }
            (_, Ok(Some(_))) => 2 * d.buffers() + steps,
            _ => 2 * d.buffers(),
        },
        Decoder::BandMf(d) if FORMS & forms::BANDMF != 0 => match (
            d.kind,
            m.header.participation,
            schema(m.header.participation, steps),
        ) {
            (BandMfKind::General, Participation::MinSeparation { .. }, Ok(Some((k, b)))) => {
                k.saturating_mul(b)
            }
            _ => 0,
        },
        Decoder::Fft(d) if FORMS & forms::FFT != 0 => match (
            m.header.participation,
            schema(m.header.participation, steps),
        ) {
            (_, Ok(None)) | (Participation::FixedEpochOrder { .. }, _) => fft::scratch_len(&d),
            _ => 0,
        },
        _ => 0,
    }
}

/// The operations (multiply-adds) [`verify`] spends on `m`, `None` for forms or schemas it does
/// not verify, and for a BLT bound over every horizon (`BltTailBound`), whose cost depends on how
/// fast its encoder decays and is only known after the run ([`blt_tail::certify`] counts it and
/// stops at the budget). Compare with a device's budget: what one operation costs a Cortex-M4F
/// in soft-float `f64` is measured by `examples/firmware/src/bin/verify.rs` (`BENCHMARKS.md`,
/// "Verification on the device").
pub fn operations(m: &Validated<'_>) -> Option<u64> {
    operations_of::<{ forms::ALL }>(m)
}

/// [`operations`] for the forms of `FORMS` ([`forms`]; `None` for the others).
fn operations_of<const FORMS: u8>(m: &Validated<'_>) -> Option<u64> {
    if m.header.sensitivity.method.covers_every_horizon() {
        return None;
    }
    let n = u64::from(m.header.steps);
    let ks = schema(m.header.participation, n as usize).ok()?;
    match m.decoder {
        Decoder::BandedLowRank(d) if FORMS & forms::BANDED != 0 => Some(banded::operations(
            &d,
            n as usize,
            banded::Shape::of(m.header.participation, ks),
        )),
        Decoder::Blt(d) if FORMS & forms::BLT != 0 => {
            let buffers = d.buffers() as u64;
            Some(match (ks, m.header.participation) {
                (None, _) => n.saturating_mul(buffers),
                (Some((k, _)), Participation::FixedEpochOrder { .. }) => {
                    n.saturating_mul(buffers).saturating_mul(k as u64)
                }
                (Some((k, _)), _) => n.saturating_mul(buffers + k as u64),
            })
        }
        Decoder::BandMf(d) if FORMS & forms::BANDMF != 0 => {
            let bands = u64::from(d.bands);
            Some(match (d.kind, ks, m.header.participation) {
                (BandMfKind::Toeplitz, None, _) => bands,
                (BandMfKind::Toeplitz, Some((k, _)), _) => bands + k as u64,
                (_, None, _) => n * bands,
                (_, Some((k, _)), Participation::FixedEpochOrder { .. }) => {
                    n.saturating_mul(k as u64).saturating_mul(bands)
                }
                (_, Some((k, _)), _) => n.saturating_mul(bands + k as u64),
            })
        }
        Decoder::Fft(d) if FORMS & forms::FFT != 0 => match (ks, m.header.participation) {
            (None, _) => Some(fft::operations(&d, None)),
            (Some((k, _)), Participation::FixedEpochOrder { .. }) => {
                Some(fft::operations(&d, Some(k)))
            }
            _ => None,
        },
        _ => None,
    }
}

/// An upper bound `U` on the sensitivity of `m`'s stored coefficients under its schema and
/// neighbouring relation (the quantity `header.sensitivity.value` records), or why it could not
/// be computed within `max_operations` and `scratch` (see the module docs).
pub fn sensitivity_bound(
    m: &Validated<'_>,
    scratch: &mut [f64],
    max_operations: u64,
) -> Result<f64, Unverifiable> {
    bound_of::<{ forms::ALL }>(m, scratch, max_operations)
}

/// [`sensitivity_bound`] with the verifiers of `FORMS` only ([`forms`]): the caller has checked
/// that `m`'s form and schema are among them ([`forms::links`]); the others' code is not reached
/// (each arm tests its bit, a constant) and a blob of theirs would be [`Unverifiable::Form`].
fn bound_of<const FORMS: u8>(
    m: &Validated<'_>,
    scratch: &mut [f64],
    max_operations: u64,
) -> Result<f64, Unverifiable> {
    let factor = m.header.neighbouring.sensitivity_factor();
    if FORMS & forms::BLT_EVERY_HORIZON != 0
        && m.header.sensitivity.method == SensitivityMethod::BltTailBound
    {
        let (Decoder::Blt(d), Participation::Single) = (m.decoder, m.header.participation) else {
            return Err(Unverifiable::Schema);
        };
        let bound = factor * blt_tail::certify(d.theta, d.omega, scratch, max_operations)?.value;
        return if bound.is_finite() {
            Ok(bound)
        } else {
            Err(Unverifiable::IllConditioned)
        };
    }
    let Some(needed_ops) = operations_of::<FORMS>(m) else {
        return Err(match m.decoder {
            Decoder::BandedLowRank(_) | Decoder::BandMf(_) | Decoder::Blt(_) | Decoder::Fft(_) => {
                Unverifiable::Schema
            }
            _ => Unverifiable::Form,
        });
    };
    if needed_ops > max_operations {
        return Err(Unverifiable::OverBudget {
            operations: needed_ops,
        });
    }
    let needed = scratch_len_of::<FORMS>(m);
    let Some(scratch) = scratch.get_mut(..needed) else {
        return Err(Unverifiable::ScratchTooSmall { needed });
    };
    let steps = m.header.steps as usize;
    let ks = schema(m.header.participation, steps)?;
    let bound = match m.decoder {
        Decoder::BandMf(d) if FORMS & forms::BANDMF != 0 => sqrt_up(bandmf::<FORMS>(
            d,
            steps,
            ks,
            m.header.participation,
            scratch,
        )?),
        Decoder::Blt(d) if FORMS & forms::BLT != 0 => {
            blt::<FORMS>(d, steps, ks, m.header.participation, scratch)?
        }
        Decoder::BandedLowRank(d) if FORMS & forms::BANDED != 0 => {
            if !matches!(m.header.workload, Workload::PrefixSum) {
                return Err(Unverifiable::WorkloadNotStored);
            }
            banded::bound::<FORMS>(
                d,
                steps,
                banded::Shape::of(m.header.participation, ks),
                scratch,
            )?
        }
        Decoder::Fft(d) if FORMS & forms::FFT != 0 => {
            fft::bound::<FORMS>(&d, ks, m.header.sensitivity.method, scratch)?
        }
        _ => return Err(Unverifiable::Form),
    };
    let bound = factor * bound;
    if bound.is_finite() {
        Ok(bound)
    } else {
        Err(Unverifiable::IllConditioned)
    }
}

/// Checks `m`'s recorded sensitivity against [`sensitivity_bound`]: `Ok(Verified)` when it is at
/// least the bound, `Ok(Unverifiable)` when the bound could not be computed (the caller's policy
/// decides), and [`Error::SensitivityUnderstated`] when the blob records less than the stored
/// coefficients have: its noise would be too small for the `(ε, δ)` it claims. Where the upper
/// bound cannot be computed, the recorded value is still checked against the certified lower
/// bound of [`lower`] (within the same budget and scratch) and refused below it. Changes nothing.
pub fn verify(
    m: &Validated<'_>,
    scratch: &mut [f64],
    max_operations: u64,
) -> Result<Verdict, Error> {
    verify_only::<{ forms::ALL }>(m, scratch, max_operations)
}

/// [`verify`] linking the verifiers of `FORMS` only (a bit set of [`forms`], e.g.
/// `verify_only::<{ forms::BANDED | forms::FFT }>`): the same verdicts for a blob of one of
/// those forms, and [`Error::VerifierNotLinked`] for any other blob, which is refused, never
/// admitted unverified. The other forms' code is not in the program (module docs).
pub fn verify_only<const FORMS: u8>(
    m: &Validated<'_>,
    scratch: &mut [f64],
    max_operations: u64,
) -> Result<Verdict, Error> {
    if !forms::links(FORMS, m) {
        return Err(Error::VerifierNotLinked);
    }
    let recorded = m.header.sensitivity.value;
    let understated = |bound: f64| {
        let shortfall = (1.0 - recorded / bound) * 1e9;
        Error::SensitivityUnderstated {
            shortfall_ppb: ceil_ppb(shortfall),
        }
    };
    match bound_of::<FORMS>(m, scratch, max_operations) {
        Err(why) => match lower::lower_bound_of::<FORMS>(m, scratch, max_operations) {
            Some(floor) if recorded < floor => Err(understated(floor)),
            _ => Ok(Verdict::Unverifiable(why)),
        },
        Ok(bound) if bound <= recorded => Ok(Verdict::Verified { recorded, bound }),
        Ok(bound) => Err(understated(bound)),
    }
}

/// `⌈x⌉` clamped to `[1, 10⁹]` (1 for NaN), as `libm::ceil(x).clamp(1.0, 1e9) as u32`, on the
/// bits: the order of non-negative `f64`s is that of their bits, and below `2⁵²` the integer
/// part is the mantissa shifted right by `52 − exponent`, the fraction the bits shifted out. No
/// `ceil`, no float-to-integer conversion (whose saturation links two more `f64` comparisons).
fn ceil_ppb(x: f64) -> u32 {
    const MOST: u32 = 1_000_000_000;
    let bits = x.to_bits();
    let magnitude = bits & !(1 << 63);
    if bits >> 63 == 1 || bits <= 1f64.to_bits() || magnitude > f64::INFINITY.to_bits() {
        return 1;
    }
    if bits >= f64::from(MOST).to_bits() {
        return MOST;
    }
    // 1 < x < 10⁹: exponent 0..=29.
    let shift = 52 - ((bits >> 52) as u32 - 1023);
    let mantissa = (bits & ((1 << 52) - 1)) | 1 << 52;
    let fraction = mantissa & ((1 << shift) - 1);
    (mantissa >> shift) as u32 + u32::from(fraction != 0)
}

/// `√x` rounded up (the square root is correctly rounded; the margin covers it).
fn sqrt_up(x: f64) -> f64 {
    sqrt::sqrt(x) * GROW
}

/// `Y ≤ Ŷ + a·Y` with `a < LOOSENESS` gives `Y ≤ Ŷ/(1 − a)`, rounded up; else `IllConditioned`.
fn solve_up(y_hat: f64, a: f64) -> Result<f64, Unverifiable> {
    if !(a.is_finite() && a < LOOSENESS && y_hat.is_finite()) {
        return Err(Unverifiable::IllConditioned);
    }
    Ok(y_hat / (1.0 - a * GROW) * GROW * GROW)
}

/// `‖Ĉ[:, j]‖²` of a BandMF encoder, rounded up: `Σ_{l < b̂, j + l < n} Ĉ[j + l, j]²`.
fn bandmf_column(d: &mfc_formats::BandMf<'_>, steps: usize, j: usize) -> f64 {
    let bands = d.bands();
    let mut sum = UpperSum::default();
    for l in 0..bands.min(steps - j) {
        let x = match d.kind {
            BandMfKind::Toeplitz => d.encoder.get(l),
            _ => d.encoder.get((j + l) * bands + l),
        };
        // The product of two f32 is exact in f64.
        sum.add(f64::from(x.unwrap_or(0.0)) * f64::from(x.unwrap_or(0.0)));
    }
    sum.value()
}

fn bandmf<const FORMS: u8>(
    d: mfc_formats::BandMf<'_>,
    steps: usize,
    ks: Option<(usize, usize)>,
    participation: Participation,
    scratch: &mut [f64],
) -> Result<f64, Unverifiable> {
    let column = |j| bandmf_column(&d, steps, j);
    let Some((k, b)) = ks else {
        return Ok(match d.kind {
            BandMfKind::Toeplitz => column(0),
            _ => (0..steps).map(column).fold(0.0, larger),
        });
    };
    if d.bands() > b {
        return Err(Unverifiable::Schema);
    }
    // Columns b apart or more are orthogonal: sens² = max over patterns of Σ ‖Ĉ[:, j]‖².
    let mut total = UpperSum::default();
    match (d.kind, participation) {
        (BandMfKind::Toeplitz, _) => {
            // Norms do not increase with j: the earliest pattern {0, b, …} is the worst.
            for p in 0..k {
                total.add(column(p * b));
            }
        }
        (_, Participation::FixedEpochOrder { .. }) if FORMS & forms::FIXED_EPOCH_ORDER != 0 => {
            let mut best = 0.0f64;
            for start in 0..steps {
                let mut window = UpperSum::default();
                for j in (start..steps).step_by(b).take(k) {
                    window.add(column(j));
                }
                best = larger(best, window.value());
            }
            total.add(best);
        }
        (_, Participation::MinSeparation { .. }) if FORMS & forms::MIN_SEPARATION != 0 => {
            // f_j(t): the largest sum of at most j columns ≥ t, pairwise ≥ b apart;
            // f_j(t) = max(f_j(t + 1), ‖Ĉ[:, t]‖² + f_{j−1}(t + b)). Ring j − 1 of scratch holds
            // f_j at the last b steps (zero beyond the horizon).
            scratch.fill(0.0);
            for t in (0..steps).rev() {
                let w = column(t);
                let slot = t % b;
                let next = (t + 1) % b;
                for j in (1..=k).rev() {
                    let with = w + if j >= 2 {
                        bound_at(scratch, (j - 2) * b + slot)
                    } else {
                        0.0
                    };
                    let without = if t + 1 < steps {
                        bound_at(scratch, (j - 1) * b + next)
                    } else {
                        0.0
                    };
                    store(scratch, (j - 1) * b + slot, larger(with, without));
                }
            }
            // Each value is a sum of at most k rounded additions of upper bounds.
            let best = bound_at(scratch, (k - 1) * b);
            total.add(best * (1.0 + (k as f64 + 2.0) * TWO_U) * GROW);
        }
        // A schema whose verifier this program does not link (`verify_only`).
        _ => return Err(Unverifiable::Form),
    }
    Ok(total.value())
}

/// One step of the BLT encoder's filter, the device's decoder run backwards
/// (`runtime/src/forms/blt.rs`): `ĉ_t = δ_t − Σ_j ω_j s_j`, then `s_j ← θ_j s_j + ĉ_t`, in plain
/// `f64` with `state` the `m` buffers. Returns `ĉ_t`.
fn blt_step(theta: F32Table<'_>, omega: F32Table<'_>, state: &mut [f64], input: f64) -> f64 {
    let m = theta.as_bytes().len() / 4;
    let mut sum = 0.0;
    for (j, s) in state.iter().enumerate().take(m) {
        sum += f64::from(omega.get(j).unwrap_or(0.0)) * s;
    }
    let c = input - sum;
    for (j, s) in state.iter_mut().enumerate().take(m) {
        *s = f64::from(theta.get(j).unwrap_or(0.0)) * *s + c;
    }
    c
}

/// The same step with every value bounded, for the residual: the state holds
/// `Σ_{u<t} θ_j^{t−1−u} ĉ_u` with `ĉ` taken as exact (so its error bounds shrink by `θ_j < 1`
/// each step and never compound), and the result is `ρ_t = δ_t − (r * ĉ)_t`, the residual of
/// `r * c = δ` (the decoder `r = 1/c`, `r_0 = 1`, `r_k = Σ_j ω_j θ_j^{k−1}`). Its computed value
/// `ĉ_t` uses the same operations as [`blt_step`], bit for bit.
fn blt_residual(
    theta: F32Table<'_>,
    omega: F32Table<'_>,
    state: &mut [f64],
    input: f64,
) -> (f64, f64) {
    let m = theta.as_bytes().len() / 4;
    let mut sum = Bounded::exact(0.0);
    for j in 0..m {
        let w = Bounded::exact(f64::from(omega.get(j).unwrap_or(0.0)));
        sum = sum.add(w.mul(Bounded::read(state, j)));
    }
    let c = input - sum.v;
    let residual = Bounded::exact(input).sub(Bounded::exact(c).add(sum));
    for j in 0..m {
        let t = Bounded::exact(f64::from(theta.get(j).unwrap_or(0.0)));
        t.mul(Bounded::read(state, j))
            .add(Bounded::exact(c))
            .write(state, j);
    }
    (c, residual.abs_upper())
}

/// The BLT encoder `c = 1/r` over the horizon, checked a posteriori: `ĉ` is computed by the
/// filter and `ρ = δ − r * ĉ` with bounded arithmetic; then `c − ĉ = c * ρ`, so
/// `‖c − ĉ‖₂ ≤ ‖ρ‖₁ ‖c‖₂` and `‖c‖₂ ≤ ‖ĉ‖₂ / (1 − ‖ρ‖₁)` (rounding of the filter never
/// compounds into the bound). Several participations: the pattern sum
/// `G(x) = ‖(Σ_{p<k'} |x_{t−pb}|)_t‖₂` (of `x` or of its non-increasing majorant) obeys
/// `G(c) ≤ G(ĉ) + k'·‖c − ĉ‖₂` (and `k'·√n·‖c − ĉ‖_∞` with the majorant).
fn blt<const FORMS: u8>(
    d: mfc_formats::Blt<'_>,
    steps: usize,
    ks: Option<(usize, usize)>,
    participation: Participation,
    scratch: &mut [f64],
) -> Result<f64, Unverifiable> {
    let m = d.buffers();
    scratch.fill(0.0);
    let impulse = |t: usize| if t == 0 { 1.0 } else { 0.0 };
    let (residual_state, rest) = scratch.split_at_mut(2 * m);
    let mut norm = UpperSum::default();
    let mut residual = UpperSum::default();
    let mut pattern = UpperSum::default();
    match (ks, participation) {
        (None, _) => {
            for t in 0..steps {
                let (c, r) = blt_residual(d.theta, d.omega, residual_state, impulse(t));
                norm.add(c * c);
                residual.add(r);
            }
        }
        (Some((k, b)), Participation::FixedEpochOrder { .. })
            if FORMS & forms::FIXED_EPOCH_ORDER != 0 =>
        {
            // Filter p (plain, `m` values of `rest`) restarts ĉ at step p·b, for p ≥ 1.
            for t in 0..steps {
                let (c, r) = blt_residual(d.theta, d.omega, residual_state, impulse(t));
                norm.add(c * c);
                residual.add(r);
                let mut g = UpperSum::default();
                g.add(c.abs());
                // Filter p's state is the p-th run of m floats of `rest` (k' − 1 of them).
                let filters = rest.chunks_exact_mut(m.max(1));
                for (p, state) in (1..k.min(t / b + 1)).zip(filters) {
                    g.add(blt_step(d.theta, d.omega, state, impulse(t - p * b)).abs());
                }
                let g = g.value();
                pattern.add(g * g);
            }
        }
        (Some((k, b)), Participation::MinSeparation { .. })
            if FORMS & forms::MIN_SEPARATION != 0 =>
        {
            let Some(majorant) = rest.get_mut(..steps) else {
                return Err(Unverifiable::ScratchTooSmall {
                    needed: 2 * m + steps,
                });
            };
            for (t, slot) in majorant.iter_mut().enumerate() {
                let (c, r) = blt_residual(d.theta, d.omega, residual_state, impulse(t));
                norm.add(c * c);
                residual.add(r);
                *slot = c.abs();
            }
            // majorant[t] = max(majorant[t], majorant[t + 1]), from the end.
            let mut later = None;
            for x in majorant.iter_mut().rev() {
                if let Some(next) = later {
                    *x = larger(*x, next);
                }
                later = Some(*x);
            }
            for t in 0..steps {
                let mut g = UpperSum::default();
                for p in 0..k.min(t / b + 1) {
                    g.add(bound_at(majorant, t - p * b));
                }
                let g = g.value();
                pattern.add(g * g);
            }
        }
        // A schema whose verifier this program does not link (`verify_only`).
        _ => return Err(Unverifiable::Form),
    }
    let rho = residual.value();
    let single = solve_up(sqrt_up(norm.value()), rho)?;
    let Some((k, _)) = ks else {
        return Ok(single);
    };
    // ‖c − ĉ‖₂ ≤ ρ·‖c‖₂; with the majorant, √n times that bound on ‖c − ĉ‖_∞ ≤ ρ·‖c‖₂.
    let spread = match participation {
        Participation::FixedEpochOrder { .. } => 1.0,
        _ => sqrt_up(steps as f64),
    };
    let error = (k as f64) * spread * rho * single * GROW * GROW;
    if error.is_nan() || error > LOOSENESS * single {
        return Err(Unverifiable::IllConditioned);
    }
    Ok((sqrt_up(pattern.value()) + error) * GROW)
}

#[cfg(test)]
mod tests {
    use super::upper;

    /// `f64::max(NaN, x)` is `x`: a bound that overflowed into `NaN` must not vanish from a
    /// maximum.
    #[test]
    fn the_shortfall_is_rounded_up_as_libm_ceil_would() {
        for x in [
            f64::NAN,
            f64::NEG_INFINITY,
            -3.5,
            0.0,
            0.2,
            1.0,
            1.0 + f64::EPSILON,
            2.5,
            1e7 - 0.5,
            999_999_999.2,
            1e9,
            1e9 + 0.5,
            4.5e9,
            f64::INFINITY,
            -f64::NAN,
            f64::MAX,
            f64::from_bits(1),
        ]
        .into_iter()
        .chain((0..100_000).map(|i| 1.0 + f64::from(i) * 10_007.37))
        .chain((0..64).map(|e| libm::ldexp(1.0, e)))
        {
            // NaN: libm gives 0; the shortfall is at least 1 ppb (`Error::SensitivityUnderstated`).
            let expected = if x.is_nan() {
                1
            } else {
                libm::ceil(x).clamp(1.0, 1e9) as u32
            };
            assert_eq!(super::ceil_ppb(x), expected, "{x}");
        }
    }

    /// `larger` and `smaller` are `f64::max` and `f64::min`, NaN operands included.
    #[test]
    fn the_maximum_and_minimum_are_those_of_f64() {
        let values = [
            f64::NAN,
            f64::NEG_INFINITY,
            -2.0,
            -0.5,
            0.0,
            0.5,
            2.0,
            f64::INFINITY,
        ];
        for a in values {
            for b in values {
                let same = |x: f64, y: f64| x == y || (x.is_nan() && y.is_nan());
                assert!(same(super::larger(a, b), a.max(b)), "max({a}, {b})");
                assert!(same(super::smaller(a, b), a.min(b)), "min({a}, {b})");
            }
        }
    }

    #[test]
    fn the_larger_of_two_bounds_keeps_a_nan() {
        assert!(upper(f64::NAN, 1.0).is_nan());
        assert!(upper(1.0, f64::NAN).is_nan());
        assert_eq!(upper(1.0, 2.0), 2.0);
        assert_eq!(upper(-0.0, 0.0), 0.0);
    }
}
