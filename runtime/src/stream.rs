//! The stream: Algorithm 3 of Denisov et al. 2022 (App. H), in the corrected form of McMahan et
//! al. (App. D, Algorithm 1) where the low-rank update runs once per step after the band.
//!
//! For a banded-plus-low-rank decoder `B̂ = (L Rᵀ) ⊙ U⁽ʰ⁾ + D⁽ʰ⁾`, step `i` (0-based) computes
//!
//! ```text
//! β   += R[i−h,:]ᵀ z_{i−h}                       (if i ≥ h)
//! y    = Σ_{k=0}^{min(i,h−1)} D[i,k] z_{i−k} + L[i,:] β
//! s   += clip(x_i, ζ)
//! out  = s + σ·ζ·sens·y
//! ```
//!
//! so `y = (B̂ z)_i` with `β = Σ_{j ≤ i−h} R[j,:]ᵀ z_j`. The state is the last `h` noise rows (row
//! `z_t` lives in slot `t mod h`; `z_{i−h}` is consumed just before `z_i` overwrites it), `β`
//! (`r × d`) and the running sum `s`: `(h + r + 1)·d` floats, all in the caller's workspace.

use core::ops::{Deref, DerefMut};

use mfc_formats::{BandedLowRank, Decoder, Mechanism, Workload};

use crate::Error;
use crate::noise::{MAX_COORDINATES, NoiseSource};

/// A stream releasing one private prefix sum (or noise row) per step.
pub struct Stream<'m, 'w, N: NoiseSource> {
    decoder: BandedLowRank<'m>,
    prefix_sum: bool,
    horizon: u32,
    dim: usize,
    clip_norm: f64,
    noise_scale: f32,
    ring: &'w mut [f32],
    beta: &'w mut [f32],
    sum: &'w mut [f32],
    step: u32,
    noise: N,
}

/// Row `index` of a row-major buffer with rows of `dim` floats (empty if out of range, which
/// the stream's construction rules out).
fn row(buffer: &[f32], index: usize, dim: usize) -> &[f32] {
    buffer.get(index * dim..(index + 1) * dim).unwrap_or(&[])
}

fn row_mut(buffer: &mut [f32], index: usize, dim: usize) -> &mut [f32] {
    buffer
        .get_mut(index * dim..(index + 1) * dim)
        .unwrap_or(&mut [])
}

/// The factor that scales `row` to L2 norm at most `clip_norm`: `min(1, ζ/‖row‖)`.
///
/// Overflow-safe: the norm is computed in `f64` from the row divided by its largest magnitude,
/// so a finite row of any size is clipped in its direction rather than zeroed. For a row with a
/// non-finite entry the result is unspecified (the stream rejects such rows first); a
/// `clip_norm` that is not positive (or NaN) gives 0.
pub fn clip_factor(row: &[f32], clip_norm: f64) -> f64 {
    if clip_norm.is_nan() || clip_norm <= 0.0 {
        return 0.0;
    }
    let largest = row.iter().fold(0.0f64, |m, &x| m.max(f64::from(x).abs()));
    if largest == 0.0 {
        return 1.0;
    }
    let inverse = 1.0 / largest;
    let squares: f64 = row
        .iter()
        .map(|&x| {
            let y = f64::from(x) * inverse;
            y * y
        })
        .sum();
    let norm = largest * libm::sqrt(squares);
    if norm > clip_norm {
        clip_norm / norm
    } else {
        1.0
    }
}

/// Scales `row` in place to L2 norm at most `clip_norm` (see [`clip_factor`]): rows already
/// within the norm are untouched, finite rows of any magnitude (even near `f32::MAX`) keep their
/// direction, and a `clip_norm` that is not positive zeroes the row.
pub fn clip_to_norm(row: &mut [f32], clip_norm: f32) {
    let factor = clip_factor(row, f64::from(clip_norm));
    if factor < 1.0 {
        for x in row.iter_mut() {
            *x = (f64::from(*x) * factor) as f32;
        }
    }
}

impl<'m, 'w, N: NoiseSource> Stream<'m, 'w, N> {
    /// Floats of workspace a stream of dimension `dim` needs: `(h + r + 1)·d`.
    pub fn workspace_len(mechanism: &Mechanism<'_>, dim: usize) -> Result<usize, Error> {
        let d = banded(mechanism)?;
        if dim == 0 || dim as u64 > MAX_COORDINATES {
            return Err(Error::InvalidDimension);
        }
        (d.band as usize)
            .checked_add(d.rank as usize)
            .and_then(|w| w.checked_add(1))
            .and_then(|w| w.checked_mul(dim))
            .ok_or(Error::InvalidDimension)
    }

    /// A stream using the noise multiplier recorded in the blob.
    pub fn new(
        mechanism: Mechanism<'m>,
        dim: usize,
        workspace: &'w mut [f32],
        noise: N,
    ) -> Result<Self, Error> {
        let sigma = mechanism
            .header
            .calibration
            .ok_or(Error::NotCalibrated)?
            .noise_multiplier;
        Self::with_noise_multiplier(mechanism, dim, workspace, noise, sigma)
    }

    /// A stream with an explicit noise multiplier `σ` (for example from
    /// [`noise_multiplier_for`](crate::privacy::noise_multiplier_for)).
    pub fn with_noise_multiplier(
        mechanism: Mechanism<'m>,
        dim: usize,
        workspace: &'w mut [f32],
        noise: N,
        noise_multiplier: f64,
    ) -> Result<Self, Error> {
        let decoder = banded(&mechanism)?;
        let needed = Self::workspace_len(&mechanism, dim)?;
        if workspace.len() < needed {
            return Err(Error::WorkspaceTooSmall {
                needed,
                found: workspace.len(),
            });
        }
        let h = mechanism.header;
        let scale = noise_multiplier * h.clip_norm * h.sensitivity.value;
        let valid = noise_multiplier.is_finite()
            && noise_multiplier > 0.0
            && (scale as f32).is_finite()
            && scale as f32 > 0.0;
        if !valid {
            return Err(Error::InvalidNoiseMultiplier);
        }
        let workspace = &mut workspace[..needed];
        workspace.fill(0.0);
        let (ring, rest) = workspace.split_at_mut(decoder.band as usize * dim);
        let (beta, sum) = rest.split_at_mut(decoder.rank as usize * dim);
        Ok(Self {
            decoder,
            prefix_sum: matches!(h.workload, Workload::PrefixSum),
            horizon: h.steps,
            dim,
            clip_norm: h.clip_norm,
            noise_scale: scale as f32,
            ring,
            beta,
            sum,
            step: 0,
            noise,
        })
    }

    /// Consumes `input` (clipped to `ζ`) and writes the private prefix sum of step `i` into
    /// `release`. On error nothing changes: not the step, not the sum, not the noise.
    pub fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        if !self.prefix_sum {
            return Err(Error::WorkloadNotStreamable);
        }
        self.check_step(release)?;
        if input.len() != self.dim {
            return Err(Error::DimensionMismatch {
                expected: self.dim,
                found: input.len(),
            });
        }
        if let Some(index) = input.iter().position(|x| !x.is_finite()) {
            return Err(Error::NonFiniteInput { index });
        }
        let clip = clip_factor(input, self.clip_norm) as f32;
        self.advance(release);
        for ((s, &x), out) in self.sum.iter_mut().zip(input).zip(release.iter_mut()) {
            *s += clip * x;
            *out += *s;
        }
        Ok(())
    }

    /// Advances one step and writes only the noise `σ·ζ·sens·(B̂ z)_i` into `noise_out`: for
    /// workloads whose `(A x)_i` the caller computes itself (from inputs it clipped to `ζ`).
    pub fn step_noise(&mut self, noise_out: &mut [f32]) -> Result<(), Error> {
        self.check_step(noise_out)?;
        self.advance(noise_out);
        Ok(())
    }

    /// Steps released so far.
    pub fn steps_released(&self) -> u32 {
        self.step
    }

    /// The horizon `n`.
    pub fn horizon(&self) -> u32 {
        self.horizon
    }

    /// The dimension `d`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    fn check_step(&self, out: &[f32]) -> Result<(), Error> {
        if self.step >= self.horizon {
            return Err(Error::StreamFinished {
                steps: self.horizon,
            });
        }
        if out.len() != self.dim {
            return Err(Error::DimensionMismatch {
                expected: self.dim,
                found: out.len(),
            });
        }
        Ok(())
    }

    /// Algorithm 3 for the current step: writes `σζ·sens·(B̂ z)_i` into `y` and moves to the next
    /// step. Only called after every check has passed.
    fn advance(&mut self, y: &mut [f32]) {
        let (i, d) = (self.step as usize, self.dim);
        let (h, r) = (self.decoder.band as usize, self.decoder.rank as usize);
        let slot = i % h;
        if i >= h {
            if let Some(right) = self.decoder.right_row(i - h) {
                let oldest = row(self.ring, slot, d);
                for (q, coefficient) in right.iter().enumerate() {
                    for (b, &z) in row_mut(self.beta, q, d).iter_mut().zip(oldest) {
                        *b += coefficient * z;
                    }
                }
            }
        }
        let current = row_mut(self.ring, slot, d);
        self.noise.fill_standard_normal(i as u64, 0, current);
        // The noise scale is folded into the coefficients: each term is one pass over `d` floats,
        // and the first one (the main diagonal, never absent) writes `y` instead of adding to it.
        let scale = self.noise_scale;
        let Some(band) = self.decoder.diagonal_row(i) else {
            y.fill(0.0); // unreachable: the blob has n rows of h coefficients
            self.step += 1;
            return;
        };
        let mut band = band.iter();
        let main = band.next().unwrap_or(0.0) * scale;
        for (out, &z) in y.iter_mut().zip(row(self.ring, slot, d)) {
            *out = main * z;
        }
        for (k, coefficient) in (1..=i.min(h - 1)).zip(band) {
            let c = coefficient * scale;
            for (out, &z) in y.iter_mut().zip(row(self.ring, (i - k) % h, d)) {
                *out += c * z;
            }
        }
        if let Some(left) = self.decoder.left_row(i) {
            for (q, coefficient) in left.iter().enumerate().take(r) {
                let c = coefficient * scale;
                for (out, &b) in y.iter_mut().zip(row(self.beta, q, d)) {
                    *out += c * b;
                }
            }
        }
        self.step += 1;
    }
}

fn banded<'m>(mechanism: &Mechanism<'m>) -> Result<BandedLowRank<'m>, Error> {
    match mechanism.decoder {
        Decoder::BandedLowRank(d) => Ok(d),
        #[allow(unreachable_patterns)]
        _ => Err(Error::UnsupportedDecoder),
    }
}

/// A statically allocated workspace of `N` floats, for callers without a heap.
pub struct Workspace<const N: usize>([f32; N]);

impl<const N: usize> Workspace<N> {
    /// A zeroed workspace.
    pub const fn new() -> Self {
        Self([0.0; N])
    }
}

impl<const N: usize> Default for Workspace<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Deref for Workspace<N> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.0
    }
}

impl<const N: usize> DerefMut for Workspace<N> {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.0
    }
}
