//! The forms a blob ships: each turns an optimized strategy into the stored coefficients a device
//! replays, computes the sensitivity of exactly those coefficients, and encodes the blob.
//!
//! - [`banded`]: the decoder `B̂` as banded plus low rank `(h, r)` (Denisov et al. 2022, App. H),
//!   compressed from the optimum, refined on the shipped loss and rescaled;
//! - [`blt`]: buffered linear Toeplitz (Dvijotham et al. 2024), `m` buffers, any horizon;
//! - [`fft`]: the FFT mechanism and its optimal decoder (001 §4, App. K), stamped;
//! - [`bandmf`]: the banded encoder `Ĉ` itself (Choquette-Choo et al. 2023b; McKenna 2025).

pub mod banded;
pub mod bandmf;
pub mod blt;
pub mod fft;
