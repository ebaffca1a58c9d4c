//! Signed blobs on the device (feature `signature`): a blob signed with Ed25519 by `mfc sign`
//! (`formats/SPEC.md`, "Signed blobs") is checked against the public key the device holds
//! before it is parsed. Verification uses `ed25519-dalek` without default features (no
//! allocation, no precomputed tables) and its strict check (`verify_strict`: canonical `S`,
//! no small-order keys or `R`), so a signature accepted here is accepted by every conforming
//! verifier. A signature proves who wrote the blob, not what it promises: verify its sensitivity
//! too (`crate::verify`, `crate::policy`).

use ed25519_dalek::{Signature, VerifyingKey};
use mfc_formats::signature::split_signed;
use mfc_formats::{Mechanism, Validated};

use crate::error::Error;

/// Checks the signature of a signed blob against `public_key` and parses the blob it covers:
/// [`Error::NotSigned`] without a signature trailer, [`Error::BadSignature`] when the signature
/// does not verify (another key, one bit of the blob or the signature changed) or the key is
/// not a valid Ed25519 public key, else the blob's own checks (`Mechanism::from_bytes`).
pub fn from_signed_bytes<'a>(
    bytes: &'a [u8],
    public_key: &[u8; 32],
) -> Result<Validated<'a>, Error> {
    let signed = split_signed(bytes).ok_or(Error::NotSigned)?;
    let key = VerifyingKey::from_bytes(public_key).map_err(|_| Error::BadSignature)?;
    let signature = Signature::from_bytes(signed.signature);
    key.verify_strict(signed.blob, &signature)
        .map_err(|_| Error::BadSignature)?;
    Ok(Mechanism::from_bytes(signed.blob)?)
}
