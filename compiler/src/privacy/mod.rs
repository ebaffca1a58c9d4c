//! What makes a blob private and what it promises: participation schemas and the sensitivity of
//! an encoder under them ([`participation`], [`sensitivity`]), the calibration of `σ` for a
//! target `(ε, δ)` ([`calibrate`]), and the device's verification of a blob's recorded
//! sensitivity, run on the host with the device's policy ([`verdict`]); and an accountant for
//! compositions of Gaussian and Poisson-subsampled Gaussian mechanisms, with the amplified BandMF
//! calibration built on it ([`accountant`]).

pub mod accountant;
pub mod calibrate;
pub mod participation;
pub mod sensitivity;
pub mod verdict;
