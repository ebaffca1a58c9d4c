//! Fuzz target `signed` (issue 20): signed frames and the device's checks of a blob. The input,
//! reframed as in [`super::blob_payload`], is signed with the RFC 8032 TEST 1 key; then
//!
//! - the input itself as a signed blob: `from_signed_bytes` never panics and accepts only what
//!   was signed with the key (a forged signature never verifies: the raw input is accepted only
//!   if it equals a blob signed here, which the fuzzer cannot produce);
//! - the signed reframed blob is accepted exactly when the blob parses, to the same mechanism,
//!   and refused once any one bit (chosen by the input) of the signed bytes is flipped, and by
//!   a reader that does not check signatures (`TrailingBytes`);
//! - every parsed mechanism goes through `verify::verify` (with a scratch of the length asked
//!   for, capped, and an empty one; budgets 0 and 10⁶) and `policy::admit`: no panic, and the
//!   verdict of the same call is the same twice (it changes nothing).

use ed25519_dalek::{Signer, SigningKey};
use mfc_formats::signature::{TRAILER_LEN, trailer};
use mfc_formats::{Error as BlobError, Mechanism};
use mfc_runtime::formats::Validated;
use mfc_runtime::policy::{Floor, Policy, admit};
use mfc_runtime::signature::from_signed_bytes;
use mfc_runtime::verify;

/// The secret seed of RFC 8032, §7.1, TEST 1 (a published test key).
const SEED: [u8; 32] = [
    0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
    0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60,
];

/// Verification and the policy on a parsed mechanism: no panic, and deterministic.
pub fn checks(m: &Validated<'_>) {
    let len = verify::scratch_len(m).min(1 << 16);
    let mut scratch = vec![f64::NAN; len];
    for budget in [0, 1_000_000] {
        let first = verify::verify(m, &mut scratch, budget);
        let again = verify::verify(m, &mut scratch, budget);
        assert_eq!(first, again, "verification is not deterministic");
        let _ = verify::verify(m, &mut [], budget);
    }
    let policy = Policy {
        floor: Floor::Epsilon {
            max: 4.0,
            delta: 1e-6,
        },
        max_operations: 1_000_000,
        refuse_unverifiable: false,
        admit_unbounded_horizon: false,
    };
    let _ = admit(m, None, &policy, &mut scratch);
}

/// The target (see the module docs).
pub fn signed(bytes: &[u8]) {
    let key = SigningKey::from_bytes(&SEED);
    let public = key.verifying_key().to_bytes();
    if let Ok(m) = from_signed_bytes(bytes, &public) {
        checks(&m);
    }
    let blob = super::reframe(bytes);
    let mut signed = blob.clone();
    signed.extend_from_slice(&trailer(&key.sign(&blob).to_bytes()));
    assert_eq!(signed.len(), blob.len() + TRAILER_LEN);
    match (
        Mechanism::from_bytes(&blob),
        from_signed_bytes(&signed, &public),
    ) {
        (Ok(plain), Ok(checked)) => {
            assert_eq!(plain, checked);
            checks(&checked);
        }
        (Err(_), Err(_)) => {}
        (plain, checked) => panic!("signed {checked:?} but unsigned {plain:?}"),
    }
    assert_eq!(
        Mechanism::from_bytes(&signed).err(),
        Some(BlobError::TrailingBytes),
        "a reader without signatures must refuse a signed blob"
    );
    let bit = bytes.iter().fold(0usize, |a, &b| {
        a.wrapping_mul(31).wrapping_add(usize::from(b))
    }) % (signed.len() * 8);
    signed[bit / 8] ^= 1 << (bit % 8);
    assert!(
        from_signed_bytes(&signed, &public).is_err(),
        "bit {bit} flipped was accepted"
    );
}
