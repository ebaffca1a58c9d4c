//! Signed blobs on the device (feature `signature`): a blob signed with Ed25519 by `mfc sign`
//! (`formats/SPEC.md`, "Signed blobs") is checked against the public key the device holds
//! before it is parsed. A signature proves who wrote the blob, not what it promises: verify its
//! sensitivity too (`crate::verify`, `crate::policy`).
//!
//! The check is the one of ed25519-dalek's `verify_strict`, with which the host signs and which
//! the tests use as the reference: with `S` and `R` the two halves of the signature, `A` the
//! public key and `k = SHA-512(R ‖ A ‖ blob) mod ℓ`, accept exactly when
//!
//! - `S < ℓ` (canonical, so `S + ℓ` is refused: no second signature of the same blob),
//! - neither `A` nor `R` is a point of small order (order 1, 2, 4 or 8; under a small-order
//!   key anyone can sign, and a small-order `R` lets the key holder sign twice),
//! - `A` decodes to a curve point and `[S]B − [k]A` encodes to the 32 bytes of `R` (the
//!   cofactorless equation; a non-canonical `R` never matches).
//!
//! The arithmetic is `salty` 0.3 (no default features; Cortex-M4 field arithmetic in assembly,
//! no tables, nothing allocated): about 11 KB of code and 3.5 KB of stack on the M4 against 44 KB
//! and 8 KB for ed25519-dalek (`README.md`, "Signed blobs"). Its `verify` is the last item only;
//! the first two are checked here on the encodings, before any arithmetic: `S` against `ℓ`,
//! `A` and `R` against the seven values of `y` (sign bit ignored) that the eight small-order
//! points encode to — `0`, `1`, `p − 1`, the two `y` of the points of order 8, and the
//! non-canonical `p` and `p + 1`, as in libsodium's `ge25519_has_small_order` (every other
//! non-canonical `y` is `y + p` for `y ≤ 18`, none of them small-order).

use mfc_formats::signature::split_signed;
use mfc_formats::{Mechanism, Validated};
use salty::{PublicKey, Signature};

use crate::error::Error;

/// Checks the signature of a signed blob against `public_key` and parses the blob it covers:
/// [`Error::NotSigned`] without a signature trailer, [`Error::BadSignature`] when the signature
/// does not verify (another key, one bit of the blob or the signature changed, a non-canonical
/// `S`, a small-order `R`) or the key is not a valid Ed25519 public key (not a point, or of
/// small order), else the blob's own checks (`Mechanism::from_bytes`).
pub fn from_signed_bytes<'a>(
    bytes: &'a [u8],
    public_key: &[u8; 32],
) -> Result<Validated<'a>, Error> {
    let signed = split_signed(bytes).ok_or(Error::NotSigned)?;
    if !verify_strict(signed.blob, signed.signature, public_key) {
        return Err(Error::BadSignature);
    }
    Ok(Mechanism::from_bytes(signed.blob)?)
}

/// `true` when `signature` is a signature of `message` under `public_key` by the rules of the
/// module docs (ed25519-dalek's `verify_strict`).
fn verify_strict(message: &[u8], signature: &[u8; 64], public_key: &[u8; 32]) -> bool {
    let Some((r, s)) = signature.split_first_chunk::<32>() else {
        return false;
    };
    if !is_canonical_scalar(s) || has_small_order(public_key) || has_small_order(r) {
        return false;
    }
    let Ok(key) = PublicKey::try_from(public_key) else {
        return false;
    };
    key.verify(message, &Signature::from(signature)).is_ok()
}

/// The order ℓ = 2^252 + 27742317777372353535851937790883648493 of the base point, little-endian.
const ORDER: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
];

/// `true` when the 32 little-endian bytes `s` are a number below ℓ.
fn is_canonical_scalar(s: &[u8]) -> bool {
    s.iter().rev().lt(ORDER.iter().rev())
}

/// The encodings of `y` (sign bit of `x` cleared) of the points of order 1, 2, 4 and 8, with
/// `p = 2^255 − 19` (module docs).
const SMALL_ORDER_Y: [[u8; 32]; 7] = [
    // y = 0: the two points of order 4.
    [0; 32],
    // y = 1: the identity (order 1).
    [
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00,
    ],
    // The two y of the four points of order 8.
    [
        0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98,
        0xf0, 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53,
        0xfc, 0x05,
    ],
    [
        0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67,
        0x0f, 0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac,
        0x03, 0x7a,
    ],
    // y = p − 1: the point of order 2.
    [
        0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0x7f,
    ],
    // y = p and p + 1: non-canonical 0 and 1.
    [
        0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0x7f,
    ],
    [
        0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0x7f,
    ],
];

/// `true` when the point encoded by the 32 bytes `point` (if any) has order 1, 2, 4 or 8.
fn has_small_order(point: &[u8; 32]) -> bool {
    let mut y = *point;
    y[31] &= 0x7f;
    SMALL_ORDER_Y.contains(&y)
}

#[cfg(test)]
mod tests;
