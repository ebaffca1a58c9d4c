//! The optimizers of every strategy family, independent of the form that ships them: the dense
//! optimum of the total loss under single participation (the fixed point φ, 003 §3, with its
//! dual certificate) and under fixed epoch order (001 §3), banded encoders (general and
//! Toeplitz, Choquette-Choo et al. 2023b; McKenna 2025), stamping (001 App. D.4), the
//! streaming factorization of a Gram matrix, and the numerical tools they share (L-BFGS, linear
//! algebra).

pub mod banded;
pub mod blt;
pub mod factorize;
pub(crate) mod lbfgs;
pub(crate) mod linalg;
pub mod multi_epoch;
pub mod optimum;
pub mod single;
pub mod stamp;
pub mod toeplitz;
