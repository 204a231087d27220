//! The closed set of primitives, with their parameters and names.
//!
//! Semantics follow JAX's `lax` (names as in JAX). Operands of elementwise primitives have equal shapes
//! and dtypes — numpy-style broadcasting is done by the tracer, which inserts `broadcast_in_dim`.
//! Families that share every rule but the arithmetic (unary, binary, comparison, reduction, cumulative,
//! arg-reduction, scatter) are one variant with an op enum, so each per-primitive table is a short
//! exhaustive `match` over [`Prim`] plus an exhaustive `match` over the family's ops.
//!
//! Adding a primitive: add the variant (or family op) here with its doc and [`Prim::name`]; then the
//! compiler lists every table that needs a row (shape rule, interpreter, printer/parser, verifier, tests).

use crate::{DType, Function, Shape};

/// Elementwise primitives of one operand. The result has the operand's shape and dtype, except
/// `is_finite` (bool result).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`; integers wrap.
    Neg,
    /// `|x|`; integers wrap (`abs(i32::MIN) = i32::MIN`, as XLA).
    Abs,
    /// -1, 0 or 1 (±0.0 keeps its sign, NaN stays NaN), floats and ints.
    Sign,
    /// Round toward -inf (floats).
    Floor,
    /// Round toward +inf (floats).
    Ceil,
    /// Round half away from zero (floats) — `lax.round`'s default `AWAY_FROM_ZERO`.
    Round,
    /// Round half to even (floats) — `jnp.round`, `lax.round(..., TO_NEAREST_EVEN)`.
    RoundEven,
    /// `e^x` (floats).
    Exp,
    /// `e^x - 1`, accurate near 0 (floats).
    Expm1,
    /// Natural logarithm (floats); `log(0) = -inf`, `log(x<0) = NaN`.
    Log,
    /// `log(1 + x)`, accurate near 0 (floats).
    Log1p,
    /// Square root (floats); `sqrt(-0.0) = -0.0`.
    Sqrt,
    /// `1/sqrt(x)` (floats).
    Rsqrt,
    /// Sine (floats).
    Sin,
    /// Cosine (floats).
    Cos,
    /// Hyperbolic tangent (floats).
    Tanh,
    /// `1/(1+e^-x)` (floats), JAX's `lax.logistic`.
    Logistic,
    /// The error function (floats).
    Erf,
    /// Inverse of the error function (floats); `±1 → ±inf`, outside [-1, 1] NaN.
    ErfInv,
    /// True where the value is neither infinite nor NaN (floats in, bool out).
    IsFinite,
    /// Logical not (bool) or bitwise not (ints).
    Not,
}

/// Elementwise primitives of two operands with equal shapes and dtypes; the result has that type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `x + y` (floats, ints wrap).
    Add,
    /// `x - y`.
    Sub,
    /// `x * y`.
    Mul,
    /// `x / y`; integer division truncates toward zero, as C and XLA; `x/0` for ints is -1 (u32: all
    /// ones), `i32::MIN / -1 = i32::MIN` (XLA's convention).
    Div,
    /// Remainder with the sign of the dividend (C `fmod`, XLA `rem`); ints: `x % 0 = x`.
    Rem,
    /// `x ** y` (floats).
    Pow,
    /// Maximum; NaN propagates (IEEE-754 `maximum`, as JAX).
    Max,
    /// Minimum; NaN propagates.
    Min,
    /// Four-quadrant arctangent of `x / y` (floats), `atan2(x, y)`.
    Atan2,
    /// Logical / bitwise and (bool, ints).
    And,
    /// Logical / bitwise or (bool, ints).
    Or,
    /// Logical / bitwise xor (bool, ints).
    Xor,
    /// `x << y` (ints); shifts of 32 or more (or negative) give 0, as XLA.
    ShiftLeft,
    /// Logical right shift (ints, zero fill); shifts of 32 or more give 0.
    ShiftRightLogical,
}

/// Comparisons of two operands with equal shapes and dtypes; the result is bool. IEEE for floats
/// (`NaN != NaN`, `-0.0 == 0.0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// Reductions over a set of axes (`reduce_sum`, ...). The reduced axes are removed from the shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum; the identity 0.
    Sum,
    /// Maximum, NaN propagates; the identity `-inf` (ints: their minimum).
    Max,
    /// Minimum, NaN propagates; the identity `+inf` (ints: their maximum).
    Min,
    /// Product; the identity 1.
    Prod,
}

/// Index of the maximum or minimum along one axis (first occurrence; a NaN counts as the extreme, as
/// numpy and JAX do).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgOp {
    /// `argmax`
    Max,
    /// `argmin`
    Min,
}

/// Inclusive prefix scans along one axis (`cumsum`, ...), optionally from the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CumulativeOp {
    /// `cumsum`
    Sum,
    /// `cumprod`
    Prod,
    /// `cummax` (NaN propagates)
    Max,
    /// `cummin` (NaN propagates)
    Min,
}

/// How `scatter` combines an update with the operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterOp {
    /// `scatter`: the update replaces the element (with duplicate indices, the last update in
    /// row-major order of the indices wins — kiln's documented choice; XLA leaves it unspecified).
    Set,
    /// `scatter_add`: updates are added; duplicates accumulate.
    Add,
}

/// What `gather` and `scatter` do with an index outside `[0, size)` (XLA's `GatherScatterMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexMode {
    /// Clamp the index into range (XLA's gather default).
    Clip,
    /// Gather reads a fill value (NaN for floats, the minimum for i32, the maximum for u32, true for
    /// bool — JAX's `mode="fill"` defaults); scatter drops the update (JAX's default for `.at[]`).
    FillOrDrop,
}

/// A primitive operation and its static parameters.
///
/// Operand conventions are given per variant; "ints" means `i32`/`u32` scalars of rank 0 where a
/// dynamic index is taken. Sub-functions (`body`, `branches`, ...) are closed: they see only their
/// explicit operands.
#[derive(Clone, Debug, PartialEq)]
pub enum Prim {
    /// One-operand elementwise op.
    Unary(UnaryOp),
    /// Two-operand elementwise op.
    Binary(BinaryOp),
    /// Two-operand comparison, bool result.
    Compare(CompareOp),
    /// `select(pred, on_true, on_false)`: pred is bool of the same shape as the arms (or a bool scalar),
    /// the arms have equal types. JAX's `select_n(pred, on_false, on_true)` with the arms in `where` order.
    Select,
    /// `clamp(lo, x, hi) = min(max(x, lo), hi)`; `lo`/`hi` have x's type or are scalars of x's dtype.
    Clamp,
    /// Numeric conversion; float→int truncates toward zero and saturates, NaN→0 (XLA on CPU).
    ConvertElementType {
        /// Result dtype.
        dtype: DType,
    },
    /// Reinterpret the bits; source and result dtypes have the same width (bool is not allowed).
    BitcastConvertType {
        /// Result dtype.
        dtype: DType,
    },
    /// No operands; `0, 1, 2, ...` along `dimension` of `shape`, broadcast along the others.
    Iota {
        /// Result dtype (numeric).
        dtype: DType,
        /// Result shape.
        shape: Shape,
        /// The dimension that counts.
        dimension: usize,
    },
    /// Broadcast to `shape`: operand dim `i` becomes result dim `broadcast_dimensions[i]` (strictly
    /// increasing), whose size equals the operand's or the operand's is 1.
    BroadcastInDim {
        /// Result shape.
        shape: Shape,
        /// Where each operand dimension goes.
        broadcast_dimensions: Vec<usize>,
    },
    /// Row-major reshape to a shape with the same number of elements.
    Reshape {
        /// Result shape.
        new_sizes: Shape,
    },
    /// Permute dimensions: result dim `i` is operand dim `permutation[i]`.
    Transpose {
        /// A permutation of `0..rank`.
        permutation: Vec<usize>,
    },
    /// Reverse the order of elements along `dimensions`.
    Rev {
        /// Distinct dimensions.
        dimensions: Vec<usize>,
    },
    /// Static strided slice `[start, limit)` with step `strides` (all ≥ 1).
    Slice {
        /// Start per dimension.
        start: Vec<usize>,
        /// Exclusive end per dimension.
        limit: Vec<usize>,
        /// Step per dimension.
        strides: Vec<usize>,
    },
    /// `dynamic_slice(operand, *start_indices)`: one integer scalar per dimension; each start is
    /// clamped to `[0, dim - size]` (XLA).
    DynamicSlice {
        /// Size of the slice per dimension.
        slice_sizes: Vec<usize>,
    },
    /// `dynamic_update_slice(operand, update, *start_indices)`, starts clamped as for `dynamic_slice`.
    DynamicUpdateSlice,
    /// Join operands (equal dtypes, equal shapes but along `dimension`).
    Concatenate {
        /// The joining dimension.
        dimension: usize,
    },
    /// `pad(operand, padding_value)`: low/high padding (negative crops) and interior padding per dim.
    Pad {
        /// Elements added before each dimension (negative removes).
        low: Vec<i64>,
        /// Elements added after each dimension (negative removes).
        high: Vec<i64>,
        /// Elements inserted between neighbours in each dimension.
        interior: Vec<usize>,
    },
    /// Reduce over `axes` (distinct, any order); `reduce_sum`, `reduce_max`, `reduce_min`, `reduce_prod`.
    Reduce {
        /// The combining op.
        op: ReduceOp,
        /// Axes removed.
        axes: Vec<usize>,
    },
    /// `argmax`/`argmin` along `axis` (removed), result `index_dtype` (i32 or u32).
    ArgReduce {
        /// Max or min.
        op: ArgOp,
        /// The reduced axis.
        axis: usize,
        /// Dtype of the indices.
        index_dtype: DType,
    },
    /// `cumsum`/`cumprod`/`cummax`/`cummin` along `axis`; the shape is kept.
    Cumulative {
        /// The combining op.
        op: CumulativeOp,
        /// The scanned axis.
        axis: usize,
        /// Scan from the end.
        reverse: bool,
    },
    /// Stable ascending sort of all operands (equal shapes) along `dimension`, ordered by the first
    /// `num_keys` operands lexicographically (`lax.sort`). NaNs sort last; `-0.0` and `0.0` compare
    /// equal (JAX canonicalizes both before comparing), so their input order is kept.
    Sort {
        /// The sorted dimension.
        dimension: usize,
        /// How many leading operands are keys (≥ 1).
        num_keys: usize,
    },
    /// `dot_general(lhs, rhs)` (XLA): result dims are batch dims, then lhs free dims, then rhs free
    /// dims. Operands have equal dtypes; the result has `preferred_element_type` or that dtype.
    DotGeneral {
        /// Contracted lhs dimensions.
        lhs_contracting: Vec<usize>,
        /// Contracted rhs dimensions (paired with `lhs_contracting`).
        rhs_contracting: Vec<usize>,
        /// Batch lhs dimensions.
        lhs_batch: Vec<usize>,
        /// Batch rhs dimensions (paired with `lhs_batch`).
        rhs_batch: Vec<usize>,
        /// Result dtype, if different from the operands'.
        preferred_element_type: Option<DType>,
    },
    /// `gather(operand, indices)` along `axis` with `batch_dims` leading dims shared by operand and
    /// indices (TensorFlow's `gather(params, indices, axis, batch_dims)`): the result shape is
    /// `operand[..axis] ++ indices[batch_dims..] ++ operand[axis+1..]`, with `batch_dims ≤ axis`.
    /// Indices are i32 or u32; out-of-range ones follow `mode`.
    Gather {
        /// The indexed operand axis.
        axis: usize,
        /// Leading dims shared by operand and indices.
        batch_dims: usize,
        /// Out-of-range behaviour.
        mode: IndexMode,
    },
    /// `scatter(operand, indices, updates)`, the transpose of [`Prim::Gather`] with the same
    /// parameters: `updates` has the shape gather would return; `scatter` sets, `scatter_add` adds.
    Scatter {
        /// Set or add.
        op: ScatterOp,
        /// The indexed operand axis.
        axis: usize,
        /// Leading dims shared by operand, indices and updates.
        batch_dims: usize,
        /// Out-of-range behaviour (clip or drop).
        mode: IndexMode,
    },
    /// `segment_sum(data, segment_ids)`: data `[n, ...]`, ids int `[n]`; result `[num_segments, ...]`;
    /// out-of-range ids are dropped, duplicates accumulate.
    SegmentSum {
        /// Number of segments (leading result dim).
        num_segments: usize,
    },
    /// `threefry2x32(k0, k1, x0, x1) -> (y0, y1)`: the Threefry-2x32 block cipher (20 rounds), all
    /// operands u32 of one shape — JAX's `threefry2x32_p`, bit for bit.
    Threefry2x32,
    /// Identity whose derivative is zero.
    StopGradient,
    /// Calls `fun` on the operands; differentiated with the user's `jvp(primals.., tangents..) ->
    /// (outs.., tangent_outs..)` (JAX's `custom_jvp_call`).
    CustomJvpCall {
        /// The primal function.
        fun: Box<Function>,
        /// The tangent rule.
        jvp: Box<Function>,
    },
    /// Calls `fun` on the operands; differentiated with `fwd(args..) -> (outs.., residuals..)` and
    /// `bwd(residuals.., cotangents..) -> (arg cotangents..)` (JAX's `custom_vjp_call`).
    CustomVjpCall {
        /// The primal function.
        fun: Box<Function>,
        /// The forward pass saving residuals.
        fwd: Box<Function>,
        /// The backward pass.
        bwd: Box<Function>,
    },
    /// `scan(consts.., init_carry.., xs..)`: `body(consts.., carry.., x..) -> (carry.., y..)` run
    /// `length` times, slicing each `xs` along its leading axis (from the end when `reverse`); returns
    /// `(final_carry.., stacked ys..)`, ys stored at their input positions (JAX's `lax.scan`).
    Scan {
        /// Number of steps (may be 0).
        length: usize,
        /// Iterate from the last element.
        reverse: bool,
        /// Leading operands passed unchanged to every step.
        num_consts: usize,
        /// Operands that are carried.
        num_carry: usize,
        /// The step function.
        body: Box<Function>,
    },
    /// `while_loop(cond_consts.., body_consts.., init..)`: while `cond(cond_consts.., state..)` (a bool
    /// scalar) is true, `state = body(body_consts.., state..)`. `max_iters`, when given, bounds the
    /// loop (it stops after that many iterations) and makes it reverse-differentiable.
    WhileLoop {
        /// The predicate.
        cond: Box<Function>,
        /// The step.
        body: Box<Function>,
        /// Leading operands passed to `cond`.
        cond_consts: usize,
        /// Operands after those passed to `body`.
        body_consts: usize,
        /// Optional iteration bound.
        max_iters: Option<u64>,
    },
    /// `cond(index, args..)`: runs `branches[clamp(index, 0, n-1)](args..)` (JAX's `lax.switch`); the
    /// index is an i32 scalar; every branch has the same signature.
    Cond {
        /// The branches (at least one).
        branches: Vec<Function>,
    },
    /// Calls a sub-function (kept as a unit, e.g. a transformed function inlined lazily).
    Call {
        /// The callee.
        body: Box<Function>,
    },
    /// Calls a sub-function whose intermediates are recomputed in reverse mode instead of stored
    /// (`jax.checkpoint` / remat).
    Checkpoint {
        /// The callee.
        body: Box<Function>,
    },
}

impl UnaryOp {
    /// Every unary op.
    pub const ALL: [UnaryOp; 21] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::RoundEven,
        UnaryOp::Exp,
        UnaryOp::Expm1,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Logistic,
        UnaryOp::Erf,
        UnaryOp::ErfInv,
        UnaryOp::IsFinite,
        UnaryOp::Not,
    ];

    /// The JAX name.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::RoundEven => "round_even",
            UnaryOp::Exp => "exp",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Log => "log",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Logistic => "logistic",
            UnaryOp::Erf => "erf",
            UnaryOp::ErfInv => "erf_inv",
            UnaryOp::IsFinite => "is_finite",
            UnaryOp::Not => "not",
        }
    }
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 14] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Atan2,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::ShiftLeft,
        BinaryOp::ShiftRightLogical,
    ];

    /// The JAX name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::Pow => "pow",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::Atan2 => "atan2",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
            BinaryOp::ShiftLeft => "shift_left",
            BinaryOp::ShiftRightLogical => "shift_right_logical",
        }
    }
}

impl CompareOp {
    /// Every comparison.
    pub const ALL: [CompareOp; 6] =
        [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge];

    /// The JAX name.
    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Eq => "eq",
            CompareOp::Ne => "ne",
            CompareOp::Lt => "lt",
            CompareOp::Le => "le",
            CompareOp::Gt => "gt",
            CompareOp::Ge => "ge",
        }
    }
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod];

    /// The JAX name.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "reduce_sum",
            ReduceOp::Max => "reduce_max",
            ReduceOp::Min => "reduce_min",
            ReduceOp::Prod => "reduce_prod",
        }
    }
}

impl ArgOp {
    /// Both arg-reductions.
    pub const ALL: [ArgOp; 2] = [ArgOp::Max, ArgOp::Min];

    /// The JAX name.
    pub fn name(self) -> &'static str {
        match self {
            ArgOp::Max => "argmax",
            ArgOp::Min => "argmin",
        }
    }
}

impl CumulativeOp {
    /// Every cumulative op.
    pub const ALL: [CumulativeOp; 4] =
        [CumulativeOp::Sum, CumulativeOp::Prod, CumulativeOp::Max, CumulativeOp::Min];

    /// The JAX name.
    pub fn name(self) -> &'static str {
        match self {
            CumulativeOp::Sum => "cumsum",
            CumulativeOp::Prod => "cumprod",
            CumulativeOp::Max => "cummax",
            CumulativeOp::Min => "cummin",
        }
    }
}

impl ScatterOp {
    /// Both scatter ops.
    pub const ALL: [ScatterOp; 2] = [ScatterOp::Set, ScatterOp::Add];

    /// The JAX name.
    pub fn name(self) -> &'static str {
        match self {
            ScatterOp::Set => "scatter",
            ScatterOp::Add => "scatter_add",
        }
    }
}

impl IndexMode {
    /// The name in the text form (`clip`, `fill`).
    pub fn name(self) -> &'static str {
        match self {
            IndexMode::Clip => "clip",
            IndexMode::FillOrDrop => "fill",
        }
    }
}

impl Prim {
    /// The primitive's name as printed in the text form and in errors (JAX's names).
    pub fn name(&self) -> &'static str {
        match self {
            Prim::Unary(op) => op.name(),
            Prim::Binary(op) => op.name(),
            Prim::Compare(op) => op.name(),
            Prim::Select => "select",
            Prim::Clamp => "clamp",
            Prim::ConvertElementType { .. } => "convert_element_type",
            Prim::BitcastConvertType { .. } => "bitcast_convert_type",
            Prim::Iota { .. } => "iota",
            Prim::BroadcastInDim { .. } => "broadcast_in_dim",
            Prim::Reshape { .. } => "reshape",
            Prim::Transpose { .. } => "transpose",
            Prim::Rev { .. } => "rev",
            Prim::Slice { .. } => "slice",
            Prim::DynamicSlice { .. } => "dynamic_slice",
            Prim::DynamicUpdateSlice => "dynamic_update_slice",
            Prim::Concatenate { .. } => "concatenate",
            Prim::Pad { .. } => "pad",
            Prim::Reduce { op, .. } => op.name(),
            Prim::ArgReduce { op, .. } => op.name(),
            Prim::Cumulative { op, .. } => op.name(),
            Prim::Sort { .. } => "sort",
            Prim::DotGeneral { .. } => "dot_general",
            Prim::Gather { .. } => "gather",
            Prim::Scatter { op, .. } => op.name(),
            Prim::SegmentSum { .. } => "segment_sum",
            Prim::Threefry2x32 => "threefry2x32",
            Prim::StopGradient => "stop_gradient",
            Prim::CustomJvpCall { .. } => "custom_jvp_call",
            Prim::CustomVjpCall { .. } => "custom_vjp_call",
            Prim::Scan { .. } => "scan",
            Prim::WhileLoop { .. } => "while_loop",
            Prim::Cond { .. } => "cond",
            Prim::Call { .. } => "call",
            Prim::Checkpoint { .. } => "checkpoint",
        }
    }

    /// The sub-functions this equation owns, in a fixed order (empty for non-control-flow primitives).
    pub fn subfunctions(&self) -> Vec<&Function> {
        self.named_subfunctions().into_iter().map(|(_, f)| f).collect()
    }

    /// The sub-functions with their role (`body`, `cond`, `branch 1`, `fun`, `jvp`, `fwd`, `bwd`), in
    /// the order of [`Prim::subfunctions`] — used in verifier locations and dumps.
    pub fn named_subfunctions(&self) -> Vec<(String, &Function)> {
        fn named<'f>(pairs: &[(&str, &'f Function)]) -> Vec<(String, &'f Function)> {
            pairs.iter().map(|(n, f)| (n.to_string(), *f)).collect()
        }
        match self {
            Prim::CustomJvpCall { fun, jvp } => named(&[("fun", fun), ("jvp", jvp)]),
            Prim::CustomVjpCall { fun, fwd, bwd } => named(&[("fun", fun), ("fwd", fwd), ("bwd", bwd)]),
            Prim::Scan { body, .. } | Prim::Call { body } | Prim::Checkpoint { body } => {
                named(&[("body", body)])
            }
            Prim::WhileLoop { cond, body, .. } => named(&[("cond", cond), ("body", body)]),
            Prim::Cond { branches } => {
                branches.iter().enumerate().map(|(i, b)| (format!("branch {i}"), b)).collect()
            }
            Prim::Unary(_)
            | Prim::Binary(_)
            | Prim::Compare(_)
            | Prim::Select
            | Prim::Clamp
            | Prim::ConvertElementType { .. }
            | Prim::BitcastConvertType { .. }
            | Prim::Iota { .. }
            | Prim::BroadcastInDim { .. }
            | Prim::Reshape { .. }
            | Prim::Transpose { .. }
            | Prim::Rev { .. }
            | Prim::Slice { .. }
            | Prim::DynamicSlice { .. }
            | Prim::DynamicUpdateSlice
            | Prim::Concatenate { .. }
            | Prim::Pad { .. }
            | Prim::Reduce { .. }
            | Prim::ArgReduce { .. }
            | Prim::Cumulative { .. }
            | Prim::Sort { .. }
            | Prim::DotGeneral { .. }
            | Prim::Gather { .. }
            | Prim::Scatter { .. }
            | Prim::SegmentSum { .. }
            | Prim::Threefry2x32
            | Prim::StopGradient => vec![],
        }
    }

    /// The sub-functions, mutably, in the order of [`Prim::subfunctions`] — for passes that rewrite
    /// every sub-function (canonicalization, dead-code elimination).
    pub fn subfunctions_mut(&mut self) -> Vec<&mut Function> {
        match self {
            Prim::CustomJvpCall { fun, jvp } => vec![fun, jvp],
            Prim::CustomVjpCall { fun, fwd, bwd } => vec![fun, fwd, bwd],
            Prim::Scan { body, .. } | Prim::Call { body } | Prim::Checkpoint { body } => vec![body],
            Prim::WhileLoop { cond, body, .. } => vec![cond, body],
            Prim::Cond { branches } => branches.iter_mut().collect(),
            Prim::Unary(_)
            | Prim::Binary(_)
            | Prim::Compare(_)
            | Prim::Select
            | Prim::Clamp
            | Prim::ConvertElementType { .. }
            | Prim::BitcastConvertType { .. }
            | Prim::Iota { .. }
            | Prim::BroadcastInDim { .. }
            | Prim::Reshape { .. }
            | Prim::Transpose { .. }
            | Prim::Rev { .. }
            | Prim::Slice { .. }
            | Prim::DynamicSlice { .. }
            | Prim::DynamicUpdateSlice
            | Prim::Concatenate { .. }
            | Prim::Pad { .. }
            | Prim::Reduce { .. }
            | Prim::ArgReduce { .. }
            | Prim::Cumulative { .. }
            | Prim::Sort { .. }
            | Prim::DotGeneral { .. }
            | Prim::Gather { .. }
            | Prim::Scatter { .. }
            | Prim::SegmentSum { .. }
            | Prim::Threefry2x32
            | Prim::StopGradient => vec![],
        }
    }

    /// A copy with every sub-function replaced by `f` of it.
    pub fn map_subfunctions(&self, mut f: impl FnMut(&Function) -> Function) -> Prim {
        let mut p = self.clone();
        for sub in p.subfunctions_mut() {
            *sub = f(sub);
        }
        p
    }
}
