//! Replay of the FFT decoder form (`SPEC.md`, decoder 1; 001 §4 and App. K) without allocation: the
//! noise of a block of `m` steps is produced at its first step by FFT convolution, `O(d·m log m)`,
//! then released step by step.
//!
//! Block `i` draws noise row `i` of the [`NoiseSource`] with `2m·d` coordinates: `z_{i,j}[c]`
//! (`j < 2m`) is coordinate `c·2m + j`, so each coordinate's `2m` draws are one contiguous run.
//! For each coordinate `c` it computes, with FFTs of size `N` (the least power of two
//! `≥ 3m − 1`, so that circular convolution equals the needed linear one):
//!
//! - **Mechanism 1** (`FftKind::Circulant`): `w_r = Σ_j ŷ[(r − j) mod 2m] z_j` (`B̂_m = PŶ`):
//!   `w = IFFT(FFT(z)·K)` with `K` the spectrum of the kernel laid out at lags `−(2m−1) … m−1`
//!   (2 FFTs);
//! - **Mechanism 2** (`FftKind::OptimalDecoder`): `u = EᵀŶᵀz` the same way, then the
//!   Gohberg–Semencul product `ξ = (L(x̂)(L(x̂)ᵀu) − L(x̃)(L(x̃)ᵀu))/x̂₀`,
//!   `x̃ = (0, x̂_{m−1}, …, x̂₁)` (the exact inverse of the Toeplitz `T̂ = EᵀŶᵀŶE` for the exact
//!   generator, 001 App. K Prop. K.2): `L(g)ᵀ` multiplies by the conjugate spectrum of `g`, `L(g)`
//!   by the spectrum, and the two products are combined before one inverse transform (8 FFTs); then
//!   `w_r = Σ_{q≤r} ξ_q`. This is `O(m log m)` per block and coordinate, not the `O(m log² m)` of a
//!   superfast solver: the compiler has already solved the Toeplitz system (Levinson–Durbin) and
//!   stored `x̂`.
//!
//! Step `r` of block `i` releases `s + σζ·sens·(carry + w_r)` with `s` the running sum of clipped
//! inputs (compensated, `runtime/src/sum.rs`) and `carry = Σ_{i'<i} w_{i',m−1}`: stamping (001 App.
//! D.4). The carry, a sum of at most `s` noise values, is a plain `f32` sum: its rounding is
//! relative to the noise, not to the inputs. The FFTs are microfft's
//! (`no_std`, power-of-two sizes up to 8192 by default, 32768 with the `fft-32768` feature).
//!
//! # Memory
//!
//! [`FftStream::workspace_len`] floats: `(m + 3)·d` (block noise, carry, running sum and its
//! compensation) `+ 2m`
//! (draws) `+ 2N·k` with `k = 2` complex buffers of `N` for Mechanism 1 and `k = 5` for
//! Mechanism 2 (spectra computed once, and scratch). The banded form needs `(h + r + 2)·d` and
//! `O(h + r)` work per step and coordinate; this one `O(m·d)` memory and `O(log m)` amortized work
//! per step and coordinate, concentrated in the first step of each block.
//!
//! [`FftStream::checkpoint`] and [`FftStream::restore`] ([`crate::checkpoint`]) save and load
//! the `(m + 3)·d` floats of state; the spectra are recomputed from the blob.

use bytemuck::try_cast_slice_mut;
use mfc_formats::{Decoder, F32Table, Fft, FftKind, Mechanism, Validated, Workload};
use num_complex::Complex32;

use super::setup::{prepare, recorded_noise_multiplier};
use super::step::{Factors, Input, add_examples, check_examples, check_input, check_step};
use crate::clip::clip_factor_with_largest;
use crate::error::Error;
use crate::noise::{MAX_COORDINATES, NoiseSource};
use crate::sum;

/// The largest FFT size this build supports.
pub const MAX_FFT_SIZE: usize = if cfg!(feature = "fft-32768") {
    32768
} else {
    8192
};

/// The largest block `m` this build can replay (`3m − 1 ≤` [`MAX_FFT_SIZE`]).
pub const MAX_BLOCK: u32 = MAX_FFT_SIZE.div_ceil(3) as u32;

/// A stream replaying an FFT-form blob.
pub struct FftStream<'m, 'w, N: NoiseSource> {
    decoder: Fft<'m>,
    prefix_sum: bool,
    horizon: u32,
    dim: usize,
    block: usize,
    clip_norm: f32,
    noise_scale: f32,
    /// `w` of the current block, row-major `m × d`.
    block_noise: &'w mut [f32],
    carry: &'w mut [f32],
    sum: &'w mut [f32],
    /// What rounding took from `sum` ([`crate::sum`]).
    compensation: &'w mut [f32],
    draws: &'w mut [f32],
    /// The kernel spectrum `K`, then (Mechanism 2) `X`, `X̃`, and scratch.
    spectra: &'w mut [Complex32],
    step: u32,
    noise: N,
}

/// `N`, the FFT size of a block of `m` steps: the least power of two `≥ 3m − 1` (at least 2),
/// so that circular convolution equals the needed linear one.
const fn fft_size(m: usize) -> usize {
    let size = (3 * m - 1).next_power_of_two();
    if size < 2 { 2 } else { size }
}

/// `k`, the complex buffers of `N` values a block of `kind` needs: the kernel spectrum and a
/// transform (Mechanism 1), plus the generator's two spectra and a second transform (Mechanism
/// 2). `None` for a kind a later format version adds.
const fn complex_buffers(kind: FftKind) -> Option<usize> {
    match kind {
        FftKind::Circulant => Some(2),
        FftKind::OptimalDecoder => Some(5),
        _ => None,
    }
}

/// Floats of workspace of an FFT stream (`kind`, block `m`) of `dim` coordinates:
/// `(m + 3)·d + 2m + 2N·k` — the block's noise, the carry, the running sum and its compensation
/// (`(m + 3)·d`, the state a checkpoint carries), the draws of one coordinate (`2m`), and `k`
/// complex buffers of the FFT size `N` (module docs). `None` when the block is 0 or longer than
/// this build replays ([`MAX_BLOCK`]), when `dim` is 0 or a block's `2m·d` draws are more than a
/// noise row can address, or when the size overflows `usize`.
pub const fn workspace_len(kind: FftKind, block: u32, dim: usize) -> Option<usize> {
    if block == 0 || block > MAX_BLOCK || dim == 0 {
        return None;
    }
    let m = block as usize;
    let Some(draws) = (2 * m as u64).checked_mul(dim as u64) else {
        return None;
    };
    if draws > MAX_COORDINATES {
        return None;
    }
    let Some(buffers) = complex_buffers(kind) else {
        return None;
    };
    let Some(state) = state_len(block, dim) else {
        return None;
    };
    let Some(with_draws) = state.checked_add(2 * m) else {
        return None;
    };
    with_draws.checked_add(2 * fft_size(m) * buffers)
}

/// Floats of state a checkpoint of an FFT stream (block `m`) carries: `(m + 3)·d` (the spectra
/// are recomputed from the blob, the draws are scratch). `None` on overflow.
pub const fn state_len(block: u32, dim: usize) -> Option<usize> {
    let Some(rows) = (block as usize).checked_add(3) else {
        return None;
    };
    rows.checked_mul(dim)
}

/// The sizes derived from a blob: `(decoder, m, N)`.
fn layout<'m>(mechanism: &Mechanism<'m>) -> Result<(Fft<'m>, usize, usize), Error> {
    let Decoder::Fft(decoder) = mechanism.decoder else {
        return Err(Error::UnsupportedDecoder);
    };
    if decoder.block > MAX_BLOCK || decoder.block == 0 {
        return Err(Error::FftBlockTooLarge {
            block: decoder.block,
            max: MAX_BLOCK,
        });
    }
    if complex_buffers(decoder.kind).is_none() {
        return Err(Error::UnsupportedDecoder);
    }
    let m = decoder.block as usize;
    Ok((decoder, m, fft_size(m)))
}

impl<'m, 'w, N: NoiseSource> FftStream<'m, 'w, N> {
    /// Floats of workspace a stream of dimension `dim` needs: [`workspace_len`]`(kind, m, dim)`,
    /// `(m + 3)·d + 2m + 2N·k` (module docs). Errors: [`Error::UnsupportedDecoder`] for a blob of
    /// another form, [`Error::FftBlockTooLarge`] for a block this build cannot replay,
    /// [`Error::InvalidDimension`] for a `dim` out of range.
    pub fn workspace_len(mechanism: &Validated<'_>, dim: usize) -> Result<usize, Error> {
        let (decoder, _, _) = layout(mechanism)?;
        workspace_len(decoder.kind, decoder.block, dim).ok_or(Error::InvalidDimension)
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
        let (decoder, m, size) = layout(&mechanism)?;
        let needed = Self::workspace_len(&mechanism, dim)?;
        let (scales, workspace) = prepare(&mechanism, noise_multiplier, workspace, needed)?;
        let h = mechanism.header;
        let (block_noise, rest) = workspace.split_at_mut(m * dim);
        let (carry, rest) = rest.split_at_mut(dim);
        let (sum, rest) = rest.split_at_mut(dim);
        let (compensation, rest) = rest.split_at_mut(dim);
        let (draws, rest) = rest.split_at_mut(2 * m);
        let spectra: &mut [Complex32] =
            try_cast_slice_mut(rest).map_err(|_| Error::InvalidDimension)?;
        prepare_spectra(&decoder, m, size, spectra)?;
        Ok(Self {
            decoder,
            prefix_sum: matches!(h.workload, Workload::PrefixSum),
            horizon: h.steps,
            dim,
            block: m,
            clip_norm: scales.clip_norm,
            noise_scale: scales.noise,
            block_noise,
            carry,
            sum,
            compensation,
            draws,
            spectra,
            step: 0,
            noise,
        })
    }

    /// Clips `input` to `ζ`, adds it to the running sum and writes the private prefix sum into
    /// `release`. On error nothing changes.
    pub fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        if !self.prefix_sum {
            return Err(Error::WorkloadNotStreamable);
        }
        self.check_step(release)?;
        let largest = check_input(self.dim, input, self.clip_norm)?;
        let clip = clip_factor_with_largest(input, self.clip_norm, largest);
        self.advance(release, Input::Row(input, clip))
    }

    /// A training step: the step's examples (rows of `d`, one after the other), each clipped to
    /// `ζ` by itself, are added to the running sum, and the private prefix sum is written into
    /// `release`; as [`Stream::step_examples`](crate::Stream::step_examples), whose guarantee
    /// (one example moves the releases by at most `ζ`) and errors it shares.
    pub fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error> {
        if !self.prefix_sum {
            return Err(Error::WorkloadNotStreamable);
        }
        self.check_step(release)?;
        check_examples(
            self.dim,
            examples,
            Factors::Computed(self.clip_norm),
            self.clip_norm,
        )?;
        // Nothing fails after the checks: the block's FFTs only fail for a size `layout` refused.
        add_examples(
            examples,
            Factors::Computed(self.clip_norm),
            self.sum,
            self.compensation,
        );
        self.advance(release, Input::Added)
    }

    /// Writes only the noise `σζ·sens·(B̂ z)_i` of the current step into `out`.
    pub fn step_noise(&mut self, out: &mut [f32]) -> Result<(), Error> {
        self.check_step(out)?;
        self.advance(out, Input::NoiseOnly)
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

    /// Whether the stream releases prefix sums (else only noise, [`step_noise`](Self::step_noise)).
    pub fn releases_prefix_sums(&self) -> bool {
        self.prefix_sum
    }

    fn check_step(&self, out: &[f32]) -> Result<(), Error> {
        check_step(self.step, self.horizon, self.dim, out)
    }

    /// Only called after every check has passed.
    fn advance(&mut self, out: &mut [f32], input: Input<'_>) -> Result<(), Error> {
        let m = self.block;
        let r = self.step as usize % m;
        let d = self.dim;
        // Construction sizes these; checked anyway, before anything changes, so that a broken
        // invariant is a refusal and never a release without its noise (the zips below would
        // otherwise stop at the shortest).
        let sized = self.block_noise.len() >= m * d
            && self.carry.len() >= d
            && self.sum.len() >= d
            && self.compensation.len() >= d
            && out.len() == d;
        if !sized {
            return Err(Error::WorkspaceTooSmall {
                needed: (m + 3) * d,
                found: self.block_noise.len()
                    + self.carry.len()
                    + self.sum.len()
                    + self.compensation.len(),
            });
        }
        if r == 0 {
            let block = u64::from(self.step) / m as u64;
            self.fill_block(block)?;
        }
        let row = self.block_noise.get(r * d..(r + 1) * d).unwrap_or(&[]);
        let scale = self.noise_scale;
        let sums = self.sum.iter_mut().zip(self.compensation.iter_mut());
        let noise = self.carry.iter().zip(row);
        match input {
            Input::Row(x, clip) => {
                for (((o, (s, k)), &x), (&c, &w)) in out.iter_mut().zip(sums).zip(x).zip(noise) {
                    sum::add(s, k, clip * x);
                    *o = sum::value(*s, *k) + scale * (c + w);
                }
            }
            Input::Added => {
                for ((o, (s, k)), (&c, &w)) in out.iter_mut().zip(sums).zip(noise) {
                    *o = sum::value(*s, *k) + scale * (c + w);
                }
            }
            Input::NoiseOnly => {
                for (o, (&c, &w)) in out.iter_mut().zip(noise) {
                    *o = scale * (c + w);
                }
            }
        }
        if r == m - 1 {
            for (c, &w) in self.carry.iter_mut().zip(row) {
                *c += w;
            }
        }
        self.step += 1;
        Ok(())
    }

    /// `w = B̂_m z_block` for every coordinate, into `block_noise`. Every kernel is real, so two
    /// coordinates share one complex transform: `c` in the real parts, `c + 1` in the imaginary
    /// parts, never mixed by a product with a real sequence's spectrum.
    fn fill_block(&mut self, block: u64) -> Result<(), Error> {
        let d = self.dim;
        for c in (0..d).step_by(2) {
            let rows = &mut *self.block_noise;
            block_pair(
                &self.decoder,
                &mut self.noise,
                self.draws,
                self.spectra,
                (self.block, d, block, c),
                |r, re, im| {
                    if let Some(row) = rows.get_mut(r * d..(r + 1) * d) {
                        if let Some(w) = row.get_mut(c) {
                            *w = re;
                        }
                        if let Some(w) = row.get_mut(c + 1) {
                            *w = im;
                        }
                    }
                },
            )?;
        }
        Ok(())
    }
}

/// The raw state, for [`checkpoint`](crate::checkpoint) and [`Replay`](crate::Replay) only.
impl<'m, N: NoiseSource> FftStream<'m, '_, N> {
    pub(crate) fn decoder(&self) -> &Fft<'m> {
        &self.decoder
    }

    /// `σ·ζ·sens`, as the stream applies it (`f32`).
    pub(crate) fn noise_scale(&self) -> f32 {
        self.noise_scale
    }

    /// The clip norm `ζ`, as the stream applies it (`f32`).
    pub fn clip_norm(&self) -> f32 {
        self.clip_norm
    }

    /// The current block's noise (`m·d`), the carry, the running sum and its compensation, as
    /// the four parts of a checkpoint's state. The spectra are the blob's, the draws scratch.
    pub(crate) fn state(&self) -> [&[f32]; 4] {
        [self.block_noise, self.carry, self.sum, self.compensation]
    }

    /// The step and the state of [`state`](Self::state), to restore.
    pub(crate) fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        (
            &mut self.step,
            [self.block_noise, self.carry, self.sum, self.compensation],
        )
    }

    /// Whether the block noise of a checkpoint at `step > 0` (state float `k` is `word(k)`) is
    /// the one this stream's key generates: the block of step `step − 1` is recomputed for the
    /// first two coordinates (one transform, the step's own operations) and compared bit for bit
    /// over all its `m` rows. Touches only scratch (draws, transform buffers).
    pub(crate) fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool {
        let (m, d) = (self.block, self.dim);
        let block = u64::from(step - 1) / m as u64;
        let mut same = true;
        let result = block_pair(
            &self.decoder,
            &mut self.noise,
            self.draws,
            self.spectra,
            (m, d, block, 0),
            |r, re, im| {
                same &= word(r * d).to_bits() == re.to_bits();
                if d > 1 {
                    same &= word(r * d + 1).to_bits() == im.to_bits();
                }
            },
        );
        result.is_ok() && same
    }
}

/// The block noise `w_r` (`r < m`) of coordinates `c` (real part) and `c + 1` (imaginary part;
/// zero past `d`) of block `block`, handed to `sink(r, w_r[c], w_r[c + 1])`, with `draws` and
/// the scratch part of `spectra` as scratch; `(m, d, block, c)` is `shape`.
fn block_pair<N: NoiseSource>(
    decoder: &Fft<'_>,
    noise: &mut N,
    draws: &mut [f32],
    spectra: &mut [Complex32],
    shape: (usize, usize, u64, usize),
    mut sink: impl FnMut(usize, f32, f32),
) -> Result<(), Error> {
    let (m, d, block, c) = shape;
    let size = spectra.len() / buffers_for(decoder.kind);
    let two_m = 2 * m;
    let (kernel, rest) = spectra.split_at_mut(size);
    let (a, rest) = rest.split_at_mut(size);
    noise.fill_standard_normal(block, c as u64 * two_m as u64, draws);
    load(a, draws);
    if c + 1 < d {
        noise.fill_standard_normal(block, (c as u64 + 1) * two_m as u64, draws);
        for (v, &z) in a.iter_mut().zip(draws.iter()) {
            v.im = z;
        }
    }
    fft(a, false)?;
    for (v, k) in a.iter_mut().zip(kernel.iter()) {
        *v *= *k;
    }
    fft(a, true)?;
    let mut x0 = 1.0;
    if let FftKind::OptimalDecoder = decoder.kind {
        let (x, rest) = rest.split_at_mut(size);
        let (x_tilde, b) = rest.split_at_mut(size);
        gohberg_semencul(a, b, x, x_tilde, m)?;
        x0 = decoder.generator.get(0).unwrap_or(1.0);
    }
    let cumulative = matches!(decoder.kind, FftKind::OptimalDecoder);
    let (mut re, mut im) = (0.0f32, 0.0f32);
    for (r, v) in a.iter().take(m).enumerate() {
        if cumulative {
            re += v.re / x0;
            im += v.im / x0;
        } else {
            (re, im) = (v.re, v.im);
        }
        sink(r, re, im);
    }
    Ok(())
}

fn buffers_for(kind: FftKind) -> usize {
    complex_buffers(kind).unwrap_or(2)
}

/// `a ← (L(x)(L(x)ᵀu) − L(x̃)(L(x̃)ᵀu))·x̂₀` for `u = a[..m]` (real and imaginary parts apart),
/// with `x`, `x_tilde` the spectra of the generator and of `x̃` (the division by `x̂₀` is left to
/// the caller).
fn gohberg_semencul(
    a: &mut [Complex32],
    b: &mut [Complex32],
    x: &[Complex32],
    x_tilde: &[Complex32],
    m: usize,
) -> Result<(), Error> {
    truncate(a, m);
    fft(a, false)?;
    // b = L(x)ᵀu, a = L(x̃)ᵀu (correlations: conjugate spectra), each cut to lags 0..m.
    for ((bv, av), xv) in b.iter_mut().zip(a.iter()).zip(x) {
        *bv = *av * xv.conj();
    }
    for (av, xv) in a.iter_mut().zip(x_tilde) {
        *av *= xv.conj();
    }
    fft(b, true)?;
    fft(a, true)?;
    truncate(b, m);
    truncate(a, m);
    fft(b, false)?;
    fft(a, false)?;
    for (((av, bv), xv), tv) in a.iter_mut().zip(b.iter()).zip(x).zip(x_tilde) {
        *av = *bv * *xv - *av * *tv;
    }
    fft(a, true)
}

/// Zeroes `a[m..]`.
fn truncate(a: &mut [Complex32], m: usize) {
    for v in a.iter_mut().skip(m) {
        *v = Complex32::new(0.0, 0.0);
    }
}

/// `a ← (values, 0, 0, …)` as complex numbers.
fn load(a: &mut [Complex32], values: &[f32]) {
    for (i, v) in a.iter_mut().enumerate() {
        *v = Complex32::new(values.get(i).copied().unwrap_or(0.0), 0.0);
    }
}

/// Lays out a kernel at circular lags and transforms it: `table[lag(q)]` goes to index `q`
/// (`q < m`) or `N + q` (`q < 0`) for `q ∈ (−2m, m)`.
fn kernel_spectrum(
    out: &mut [Complex32],
    m: usize,
    value: impl Fn(isize) -> f32,
) -> Result<(), Error> {
    let size = out.len();
    for (i, v) in out.iter_mut().enumerate() {
        let q = if i < m {
            Some(i as isize)
        } else if i + 2 * m > size {
            Some(i as isize - size as isize)
        } else {
            None
        };
        *v = Complex32::new(q.map_or(0.0, &value), 0.0);
    }
    fft(out, false)
}

/// The spectra the blocks reuse: `K` (both kinds), `X` and `X̃` (Mechanism 2).
fn prepare_spectra(
    decoder: &Fft<'_>,
    m: usize,
    size: usize,
    spectra: &mut [Complex32],
) -> Result<(), Error> {
    let kernel = decoder.kernel;
    let two_m = 2 * m as isize;
    let at = |t: F32Table<'_>, i: isize| t.get(i.rem_euclid(two_m) as usize).unwrap_or(0.0);
    let (k, rest) = spectra.split_at_mut(size);
    match decoder.kind {
        FftKind::OptimalDecoder => {
            // u_r = Σ_j ŷ[(j − r) mod 2m] z_j: lag q = r − j carries ŷ[−q].
            kernel_spectrum(k, m, |q| at(kernel, -q))?;
            let (_, rest) = rest.split_at_mut(size);
            let (x, rest) = rest.split_at_mut(size);
            let (x_tilde, _) = rest.split_at_mut(size);
            let g = decoder.generator;
            load(x, &[]);
            load(x_tilde, &[]);
            for (i, (xv, tv)) in x.iter_mut().zip(x_tilde.iter_mut()).take(m).enumerate() {
                *xv = Complex32::new(g.get(i).unwrap_or(0.0), 0.0);
                let tilde = if i == 0 {
                    0.0
                } else {
                    g.get(m - i).unwrap_or(0.0)
                };
                *tv = Complex32::new(tilde, 0.0);
            }
            fft(x, false)?;
            fft(x_tilde, false)
        }
        // w_r = Σ_j ŷ[(r − j) mod 2m] z_j: lag q carries ŷ[q].
        _ => kernel_spectrum(k, m, |q| at(kernel, q)),
    }
}

/// An in-place forward (or normalized inverse) FFT of a power-of-two length ≤ [`MAX_FFT_SIZE`].
fn fft(a: &mut [Complex32], inverse: bool) -> Result<(), Error> {
    macro_rules! sizes {
        ($($n:literal => $f:ident, $i:ident $(, $feature:literal)?;)*) => {
            match a.len() {
                $(
                    $(#[cfg(feature = $feature)])?
                    $n => {
                        let array: &mut [Complex32; $n] =
                            a.try_into().map_err(|_| Error::UnsupportedDecoder)?;
                        if inverse {
                            let _ = microfft::inverse::$i(array);
                        } else {
                            let _ = microfft::complex::$f(array);
                        }
                        Ok(())
                    }
                )*
                _ => Err(Error::UnsupportedDecoder),
            }
        };
    }
    sizes! {
        2 => cfft_2, ifft_2;
        4 => cfft_4, ifft_4;
        8 => cfft_8, ifft_8;
        16 => cfft_16, ifft_16;
        32 => cfft_32, ifft_32;
        64 => cfft_64, ifft_64;
        128 => cfft_128, ifft_128;
        256 => cfft_256, ifft_256;
        512 => cfft_512, ifft_512;
        1024 => cfft_1024, ifft_1024;
        2048 => cfft_2048, ifft_2048;
        4096 => cfft_4096, ifft_4096;
        8192 => cfft_8192, ifft_8192;
        16384 => cfft_16384, ifft_16384, "fft-32768";
        32768 => cfft_32768, ifft_32768, "fft-32768";
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::ChaChaNoise;
    use mfc_formats::{
        Calibration, ErrorSummary, Header, Neighbouring, Participation, Sensitivity,
        SensitivityMethod, encode_f32s,
    };
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn blob(kind: FftKind, block: u32, stamps: u32, kernel: &[f32], generator: &[f32]) -> Vec<u8> {
        let (k, g) = (
            encode_f32s(kernel.iter().copied()),
            encode_f32s(generator.iter().copied()),
        );
        Mechanism {
            header: Header {
                workload: Workload::PrefixSum,
                steps: block * stamps,
                participation: Participation::Single,
                neighbouring: Neighbouring::AddOrRemove,
                sensitivity: Sensitivity {
                    value: 1.0,
                    method: SensitivityMethod::MaxColumnNorm,
                },
                clip_norm: 1.0,
                calibration: Some(Calibration {
                    noise_multiplier: 1.0,
                    target: None,
                }),
                error: ErrorSummary {
                    sqrt_loss: 1.0,
                    optimal_sqrt_loss: None,
                    max_step_stddev: 1.0,
                    final_step_stddev: 1.0,
                },
                generator: "test",
            },
            decoder: Decoder::Fft(Fft {
                kind,
                block,
                stamps,
                kernel: F32Table::new(&k).unwrap(),
                generator: F32Table::new(&g).unwrap(),
            }),
        }
        .to_vec()
        .unwrap()
    }

    /// m = 1: ŷ = (1, 0), x̂ = (1) is the identity decoder of both kinds, so each step releases
    /// the running sum plus `σζ·sens·(z_{i,0} + Σ_{i'<i} z_{i',0})` — a random walk of the draws.
    #[test]
    fn unit_block_is_a_random_walk_of_the_draws() {
        for (kind, generator) in [
            (FftKind::Circulant, &[][..]),
            (FftKind::OptimalDecoder, &[1.0][..]),
        ] {
            let bytes = blob(kind, 1, 5, &[1.0, 0.0], generator);
            let mechanism = Mechanism::from_bytes(&bytes).unwrap();
            let d = 3;
            let mut workspace = [0.0f32; 64];
            let mut stream = FftStream::new(
                mechanism,
                d,
                &mut workspace,
                ChaChaNoise::from_seed([3; 32]).unwrap(),
            )
            .unwrap();
            let mut draws = ChaChaNoise::from_seed([3; 32]).unwrap();
            let mut walk = [0.0f32; 3];
            for i in 0..5u64 {
                let mut out = [0.0f32; 3];
                stream.step_noise(&mut out).unwrap();
                for (c, w) in walk.iter_mut().enumerate() {
                    let mut z = [0.0f32; 2];
                    draws.fill_standard_normal(i, 2 * c as u64, &mut z);
                    *w += z[0];
                    assert!((out[c] - *w).abs() < 1e-5, "{kind:?} step {i} c {c}");
                }
            }
        }
    }

    #[test]
    fn refuses_other_forms_and_long_blocks() {
        let long = MAX_BLOCK + 1;
        let kernel = vec![0.0f32; 2 * long as usize];
        let bytes = blob(FftKind::Circulant, long, 1, &kernel, &[]);
        let mechanism = Mechanism::from_bytes(&bytes).unwrap();
        assert_eq!(
            FftStream::<ChaChaNoise>::workspace_len(&mechanism, 1),
            Err(Error::FftBlockTooLarge {
                block: long,
                max: MAX_BLOCK
            })
        );
    }

    proptest! {
        /// Any valid FFT blob, any dimension: construction and every step succeed or fail with
        /// a typed error, never a panic.
        #[test]
        fn arbitrary_fft_blobs_never_panic(
            block in 1u32..40,
            stamps in 1u32..4,
            optimal in any::<bool>(),
            values in proptest::collection::vec(-1e30f32..1e30, 80),
            d in 0usize..5,
        ) {
            let m = block as usize;
            let kernel = &values[..2 * m];
            let mut generator: Vec<f32> = values[2 * m..].iter().chain(&values[..]).take(m).copied().collect();
            generator[0] = generator[0].abs().max(1e-30);
            let (kind, generator) = if optimal {
                (FftKind::OptimalDecoder, &generator[..])
            } else {
                (FftKind::Circulant, &[][..])
            };
            let bytes = blob(kind, block, stamps, kernel, generator);
            let mechanism = Mechanism::from_bytes(&bytes).unwrap();
            let mut workspace = vec![0.0f32; 20_000];
            if let Ok(mut stream) = FftStream::new(mechanism, d, &mut workspace, ChaChaNoise::from_seed([9; 32]).unwrap()) {
                let x = vec![1.0f32; d];
                let mut out = vec![0.0f32; d];
                for _ in 0..block * stamps + 1 {
                    let _ = stream.step(&x, &mut out);
                }
                prop_assert_eq!(stream.steps_released(), block * stamps);
            }
        }
    }

    /// The FFT wrapper against a direct DFT, forward and inverse, for every size.
    #[test]
    fn fft_matches_direct_dft() {
        let mut size = 2;
        while size <= 256 {
            let input: [Complex32; 256] = core::array::from_fn(|i| {
                Complex32::new(((i * 7 + 3) % 13) as f32 - 6.0, ((i * 5) % 11) as f32 - 5.0)
            });
            let mut a = input;
            fft(&mut a[..size], false).unwrap();
            for (f, got) in a[..size].iter().enumerate() {
                let mut want = Complex32::new(0.0, 0.0);
                for (t, x) in input[..size].iter().enumerate() {
                    let angle =
                        -2.0 * core::f32::consts::PI * ((f * t) % size) as f32 / size as f32;
                    want += x * Complex32::new(libm::cosf(angle), libm::sinf(angle));
                }
                assert!(
                    (got - want).l1_norm() < 1e-3 * size as f32,
                    "size {size} f {f}"
                );
            }
            fft(&mut a[..size], true).unwrap();
            for (x, y) in a[..size].iter().zip(&input[..size]) {
                assert!((x - y).l1_norm() < 1e-4 * size as f32);
            }
            size *= 2;
        }
        let mut odd = [Complex32::new(0.0, 0.0); 6];
        assert_eq!(fft(&mut odd, false), Err(Error::UnsupportedDecoder));
    }
}
