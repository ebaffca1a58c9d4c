//! What the package takes from Python, checked at the door: numpy arrays (read in place only
//! when their layout has been checked, else converted explicitly in logical C order), bytes-like
//! objects, integers used as sizes, and memory sizes (checked before anything is allocated).
//!
//! numpy hands an extension any strides, byte order and alignment. A float array is **read in
//! place** only if it is C-contiguous, aligned and of native byte order, so that its memory order
//! is its logical (row-major) order; any other float array of the right precision — column-major
//! (`numpy.asfortranarray(x)`, `x.T`), strided, byte-swapped (`x.astype(">f4")`), misaligned — is
//! first copied by `numpy.ascontiguousarray(x, dtype=...)`, which converts element by element in
//! logical order. Either way the values reach the runtime in the order `x[i, j]` names them:
//! reading a column-major batch as row-major would release sums of the wrong entries and clip the
//! wrong vectors, voiding the privacy guarantee.
//!
//! A size given by the caller (`dim`, `shard`, `released`, `steps`, …) is checked against its
//! range with the argument's name (a `ValueError`, not pyo3's nameless `OverflowError` for a
//! negative number), and every allocation whose size the caller controls is checked first
//! ([`zeroed`]): its byte count with overflow-checked arithmetic, against the machine's physical
//! memory when `os.sysconf` reports it, then allocated fallibly, so that a request too large
//! raises `MemoryError` instead of aborting the interpreter.

use faer::Mat;
use numpy::{
    Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::error::{Error, Result};

/// A numpy array of `T` whose memory is in logical C order: the caller's own (checked) or
/// numpy's C-ordered copy of it.
pub struct Array<'py, T: Element> {
    array: PyReadonlyArrayDyn<'py, T>,
    /// The array's shape.
    pub shape: Vec<usize>,
}

impl<T: Element> Array<'_, T> {
    /// The values in C order. The layout is checked again here, where the memory is borrowed:
    /// C-contiguous and aligned (a native dtype is guaranteed by the type `T`).
    pub fn values(&self) -> Result<&[T]> {
        if !(self.array.is_c_contiguous() && self.array.is_aligned()) {
            return Err(Error::Value(
                "internal: an array reached the runtime without a C-ordered, aligned layout".into(),
            ));
        }
        self.array
            .as_slice()
            .map_err(|e| Error::Value(format!("internal: {e}")))
    }
}

/// Whether `array`'s memory can be read in place as `T` values in logical C order:
/// C-contiguous (not merely contiguous: a column-major array is contiguous too), aligned, of
/// native byte order.
pub fn reads_in_place(array: &Bound<'_, PyUntypedArray>) -> bool {
    array.is_c_contiguous()
        && array.is_aligned()
        && array.dtype().is_native_byteorder().unwrap_or(true)
}

/// `x` as a numpy array of `T` (float32 or float64, `dtype_name`), read in place when
/// [`reads_in_place`], else copied by numpy in logical C order. `TypeError` for anything else,
/// naming `what` and the dtype it got.
pub fn float_array<'py, T: Element>(
    x: &Bound<'py, PyAny>,
    what: &str,
    dtype_name: &str,
) -> Result<Array<'py, T>> {
    let refuse = |got: String| {
        Error::Type(format!(
            "{what}: expected a {dtype_name} numpy array, got {got} (convert with \
             x.astype(numpy.{dtype_name}))"
        ))
    };
    let untyped = x
        .cast::<PyUntypedArray>()
        .map_err(|_| refuse(x.get_type().to_string()))?;
    let dtype = untyped.dtype();
    let itemsize = core::mem::size_of::<T>();
    if !(dtype.kind() == b'f' && dtype.itemsize() == itemsize) {
        return Err(refuse(dtype.to_string()));
    }
    let shape = untyped.shape().to_vec();
    let array = if !reads_in_place(untyped) {
        // A new array, always (`ascontiguousarray` would hand back a misaligned C-contiguous
        // array as it is): C order, aligned, native dtype, element by element.
        let numpy = x.py().import("numpy")?;
        let options = pyo3::types::PyDict::new(x.py());
        options.set_item("dtype", numpy.getattr(dtype_name)?)?;
        options.set_item("order", "C")?;
        options.set_item("copy", true)?;
        numpy.call_method("array", (x,), Some(&options))?
    } else {
        x.clone()
    };
    let typed = array
        .cast_into::<PyArrayDyn<T>>()
        .map_err(|e| refuse(e.to_string()))?;
    let array = typed
        .try_readonly()
        .map_err(|e| Error::Value(format!("{what}: {e}")))?;
    Ok(Array { array, shape })
}

/// A float32 array (`Stream.step`, `step_examples`, `clip_factor`).
pub fn f32_array<'py>(x: &Bound<'py, PyAny>, what: &str) -> Result<Array<'py, f32>> {
    float_array(x, what, "float32")
}

/// A 2-D float64 array as a faer matrix, element `(i, j)` from `x[i, j]` (a workload `A`).
pub fn f64_matrix(x: &Bound<'_, PyAny>, what: &str, limit: Option<u64>) -> Result<Mat<f64>> {
    let array = float_array::<f64>(x, what, "float64")?;
    let [rows, cols] = *array.shape.as_slice() else {
        return Err(Error::Value(format!(
            "{what}: expected a 2-D array (n × n), got shape {:?}",
            array.shape
        )));
    };
    let values = array.values()?;
    matrix(rows, cols, what, limit, |i, j| values[i * cols + j])
}

/// A `rows × cols` faer matrix filled by `f`, its size checked first and allocated fallibly
/// (`MemoryError` instead of a panic).
pub fn matrix(
    rows: usize,
    cols: usize,
    what: &str,
    limit: Option<u64>,
    f: impl FnMut(usize, usize) -> f64,
) -> Result<Mat<f64>> {
    let elements = rows.checked_mul(cols);
    check_bytes(elements, 8, what, limit)?;
    let mut m = Mat::<f64>::new();
    m.try_reserve(rows, cols).map_err(|_| {
        Error::Memory(format!(
            "{what}: a {rows} × {cols} float64 matrix ({}) could not be allocated",
            bytes_text(rows as u128 * cols as u128 * 8)
        ))
    })?;
    m.resize_with(rows, cols, f);
    Ok(m)
}

/// The bytes of `bytes`, `bytearray` or `memoryview` (its bytes in C order, `tobytes()`),
/// copied; `TypeError` naming `what` for anything else (a `str` included).
pub fn bytes(x: &Bound<'_, PyAny>, what: &str) -> Result<Vec<u8>> {
    use pyo3::types::{PyByteArray, PyBytes, PyMemoryView};
    if let Ok(b) = x.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = x.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if x.is_instance_of::<PyMemoryView>() {
        let copy = x.call_method0("tobytes")?;
        let copy = copy
            .cast::<PyBytes>()
            .map_err(|e| Error::Type(format!("{what}: memoryview.tobytes(): {e}")))?;
        return Ok(copy.as_bytes().to_vec());
    }
    Err(Error::Type(format!(
        "{what}: expected bytes, bytearray or memoryview, got {}",
        x.get_type()
    )))
}

/// `value`, a Python integer, as a size in `min..=max`: `ValueError` naming `name`, the range
/// and the value otherwise (a negative number included), `TypeError` for a non-integer.
pub fn size(value: &Bound<'_, PyAny>, name: &str, min: u64, max: u64) -> Result<u64> {
    match value.extract::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        Ok(_) => Err(out_of_range(name, min, max, &text(value))),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(value.py()) => {
            Err(out_of_range(name, min, max, &text(value)))
        }
        Err(_) => Err(Error::Type(format!(
            "{name}: expected an integer, got {}",
            value.get_type()
        ))),
    }
}

fn text(value: &Bound<'_, PyAny>) -> String {
    value
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into())
}

fn out_of_range(name: &str, min: u64, max: u64, got: &str) -> Error {
    let range = if max == u64::MAX {
        format!("an integer ≥ {min}")
    } else {
        format!("an integer in {min}..={max}")
    };
    Error::Value(format!("{name}={got}: expected {range}"))
}

/// The machine's physical memory in bytes (`os.sysconf`), where the platform reports it: the
/// stated limit of every allocation whose size a caller controls.
pub fn physical_memory(py: Python<'_>) -> Option<u64> {
    let os = py.import("os").ok()?;
    let get = |name: &str| -> Option<u64> {
        let v = os
            .call_method1("sysconf", (name,))
            .ok()?
            .extract::<i64>()
            .ok()?;
        u64::try_from(v).ok().filter(|&v| v > 0)
    };
    get("SC_PHYS_PAGES")?.checked_mul(get("SC_PAGE_SIZE")?)
}

/// Refuses (`MemoryError`, naming `what`) `elements` of `size` bytes when the count overflowed
/// (`None`) or exceeds `limit`.
pub fn check_bytes(
    elements: Option<usize>,
    size: usize,
    what: &str,
    limit: Option<u64>,
) -> Result<()> {
    let bytes = elements.and_then(|e| e.checked_mul(size));
    match (bytes, limit) {
        (None, _) => Err(Error::Memory(format!(
            "{what}: the size overflows this machine's address space"
        ))),
        (Some(b), Some(limit)) if b as u64 > limit => Err(Error::Memory(format!(
            "{what}: needs {}, more than this machine's {} of memory",
            bytes_text(b as u128),
            bytes_text(limit as u128)
        ))),
        _ => Ok(()),
    }
}

/// `len` zeros, the size checked ([`check_bytes`]) and allocated fallibly: `MemoryError`
/// naming `what` instead of an abort.
pub fn zeroed<T: Copy + Default>(len: usize, what: &str, limit: Option<u64>) -> Result<Vec<T>> {
    check_bytes(Some(len), core::mem::size_of::<T>(), what, limit)?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::Memory(format!(
            "{what}: {} could not be allocated",
            bytes_text(len as u128 * core::mem::size_of::<T>() as u128)
        ))
    })?;
    v.resize(len, T::default());
    Ok(v)
}

/// `bytes` in words: `3.2 GB`.
pub fn bytes_text(bytes: u128) -> String {
    let b = bytes as f64;
    match bytes {
        0..1_000 => format!("{bytes} bytes"),
        1_000..1_000_000 => format!("{:.1} kB", b / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b / 1e6),
        1_000_000_000..1_000_000_000_000 => format!("{:.1} GB", b / 1e9),
        _ => format!("{:.1} TB", b / 1e12),
    }
}

/// A new C-ordered numpy array of `shape`, uninitialized, allocated by numpy (`MemoryError`
/// when it cannot be): what a call writes its results into.
pub fn empty<'py, T: Element>(
    py: Python<'py>,
    shape: &[usize],
    dtype_name: &str,
) -> Result<Bound<'py, PyArrayDyn<T>>> {
    let numpy = py.import("numpy")?;
    let shape = pyo3::types::PyTuple::new(py, shape)?;
    let array = numpy.call_method1("empty", (shape, numpy.getattr(dtype_name)?))?;
    array
        .cast_into::<PyArrayDyn<T>>()
        .map_err(|e| Error::Value(format!("internal: numpy.empty: {e}")))
}
