//! Replay of the BandMF form (`formats/SPEC.md`, decoder 3; Choquette-Choo et al. 2023b,
//! McKenna 2025): the blob stores the banded lower-triangular **encoder** `C` (`b̂` bands,
//! general or Toeplitz), and the stream adds `w = C⁻¹ z` to the clipped inputs by forward
//! substitution. Step `t` (0-based), per coordinate:
//!
//! ```text
//! w_t  = (z_t − Σ_{l=1}^{min(t, b̂−1)} C[t, t−l] w_{t−l}) / C[t, t]
//! s   += clip(x_t, ζ) + σζ·sens·w_t,    out = s          (prefix sum: S(x + w); compensated)
//! out  = clip(x_t, ζ) + σζ·sens·w_t                      (any other workload A)
//! ```
//!
//! The release is the mechanism `A(x + C⁻¹z)` with decoder `B = A C⁻¹`: for the prefix sum the
//! stream applies `S` itself; for another workload (a training loop whose optimizer applies
//! `A`, e.g. momentum and a learning-rate schedule) it releases the noised input `x_t + w_t`,
//! and `A` is post-processing.
//!
//! # State
//!
//! A ring of the last `b̂` rows of `w` (slot `t mod b̂` holds `w_t`; step `t` overwrites
//! `w_{t−b̂}`, which it no longer needs) and, for the prefix sum, the running sum with its
//! compensation (`runtime/src/sum.rs`: within a few ulps of the exact sum):
//! `(b̂ + 2)·d` floats (`b̂·d` for another workload), for any horizon. The forward substitution
//! needs only `b̂ − 1` rows; the one more row lets a restored checkpoint prove its key: the newest
//! row `w_{t−1}` is recomputed from the regenerated `z_{t−1}` and the `b̂ − 1` rows before it
//! ([`checkpoint`](crate::checkpoint)).
//!
//! As in [`Stream`](crate::Stream), a step is one pass over the coordinates in chunks of
//! [`CHUNK`] (each coordinate sees the same operations in the same order
//! as in whole-row passes), a stream can be a shard of coordinates `a .. b` of a wider row
//! ([`BandMfStream::shard`], which takes the whole row's clip factor in
//! [`BandMfStream::step_clipped`]), and every refused call leaves the state untouched.
//! [`BandMfStream::step_examples`] clips a step's examples one by one, as
//! [`Stream::step_examples`](crate::Stream::step_examples) does; a shard takes its coordinates of
//! each example with each whole example's factor ([`BandMfStream::step_examples_clipped`]) and
//! then releases its coordinates of the unsharded `step_examples` bit for bit — privacy resting,
//! as for `step_clipped`, on the caller passing the whole-row factors (see
//! [`Stream`](crate::Stream)'s module docs, "Shards").

use core::ops::Range;

use mfc_formats::{BandMf, Decoder, F32Table, Mechanism, Validated, Workload};

use super::setup::{dimension_supported, prepare, recorded_noise_multiplier};
use super::step::{
    CHUNK, Factors, add_examples, check_examples, check_input, check_step, scaled_examples,
};
use crate::clip::clip_factor_with_largest;
use crate::error::Error;
use crate::noise::{MAX_COORDINATES, NoiseSource};
use crate::sum;

/// Floats of workspace of a BandMF stream with `bands` bands (`b̂`) of `dim` coordinates:
/// `(b̂ + 2)·d` for the prefix sum (the ring of the last `b̂` rows of `w`, the running sum and its
/// compensation), `b̂·d` for another workload (`prefix_sum` false) — all of which a checkpoint
/// carries. `None` when `dim` is 0 or more than a noise row can address, or the size overflows
/// `usize`.
pub const fn workspace_len(bands: u32, prefix_sum: bool, dim: usize) -> Option<usize> {
    if !dimension_supported(dim) {
        return None;
    }
    let sums = if prefix_sum { 2 } else { 0 };
    let Some(rows) = (bands as usize).checked_add(sums) else {
        return None;
    };
    rows.checked_mul(dim)
}

/// A stream releasing one private prefix sum (or noised input row) per step from a BandMF blob.
pub struct BandMfStream<'m, 'w, N: NoiseSource> {
    decoder: BandMf<'m>,
    prefix_sum: bool,
    horizon: u32,
    dim: usize,
    clip_norm: f32,
    noise_scale: f32,
    /// `b̂·d`: slot `t mod b̂` (floats `slot·d .. (slot+1)·d`) holds `w_t`.
    ring: &'w mut [f32],
    /// The running sum of clipped inputs and noise (`d` floats; empty unless a prefix sum).
    sum: &'w mut [f32],
    /// What rounding took from `sum` ([`crate::sum`]; empty unless a prefix sum).
    compensation: &'w mut [f32],
    step: u32,
    noise: N,
    /// The first coordinate of the row this stream owns (0 unless a shard).
    offset: u64,
    /// Whether the stream owns the whole row, so that it can clip inputs itself.
    whole_row: bool,
}

fn bandmf<'m>(mechanism: &Mechanism<'m>) -> Result<BandMf<'m>, Error> {
    match mechanism.decoder {
        Decoder::BandMf(d) => Ok(d),
        _ => Err(Error::UnsupportedDecoder),
    }
}

/// What a step adds besides the noise.
#[derive(Clone, Copy)]
enum Input<'a> {
    /// A row and its clip factor.
    Row(&'a [f32], f32),
    /// The step's examples (checked rows of `d`), each scaled by its clip factor, and a bound on
    /// the magnitude of each coordinate of their scaled sum ([`check_examples`]).
    Examples(&'a [f32], Factors<'a>, f32),
}

/// `w = (z − Σ_{l=1}^{min(t, b̂−1)} row[l]·w_{t−l}) / row[0]` for one coordinate, `older(l)`
/// giving `w_{t−l}`: the operations of [`BandMfStream`]'s step, in its order, for the key check
/// of a restored checkpoint.
pub(crate) fn forward_substitution(
    z: f32,
    row: F32Table<'_>,
    step: usize,
    older: impl Fn(usize) -> f32,
) -> f32 {
    let mut w = z;
    for (l, c) in row.iter().enumerate().take(step + 1).skip(1) {
        w -= c * older(l);
    }
    w / row.get(0).unwrap_or(1.0)
}

impl<'m, 'w, N: NoiseSource> BandMfStream<'m, 'w, N> {
    /// Floats of workspace for dimension `dim`: [`workspace_len`]`(b̂, prefix_sum, dim)`,
    /// `(b̂ + 2)·d` for the prefix sum, `b̂·d` for another workload. Errors:
    /// [`Error::UnsupportedDecoder`] for a blob of another form, [`Error::InvalidDimension`] for a
    /// `dim` out of range.
    pub fn workspace_len(mechanism: &Validated<'_>, dim: usize) -> Result<usize, Error> {
        let d = bandmf(mechanism)?;
        let prefix_sum = matches!(mechanism.header.workload, Workload::PrefixSum);
        workspace_len(d.bands, prefix_sum, dim).ok_or(Error::InvalidDimension)
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
        let decoder = bandmf(&mechanism)?;
        let needed = Self::workspace_len(&mechanism, dim)?;
        let (scales, workspace) = prepare(&mechanism, noise_multiplier, workspace, needed)?;
        let h = mechanism.header;
        let (ring, sums) = workspace.split_at_mut(decoder.bands() * dim);
        let (sum, compensation) = sums.split_at_mut(sums.len() / 2);
        Ok(Self {
            decoder,
            prefix_sum: matches!(h.workload, Workload::PrefixSum),
            horizon: h.steps,
            dim,
            clip_norm: scales.clip_norm,
            noise_scale: scales.noise,
            ring,
            sum,
            compensation,
            step: 0,
            noise,
            offset: 0,
            whole_row: true,
        })
    }

    /// A shard: the stream of coordinates `range` of rows of `row_dim` coordinates, with the
    /// noise multiplier recorded in the blob. Its workspace is
    /// [`workspace_len`](Self::workspace_len)`(mechanism, range.len())`; with the same seed its
    /// releases equal coordinates `range` of an unsharded stream's, bit for bit. It refuses
    /// [`step`](Self::step): use [`step_clipped`](Self::step_clipped) with the whole row's clip
    /// factor.
    pub fn shard(
        mechanism: Validated<'m>,
        row_dim: usize,
        range: Range<usize>,
        workspace: &'w mut [f32],
        noise: N,
    ) -> Result<Self, Error> {
        let sigma = recorded_noise_multiplier(&mechanism)?;
        Self::shard_with_noise_multiplier(mechanism, row_dim, range, workspace, noise, sigma)
    }

    /// A shard ([`shard`](Self::shard)) with an explicit noise multiplier `σ`.
    pub fn shard_with_noise_multiplier(
        mechanism: Validated<'m>,
        row_dim: usize,
        range: Range<usize>,
        workspace: &'w mut [f32],
        noise: N,
        noise_multiplier: f64,
    ) -> Result<Self, Error> {
        if range.start >= range.end || range.end > row_dim || row_dim as u64 > MAX_COORDINATES {
            return Err(Error::InvalidShard {
                start: range.start,
                end: range.end,
                row: row_dim,
            });
        }
        let dim = range.end - range.start;
        let mut stream =
            Self::with_noise_multiplier(mechanism, dim, workspace, noise, noise_multiplier)?;
        stream.offset = range.start as u64;
        stream.whole_row = dim == row_dim;
        Ok(stream)
    }

    /// Consumes `input` (clipped to `ζ` here) and writes this step's release into `release`:
    /// the private prefix sum, or for another workload the noised input `x_t + σζ·sens·w_t`. On
    /// error nothing changes: not the step, not the ring, not the sum.
    ///
    /// A shard refuses this ([`Error::ClipFactorRequired`]): it cannot see the whole row's norm.
    pub fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        check_step(self.step, self.horizon, self.dim, release)?;
        let largest = check_input(self.dim, input, self.clip_norm)?;
        if !self.whole_row {
            return Err(Error::ClipFactorRequired);
        }
        let clip = clip_factor_with_largest(input, self.clip_norm, largest);
        self.advance(Input::Row(input, clip), release)
    }

    /// A training step: the step's examples (rows of `d`, one after the other), each clipped to
    /// `ζ` by itself, are summed and noised — added to the running sum for the prefix sum, or
    /// released as the noised sum `Σ_e clip(x_e) + σζ·sens·w_t` for another workload — as
    /// [`Stream::step_examples`](crate::Stream::step_examples), whose guarantee (one example
    /// moves the releases by at most `ζ`) and errors it shares; a shard refuses it
    /// ([`Error::ClipFactorRequired`]).
    pub fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error> {
        let factors = Factors::Computed(self.clip_norm);
        check_step(self.step, self.horizon, self.dim, release)?;
        let bound = check_examples(self.dim, examples, factors, self.clip_norm)?;
        if !self.whole_row {
            return Err(Error::ClipFactorRequired);
        }
        self.advance(Input::Examples(examples, factors, bound), release)
    }

    /// [`step_examples`](Self::step_examples) with each example's clip factor given by the
    /// caller, for a shard: `examples` holds this shard's coordinates of each of the step's `m`
    /// examples (`m` rows of [`dim`](Self::dim)), `clips` the `m` factors `min(1, ζ/‖x_e‖)` of
    /// the **whole** examples ([`clip_factor`](crate::clip_factor)`(x_e, ζ)`, ζ from
    /// [`clip_norm`](Self::clip_norm)). With those factors the release equals this shard's
    /// coordinates of the unsharded `step_examples` bit for bit (a whole-row stream: its
    /// release). The stream checks that each factor lies in `[0, 1]` but cannot check that it is
    /// the whole example's: privacy rests on the caller here, as for
    /// [`step_clipped`](Self::step_clipped). Errors, with nothing changed: those of
    /// `step_examples` (but not [`Error::ClipFactorRequired`]), [`Error::ClipFactorsShape`]
    /// unless there is one factor per example, [`Error::InvalidClipFactor`].
    pub fn step_examples_clipped(
        &mut self,
        examples: &[f32],
        clips: &[f32],
        release: &mut [f32],
    ) -> Result<(), Error> {
        let factors = Factors::Given(clips);
        check_step(self.step, self.horizon, self.dim, release)?;
        let bound = check_examples(self.dim, examples, factors, self.clip_norm)?;
        self.advance(Input::Examples(examples, factors, bound), release)
    }

    /// [`step`](Self::step) with the clip factor given by the caller: `clip` must be
    /// `min(1, ζ/‖x‖)` for the **whole** input row `x`
    /// ([`clip_factor`](crate::clip_factor)`(x, ζ)`, ζ from [`clip_norm`](Self::clip_norm)), of
    /// which `input` is this shard's part. The stream checks that `clip` lies in `[0, 1]` but
    /// cannot check that it is the whole row's: privacy rests on the caller here.
    pub fn step_clipped(
        &mut self,
        input: &[f32],
        clip: f32,
        release: &mut [f32],
    ) -> Result<(), Error> {
        check_step(self.step, self.horizon, self.dim, release)?;
        check_input(self.dim, input, self.clip_norm)?;
        if !(0.0..=1.0).contains(&clip) {
            return Err(Error::InvalidClipFactor);
        }
        self.advance(Input::Row(input, clip), release)
    }

    /// The step of the module docs, after every check has passed, in two passes. First `w_t`
    /// into `release` (which the caller's buffer holds until the release is written) by row
    /// passes: `z_t`, then each older row's term, then the division; a release that could
    /// overflow (twice its terms' magnitudes not finite: an encoder whose inverse grows without
    /// bound, e.g. `c = (1, −2)`, `w_t = z_t + 2w_{t−1}`) refuses the step with
    /// [`Error::NonFiniteRelease`], the state untouched. Then `w_t` into its ring slot, the
    /// inputs, and the release.
    fn advance(&mut self, input: Input<'_>, release: &mut [f32]) -> Result<(), Error> {
        let (t, d, bands) = (self.step as usize, self.dim, self.decoder.bands());
        let slot = t % bands;
        // Construction and validation give the ring its `b̂` rows and the blob a row for every
        // t < n; checked anyway, before anything changes, so that a broken invariant is a
        // refusal and never a release without its noise.
        let sums = if self.prefix_sum { d } else { 0 };
        let sized = self.ring.len() >= bands * d
            && self.sum.len() >= sums
            && self.compensation.len() >= sums
            && release.len() == d;
        if !sized {
            return Err(Error::WorkspaceTooSmall {
                needed: bands * d + 2 * sums,
                found: self.ring.len() + self.sum.len() + self.compensation.len(),
            });
        }
        let Some(row) = self.decoder.row(t) else {
            return Err(Error::StreamFinished { steps: self.step });
        };
        let diagonal = row.get(0).unwrap_or(1.0);
        let scale = self.noise_scale;
        let mut start = 0;
        while start < d {
            let end = d.min(start + CHUNK);
            let w = release.get_mut(start..end).unwrap_or(&mut []);
            self.noise
                .fill_standard_normal(t as u64, self.offset + start as u64, w);
            for (l, c) in row.iter().enumerate().take(t + 1).skip(1) {
                // Slot (t − l) mod b̂ ≠ slot.
                let at = ((t - l) % bands) * d;
                let older = self.ring.get(at + start..at + end).unwrap_or(&[]);
                for (w, &v) in w.iter_mut().zip(older) {
                    *w -= c * v;
                }
            }
            for w in w.iter_mut() {
                *w /= diagonal;
            }
            // The release is finite when twice the sum of the magnitudes it adds up is: the
            // running sum and its compensation (prefix sum), the clipped input (each example at
            // most ζ) and the noise; Kahan's update then cannot overflow either (`crate::sum`).
            for (k, &w) in w.iter().enumerate() {
                let at = start + k;
                let input = match input {
                    Input::Row(x, clip) => (clip * x.get(at).copied().unwrap_or(0.0)).abs(),
                    Input::Examples(_, _, bound) => bound,
                };
                let carried = if self.prefix_sum {
                    let s = self.sum.get(at).copied().unwrap_or(0.0);
                    s.abs() + self.compensation.get(at).copied().unwrap_or(0.0).abs()
                } else {
                    0.0
                };
                if !(2.0 * (carried + input + (scale * w).abs())).is_finite() {
                    return Err(Error::NonFiniteRelease {
                        step: self.step,
                        index: at,
                    });
                }
            }
            start = end;
        }
        let current = self
            .ring
            .get_mut(slot * d..(slot + 1) * d)
            .unwrap_or(&mut []);
        current.copy_from_slice(release.get(..current.len()).unwrap_or(&[]));
        let w = &*current;
        match (input, self.prefix_sum) {
            (Input::Row(x, clip), true) => {
                for (k, (out, (s, c))) in release
                    .iter_mut()
                    .zip(self.sum.iter_mut().zip(self.compensation.iter_mut()))
                    .enumerate()
                {
                    let noise = scale * w.get(k).copied().unwrap_or(0.0);
                    sum::add(s, c, clip * x.get(k).copied().unwrap_or(0.0) + noise);
                    *out = sum::value(*s, *c);
                }
            }
            (Input::Examples(examples, factors, _), true) => {
                add_examples(examples, factors, self.sum, self.compensation);
                for (k, (out, (s, c))) in release
                    .iter_mut()
                    .zip(self.sum.iter_mut().zip(self.compensation.iter_mut()))
                    .enumerate()
                {
                    sum::add(s, c, scale * w.get(k).copied().unwrap_or(0.0));
                    *out = sum::value(*s, *c);
                }
            }
            (Input::Row(x, clip), false) => {
                for (k, out) in release.iter_mut().enumerate() {
                    let noise = scale * w.get(k).copied().unwrap_or(0.0);
                    *out = clip * x.get(k).copied().unwrap_or(0.0) + noise;
                }
            }
            (Input::Examples(examples, factors, _), false) => {
                release.fill(0.0);
                for (factor, row) in scaled_examples(examples, d, factors) {
                    for (out, &x) in release.iter_mut().zip(row) {
                        *out += factor * x;
                    }
                }
                for (out, &w) in release.iter_mut().zip(w) {
                    *out += scale * w;
                }
            }
        }
        self.step += 1;
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

    /// The dimension `d` (of a shard: its number of coordinates).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The first coordinate of the row this stream owns: 0 unless it is a shard.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The clip norm `ζ` recorded in the blob, as the stream applies it: rounded down to `f32`.
    pub fn clip_norm(&self) -> f32 {
        self.clip_norm
    }

    /// Whether the stream releases prefix sums (else noised input rows).
    pub fn releases_prefix_sums(&self) -> bool {
        self.prefix_sum
    }
}

/// The raw state, for [`checkpoint`](crate::checkpoint) and [`Replay`](crate::Replay) only.
impl<'m, N: NoiseSource> BandMfStream<'m, '_, N> {
    pub(crate) fn decoder(&self) -> &BandMf<'m> {
        &self.decoder
    }

    pub(crate) fn noise_scale(&self) -> f32 {
        self.noise_scale
    }

    pub(crate) fn whole_row(&self) -> bool {
        self.whole_row
    }

    /// The ring of the last `b̂` rows of `w`, and the running sum and its compensation (empty
    /// unless a prefix sum), as the four parts of a checkpoint's state.
    pub(crate) fn state(&self) -> [&[f32]; 4] {
        [self.ring, &[], self.sum, self.compensation]
    }

    /// The step and the state of [`state`](Self::state), to restore.
    pub(crate) fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        (
            &mut self.step,
            [self.ring, &mut [], self.sum, self.compensation],
        )
    }

    pub(crate) fn noise_mut(&mut self) -> &mut N {
        &mut self.noise
    }
}
