//! Fuzz target `blob`: arbitrary bytes as an `.mfc` blob. `Mechanism::from_bytes` must never
//! panic; an accepted blob must re-encode to itself ([`mfc_fuzz::round_trip`]) and replay through the runtime stream of its decoder form without
//! panicking or changing state on refused calls (see [`mfc_fuzz::replay`]).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| mfc_fuzz::blob(bytes));
