//! Fuzz target `blob_payload`: the structure-aware variant of `blob`. The input is a blob whose
//! frame and CRC the target rewrites before parsing (see [`mfc_fuzz::blob_payload`]), so libFuzzer's
//! mutations of the seed blobs in `seeds/blob/` reach the postcard decoder and `validate()` instead
//! of stopping at the checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| mfc_fuzz::blob_payload(bytes));
