//! What leaves the compiler: the `.mfc` blob ([`blob`]; `formats/SPEC.md`) and its Ed25519
//! signature ([`signing`]).

pub mod blob;
pub mod signing;
