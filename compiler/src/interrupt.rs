//! Stopping a compile from outside it: a front end whose compile runs on another thread (the
//! Python package, whose Ctrl-C only reaches Python code) calls [`interrupt`]; the optimizers'
//! iterations (L-BFGS, the fixed point, the multi-epoch Newton method, the general banded
//! optimizer and its line search, the ALS sweeps, the BLT fits) [`check`] it and return
//! [`Error::Interrupted`], and a pattern search stops as if its budget were spent (its value
//! then an upper bound, never less than the maximum). The flag is process-wide, as a signal
//! is: an interrupt stops every compile running in the process; the front end [`clear`]s it
//! once no compile of its own is running. The CLI needs none of this: the default action of
//! `SIGINT` ends the process.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::{Error, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Asks every running compile to stop at its next iteration.
pub fn interrupt() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Lets compiles run again after an [`interrupt`].
pub fn clear() {
    INTERRUPTED.store(false, Ordering::SeqCst);
}

/// `Err(Error::Interrupted)` once [`interrupt`] was called (and not [`clear`]ed).
pub fn check() -> Result<()> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}
