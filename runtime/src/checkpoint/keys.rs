//! Epoch keys: the noise key of each epoch, derived from a device root secret so that a cold
//! start never reuses a previous stream's noise, in a domain of ChaCha20 that noise never reads.

use chacha20::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

use super::counter::ReleaseCounter;
use crate::error::Error;
use crate::noise::{ChaChaNoise, KEY_WORD};

/// The noise key of epoch `epoch`: 32 bytes of ChaCha20 keyed by `root` with nonce `epoch`
/// (ChaCha20 as a PRF of the epoch), from word `2⁶⁷` of that stream on — the half of every
/// ChaCha stream that noise never reads ([`noise`](crate::noise), "Limits"). The key domain is
/// thus apart from the noise domain: a [`ChaChaNoise`] seeded with `root` itself never draws
/// these bytes for any row. `root` is a device secret used only for this derivation.
pub fn stream_key(root: &[u8; 32], epoch: u64) -> [u8; 32] {
    let mut prf = ChaCha20Rng::from_seed(*root);
    prf.set_stream(epoch);
    prf.set_word_pos(KEY_WORD);
    let mut key = [0u8; 32];
    prf.fill_bytes(&mut key);
    key
}

/// The noise source of the counter's epoch: [`ChaChaNoise`] keyed by
/// [`stream_key`]`(root, counter.epoch())`. Refuses the all-zero root ([`Error::WeakSeed`]) and
/// epoch 0 ([`Error::EpochNotStarted`]: call [`ReleaseCounter::cold_start`] first).
pub fn epoch_noise(root: &[u8; 32], counter: &ReleaseCounter) -> Result<ChaChaNoise, Error> {
    if *root == [0; 32] {
        return Err(Error::WeakSeed);
    }
    if counter.epoch() == 0 {
        return Err(Error::EpochNotStarted);
    }
    ChaChaNoise::from_seed(stream_key(root, counter.epoch()))
}
