//! Signing blobs with Ed25519 (`formats/SPEC.md`, "Signed blobs"): key generation from the
//! operating system's random source, and the detached trailer `"MFCSIG1\0" ‖ signature` after
//! a whole blob. Devices verify with `mfc_runtime::signature` (feature `signature`) against the
//! public key they hold. Keys are stored as 64 hexadecimal digits, one line: the 32-byte secret
//! seed (keep it secret) or the 32-byte public key.

use ed25519_dalek::{Signer, SigningKey};
use mfc_formats::Mechanism;
use mfc_formats::signature::{split_signed, trailer};

use crate::{Error, Result};

/// A new key pair: `(secret seed, public key)`, the seed from the operating system.
pub fn keygen() -> Result<([u8; 32], [u8; 32])> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| {
        Error::Numerical(format!("the operating system's random source failed: {e}"))
    })?;
    let key = SigningKey::from_bytes(&seed);
    Ok((seed, key.verifying_key().to_bytes()))
}

/// The public key of a secret seed.
pub fn public_key(seed: &[u8; 32]) -> [u8; 32] {
    SigningKey::from_bytes(seed).verifying_key().to_bytes()
}

/// `blob` with its signature trailer: the blob must be a whole, valid, unsigned blob (a signed
/// one is refused rather than signed twice).
pub fn sign(blob: &[u8], seed: &[u8; 32]) -> Result<Vec<u8>> {
    if split_signed(blob).is_some() {
        return Err(Error::InvalidArgument("the blob is signed already".into()));
    }
    Mechanism::from_bytes(blob)?;
    let signature = SigningKey::from_bytes(seed).sign(blob).to_bytes();
    let mut out = blob.to_vec();
    out.extend_from_slice(&trailer(&signature));
    Ok(out)
}

/// Hexadecimal text of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 32 bytes from 64 hexadecimal digits (surrounding white space ignored), naming `what` when
/// they are not.
pub fn from_hex(text: &str, what: &str) -> Result<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::InvalidArgument(format!(
            "{what}: expected 64 hexadecimal digits (a key written by mfc keygen)"
        )));
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
        let digit = |b: u8| char::from(b).to_digit(16).unwrap_or(0) as u8;
        *byte = (digit(pair[0]) << 4) | digit(pair[1]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8032, §7.1, TEST 1: the public key of the all-`9d61…` seed.
    #[test]
    fn the_public_key_matches_rfc_8032() {
        let seed = from_hex(
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "seed",
        )
        .unwrap();
        assert_eq!(
            to_hex(&public_key(&seed)),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
    }
}
