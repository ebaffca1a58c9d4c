//! The host-side compiler of mfc: it optimizes a factorization `A = B C` of a lower-triangular
//! workload, compresses the decoder `B` into a form a small device can replay, computes the
//! sensitivity of the encoder that actually ships, calibrates the noise for a privacy target, and
//! writes a versioned `.mfc` blob. The `mfc` binary (crate `mfc-cli`) is thin glue over this
//! library.
//!
//! The library is grouped by concern (README, "Layout"): [`compile`] takes a typed request and
//! dispatches it to the one seam over the forms, [`forms`] (what ships: banded + low rank, BLT,
//! FFT, BandMF); [`optimize`] holds the optimizers of every strategy family, independent of
//! what ships; [`privacy`] the participation schemas, sensitivities, calibration and the
//! device's verification run on the host; [`ship`] the blob and its signature; [`compare`],
//! [`report`], [`budget`] and [`workload`] serve them all; [`interrupt`] stops a compile from
//! another thread.

pub mod budget;
pub mod compare;
pub mod compile;
pub mod error;
pub mod forms;
pub mod interrupt;
pub mod max_error;
pub mod optimize;
pub mod privacy;
pub mod report;
pub mod request;
pub mod ship;
pub mod workload;

pub use error::{Error, Result};
