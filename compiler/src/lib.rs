//! The host-side compiler of mfc: it optimizes a factorization `A = B C` of a lower-triangular
//! workload, compresses the decoder `B` into a form a small device can replay, computes the
//! sensitivity of the encoder that actually ships, calibrates the noise for a privacy target, and
//! writes a versioned `.mfc` blob. The `mfc` binary is thin glue over this library.

pub mod banded;
pub mod banded_toeplitz;
pub mod bandmf;
pub mod blob;
pub mod budget;
pub mod calibrate;
pub mod compare;
pub mod compress;
pub mod error;
pub mod factorize;
pub mod fft;
mod lbfgs;
mod linalg;
pub mod mechanism;
pub mod multi_epoch;
pub mod optimize;
pub mod participation;
pub mod pipeline;
mod refine;
pub mod report;
pub mod rescale;
pub mod sensitivity;
pub mod signing;
pub mod stamp;
pub mod toeplitz;
pub mod tree;
pub mod verdict;
pub mod workload;

pub use error::{Error, Result};
