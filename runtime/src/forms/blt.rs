//! Replay of the BLT form (buffered linear Toeplitz, Dvijotham et al. 2024; `formats/SPEC.md`,
//! decoder 2): private prefix sums with `m` buffers per coordinate and no dependence on the
//! horizon.
//!
//! `C⁻¹` is Toeplitz with `r_0 = 1`, `r_k = Σ_j ω_j θ_j^{k−1}`, and the noise of step `t` is
//! `Σ_{u ≤ t} w_u` with `w = C⁻¹ z`. Step `t` (0-based), per coordinate:
//!
//! ```text
//! w    = z_t + Σ_j ω_j s_j
//! s_j ← θ_j s_j + z_t                (so s_j = Σ_{k ≥ 1} θ_j^{k−1} z_{t−k} at the next step)
//! acc += clip(x_t, ζ) + σζ·sens·w     (compensated: crate::sum)
//! out  = acc
//! ```
//!
//! The workspace is `(m + 2)·d` floats: the buffers and the accumulator of inputs and noise with
//! its compensation, for any number of steps; the accumulator stays within a few ulps of the exact
//! sum however long the stream runs (measured in `runtime/src/sum.rs`). The stream stops at the
//! blob's `steps`, the horizon its sensitivity was computed for — unless the blob's sensitivity
//! holds for every horizon (`SensitivityMethod::BltTailBound`,
//! `mfc compile --form blt --horizon unbounded`): then it runs until its `u32` step counter is
//! exhausted (4 294 967 295 steps, 136 years at one step a second) and refuses the next step
//! ([`Error::StreamFinished`]) rather than reuse a noise row.
//!
//! [`BltStream::step_examples`] clips a step's examples one by one, as
//! [`Stream::step_examples`](crate::Stream::step_examples) does. A device resumes the stream after
//! a reboot with [`BltStream::checkpoint`] and [`BltStream::restore`] ([`crate::checkpoint`]: the
//! buffers, the sum and its compensation, and `min(d, 8)` noise values to check the key).

use mfc_formats::{Blt, Decoder, Mechanism, Validated, Workload};

use super::setup::{dimension_supported, horizon, prepare, recorded_noise_multiplier};
use super::step::{Factors, add_examples, check_examples, check_input, check_step};
use crate::clip::clip_factor_with_largest;
use crate::error::Error;
use crate::noise::NoiseSource;
use crate::sum;

/// Coordinates of the newest noise row a BLT stream keeps besides its buffers, which mix every
/// past row so that none can be read back from them: a checkpoint carries them, and restore
/// compares them with the key's regeneration ([`crate::checkpoint`], whose key check compares
/// this many coordinates in every form).
pub(crate) const KEY_CHECK: usize = 8;

/// Floats of workspace of a BLT stream with `buffers` buffers (`m`) of `dim` coordinates:
/// `(m + 2)·d` — the buffers, the running sum and its compensation — for any number of steps.
/// `None` when `dim` is 0 or more than a noise row can address, or the size overflows `usize`.
pub const fn workspace_len(buffers: u32, dim: usize) -> Option<usize> {
    if !dimension_supported(dim) {
        return None;
    }
    let Some(rows) = (buffers as usize).checked_add(2) else {
        return None;
    };
    rows.checked_mul(dim)
}

/// Floats of state a checkpoint of a BLT stream carries: its workspace and the first
/// `min(d, 8)` coordinates of the newest noise row, for the key check ([`crate::checkpoint`]).
pub const fn state_len(buffers: u32, dim: usize) -> Option<usize> {
    let Some(workspace) = workspace_len(buffers, dim) else {
        return None;
    };
    let tag = if dim < KEY_CHECK { dim } else { KEY_CHECK };
    workspace.checked_add(tag)
}

/// A stream releasing one private prefix sum per step from a BLT blob.
pub struct BltStream<'m, 'w, N: NoiseSource> {
    decoder: Blt<'m>,
    horizon: u32,
    dim: usize,
    clip_norm: f32,
    noise_scale: f32,
    /// `m·d` buffers (buffer `j` is `buffers[j·d .. (j+1)·d]`).
    buffers: &'w mut [f32],
    /// The running sum of clipped inputs and noise.
    sum: &'w mut [f32],
    /// What rounding took from `sum` ([`crate::sum`]).
    compensation: &'w mut [f32],
    /// The first [`KEY_CHECK`] coordinates of the last noise row `z_{t−1}` (fewer if `d` is):
    /// what a checkpoint carries so that restore can check the key ([`crate::checkpoint`]), since
    /// the buffers mix every past row and no row can be read back from them.
    newest: [f32; KEY_CHECK],
    step: u32,
    noise: N,
}

/// The buffers `m` of a BLT decoder (at most 64 in a validated blob).
pub(crate) fn buffers(decoder: &Blt<'_>) -> Result<u32, Error> {
    u32::try_from(decoder.buffers()).map_err(|_| Error::InvalidDimension)
}

fn blt<'m>(mechanism: &Mechanism<'m>) -> Result<Blt<'m>, Error> {
    match mechanism.decoder {
        Decoder::Blt(d) => Ok(d),
        _ => Err(Error::UnsupportedDecoder),
    }
}

impl<'m, 'w, N: NoiseSource> BltStream<'m, 'w, N> {
    /// Floats of workspace for dimension `dim`: [`workspace_len`]`(m, dim)`, `(m + 2)·d`.
    /// Errors: [`Error::UnsupportedDecoder`] for a blob of another form,
    /// [`Error::InvalidDimension`] for a `dim` out of range.
    pub fn workspace_len(mechanism: &Validated<'_>, dim: usize) -> Result<usize, Error> {
        let d = blt(mechanism)?;
        workspace_len(buffers(&d)?, dim).ok_or(Error::InvalidDimension)
    }

    /// A stream using the noise multiplier recorded in the blob.
    pub fn new(
        mechanism: Validated<'m>,
        dim: usize,
        workspace: &'w mut [f32],
        noise: N,
    ) -> Result<Self, Error> {
        let sigma = recorded_noise_multiplier(&mechanism)?;
        Self::with_noise_multiplier(mechanism, dim, workspace, noise, sigma)
    }

    /// A stream with an explicit noise multiplier `σ`.
    pub fn with_noise_multiplier(
        mechanism: Validated<'m>,
        dim: usize,
        workspace: &'w mut [f32],
        noise: N,
        noise_multiplier: f64,
    ) -> Result<Self, Error> {
        let decoder = blt(&mechanism)?;
        let h = mechanism.header;
        if !matches!(h.workload, Workload::PrefixSum) {
            return Err(Error::WorkloadNotStreamable);
        }
        let needed = Self::workspace_len(&mechanism, dim)?;
        let (scales, workspace) = prepare(&mechanism, noise_multiplier, workspace, needed)?;
        let (buffers, rest) = workspace.split_at_mut(decoder.buffers() * dim);
        let (sum, compensation) = rest.split_at_mut(dim);
        Ok(Self {
            decoder,
            horizon: horizon(&mechanism),
            dim,
            clip_norm: scales.clip_norm,
            noise_scale: scales.noise,
            buffers,
            sum,
            compensation,
            newest: [0.0; KEY_CHECK],
            step: 0,
            noise,
        })
    }

    /// Consumes `input` (clipped to `ζ`) and writes the private prefix sum of this step into
    /// `release`. On error nothing changes.
    pub fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        check_step(self.step, self.horizon, self.dim, release)?;
        let largest = check_input(self.dim, input, self.clip_norm)?;
        let clip = clip_factor_with_largest(input, self.clip_norm, largest);
        self.advance(release, Some((input, clip)));
        Ok(())
    }

    /// A training step: the step's examples (rows of `d`, one after the other), each clipped to
    /// `ζ` by itself, are added to the running sum, and the private prefix sum is written into
    /// `release`; as [`Stream::step_examples`](crate::Stream::step_examples), whose guarantee
    /// (one example moves the releases by at most `ζ`) and errors it shares.
    pub fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error> {
        check_step(self.step, self.horizon, self.dim, release)?;
        check_examples(
            self.dim,
            examples,
            Factors::Computed(self.clip_norm),
            self.clip_norm,
        )?;
        add_examples(
            examples,
            Factors::Computed(self.clip_norm),
            self.sum,
            self.compensation,
        );
        self.advance(release, None);
        Ok(())
    }

    /// The step after every check: adds `clip·x` (if given) and the noise to the accumulator and
    /// writes it into `release`.
    fn advance(&mut self, release: &mut [f32], input: Option<(&[f32], f32)>) {
        // z_t into `release`, then everything per coordinate.
        self.noise
            .fill_standard_normal(u64::from(self.step), 0, release);
        let d = self.dim;
        for (c, out) in release.iter_mut().enumerate() {
            let z = *out;
            if let Some(tag) = self.newest.get_mut(c) {
                *tag = z;
            }
            let mut w = z;
            for (j, (theta, omega)) in self
                .decoder
                .theta
                .iter()
                .zip(self.decoder.omega.iter())
                .enumerate()
            {
                if let Some(s) = self.buffers.get_mut(j * d + c) {
                    w += omega * *s;
                    *s = theta * *s + z;
                }
            }
            let term = match input {
                Some((x, clip)) => clip * x.get(c).copied().unwrap_or(0.0) + self.noise_scale * w,
                None => self.noise_scale * w,
            };
            if let (Some(acc), Some(compensation)) =
                (self.sum.get_mut(c), self.compensation.get_mut(c))
            {
                sum::add(acc, compensation, term);
                *out = sum::value(*acc, *compensation);
            }
        }
        self.step += 1;
    }

    /// Steps released so far.
    pub fn steps_released(&self) -> u32 {
        self.step
    }

    /// The horizon the blob's sensitivity covers: its `steps`, or `u32::MAX` (the step
    /// counter's limit) for a blob whose sensitivity holds for every horizon.
    pub fn horizon(&self) -> u32 {
        self.horizon
    }

    /// The dimension `d`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The clip norm `ζ`, as the stream applies it (`f32`).
    pub fn clip_norm(&self) -> f32 {
        self.clip_norm
    }
}

/// The raw state, for [`checkpoint`](crate::checkpoint) and [`Replay`](crate::Replay) only.
impl<'m, N: NoiseSource> BltStream<'m, '_, N> {
    pub(crate) fn decoder(&self) -> &Blt<'m> {
        &self.decoder
    }

    /// `m`, the buffers per coordinate (at most 64 in a validated blob).
    pub(crate) fn buffers(&self) -> u32 {
        self.decoder.buffers() as u32
    }

    /// `σ·ζ·sens`, as the stream applies it (`f32`).
    pub(crate) fn noise_scale(&self) -> f32 {
        self.noise_scale
    }

    /// The `m·d` buffers, the running sum, its compensation and the first
    /// `min(d, KEY_CHECK)` coordinates of the last noise row, as the four parts of a
    /// checkpoint's state.
    pub(crate) fn state(&self) -> [&[f32]; 4] {
        let tag = self.dim.min(KEY_CHECK);
        [
            self.buffers,
            self.sum,
            self.compensation,
            self.newest.get(..tag).unwrap_or(&[]),
        ]
    }

    /// The step and the state of [`state`](Self::state), to restore.
    pub(crate) fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        let tag = self.dim.min(KEY_CHECK);
        (
            &mut self.step,
            [
                self.buffers,
                self.sum,
                self.compensation,
                self.newest.get_mut(..tag).unwrap_or(&mut []),
            ],
        )
    }

    pub(crate) fn noise_mut(&mut self) -> &mut N {
        &mut self.noise
    }
}
