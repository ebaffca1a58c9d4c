//! Privacy calibration: the exact analytic-Gaussian relation between `σ` and `(ε, δ)` for a
//! mechanism normalized to sensitivity 1. The implementation is `no_std` and lives in the runtime
//! (`mfc_runtime::privacy`) so a device computes exactly what the compiler does.

pub use mfc_runtime::privacy::{
    delta_for_epsilon, epsilon_for_noise_multiplier, noise_multiplier_for, zcdp_rho,
};
