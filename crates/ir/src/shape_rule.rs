//! One shape/dtype rule per primitive (JAX's abstract evaluation).
//!
//! Every rule first checks the operand count, then dtypes, ranks and sizes, and never panics: any
//! operand types and parameters give `Ok` or a [`TypeError`] (size arithmetic is checked, sub-function
//! signatures are read without indexing).

use crate::{
    ArgOp, BinaryOp, CumulativeOp, DType, Function, Prim, ReduceOp, ScatterOp, Shape, TensorType, TypeError,
    UnaryOp,
};

type Types = Result<Vec<TensorType>, TypeError>;

/// The types of `prim`'s results when applied to operands of types `inputs`.
///
/// # Errors
/// A [`TypeError`] naming the primitive and the operand types when the operands do not fit (wrong
/// count, dtype, rank or size, or parameters that do not fit the operands).
pub fn output_types(prim: &Prim, inputs: &[TensorType]) -> Types {
    let r = Rule { name: prim.name(), inputs };
    let types = rule(r, prim)?;
    for t in &types {
        t.check_addressable().map_err(|m| r.err(format!("the result {m}")))?;
    }
    Ok(types)
}

/// The per-primitive rules.
fn rule(r: Rule, prim: &Prim) -> Types {
    match prim {
        Prim::Unary(op) => unary(&r, *op),
        Prim::Binary(op) => binary(&r, *op),
        Prim::Compare(_) => {
            let [x, _] = r.same_pair()?;
            Ok(vec![TensorType { dtype: DType::Bool, shape: x.shape.clone() }])
        }
        Prim::Select => select(&r),
        Prim::Clamp => clamp(&r),
        Prim::ConvertElementType { dtype } => {
            let [x] = r.operands()?;
            Ok(vec![TensorType { dtype: *dtype, shape: x.shape.clone() }])
        }
        Prim::BitcastConvertType { dtype } => bitcast(&r, *dtype),
        Prim::Iota { dtype, shape, dimension } => {
            let [] = r.operands()?;
            r.kind("iota dtype", *dtype, Kind::Numeric)?;
            r.check(shape.rank() >= 1, || "iota shape must have rank >= 1, got ()".to_string())?;
            r.dim_in_range("dimension", *dimension, shape.rank())?;
            // A wrapped position (argsort, the sort and cummax gradients, scatter's winners) would
            // be a silently wrong index.
            r.positions_fit(*dtype, shape[*dimension], || format!("dimension {dimension}"))?;
            Ok(vec![TensorType { dtype: *dtype, shape: shape.clone() }])
        }
        Prim::BroadcastInDim { shape, broadcast_dimensions } => {
            broadcast_in_dim(&r, shape, broadcast_dimensions)
        }
        Prim::Reshape { new_sizes } => reshape(&r, new_sizes),
        Prim::Transpose { permutation } => transpose(&r, permutation),
        Prim::Rev { dimensions } => {
            let [x] = r.operands()?;
            r.distinct_dims("dimension", dimensions, x.rank())?;
            Ok(vec![x.clone()])
        }
        Prim::Slice { start, limit, strides } => slice(&r, start, limit, strides),
        Prim::DynamicSlice { slice_sizes } => dynamic_slice(&r, slice_sizes),
        Prim::DynamicUpdateSlice => dynamic_update_slice(&r),
        Prim::Concatenate { dimension } => concatenate(&r, *dimension),
        Prim::Pad { low, high, interior } => pad(&r, low, high, interior),
        Prim::Reduce { op, axes } => reduce(&r, *op, axes),
        Prim::ArgReduce { op, axis, index_dtype } => arg_reduce(&r, *op, *axis, *index_dtype),
        Prim::Cumulative { op, axis, reverse: _ } => {
            let [x] = r.operands()?;
            let kind = match op {
                CumulativeOp::Sum | CumulativeOp::Prod => Kind::Numeric,
                CumulativeOp::Max | CumulativeOp::Min => Kind::NumericOrBool,
            };
            r.kind("dtype", x.dtype, kind)?;
            r.dim_in_range("axis", *axis, x.rank())?;
            Ok(vec![x.clone()])
        }
        Prim::Sort { dimension, num_keys } => sort(&r, *dimension, *num_keys),
        Prim::DotGeneral {
            lhs_contracting,
            rhs_contracting,
            lhs_batch,
            rhs_batch,
            preferred_element_type,
        } => dot_general(
            &r,
            (lhs_contracting, rhs_contracting),
            (lhs_batch, rhs_batch),
            *preferred_element_type,
        ),
        Prim::Gather { axis, batch_dims, mode: _ } => {
            let [operand, indices] = r.operands()?;
            Ok(vec![gather_type(&r, operand, indices, *axis, *batch_dims)?])
        }
        Prim::Scatter { op, axis, batch_dims, mode: _ } => scatter(&r, *op, *axis, *batch_dims),
        Prim::SegmentSum { num_segments } => segment_sum(&r, *num_segments),
        Prim::Threefry2x32 => {
            let [k0, k1, x0, x1] = r.operands()?;
            for t in [k0, k1, x0, x1] {
                r.check(t.dtype == DType::U32, || format!("dtype {} is not u32", t.dtype))?;
                r.check(t.shape == k0.shape, || format!("shapes {} and {} differ", k0.shape, t.shape))?;
            }
            Ok(vec![k0.clone(), k0.clone()])
        }
        Prim::StopGradient => {
            let [x] = r.operands()?;
            Ok(vec![x.clone()])
        }
        Prim::Call { body } | Prim::Checkpoint { body } => {
            let body = r.signature("body", body)?;
            r.same_types("body parameter", &body.params, "operand", r.inputs)?;
            Ok(body.outputs)
        }
        Prim::CustomJvpCall { fun, jvp } => custom_jvp(&r, fun, jvp),
        Prim::CustomVjpCall { fun, fwd, bwd } => custom_vjp(&r, fun, fwd, bwd),
        Prim::Scan { length, reverse: _, num_consts, num_carry, body } => {
            scan(&r, *length, *num_consts, *num_carry, body)
        }
        Prim::WhileLoop { cond, body, cond_consts, body_consts, max_iters: _ } => {
            while_loop(&r, cond, body, *cond_consts, *body_consts)
        }
        Prim::Cond { branches } => cond(&r, branches),
    }
}

/// A class of dtypes a rule accepts.
#[derive(Clone, Copy)]
enum Kind {
    Float,
    Int,
    /// Floats and ints (not bool).
    Numeric,
    NumericOrBool,
    IntOrBool,
}

impl Kind {
    fn accepts(self, d: DType) -> bool {
        match self {
            Kind::Float => d.is_float(),
            Kind::Int => d.is_int(),
            Kind::Numeric => d.is_float() || d.is_int(),
            Kind::NumericOrBool => d.is_float() || d.is_int() || d == DType::Bool,
            Kind::IntOrBool => d.is_int() || d == DType::Bool,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Float => "a float type",
            Kind::Int => "an integer type",
            Kind::Numeric => "a numeric type",
            Kind::NumericOrBool => "a numeric or bool type",
            Kind::IntOrBool => "bool or an integer type",
        }
    }
}

/// A sub-function's parameter and output types, read without panicking on dangling variables.
struct Signature {
    params: Vec<TensorType>,
    outputs: Vec<TensorType>,
}

/// The primitive being checked and its operands: builds errors that name both.
#[derive(Clone, Copy)]
struct Rule<'a> {
    name: &'static str,
    inputs: &'a [TensorType],
}

impl<'a> Rule<'a> {
    fn err(&self, message: impl Into<String>) -> TypeError {
        TypeError::new(self.name, self.inputs, message)
    }

    fn check(&self, ok: bool, message: impl FnOnce() -> String) -> Result<(), TypeError> {
        if ok { Ok(()) } else { Err(self.err(message())) }
    }

    /// Integer positions `0..n` (along `along`) fit `dtype`: at most 2^31 for i32, 2^32 for u32.
    fn positions_fit(&self, dtype: DType, n: usize, along: impl FnOnce() -> String) -> Result<(), TypeError> {
        let most = match dtype {
            DType::I32 => 1usize << 31,
            DType::U32 => 1usize << 32,
            DType::F32 | DType::F64 | DType::Bool => return Ok(()),
        };
        self.check(n <= most, || {
            format!("{dtype} values cannot number the {n} positions along {} (at most {most})", along())
        })
    }

    /// Exactly `N` operands, destructured.
    fn operands<const N: usize>(&self) -> Result<&'a [TensorType; N], TypeError> {
        self.inputs.try_into().map_err(|_| self.err(count_message("", N, self.inputs.len())))
    }

    fn at_least(&self, n: usize) -> Result<(), TypeError> {
        self.check(self.inputs.len() >= n, || count_message("at least ", n, self.inputs.len()))
    }

    fn kind(&self, what: &str, d: DType, kind: Kind) -> Result<(), TypeError> {
        self.check(kind.accepts(d), || format!("{what} {d} is not {}", kind.describe()))
    }

    fn index_dtype(&self, what: &str, d: DType) -> Result<(), TypeError> {
        self.check(matches!(d, DType::I32 | DType::U32), || format!("{what} dtype {d} is not i32 or u32"))
    }

    /// Two operands of equal shapes and dtypes.
    fn same_pair(&self) -> Result<&'a [TensorType; 2], TypeError> {
        let pair @ [x, y] = self.operands()?;
        self.check(x.shape == y.shape, || format!("shapes {} and {} differ", x.shape, y.shape))?;
        self.check(x.dtype == y.dtype, || format!("dtypes {} and {} differ", x.dtype, y.dtype))?;
        Ok(pair)
    }

    fn dim_in_range(&self, what: &str, dim: usize, rank: usize) -> Result<(), TypeError> {
        self.check(dim < rank, || format!("{what} {dim} out of range for rank {rank}"))
    }

    /// Dimensions in range and pairwise distinct.
    fn distinct_dims(&self, what: &str, dims: &[usize], rank: usize) -> Result<(), TypeError> {
        let mut seen = vec![false; rank];
        for &d in dims {
            self.dim_in_range(what, d, rank)?;
            self.check(!std::mem::replace(&mut seen[d], true), || {
                format!("{what} {d} repeated in {dims:?}")
            })?;
        }
        Ok(())
    }

    /// A per-dimension parameter list has one entry per operand dimension.
    fn per_dim(&self, what: &str, len: usize, rank: usize) -> Result<(), TypeError> {
        self.check(len == rank, || format!("{what} has {len} entries but the operand has rank {rank}"))
    }

    /// `got` equals `want`; the message names the first differing position.
    fn same_types(
        &self,
        got_what: &str,
        got: &[TensorType],
        want_what: &str,
        want: &[TensorType],
    ) -> Result<(), TypeError> {
        self.check(got.len() == want.len(), || {
            format!(
                "{got_what} count {} differs from {want_what} count {}: [{}] vs [{}]",
                got.len(),
                want.len(),
                list(got),
                list(want)
            )
        })?;
        match got.iter().zip(want).position(|(g, w)| g != w) {
            None => Ok(()),
            Some(i) => {
                Err(self
                    .err(format!("{got_what} {i} has type {} but the {want_what} is {}", got[i], want[i])))
            }
        }
    }

    fn signature(&self, what: &str, f: &Function) -> Result<Signature, TypeError> {
        let types = |vars: &[crate::Var], role: &str| {
            vars.iter()
                .map(|v| {
                    f.vars.get(v.index()).cloned().ok_or_else(|| {
                        self.err(format!("{what} {role} {v:?} is not a variable of the function"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Signature { params: types(&f.params, "parameter")?, outputs: types(&f.outputs, "output")? })
    }
}

fn count_message(prefix: &str, n: usize, got: usize) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("expected {prefix}{n} operand{s}, got {got}")
}

fn list(ts: &[TensorType]) -> String {
    ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
}

/// Elements of a shape, `None` on overflow (a zero-size dim makes it 0 whatever the others are).
fn num_elements(s: &Shape) -> Option<usize> {
    if s.dims().contains(&0) {
        return Some(0);
    }
    s.dims().iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

fn with_shape(dtype: DType, dims: Vec<usize>) -> TensorType {
    TensorType { dtype, shape: Shape::from(dims) }
}

fn unary(r: &Rule, op: UnaryOp) -> Types {
    let [x] = r.operands()?;
    let kind = match op {
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign => Kind::Numeric,
        UnaryOp::Not => Kind::IntOrBool,
        UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Erf
        | UnaryOp::ErfInv
        | UnaryOp::IsFinite => Kind::Float,
    };
    r.kind("dtype", x.dtype, kind)?;
    let dtype = if op == UnaryOp::IsFinite { DType::Bool } else { x.dtype };
    Ok(vec![TensorType { dtype, shape: x.shape.clone() }])
}

fn binary(r: &Rule, op: BinaryOp) -> Types {
    let [x, _] = r.same_pair()?;
    let kind = match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => Kind::Numeric,
        BinaryOp::Max | BinaryOp::Min => Kind::NumericOrBool,
        BinaryOp::Pow | BinaryOp::Atan2 => Kind::Float,
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => Kind::IntOrBool,
        BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => Kind::Int,
    };
    r.kind("dtype", x.dtype, kind)?;
    Ok(vec![x.clone()])
}

fn select(r: &Rule) -> Types {
    let [pred, t, f] = r.operands()?;
    r.check(t == f, || format!("branch types {t} and {f} differ"))?;
    r.check(pred.dtype == DType::Bool, || format!("predicate dtype {} is not bool", pred.dtype))?;
    r.check(pred.rank() == 0 || pred.shape == t.shape, || {
        format!("predicate shape {} is neither () nor the branch shape {}", pred.shape, t.shape)
    })?;
    Ok(vec![t.clone()])
}

fn clamp(r: &Rule) -> Types {
    let [lo, x, hi] = r.operands()?;
    r.kind("dtype", x.dtype, Kind::Numeric)?;
    for (what, b) in [("lower bound", lo), ("upper bound", hi)] {
        r.check(b.dtype == x.dtype, || {
            format!("{what} dtype {} differs from operand dtype {}", b.dtype, x.dtype)
        })?;
        r.check(b.rank() == 0 || b.shape == x.shape, || {
            format!("{what} shape {} is neither () nor the operand shape {}", b.shape, x.shape)
        })?;
    }
    Ok(vec![x.clone()])
}

fn bitcast(r: &Rule, to: DType) -> Types {
    let [x] = r.operands()?;
    for d in [x.dtype, to] {
        r.check(d != DType::Bool, || "cannot bitcast to or from bool".to_string())?;
    }
    r.check(x.dtype.size_bytes() == to.size_bytes(), || {
        format!(
            "cannot bitcast {} ({} bytes) to {} ({} bytes): widths differ",
            x.dtype,
            x.dtype.size_bytes(),
            to,
            to.size_bytes()
        )
    })?;
    Ok(vec![TensorType { dtype: to, shape: x.shape.clone() }])
}

fn broadcast_in_dim(r: &Rule, shape: &Shape, bdims: &[usize]) -> Types {
    let [x] = r.operands()?;
    r.check(bdims.len() == x.rank(), || {
        format!(
            "broadcast_dimensions {bdims:?} has {} entries but the operand has rank {}",
            bdims.len(),
            x.rank()
        )
    })?;
    for (i, (&d, &size)) in bdims.iter().zip(x.shape.dims()).enumerate() {
        r.dim_in_range("broadcast dimension", d, shape.rank())?;
        r.check(i == 0 || bdims[i - 1] < d, || {
            format!("broadcast_dimensions {bdims:?} are not strictly increasing")
        })?;
        r.check(size == shape[d] || size == 1, || {
            format!(
                "operand dimension {i} of size {size} cannot broadcast to result dimension {d} of size {} \
                 (operand shape {}, result shape {shape})",
                shape[d], x.shape
            )
        })?;
    }
    Ok(vec![TensorType { dtype: x.dtype, shape: shape.clone() }])
}

fn reshape(r: &Rule, new_sizes: &Shape) -> Types {
    let [x] = r.operands()?;
    let (from, to) = (num_elements(&x.shape), num_elements(new_sizes));
    r.check(from.is_some() && from == to, || {
        format!("cannot reshape {} to {new_sizes}: element counts differ", x.shape)
    })?;
    Ok(vec![TensorType { dtype: x.dtype, shape: new_sizes.clone() }])
}

fn transpose(r: &Rule, perm: &[usize]) -> Types {
    let [x] = r.operands()?;
    r.check(perm.len() == x.rank(), || {
        format!("permutation {perm:?} is not a permutation of the operand's {} dimensions", x.rank())
    })?;
    r.distinct_dims("permutation entry", perm, x.rank())?;
    Ok(vec![with_shape(x.dtype, perm.iter().map(|&p| x.shape[p]).collect())])
}

fn slice(r: &Rule, start: &[usize], limit: &[usize], strides: &[usize]) -> Types {
    let [x] = r.operands()?;
    r.per_dim("start", start.len(), x.rank())?;
    r.per_dim("limit", limit.len(), x.rank())?;
    r.per_dim("strides", strides.len(), x.rank())?;
    let mut dims = Vec::with_capacity(x.rank());
    for (i, &d) in x.shape.dims().iter().enumerate() {
        let (s, l, st) = (start[i], limit[i], strides[i]);
        r.check(s <= l && l <= d, || {
            format!("slice [{s}, {l}) does not fit dimension {i} of size {d} (shape {})", x.shape)
        })?;
        r.check(st >= 1, || format!("stride {st} of dimension {i} is not >= 1"))?;
        dims.push((l - s).div_ceil(st));
    }
    Ok(vec![with_shape(x.dtype, dims)])
}

/// `starts` are `n` scalar indices, one per dimension of a rank-`n` operand.
fn start_indices(r: &Rule, starts: &[TensorType], rank: usize) -> Result<(), TypeError> {
    r.check(starts.len() == rank, || {
        format!("expected {rank} start indices for an operand of rank {rank}, got {}", starts.len())
    })?;
    for (i, s) in starts.iter().enumerate() {
        r.index_dtype(&format!("start index {i}"), s.dtype)?;
        r.check(s.rank() == 0, || format!("start index {i} has shape {} but must be a scalar", s.shape))?;
    }
    Ok(())
}

fn dynamic_slice(r: &Rule, sizes: &[usize]) -> Types {
    r.at_least(1)?;
    let (x, starts) = (&r.inputs[0], &r.inputs[1..]);
    start_indices(r, starts, x.rank())?;
    r.per_dim("slice_sizes", sizes.len(), x.rank())?;
    for (i, (&s, &d)) in sizes.iter().zip(x.shape.dims()).enumerate() {
        r.check(s <= d, || format!("slice size {s} exceeds dimension {i} of size {d} (shape {})", x.shape))?;
    }
    Ok(vec![with_shape(x.dtype, sizes.to_vec())])
}

fn dynamic_update_slice(r: &Rule) -> Types {
    r.at_least(2)?;
    let (x, u, starts) = (&r.inputs[0], &r.inputs[1], &r.inputs[2..]);
    r.check(u.dtype == x.dtype, || {
        format!("update dtype {} differs from operand dtype {}", u.dtype, x.dtype)
    })?;
    r.check(u.rank() == x.rank() && u.shape.dims().iter().zip(x.shape.dims()).all(|(a, b)| a <= b), || {
        format!("update shape {} does not fit in operand shape {}", u.shape, x.shape)
    })?;
    start_indices(r, starts, x.rank())?;
    Ok(vec![x.clone()])
}

fn concatenate(r: &Rule, dimension: usize) -> Types {
    r.at_least(1)?;
    let first = &r.inputs[0];
    r.dim_in_range("dimension", dimension, first.rank())?;
    let mut total = 0usize;
    for t in r.inputs {
        r.check(t.dtype == first.dtype, || format!("dtypes {} and {} differ", first.dtype, t.dtype))?;
        let fits = t.rank() == first.rank()
            && t.shape
                .dims()
                .iter()
                .zip(first.shape.dims())
                .enumerate()
                .all(|(i, (a, b))| i == dimension || a == b);
        r.check(fits, || {
            format!("shapes {} and {} differ outside dimension {dimension}", first.shape, t.shape)
        })?;
        total = total
            .checked_add(t.shape[dimension])
            .ok_or_else(|| r.err(format!("concatenated dimension {dimension} overflows")))?;
    }
    let mut dims = first.shape.dims().to_vec();
    dims[dimension] = total;
    Ok(vec![with_shape(first.dtype, dims)])
}

fn pad(r: &Rule, low: &[i64], high: &[i64], interior: &[usize]) -> Types {
    let [x, value] = r.operands()?;
    r.check(value.rank() == 0 && value.dtype == x.dtype, || {
        format!("padding value {value} is not a scalar of the operand dtype {}", x.dtype)
    })?;
    r.per_dim("low", low.len(), x.rank())?;
    r.per_dim("high", high.len(), x.rank())?;
    r.per_dim("interior", interior.len(), x.rank())?;
    let mut dims = Vec::with_capacity(x.rank());
    for (i, &d) in x.shape.dims().iter().enumerate() {
        // Checked i128: low/high may be negative, and the interior product can exceed even i128.
        let d128 = d as i128;
        let out = (d128 - 1)
            .max(0)
            .checked_mul(interior[i] as i128)
            .and_then(|inner| inner.checked_add(d128))
            .and_then(|o| o.checked_add(low[i] as i128 + high[i] as i128));
        let out = out.and_then(|o| usize::try_from(o).ok()).ok_or_else(|| {
            let shown = out.map_or("an overflowing size".to_string(), |o| format!("size {o}"));
            r.err(format!(
                "padding (low {}, high {}, interior {}) of dimension {i} of size {d} gives {shown}",
                low[i], high[i], interior[i]
            ))
        })?;
        dims.push(out);
    }
    Ok(vec![with_shape(x.dtype, dims)])
}

/// `dims` without the positions in `drop` (all in range).
fn drop_dims(dims: &[usize], drop: &[usize]) -> Vec<usize> {
    dims.iter().enumerate().filter(|(i, _)| !drop.contains(i)).map(|(_, &d)| d).collect()
}

fn reduce(r: &Rule, op: ReduceOp, axes: &[usize]) -> Types {
    let [x] = r.operands()?;
    let kind = match op {
        ReduceOp::Sum | ReduceOp::Prod => Kind::Numeric,
        ReduceOp::Max | ReduceOp::Min => Kind::NumericOrBool,
    };
    r.kind("dtype", x.dtype, kind)?;
    r.distinct_dims("axis", axes, x.rank())?;
    Ok(vec![with_shape(x.dtype, drop_dims(x.shape.dims(), axes))])
}

fn arg_reduce(r: &Rule, op: ArgOp, axis: usize, index_dtype: DType) -> Types {
    let [x] = r.operands()?;
    // Both ops accept the same operands; the match keeps a new op from slipping through unchecked.
    match op {
        ArgOp::Max | ArgOp::Min => r.kind("dtype", x.dtype, Kind::Numeric)?,
    }
    r.dim_in_range("axis", axis, x.rank())?;
    r.check(x.shape[axis] >= 1, || format!("axis {axis} of shape {} is empty", x.shape))?;
    r.index_dtype("index", index_dtype)?;
    r.positions_fit(index_dtype, x.shape[axis], || format!("axis {axis}"))?;
    Ok(vec![with_shape(index_dtype, drop_dims(x.shape.dims(), &[axis]))])
}

fn sort(r: &Rule, dimension: usize, num_keys: usize) -> Types {
    r.at_least(1)?;
    let first = &r.inputs[0];
    for t in r.inputs {
        r.check(t.shape == first.shape, || format!("shapes {} and {} differ", first.shape, t.shape))?;
    }
    r.check(num_keys >= 1 && num_keys <= r.inputs.len(), || {
        format!("num_keys {num_keys} is not in 1..={}", r.inputs.len())
    })?;
    r.dim_in_range("dimension", dimension, first.rank())?;
    Ok(r.inputs.to_vec())
}

fn dot_general(
    r: &Rule,
    (lc, rc): (&[usize], &[usize]),
    (lb, rb): (&[usize], &[usize]),
    preferred: Option<DType>,
) -> Types {
    let [lhs, rhs] = r.operands()?;
    r.check(lhs.dtype == rhs.dtype, || format!("dtypes {} and {} differ", lhs.dtype, rhs.dtype))?;
    r.kind("dtype", lhs.dtype, Kind::Numeric)?;
    r.check(lc.len() == rc.len(), || format!("contracting dimensions {lc:?} and {rc:?} differ in length"))?;
    r.check(lb.len() == rb.len(), || format!("batch dimensions {lb:?} and {rb:?} differ in length"))?;
    for (side, t, batch, contract) in [("lhs", lhs, lb, lc), ("rhs", rhs, rb, rc)] {
        let used: Vec<usize> = batch.iter().chain(contract).copied().collect();
        r.distinct_dims(&format!("{side} dimension"), &used, t.rank())?;
    }
    for (what, ls, rs) in [("batch", lb, rb), ("contracting", lc, rc)] {
        for (&l, &rr) in ls.iter().zip(rs) {
            r.check(lhs.shape[l] == rhs.shape[rr], || {
                format!(
                    "{what} dimensions lhs {l} (size {}) and rhs {rr} (size {}) differ; shapes {} and {}",
                    lhs.shape[l], rhs.shape[rr], lhs.shape, rhs.shape
                )
            })?;
        }
    }
    let free = |t: &TensorType, batch: &[usize], contract: &[usize]| {
        (0..t.rank())
            .filter(|d| !batch.contains(d) && !contract.contains(d))
            .map(|d| t.shape[d])
            .collect::<Vec<_>>()
    };
    let mut dims: Vec<usize> = lb.iter().map(|&d| lhs.shape[d]).collect();
    dims.extend(free(lhs, lb, lc));
    dims.extend(free(rhs, rb, rc));
    let dtype = match preferred {
        Some(p) => {
            r.kind("preferred_element_type", p, Kind::Numeric)?;
            p
        }
        None => lhs.dtype,
    };
    Ok(vec![with_shape(dtype, dims)])
}

/// The result type of `gather(operand, indices)`, shared with `scatter` (its updates' type).
fn gather_type(
    r: &Rule,
    operand: &TensorType,
    indices: &TensorType,
    axis: usize,
    batch_dims: usize,
) -> Result<TensorType, TypeError> {
    r.index_dtype("indices", indices.dtype)?;
    r.check(operand.rank() >= 1, || "operand must have rank >= 1, got shape ()".to_string())?;
    r.dim_in_range("axis", axis, operand.rank())?;
    r.check(batch_dims <= axis && batch_dims <= indices.rank(), || {
        format!("batch_dims {batch_dims} exceeds axis {axis} or the indices rank {}", indices.rank())
    })?;
    let (ob, ib) = (&operand.shape.dims()[..batch_dims], &indices.shape.dims()[..batch_dims]);
    r.check(ob == ib, || {
        format!(
            "leading {batch_dims} batch dims of operand shape {} and indices shape {} differ",
            operand.shape, indices.shape
        )
    })?;
    let o = operand.shape.dims();
    let dims = o[..axis].iter().chain(&indices.shape.dims()[batch_dims..]).chain(&o[axis + 1..]).copied();
    Ok(with_shape(operand.dtype, dims.collect()))
}

fn scatter(r: &Rule, op: ScatterOp, axis: usize, batch_dims: usize) -> Types {
    let [operand, indices, updates] = r.operands()?;
    match op {
        ScatterOp::Set => {}
        ScatterOp::Add => r.kind("dtype", operand.dtype, Kind::Numeric)?,
    }
    let want = gather_type(r, operand, indices, axis, batch_dims)?;
    r.check(updates.dtype == operand.dtype, || {
        format!("updates dtype {} differs from operand dtype {}", updates.dtype, operand.dtype)
    })?;
    r.check(updates.shape == want.shape, || {
        format!("updates shape {} differs from the gathered shape {}", updates.shape, want.shape)
    })?;
    Ok(vec![operand.clone()])
}

fn segment_sum(r: &Rule, num_segments: usize) -> Types {
    let [data, ids] = r.operands()?;
    r.kind("data dtype", data.dtype, Kind::Numeric)?;
    r.check(data.rank() >= 1, || "data must have rank >= 1, got shape ()".to_string())?;
    r.index_dtype("segment ids", ids.dtype)?;
    r.check(ids.rank() == 1 && ids.shape[0] == data.shape[0], || {
        format!("segment ids shape {} is not ({},) for data shape {}", ids.shape, data.shape[0], data.shape)
    })?;
    let dims = std::iter::once(num_segments).chain(data.shape.dims()[1..].iter().copied());
    Ok(vec![with_shape(data.dtype, dims.collect())])
}

fn custom_jvp(r: &Rule, fun: &Function, jvp: &Function) -> Types {
    let fun = r.signature("fun", fun)?;
    let jvp = r.signature("jvp", jvp)?;
    r.same_types("fun parameter", &fun.params, "operand", r.inputs)?;
    let twice = |ts: &[TensorType]| ts.iter().chain(ts).cloned().collect::<Vec<_>>();
    r.same_types("jvp parameter", &jvp.params, "primal/tangent type", &twice(r.inputs))?;
    r.same_types("jvp output", &jvp.outputs, "primal/tangent output type", &twice(&fun.outputs))?;
    Ok(fun.outputs)
}

fn custom_vjp(r: &Rule, fun: &Function, fwd: &Function, bwd: &Function) -> Types {
    let fun = r.signature("fun", fun)?;
    let fwd = r.signature("fwd", fwd)?;
    let bwd = r.signature("bwd", bwd)?;
    r.same_types("fun parameter", &fun.params, "operand", r.inputs)?;
    r.same_types("fwd parameter", &fwd.params, "operand", r.inputs)?;
    let n = fun.outputs.len();
    r.check(fwd.outputs.len() >= n, || {
        format!("fwd has {} outputs, fewer than fun's {n}", fwd.outputs.len())
    })?;
    let (primal, residuals) = fwd.outputs.split_at(n);
    r.same_types("fwd output", primal, "fun output", &fun.outputs)?;
    let want: Vec<_> = residuals.iter().chain(&fun.outputs).cloned().collect();
    r.same_types("bwd parameter", &bwd.params, "residual/cotangent type", &want)?;
    r.same_types("bwd output", &bwd.outputs, "operand", r.inputs)?;
    Ok(fun.outputs)
}

/// Splits the operands into `(first n, next m, rest)`.
fn split3<'a>(r: &Rule<'a>, n: usize, m: usize) -> Result<[&'a [TensorType]; 3], TypeError> {
    let fixed = n
        .checked_add(m)
        .filter(|&k| k <= r.inputs.len())
        .ok_or_else(|| r.err(format!("expected at least {n} + {m} operands, got {}", r.inputs.len())))?;
    let (head, rest) = r.inputs.split_at(fixed);
    let (a, b) = head.split_at(n);
    Ok([a, b, rest])
}

fn scan(r: &Rule, length: usize, num_consts: usize, num_carry: usize, body: &Function) -> Types {
    let [consts, carry, xs] = split3(r, num_consts, num_carry)?;
    let body = r.signature("body", body)?;
    let mut want: Vec<TensorType> = consts.iter().chain(carry).cloned().collect();
    for (i, x) in xs.iter().enumerate() {
        r.check(x.rank() >= 1 && x.shape[0] == length, || {
            format!("xs {i} has shape {} but its leading dimension must be the length {length}", x.shape)
        })?;
        want.push(with_shape(x.dtype, x.shape.dims()[1..].to_vec()));
    }
    r.same_types("body parameter", &body.params, "scan operand slice", &want)?;
    r.check(body.outputs.len() >= num_carry, || {
        format!("body has {} outputs, fewer than the {num_carry} carries", body.outputs.len())
    })?;
    let (carry_out, ys) = body.outputs.split_at(num_carry);
    r.same_types("body carry output", carry_out, "carry input", carry)?;
    let mut out = carry.to_vec();
    for y in ys {
        let dims = std::iter::once(length).chain(y.shape.dims().iter().copied());
        out.push(with_shape(y.dtype, dims.collect()));
    }
    Ok(out)
}

fn while_loop(r: &Rule, cond: &Function, body: &Function, cond_consts: usize, body_consts: usize) -> Types {
    let [cc, bc, state] = split3(r, cond_consts, body_consts)?;
    let cond = r.signature("cond", cond)?;
    let body = r.signature("body", body)?;
    let cat = |a: &[TensorType]| a.iter().chain(state).cloned().collect::<Vec<_>>();
    r.same_types("cond parameter", &cond.params, "cond operand", &cat(cc))?;
    r.same_types("cond output", &cond.outputs, "required output", &[TensorType::scalar(DType::Bool)])?;
    r.same_types("body parameter", &body.params, "body operand", &cat(bc))?;
    r.same_types("body output", &body.outputs, "state type", state)?;
    Ok(state.to_vec())
}

fn cond(r: &Rule, branches: &[Function]) -> Types {
    r.at_least(1)?;
    r.check(!branches.is_empty(), || "cond needs at least one branch".to_string())?;
    let (index, args) = (&r.inputs[0], &r.inputs[1..]);
    r.check(*index == TensorType::scalar(DType::I32), || format!("index has type {index}, not i32[]"))?;
    let mut outputs: Option<Vec<TensorType>> = None;
    for (i, b) in branches.iter().enumerate() {
        let sig = r.signature(&format!("branch {i}"), b)?;
        r.same_types(&format!("branch {i} parameter"), &sig.params, "operand", args)?;
        match &outputs {
            None => outputs = Some(sig.outputs),
            Some(first) => {
                r.same_types(&format!("branch {i} output"), &sig.outputs, "branch 0 output", first)?
            }
        }
    }
    Ok(outputs.unwrap_or_default())
}
