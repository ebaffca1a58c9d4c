//! The `no_std`, allocation-free runtime of mfc: it replays a compiled matrix-factorization
//! mechanism from an `.mfc` blob (read in place, e.g. from flash) and releases one differentially
//! private prefix sum per step.
//!
//! ```
//! use mfc_runtime::{ChaChaNoise, Mechanism, Stream};
//! # use mfc_runtime::formats::*;
//! # let (d, l, r) = (encode_f32s([1.0, 0.0, 1.0, 0.5]), encode_f32s([0.0; 2]), encode_f32s([0.0; 2]));
//! # let t = |b| F32Table::new(b).unwrap();
//! # let example = Mechanism { header: Header { workload: Workload::PrefixSum, steps: 2,
//! #   participation: Participation::Single, neighbouring: Neighbouring::AddOrRemove,
//! #   sensitivity: Sensitivity { value: 1.2, method: SensitivityMethod::MaxColumnNorm },
//! #   clip_norm: 1.0, calibration: Some(Calibration { noise_multiplier: 1.0, target: None }),
//! #   error: ErrorSummary { sqrt_loss: 1.0, optimal_sqrt_loss: None, max_step_stddev: 1.0,
//! #   final_step_stddev: 1.0 }, generator: "doc" },
//! #   decoder: Decoder::BandedLowRank(BandedLowRank { band: 2, rank: 1, diagonals: t(&d),
//! #   left: t(&l), right: t(&r) }) };
//! let bytes: Vec<u8> = example.to_vec()?; // on a device: include_bytes!("mech.mfc")
//! let mechanism = Mechanism::from_bytes(&bytes)?; // validates everything once
//! let mut workspace = [0.0f32; 20]; // (h + r + 2)·d floats
//! let noise = ChaChaNoise::from_seed([0x5a; 32])?; // a secret seed from a hardware RNG
//! let mut stream = Stream::new(mechanism, 4, &mut workspace, noise)?;
//! let mut release = [0.0f32; 4];
//! stream.step(&[1.0, 0.0, 0.0, 0.0], &mut release)?; // clipped to ζ, summed, noised
//! # Ok::<(), mfc_runtime::Error>(())
//! ```
//!
//! Every fallible call checks everything before it changes anything: on error the stream is
//! exactly as it was. Nothing here allocates, logs or panics on any input.
//!
//! Streams take only a [`Validated`] mechanism, which [`Mechanism::from_bytes`] and
//! [`Mechanism::validate`] produce after checking every field: one built in code with, say,
//! `band: 0` must pass `validate` first (`tests/arbitrary_mechanisms.rs` feeds arbitrary ones
//! through every constructor and step function). Passing an unchecked one does not compile:
//!
//! ```compile_fail
//! use mfc_runtime::{ChaChaNoise, Mechanism, Stream};
//! fn stream_from(m: Mechanism<'_>) {
//!     let mut ws = [0.0f32; 64];
//!     let _ = Stream::new(m, 1, &mut ws, ChaChaNoise::from_seed([1; 32]).unwrap());
//! }
//! ```
//!
//! and the same with `.validate()?` does:
//!
//! ```
//! use mfc_runtime::{ChaChaNoise, Error, Mechanism, Stream};
//! fn stream_from(m: Mechanism<'_>) -> Result<(), Error> {
//!     let mut ws = [0.0f32; 64];
//!     let _ = Stream::new(m.validate()?, 1, &mut ws, ChaChaNoise::from_seed([1; 32])?);
//!     Ok(())
//! }
//! ```
//!
//! # Features
//!
//! Only the forms are on by default (`all-forms`); the default build is `no_std`,
//! allocation-free, and can only draw noise from ChaCha20.
//!
//! - `form-banded`, `form-blt`, `form-bandmf`, `form-fft` (all four: `all-forms`, the default):
//!   the decoder forms [`Replay`] replays. A blob of a form left out is refused
//!   ([`Error::UnsupportedDecoder`]) and its replay code is not linked; at least one must be on.
//!   The form's stream type stays public either way. Verifiers are selected at link time
//!   instead, by [`verify::verify_only`]'s const parameter.
//! - `os-entropy`: `ChaChaNoise::from_os_entropy`, a seed from the operating system.
//! - `parallel` (implies `std`): `parallel::ParallelStream`, shards of one stream stepped on
//!   rayon's thread pool, and `prefetch::PrefetchedNoise`, noise drawn one step ahead on a
//!   second thread.
//! - `insecure-simulation`: `InsecureSimulationNoise` (Xoshiro256++), predictable noise for
//!   simulations and benchmarks only — a release noised by it is not private.
//! - `signature`: `signature::from_signed_bytes`, blobs signed with Ed25519 (`mfc sign`) verified
//!   against a public key the device holds, before they are parsed.
//! - `defmt`: `defmt::Format` for the error type and the public types (the runtime itself logs
//!   nothing).
//!
//! A device resumes a stream after a reboot with [`checkpoint`]: see its rules on keys, stale
//! checkpoints and the release counter. [`Replay`] opens a blob of any decoder form and
//! dispatches to the form's stream ([`replay`] documents the guarantees every form shares); the
//! C library, `mfc simulate` and the Python package use it. [`Shape`] sizes a form's workspace
//! and checkpoint as `const fn`s, so a device can size its static buffers at compile time.
//!
//! # Layout
//!
//! - [`forms`]: one module per decoder form, each a stream with its algorithm, state and memory
//!   formula, and beside them the checks of a step and what a stream derives from its blob;
//! - [`replay`]: the one entry point over the forms ([`Replay`], [`Shape`]);
//! - [`checkpoint`]: the release counter, epoch keys, the blob's fingerprint, the wire format, the
//!   protocol and each form's state;
//! - [`verify`] and [`policy`]: the device's check of a blob's recorded sensitivity, and what it
//!   accepts;
//! - [`noise`], [`clip`], [`privacy`], `sum.rs`: the sampler, clipping with its proof, the
//!   `(ε, δ)` of a noise multiplier, compensated sums.
//!
//! The forms are dispatched in two places only, `replay.rs` and `verify/`; a fifth form is a
//! module in `forms/`, a variant of [`Replay`] and [`Shape`], its checkpoint state
//! (`checkpoint/forms.rs`) and its verification.
#![no_std]
#![forbid(unsafe_code)]
// The promise "no panic on any input" as lints: no unwrap, expect, panic or indexing in the
// library's code (tests may use them).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

#[cfg(feature = "std")]
extern crate std;

pub mod checkpoint;
pub mod clip;
mod error;
pub mod forms;
pub mod noise;
#[cfg(feature = "parallel")]
pub mod parallel;
pub mod policy;
#[cfg(feature = "parallel")]
pub mod prefetch;
pub mod privacy;
pub mod replay;
#[cfg(feature = "signature")]
pub mod signature;
mod sum;
pub mod verify;
mod ziggurat;

pub use checkpoint::{BlobFingerprint, ReleaseCounter, Resumable, epoch_noise};
pub use clip::{clip_factor, clip_to_norm};
pub use error::Error;
pub use forms::{BandMfStream, BltStream, FftStream, Stream, Workspace};
pub use mfc_formats as formats;
pub use mfc_formats::{Mechanism, Validated};
#[cfg(feature = "insecure-simulation")]
pub use noise::InsecureSimulationNoise;
pub use noise::{ChaChaNoise, NoiseSource};
pub use replay::{Replay, Shape};
