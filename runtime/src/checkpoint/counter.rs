//! The release counter: the two numbers a device keeps in monotonic, durable storage — the epoch
//! of the current noise key and how many steps of that epoch's stream may have been released —
//! and the streams it counts ([`Resumable`]). The rules it enforces are the parent module's.

use crate::error::Error;

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A stream with checkpoints: [`Stream`](crate::Stream) (banded plus low rank),
/// [`BltStream`](crate::BltStream), [`FftStream`](crate::FftStream),
/// [`BandMfStream`](crate::BandMfStream) and [`Replay`](crate::Replay). Sealed; what
/// [`ReleaseCounter::record`] reads.
pub trait Resumable: sealed::Sealed {
    /// Steps computed so far.
    fn steps_released(&self) -> u32;
}

/// What the device persists in monotonic storage: the epoch of the current key and the number of
/// steps of that epoch's stream that may have been released. See the
/// [module docs](crate::checkpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReleaseCounter {
    epoch: u64,
    released: u32,
}

impl ReleaseCounter {
    /// The factory state: no epoch started, nothing released. Its epoch (0) is never keyed.
    pub const FACTORY: Self = Self {
        epoch: 0,
        released: 0,
    };

    /// The counter as read back from storage.
    pub const fn new(epoch: u64, released: u32) -> Self {
        Self { epoch, released }
    }

    /// The epoch of the current key.
    pub const fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Steps of the current epoch's stream that may have been released.
    pub const fn released(&self) -> u32 {
        self.released
    }

    /// The counter of a cold start: the next epoch, nothing released. Persist it **before**
    /// deriving the new key ([`epoch_noise`](crate::epoch_noise)) and releasing anything.
    pub fn cold_start(self) -> Result<Self, Error> {
        let epoch = self.epoch.checked_add(1).ok_or(Error::EpochExhausted)?;
        Ok(Self { epoch, released: 0 })
    }

    /// Records that `stream`'s latest step is about to be released: `released` becomes
    /// `stream.steps_released()`. Persist the counter after the checkpoint and before the
    /// release leaves the device. Refuses ([`Error::StaleCheckpoint`], counter untouched) a
    /// stream behind the counter: its steps were released already.
    pub fn record(&mut self, stream: &impl Resumable) -> Result<(), Error> {
        let step = stream.steps_released();
        if step < self.released {
            return Err(Error::StaleCheckpoint {
                step,
                released: self.released,
            });
        }
        self.released = step;
        Ok(())
    }

    /// The 12 bytes to persist: epoch (u64) then released (u32), little-endian.
    pub fn to_bytes(&self) -> [u8; 12] {
        let [e0, e1, e2, e3, e4, e5, e6, e7] = self.epoch.to_le_bytes();
        let [r0, r1, r2, r3] = self.released.to_le_bytes();
        [e0, e1, e2, e3, e4, e5, e6, e7, r0, r1, r2, r3]
    }

    /// The counter from the bytes of [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(bytes: [u8; 12]) -> Self {
        let [e0, e1, e2, e3, e4, e5, e6, e7, r0, r1, r2, r3] = bytes;
        Self {
            epoch: u64::from_le_bytes([e0, e1, e2, e3, e4, e5, e6, e7]),
            released: u32::from_le_bytes([r0, r1, r2, r3]),
        }
    }
}
