//! Issue 20, signed blobs (`formats/SPEC.md`, "Signed blobs"; feature `signature`): the golden
//! blob of the SPEC signed with the RFC 8032 test key (TEST 1), its trailer pinned byte for byte
//! (Ed25519 signatures are deterministic); it verifies under its public key, and is refused
//! under another key, with any single bit of it changed, and by a reader that does not check
//! signatures (`TrailingBytes`).
#![cfg(feature = "signature")]

use ed25519_dalek::{Signer, SigningKey};
use mfc_formats::signature::{TRAILER_LEN, split_signed, trailer};
use mfc_runtime::Error;
use mfc_runtime::formats::{Error as BlobError, Mechanism};
use mfc_runtime::signature::from_signed_bytes;

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The 149-byte golden blob of `formats/SPEC.md` ("Golden example").
const GOLDEN: &str = concat!(
    "4d4643424c4f42000100000081000000000300000000000000f03f00000000000000f03f",
    "010000000000000040010000000000000040000000000000e03f00000000000000400000",
    "0000000000f83f000000000000f83f036d6663000201180000803f000000000000803f00",
    "00003f0000803f0000003f0c00000000000000000000003f0c0000003f00000000000000",
    "00a64bc3c1",
);

/// RFC 8032, §7.1, TEST 1.
const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const PUBLIC: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

/// The trailer of the golden blob signed with the test key: magic, then the signature.
const GOLDEN_TRAILER: &str = concat!(
    "4d46435349473100",                                                 // "MFCSIG1\0"
    "a8b09a1ea9760c216f83ebfb6d0b060579471422925459ff6554cd730a40e61a", // R
    "a2ad659a34c0ee899501293be61fabe31a498881039c95cce38c8febf6c65e0f", // S
);

fn golden() -> Vec<u8> {
    unhex(GOLDEN)
}

fn signed(seed: &str) -> Vec<u8> {
    let key = SigningKey::from_bytes(&unhex(seed).try_into().unwrap());
    let blob = golden();
    let signature = key.sign(&blob).to_bytes();
    let mut out = blob;
    out.extend_from_slice(&trailer(&signature));
    out
}

fn public() -> [u8; 32] {
    unhex(PUBLIC).try_into().unwrap()
}

#[test]
fn golden_signed_blob() {
    let bytes = signed(SEED);
    assert!(Mechanism::from_bytes(&golden()).is_ok());
    assert_eq!(bytes.len(), 149 + TRAILER_LEN);
    assert_eq!(hex(&bytes[149..]), GOLDEN_TRAILER);
    let m = from_signed_bytes(&bytes, &public()).unwrap();
    assert_eq!(m, Mechanism::from_bytes(&golden()).unwrap().into_inner());
    assert_eq!(split_signed(&bytes).unwrap().blob, &golden()[..]);
}

#[test]
fn another_key_one_flipped_bit_and_unsigned_blobs_are_refused() {
    let bytes = signed(SEED);
    // Another key (RFC 8032 TEST 2's seed) signing the same blob.
    let other = signed("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb");
    assert_eq!(
        from_signed_bytes(&other, &public()),
        Err(Error::BadSignature)
    );
    // Every single bit of the signed blob, blob and trailer alike.
    for i in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[i / 8] ^= 1 << (i % 8);
        assert!(
            from_signed_bytes(&flipped, &public()).is_err(),
            "bit {i} flipped was accepted"
        );
    }
    // An unsigned blob, and a reader that does not check signatures.
    assert_eq!(
        from_signed_bytes(&golden(), &public()),
        Err(Error::NotSigned)
    );
    assert!(matches!(
        Mechanism::from_bytes(&bytes),
        Err(BlobError::TrailingBytes)
    ));
    // An invalid public key.
    assert_eq!(
        from_signed_bytes(&bytes, &[0xff; 32]),
        Err(Error::BadSignature)
    );
}
