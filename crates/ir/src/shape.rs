//! Static shapes and array types.

use crate::DType;
use smallvec::SmallVec;
use std::fmt;

/// A static shape: one size per dimension, rank 0 for scalars.
///
/// `Display` prints it as Python prints a shape tuple — `()`, `(3,)`, `(2, 4)` — because error messages
/// quote shapes the way a JAX user knows them.
#[derive(Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Shape(pub SmallVec<[usize; 4]>);

impl Shape {
    /// The shape of a scalar.
    pub fn scalar() -> Shape {
        Shape(SmallVec::new())
    }

    /// A shape from its dimension sizes.
    pub fn new(dims: &[usize]) -> Shape {
        Shape(SmallVec::from_slice(dims))
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The dimension sizes.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// The number of elements (1 for a scalar).
    pub fn size(&self) -> usize {
        self.0.iter().product()
    }
}

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Shape {
        Shape::new(d)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(d: [usize; N]) -> Shape {
        Shape::new(&d)
    }
}

impl From<Vec<usize>> for Shape {
    fn from(d: Vec<usize>) -> Shape {
        Shape(SmallVec::from_vec(d))
    }
}

impl std::ops::Index<usize> for Shape {
    type Output = usize;
    fn index(&self, i: usize) -> &usize {
        &self.0[i]
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [] => f.write_str("()"),
            [d] => write!(f, "({d},)"),
            dims => {
                f.write_str("(")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{d}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The type of an IR value: dtype and static shape (JAX's "aval"). Prints as `f32[3,4]`, `i32[]`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Shape,
}

impl TensorType {
    /// A type from a dtype and a shape.
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> TensorType {
        TensorType { dtype, shape: shape.into() }
    }

    /// Whether an array of this type can exist: its size in bytes (the product of its non-zero
    /// sizes, as ndarray counts) fits `isize`. Every shape rule checks its results with this, and
    /// `verify` a function's parameters (constants are arrays, so they exist), so the backend's size
    /// arithmetic never wraps.
    pub fn addressable(&self) -> bool {
        self.shape
            .dims()
            .iter()
            .filter(|&&d| d != 0)
            .try_fold(self.dtype.size_bytes(), |n, &d| n.checked_mul(d))
            .is_some_and(|bytes| bytes <= isize::MAX as usize)
    }

    /// [`TensorType::addressable`] as a check whose error names the type (the one message the
    /// shape rules, `verify` and the tracer's constructors give).
    pub fn check_addressable(&self) -> Result<(), String> {
        if self.addressable() {
            return Ok(());
        }
        Err(format!("{self} has too many elements: its size in bytes does not fit isize"))
    }

    /// Bytes of an array of this type (`size × dtype size`); `usize::MAX` if that overflows (then
    /// the type is not [`TensorType::addressable`]).
    pub fn bytes(&self) -> usize {
        let dims = self.shape.dims();
        if dims.contains(&0) {
            return 0;
        }
        dims.iter().try_fold(self.dtype.size_bytes(), |n, &d| n.checked_mul(d)).unwrap_or(usize::MAX)
    }

    /// Checks that an array of this type can be allocated now, so that a huge but addressable
    /// result (`segment_sum(ids, 1 << 40)`) is an error naming it rather than the process aborting
    /// in the allocator. Below [`ALLOCATION_PROBE_BYTES`] it is always `Ok` (a failure there is the
    /// machine running out of memory, not a bad shape); above, [`can_allocate`] asks the allocator.
    /// The allocator's answer is only as good as the OS's: under Linux's default heuristic
    /// overcommit, sizes beyond RAM plus swap are refused, but under `vm.overcommit_memory = 1` only
    /// sizes beyond the address space are, and a size that is granted can still exhaust memory
    /// once written.
    ///
    /// # Errors
    /// A message naming the type and its size when the allocator refuses it.
    pub fn check_allocatable(&self) -> Result<(), String> {
        let bytes = self.bytes();
        if bytes < ALLOCATION_PROBE_BYTES || can_allocate(bytes) {
            return Ok(());
        }
        Err(format!("{self} needs {}, more than this process can allocate", human_bytes(bytes)))
    }

    /// A rank-0 type.
    pub fn scalar(dtype: DType) -> TensorType {
        TensorType { dtype, shape: Shape::scalar() }
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.dims().iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Sizes from which [`TensorType::check_allocatable`] asks the allocator (64 MiB): one probe costs
/// a `malloc`/`free` pair (an `mmap`/`munmap`, nothing touched), next to filling that many bytes.
pub const ALLOCATION_PROBE_BYTES: usize = 1 << 26;

/// Whether `bytes` bytes can be allocated now: one fallible reservation, released at once (nothing
/// is touched). Linux's default overcommit refuses sizes beyond RAM plus swap; any policy refuses
/// sizes beyond the address space. A `true` is not a promise that a later allocation succeeds.
pub fn can_allocate(bytes: usize) -> bool {
    Vec::<u8>::new().try_reserve_exact(bytes).is_ok()
}

/// `bytes` for messages: `512 B`, `3.0 GiB`, `256.0 PiB`.
pub fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut x = bytes as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    format!("{x:.1} {}", UNITS[unit])
}
