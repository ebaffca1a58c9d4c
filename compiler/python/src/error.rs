//! The crate's one error type and the Python exceptions it becomes: every refusal of the
//! compiler, the blob parser or the runtime reaches Python with the library's own message; a
//! file that cannot be read is the `OSError` subclass of its cause (`FileNotFoundError`, …), an
//! allocation too large a `MemoryError`.

use std::fmt;

use pyo3::exceptions::{PyMemoryError, PyOSError, PyTypeError, PyValueError};
use pyo3::{PyErr, create_exception};

create_exception!(
    _mfc,
    MfcError,
    PyValueError,
    "Base class of mfc's errors (a ValueError): the message is the library's own."
);
create_exception!(
    _mfc,
    CompileError,
    MfcError,
    "The compiler refused the options or failed (the message names the option, the value and the allowed range)."
);
create_exception!(
    _mfc,
    BlobError,
    MfcError,
    "A blob is malformed, corrupted (checksum mismatch), of another version or out of range."
);
create_exception!(
    _mfc,
    StreamError,
    MfcError,
    "The runtime refused a stream, a step, a checkpoint or a restore; the stream is unchanged."
);

/// Why a call of the Python package failed.
#[derive(Debug)]
pub enum Error {
    /// The compiler refused or failed.
    Compiler(mfc_compiler::Error),
    /// An option refused, rendered in Python's words (`min_sep=5: …`): `CompileError`.
    Option(String),
    /// The runtime refused (an invalid blob included).
    Runtime(mfc_runtime::Error),
    /// An argument is of the wrong type (e.g. a float64 array where float32 is required).
    Type(String),
    /// An argument has the right type but a value the package refuses before the runtime sees it.
    Value(String),
    /// A stream refused by the package's own policy before the runtime sees it (an unverifiable
    /// blob, a lowered noise multiplier without its opt-in): `StreamError`.
    Refused(String),
    /// An allocation whose size the caller controls is too large for this machine.
    Memory(String),
    /// A file could not be read or written.
    Io {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// An exception raised by Python code the package called (numpy's conversion).
    Python(PyErr),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Compiler(e) => write!(f, "{e}"),
            Error::Runtime(e) => write!(f, "{e}"),
            Error::Type(why)
            | Error::Value(why)
            | Error::Refused(why)
            | Error::Memory(why)
            | Error::Option(why) => f.write_str(why),
            Error::Io { path, error } => write!(f, "{path}: {error}"),
            Error::Python(e) => write!(f, "{e}"),
        }
    }
}

impl From<mfc_compiler::Error> for Error {
    fn from(e: mfc_compiler::Error) -> Self {
        Error::Compiler(e)
    }
}

impl From<mfc_runtime::Error> for Error {
    fn from(e: mfc_runtime::Error) -> Self {
        Error::Runtime(e)
    }
}

impl From<mfc_formats::Error> for Error {
    fn from(e: mfc_formats::Error) -> Self {
        Error::Runtime(mfc_runtime::Error::InvalidBlob(e))
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Error::Python(e)
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            // OSError(errno, strerror, filename) is the subclass of its errno
            // (FileNotFoundError, PermissionError, …) with `filename` set.
            Error::Io { path, error } => match error.raw_os_error() {
                Some(errno) => {
                    let text = error.to_string();
                    let strerror = text
                        .strip_suffix(&format!(" (os error {errno})"))
                        .unwrap_or(&text)
                        .to_string();
                    PyOSError::new_err((errno, strerror, path))
                }
                None => PyErr::from(std::io::Error::new(error.kind(), message)),
            },
            Error::Python(e) => e,
            Error::Memory(_) => PyMemoryError::new_err(message),
            Error::Refused(_) => StreamError::new_err(message),
            Error::Compiler(
                mfc_compiler::Error::Blob(_) | mfc_compiler::Error::BlobFile { .. },
            )
            | Error::Runtime(mfc_runtime::Error::InvalidBlob(_)) => BlobError::new_err(message),
            Error::Compiler(_) | Error::Option(_) => CompileError::new_err(message),
            Error::Runtime(_) => StreamError::new_err(message),
            Error::Type(_) => PyTypeError::new_err(message),
            Error::Value(_) => MfcError::new_err(message),
        }
    }
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, Error>;
