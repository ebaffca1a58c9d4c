//! Signed blobs (`SPEC.md`, "Signed blobs"): an Ed25519 signature in a detached trailer after a
//! whole blob, `blob ‖ "MFCSIG1\0" ‖ signature` (72 bytes more), the signature over the blob's
//! bytes exactly as they are (its magic `MFCBLOB\0` opens the signed message, which separates it
//! from anything else a key might sign). A reader that predates signatures refuses a signed blob
//! (`TrailingBytes`) instead of misreading it; this module only frames and splits, the runtime
//! verifies (`mfc_runtime::signature`, feature `signature`).

/// The trailer's magic, after the blob and before the signature.
pub const SIGNATURE_MAGIC: [u8; 8] = *b"MFCSIG1\0";

/// Bytes of an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;

/// Bytes a signature adds to a blob: the magic and the signature.
pub const TRAILER_LEN: usize = SIGNATURE_MAGIC.len() + SIGNATURE_LEN;

/// A signed blob split into the blob (the signed message) and its signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signed<'a> {
    /// The whole unsigned blob, from its magic to its CRC-32: what was signed.
    pub blob: &'a [u8],
    /// The Ed25519 signature of `blob`.
    pub signature: &'a [u8; SIGNATURE_LEN],
}

/// Splits `bytes` into a blob and its signature when they end with a signature trailer (the
/// magic [`SIGNATURE_MAGIC`] 72 bytes before the end), `None` otherwise. Neither the blob nor the
/// signature is checked here.
pub fn split_signed(bytes: &[u8]) -> Option<Signed<'_>> {
    let blob_len = bytes.len().checked_sub(TRAILER_LEN)?;
    let (blob, trailer) = bytes.split_at(blob_len);
    let (magic, signature) = trailer.split_at(SIGNATURE_MAGIC.len());
    if magic != SIGNATURE_MAGIC {
        return None;
    }
    Some(Signed {
        blob,
        signature: signature.try_into().ok()?,
    })
}

/// The trailer for `signature`: append it to the blob that was signed.
pub fn trailer(signature: &[u8; SIGNATURE_LEN]) -> [u8; TRAILER_LEN] {
    let mut out = [0u8; TRAILER_LEN];
    let (magic, rest) = out.split_at_mut(SIGNATURE_MAGIC.len());
    magic.copy_from_slice(&SIGNATURE_MAGIC);
    rest.copy_from_slice(signature);
    out
}
