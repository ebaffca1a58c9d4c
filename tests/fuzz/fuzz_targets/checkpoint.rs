//! Fuzz target `checkpoint`: arbitrary bytes restored as a checkpoint into a freshly built stream
//! of a valid blob, then stepped to the horizon. Restore must never panic, a refused checkpoint
//! must leave the stream unchanged, and an accepted one must round-trip through the stream's own
//! checkpoint (see [`mfc_fuzz::checkpoint::checkpoint`] for the input layout and every property).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| mfc_fuzz::checkpoint::checkpoint(bytes));
