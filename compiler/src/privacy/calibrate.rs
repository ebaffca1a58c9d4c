//! Privacy calibration: the exact analytic-Gaussian relation between `σ` and `(ε, δ)` for a
//! mechanism normalized to sensitivity 1. The implementation is `no_std` and lives in the runtime
//! (`mfc_runtime::privacy`) so a device computes exactly what the compiler does.

pub use mfc_runtime::privacy::{
    delta_for_epsilon, epsilon_for_noise_multiplier, noise_multiplier_for, zcdp_rho,
};

/// What a calibration's `(ε, δ)` is for, in words: the calibration alone is for sensitivity 1,
/// so the blob the `σ` goes into says whose privacy it is (`mfc calibrate`, text and JSON, and
/// Python's `calibrate` print it next to the `(ε, δ)`).
pub const PRIVACY_UNIT: &str = "for a Gaussian mechanism of sensitivity 1: a blob's noise is σ·ζ·sens with sens computed for its participation schema and neighbouring relation, so the (ε, δ) is per record under those (mfc inspect states them); not for a blob under cyclic Poisson sampling, whose (ε, δ) is the accountant's (--sampling-prob)";
