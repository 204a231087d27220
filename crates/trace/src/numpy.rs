//! `jax.numpy`-style methods on [`Tensor`]: numpy broadcasting, negative axes, errors that quote the
//! user's shapes. Each checks its operands *before* binding primitives, so a mismatch is reported with
//! the shapes the user passed, not internally promoted ones (JAX #12305).

use crate::context::fail;
use crate::{Tensor, lax};
use kiln_ir::{BinaryOp, CompareOp, DType, UnaryOp};

/// The numpy broadcast of two shapes, or `None` if they are incompatible.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

impl Tensor {
    /// Broadcasts to `shape` by numpy rules (JAX `broadcast_to`).
    ///
    /// Errors (recorded in a trace, a panic eagerly) quote both shapes when the shape does not fit.
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        let own = self.shape();
        let own = own.dims();
        let fits = own.len() <= shape.len()
            && own.iter().rev().zip(shape.iter().rev()).all(|(&d, &s)| d == s || d == 1);
        if !fits {
            let msg = format!(
                "cannot broadcast shape {} to {}",
                kiln_ir::Shape::new(own),
                kiln_ir::Shape::new(shape)
            );
            return fail("broadcast_to", &[self], msg, 1).remove(0);
        }
        self.broadcast_unchecked(shape)
    }

    /// Broadcast whose compatibility was checked by the caller: size-1 dims are squeezed by reshape
    /// first, so `broadcast_in_dim` only inserts dims.
    #[track_caller]
    pub(crate) fn broadcast_unchecked(&self, shape: &[usize]) -> Tensor {
        let own = self.shape();
        if own.dims() == shape {
            return self.clone();
        }
        let offset = shape.len() - own.rank();
        let (kept_dims, kept_sizes): (Vec<usize>, Vec<usize>) = own
            .dims()
            .iter()
            .enumerate()
            .filter(|&(i, &d)| d == shape[i + offset])
            .map(|(i, &d)| (i + offset, d))
            .unzip();
        let x = if kept_sizes.len() == own.rank() { self.clone() } else { lax::reshape(self, &kept_sizes) };
        lax::broadcast_in_dim(&x, shape, &kept_dims)
    }
}

/// Broadcasts two operands of a binary op by numpy rules; `name` is the user-facing op name. Dtypes
/// must match. On a mismatch the error is reported (quoting the user's shapes) and `Err` holds the
/// placeholder result. (A function, not a closure-taking helper: closures lose `#[track_caller]`.)
#[track_caller]
pub(crate) fn broadcast_pair(name: &str, x: &Tensor, y: &Tensor) -> Result<(Tensor, Tensor), Tensor> {
    if x.dtype() != y.dtype() {
        let msg = format!(
            "dtypes {} and {} differ (kiln does not promote implicitly; use astype)",
            x.dtype(),
            y.dtype()
        );
        return Err(fail(name, &[x, y], msg, 1).remove(0));
    }
    let (xs, ys) = (x.shape(), y.shape());
    let Some(shape) = broadcast_shapes(xs.dims(), ys.dims()) else {
        let msg = format!("shapes {xs} and {ys} cannot be broadcast together");
        return Err(fail(name, &[x, y], msg, 1).remove(0));
    };
    Ok((x.broadcast_unchecked(&shape), y.broadcast_unchecked(&shape)))
}

/// A binary elementwise op with broadcasting, by primitive.
#[track_caller]
pub(crate) fn bin(op: BinaryOp, x: &Tensor, y: &Tensor) -> Tensor {
    match broadcast_pair(op.name(), x, y) {
        Ok((a, b)) => lax::binary(op, &a, &b),
        Err(poisoned) => poisoned,
    }
}

/// A comparison with broadcasting.
#[track_caller]
pub(crate) fn cmp(op: CompareOp, x: &Tensor, y: &Tensor) -> Tensor {
    match broadcast_pair(op.name(), x, y) {
        Ok((a, b)) => lax::compare(op, &a, &b),
        Err(poisoned) => poisoned,
    }
}

/// A rank-0 tensor of `like`'s dtype holding `v` (weak typing of Rust scalars, as JAX's Python
/// scalars). A value the dtype cannot hold exactly (2.5 or -1 for an integer tensor, 2 for bool) is an
/// error of `op`: kiln does not promote implicitly, and truncating would be a silently wrong number.
/// So is a float scalar (`from_float`) in a division of an integer or bool tensor: `&ints / 2.0`
/// would truncate where the literal (and `jnp`'s `/`) asks for a fraction.
#[track_caller]
pub(crate) fn weak_scalar(op: BinaryOp, v: f64, from_float: bool, like: &Tensor) -> Tensor {
    let dtype = like.dtype();
    if op == BinaryOp::Div && from_float && !dtype.is_float() {
        let msg = format!(
            "a float scalar ({v:?}) divides or is divided by a {dtype} tensor: `/` on integers truncates \
             toward zero (lax.div); convert the tensor with astype for a true division, or write an \
             integer scalar for a truncating one"
        );
        fail(op.name(), &[like], msg, 1);
        return Tensor::scalar_like(0.0, dtype);
    }
    let fits = match dtype {
        DType::F32 | DType::F64 => true,
        DType::I32 => v.fract() == 0.0 && (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&v),
        DType::U32 => v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v),
        DType::Bool => v == 0.0 || v == 1.0,
    };
    if !fits {
        let msg = format!(
            "the scalar {v} cannot be represented in {dtype} without rounding or wrapping; kiln does not \
             promote implicitly (convert the tensor with astype)"
        );
        fail(op.name(), &[like], msg, 1);
    }
    Tensor::scalar_like(v, dtype)
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self) -> Tensor {
                    lax::unary(UnaryOp::$op, self)
                }
            )*
        }
    };
}

unary_methods! {
    /// `|x|` elementwise.
    abs => Abs;
    /// `-1, 0, 1` elementwise (`sign(±0.0) = ±0.0`).
    sign => Sign;
    /// Round toward -inf.
    floor => Floor;
    /// Round toward +inf.
    ceil => Ceil;
    /// Round half to even (`jnp.round`).
    round => RoundEven;
    /// `e^x`.
    exp => Exp;
    /// `e^x - 1`, accurate near 0.
    expm1 => Expm1;
    /// Natural logarithm.
    log => Log;
    /// `log(1 + x)`, accurate near 0.
    log1p => Log1p;
    /// Square root.
    sqrt => Sqrt;
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt;
    /// Sine.
    sin => Sin;
    /// Cosine.
    cos => Cos;
    /// Hyperbolic tangent.
    tanh => Tanh;
    /// Error function.
    erf => Erf;
    /// Inverse error function.
    erf_inv => ErfInv;
    /// True where finite (bool result).
    isfinite => IsFinite;
    /// Logical (bool) or bitwise (ints) not.
    logical_not => Not;
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, other: &Tensor) -> Tensor {
                    bin(BinaryOp::$op, self, other)
                }
            )*
        }
    };
}

binary_methods! {
    /// Elementwise maximum with broadcasting; NaN propagates (`jnp.maximum`).
    maximum => Max;
    /// Elementwise minimum with broadcasting; NaN propagates (`jnp.minimum`).
    minimum => Min;
    /// `self ** other` with broadcasting.
    pow => Pow;
    /// Remainder with the sign of `self` (C `fmod`; note `jnp.remainder` differs for negatives).
    rem => Rem;
    /// `atan2(self, other)` with broadcasting.
    atan2 => Atan2;
    /// Logical/bitwise and.
    logical_and => And;
    /// Logical/bitwise or.
    logical_or => Or;
    /// Logical/bitwise xor.
    logical_xor => Xor;
}

macro_rules! compare_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, other: &Tensor) -> Tensor {
                    cmp(CompareOp::$op, self, other)
                }
            )*
        }
    };
}

compare_methods! {
    /// `self == other` elementwise (bool).
    eq => Eq;
    /// `self != other` elementwise (bool).
    ne => Ne;
    /// `self < other` elementwise (bool).
    lt => Lt;
    /// `self <= other` elementwise (bool).
    le => Le;
    /// `self > other` elementwise (bool).
    gt => Gt;
    /// `self >= other` elementwise (bool).
    ge => Ge;
}

impl Tensor {
    /// `self ** p` for a scalar exponent (taking `self`'s dtype), e.g. `x.powf(3.0)`.
    #[track_caller]
    pub fn powf(&self, p: f64) -> Tensor {
        bin(BinaryOp::Pow, self, &weak_scalar(BinaryOp::Pow, p, false, self))
    }

    /// Converts to `dtype` (`astype`).
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Tensor {
        lax::convert_element_type(self, dtype)
    }

    /// `jnp.where(cond, self, other)` written as a method on the condition's first arm is awkward, so
    /// kiln has [`crate::where_`]; this is `select` on `self` as the condition.
    #[track_caller]
    pub fn select(&self, on_true: &Tensor, on_false: &Tensor) -> Tensor {
        crate::where_(self, on_true, on_false)
    }
}

/// `jnp.where(cond, x, y)`: picks `x` where `cond` is true, with numpy broadcasting of all three.
#[track_caller]
pub fn where_(cond: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    if cond.dtype() != DType::Bool {
        return fail("where", &[cond, x, y], format!("condition has dtype {}, not bool", cond.dtype()), 1)
            .remove(0);
    }
    if x.dtype() != y.dtype() {
        let msg = format!("branch dtypes {} and {} differ", x.dtype(), y.dtype());
        return fail("where", &[cond, x, y], msg, 1).remove(0);
    }
    let shape = broadcast_shapes(cond.shape().dims(), x.shape().dims())
        .and_then(|s| broadcast_shapes(&s, y.shape().dims()));
    let Some(shape) = shape else {
        let msg =
            format!("shapes {}, {} and {} cannot be broadcast together", cond.shape(), x.shape(), y.shape());
        return fail("where", &[cond, x, y], msg, 1).remove(0);
    };
    lax::select(
        &cond.broadcast_unchecked(&shape),
        &x.broadcast_unchecked(&shape),
        &y.broadcast_unchecked(&shape),
    )
}
