//! Fuzz target `signed`: signed frames, signature checks, and the device's verification of the
//! sensitivity and privacy floor (see [`mfc_fuzz::signed`]).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| mfc_fuzz::signed::signed(bytes));
