//! Issue 33: the device's verifier (`salty` under the module's checks) against ed25519-dalek's
//! `verify_strict` as the independent reference: the RFC 8032 vectors verify, and every flipped
//! bit, another key or message, `S + ℓ`, a small-order key, a small-order `R` and a signature
//! that only a cofactored verifier would accept are refused — each case asserts both verdicts.
//! The forged cases also assert that `salty` alone accepts them, so removing any one of the
//! module's checks fails a test.

use curve25519_dalek::constants::{ED25519_BASEPOINT_POINT, EIGHT_TORSION};
use curve25519_dalek::edwards::CompressedEdwardsY;
use curve25519_dalek::{EdwardsPoint, Scalar};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha512};

use super::*;

fn unhex<const N: usize>(text: &str) -> [u8; N] {
    assert_eq!(text.len(), 2 * N);
    core::array::from_fn(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
}

/// RFC 8032, §7.1, TEST 1 (empty message) and TEST 2 (message `72`).
const SEED_1: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const PUBLIC_1: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
const SIGNATURE_1: &str = concat!(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155",
    "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
);
const SEED_2: &str = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";
const PUBLIC_2: &str = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
const SIGNATURE_2: &str = concat!(
    "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da",
    "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
);

/// ed25519-dalek's verdict.
fn reference(message: &[u8], signature: &[u8; 64], key: &[u8; 32]) -> bool {
    VerifyingKey::from_bytes(key).is_ok_and(|key| {
        key.verify_strict(message, &ed25519_dalek::Signature::from_bytes(signature))
            .is_ok()
    })
}

/// `salty`'s verdict without the module's checks.
fn salty_alone(message: &[u8], signature: &[u8; 64], key: &[u8; 32]) -> bool {
    PublicKey::try_from(key)
        .is_ok_and(|key| key.verify(message, &Signature::from(signature)).is_ok())
}

/// Asserts that the device and the reference both answer `expected`.
#[track_caller]
fn check(message: &[u8], signature: &[u8; 64], key: &[u8; 32], expected: bool) {
    assert_eq!(
        verify_strict(message, signature, key),
        expected,
        "the device's verdict"
    );
    assert_eq!(
        reference(message, signature, key),
        expected,
        "verify_strict's verdict"
    );
}

/// `R ‖ S`.
fn signature(r: &[u8; 32], s: &[u8; 32]) -> [u8; 64] {
    core::array::from_fn(|i| if i < 32 { r[i] } else { s[i - 32] })
}

/// `k = SHA-512(R ‖ A ‖ message) mod ℓ`.
fn challenge(r: &[u8; 32], key: &[u8; 32], message: &[u8]) -> Scalar {
    let hash = Sha512::new()
        .chain_update(r)
        .chain_update(key)
        .chain_update(message)
        .finalize();
    let mut wide = [0u8; 64];
    wide.copy_from_slice(&hash);
    Scalar::from_bytes_mod_order_wide(&wide)
}

/// The secret scalar `a` of a seed (RFC 8032, §5.1.5).
fn secret_scalar(seed: &[u8; 32]) -> Scalar {
    let hash = Sha512::digest(seed);
    let mut a = [0u8; 32];
    a.copy_from_slice(&hash[..32]);
    a[0] &= 248;
    a[31] &= 127;
    a[31] |= 64;
    Scalar::from_bytes_mod_order(a)
}

#[test]
fn rfc_8032_vectors_verify_and_dalek_signs_them() {
    let vectors = [
        (SEED_1, PUBLIC_1, &[][..], SIGNATURE_1),
        (SEED_2, PUBLIC_2, &[0x72][..], SIGNATURE_2),
    ];
    for (seed, public, message, sig) in vectors {
        let (key, sig) = (unhex::<32>(public), unhex::<64>(sig));
        check(message, &sig, &key, true);
        let signer = SigningKey::from_bytes(&unhex(seed));
        assert_eq!(signer.verifying_key().to_bytes(), key);
        assert_eq!(signer.sign(message).to_bytes(), sig);
    }
}

#[test]
fn any_flipped_bit_another_key_or_message_is_refused() {
    let (key, sig) = (unhex::<32>(PUBLIC_1), unhex::<64>(SIGNATURE_1));
    for bit in 0..64 * 8 {
        let mut flipped = sig;
        flipped[bit / 8] ^= 1 << (bit % 8);
        check(b"", &flipped, &key, false);
    }
    for bit in 0..32 * 8 {
        let mut flipped = key;
        flipped[bit / 8] ^= 1 << (bit % 8);
        check(b"", &sig, &flipped, false);
    }
    check(b"", &sig, &unhex(PUBLIC_2), false);
    check(&[0x72], &sig, &key, false);
    check(&[0x00], &sig, &key, false);
}

#[test]
fn s_plus_multiples_of_the_order_are_refused() {
    let (key, sig) = (unhex::<32>(PUBLIC_1), unhex::<64>(SIGNATURE_1));
    let mut s = [0u8; 32];
    s.copy_from_slice(&sig[32..]);
    // S + jℓ for every j with S + jℓ < 2^256 (ℓ > 2^252, so at most 15).
    let mut tried = 0;
    loop {
        let mut carry = 0u16;
        for (byte, order) in s.iter_mut().zip(ORDER) {
            let sum = u16::from(*byte) + u16::from(order) + carry;
            *byte = sum as u8;
            carry = sum >> 8;
        }
        if carry != 0 {
            break;
        }
        tried += 1;
        let malleated = signature(sig[..32].try_into().unwrap(), &s);
        assert!(
            salty_alone(b"", &malleated, &key),
            "salty alone accepts S + {tried}ℓ"
        );
        check(b"", &malleated, &key, false);
    }
    assert!(tried >= 1);
}

#[test]
fn the_small_order_list_is_exactly_the_small_order_points() {
    // Every point of order 1, 2, 4 or 8, either sign bit, is listed ...
    for point in EIGHT_TORSION {
        let mut bytes = point.compress().to_bytes();
        assert!(has_small_order(&bytes));
        bytes[31] ^= 0x80;
        assert!(has_small_order(&bytes));
    }
    // ... and every listed encoding, either sign bit, is a small-order point or none.
    for y in SMALL_ORDER_Y {
        for sign in [0, 0x80] {
            let mut bytes = y;
            bytes[31] |= sign;
            if let Some(point) = CompressedEdwardsY(bytes).decompress() {
                assert!(point.is_small_order(), "{bytes:02x?}");
            }
        }
    }
    assert!(!has_small_order(&unhex::<32>(PUBLIC_1)));
    assert!(!has_small_order(
        &ED25519_BASEPOINT_POINT.compress().to_bytes()
    ));
}

#[test]
fn small_order_keys_are_refused() {
    // Under a key T of small order, [S]B − [k]T = R for S = 1, R = B − [j]T and k ≡ j (mod the
    // order of T): a forgery of some message within a few tries, for every T.
    for point in EIGHT_TORSION {
        let key = point.compress().to_bytes();
        let mut forged = None;
        'search: for counter in 0u32..256 {
            let message = counter.to_le_bytes();
            for j in 0u8..8 {
                let r = ED25519_BASEPOINT_POINT - point * Scalar::from(j);
                let r_bytes = r.compress().to_bytes();
                let k = challenge(&r_bytes, &key, &message);
                if ED25519_BASEPOINT_POINT - point * k == r {
                    forged = Some((message, signature(&r_bytes, &Scalar::ONE.to_bytes())));
                    break 'search;
                }
            }
        }
        let (message, sig) = forged.expect("a forgery under a small-order key");
        assert!(
            salty_alone(&message, &sig, &key),
            "salty alone accepts it under {key:02x?}"
        );
        check(&message, &sig, &key, false);
        let mut negative = key;
        negative[31] ^= 0x80;
        check(&message, &sig, &negative, false);
    }
}

#[test]
fn a_small_order_r_is_refused() {
    // The key holder can make R the identity: S = k·a gives [S]B − [k]A = identity = R.
    let key = unhex::<32>(PUBLIC_1);
    let a = secret_scalar(&unhex(SEED_1));
    assert_eq!((ED25519_BASEPOINT_POINT * a).compress().to_bytes(), key);
    let identity = EdwardsPoint::default().compress().to_bytes();
    let message = b"two signatures of one message";
    let s = challenge(&identity, &key, message) * a;
    let sig = signature(&identity, &s.to_bytes());
    assert!(
        salty_alone(message, &sig, &key),
        "salty alone accepts a small-order R"
    );
    check(message, &sig, &key, false);
    // Any other small-order R.
    for point in EIGHT_TORSION {
        let r = point.compress().to_bytes();
        let s = challenge(&r, &key, message) * a;
        check(message, &signature(&r, &s.to_bytes()), &key, false);
    }
}

#[test]
fn the_equation_is_cofactorless() {
    // A key with a torsion part, A' = A + T (T of order 8): for R = [r]B and S = r + k·a,
    // [S]B − [k]A' = R − [k]T, which is R exactly when 8 divides k. A cofactored verifier
    // (ed25519-compact) accepts all of them; verify_strict and the device only those.
    let a = secret_scalar(&unhex(SEED_1));
    let torsion = EIGHT_TORSION[1];
    let key = (ED25519_BASEPOINT_POINT * a + torsion)
        .compress()
        .to_bytes();
    let nonce = Scalar::from(12_345u32);
    let r = (ED25519_BASEPOINT_POINT * nonce).compress().to_bytes();
    let (mut accepted, mut refused) = (0, 0);
    for counter in 0u32..64 {
        let message = counter.to_le_bytes();
        let k = challenge(&r, &key, &message);
        let sig = signature(&r, &(nonce + k * a).to_bytes());
        let divisible = k.to_bytes()[0] % 8 == 0;
        check(&message, &sig, &key, divisible);
        if divisible {
            accepted += 1;
        } else {
            refused += 1;
        }
    }
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}
