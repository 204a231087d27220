//! The interpreter's table: every primitive (every family op, every parameter variant) against
//! hand-computed values, edge cases included, at ranks 0–4.
//!
//! [`cases`] is an exhaustive `match` over [`Prim`] (and, in the per-family modules, over each op
//! enum), so a new primitive or op does not compile until it has rows; [`samples`] lists one `Prim` per
//! variant, op and index mode, and the tests check that every sample's name gets cases, at two ranks
//! or more, and that the interpreter reproduces each case bit for bit.
//!
//! Expected values are worked out by hand (the arithmetic is in comments where it is not obvious).
//! Transcendentals use only results that are exact (`exp(0) = 1`, `tanh(±inf) = ±1`, ...) or are
//! compared with Rust std's result on the same input, noted where used.

use kiln_ir::{
    ArgOp, Array, BinaryOp, CompareOp, CumulativeOp, DType, Element, Function, IndexMode, Prim, ReduceOp,
    ScatterOp, TensorType, UnaryOp, Var, eval_prim,
};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

#[path = "interp_table/control.rs"]
mod control;
#[path = "interp_table/elementwise.rs"]
mod elementwise;
#[path = "interp_table/indexing.rs"]
mod indexing;
#[path = "interp_table/reduce.rs"]
mod reduce;
#[path = "interp_table/structural.rs"]
mod structural;

// ---------------------------------------------------------------- the table

/// One row: `prim(inputs) == expected`, bit for bit.
#[derive(Clone)]
pub struct Case {
    /// What the row checks (the primitive's name is prefixed when printed).
    pub name: String,
    /// The primitive with this row's parameters.
    pub prim: Prim,
    /// Operands.
    pub inputs: Vec<Array>,
    /// Results.
    pub expected: Vec<Array>,
}

/// The hand-computed rows for the primitive (family op, index mode) of `p`. Parameters that are plain
/// numbers (axes, shapes, ...) are chosen per row; the enums that select semantics are taken from `p`.
fn cases(p: &Prim) -> Vec<Case> {
    match p {
        Prim::Unary(op) => elementwise::unary(*op),
        Prim::Binary(op) => elementwise::binary(*op),
        Prim::Compare(op) => elementwise::compare(*op),
        Prim::Select => elementwise::select(),
        Prim::Clamp => elementwise::clamp(),
        Prim::ConvertElementType { .. } => elementwise::convert(),
        Prim::BitcastConvertType { .. } => elementwise::bitcast(),
        Prim::Iota { .. } => elementwise::iota(),
        Prim::Threefry2x32 => elementwise::threefry2x32(),
        Prim::BroadcastInDim { .. } => structural::broadcast_in_dim(),
        Prim::Reshape { .. } => structural::reshape(),
        Prim::Transpose { .. } => structural::transpose(),
        Prim::Rev { .. } => structural::rev(),
        Prim::Slice { .. } => structural::slice(),
        Prim::DynamicSlice { .. } => structural::dynamic_slice(),
        Prim::DynamicUpdateSlice => structural::dynamic_update_slice(),
        Prim::Concatenate { .. } => structural::concatenate(),
        Prim::Pad { .. } => structural::pad(),
        Prim::Reduce { op, .. } => reduce::reduce(*op),
        Prim::ArgReduce { op, .. } => reduce::arg_reduce(*op),
        Prim::Cumulative { op, .. } => reduce::cumulative(*op),
        Prim::Sort { .. } => reduce::sort(),
        Prim::DotGeneral { .. } => reduce::dot_general(),
        Prim::Gather { mode, .. } => indexing::gather(*mode),
        Prim::Scatter { op, mode, .. } => indexing::scatter(*op, *mode),
        Prim::SegmentSum { .. } => indexing::segment_sum(),
        Prim::StopGradient => control::stop_gradient(),
        Prim::CustomJvpCall { .. } => control::custom_jvp_call(),
        Prim::CustomVjpCall { .. } => control::custom_vjp_call(),
        Prim::Scan { .. } => control::scan(),
        Prim::WhileLoop { .. } => control::while_loop(),
        Prim::Cond { .. } => control::cond(),
        Prim::Call { .. } => control::call(),
        Prim::Checkpoint { .. } => control::checkpoint(),
    }
}

/// The number of [`Prim`] variants: [`samples`] must hold each (bump this when adding one, together
/// with its sample and its arm in [`cases`]).
const PRIM_VARIANTS: usize = 34;

/// Both index modes (checked exhaustively where gather/scatter rows pick their expectations).
const INDEX_MODES: [IndexMode; 2] = [IndexMode::Clip, IndexMode::FillOrDrop];

/// One `Prim` per variant, family op and index mode. Parameters here are placeholders: [`cases`]
/// reads only the op enums and the mode.
fn samples() -> Vec<Prim> {
    let empty = || Box::new(Function::new());
    let mut s: Vec<Prim> = Vec::new();
    s.extend(UnaryOp::ALL.map(Prim::Unary));
    s.extend(BinaryOp::ALL.map(Prim::Binary));
    s.extend(CompareOp::ALL.map(Prim::Compare));
    s.extend(ReduceOp::ALL.map(|op| Prim::Reduce { op, axes: vec![] }));
    s.extend(ArgOp::ALL.map(|op| Prim::ArgReduce { op, axis: 0, index_dtype: DType::I32 }));
    s.extend(CumulativeOp::ALL.map(|op| Prim::Cumulative { op, axis: 0, reverse: false }));
    for mode in INDEX_MODES {
        s.push(Prim::Gather { axis: 0, batch_dims: 0, mode });
        s.extend(ScatterOp::ALL.map(|op| Prim::Scatter { op, axis: 0, batch_dims: 0, mode }));
    }
    s.extend([
        Prim::Select,
        Prim::Clamp,
        Prim::ConvertElementType { dtype: DType::F32 },
        Prim::BitcastConvertType { dtype: DType::F32 },
        Prim::Iota { dtype: DType::I32, shape: [1].into(), dimension: 0 },
        Prim::Threefry2x32,
        Prim::BroadcastInDim { shape: [].into(), broadcast_dimensions: vec![] },
        Prim::Reshape { new_sizes: [].into() },
        Prim::Transpose { permutation: vec![] },
        Prim::Rev { dimensions: vec![] },
        Prim::Slice { start: vec![], limit: vec![], strides: vec![] },
        Prim::DynamicSlice { slice_sizes: vec![] },
        Prim::DynamicUpdateSlice,
        Prim::Concatenate { dimension: 0 },
        Prim::Pad { low: vec![], high: vec![], interior: vec![] },
        Prim::Sort { dimension: 0, num_keys: 1 },
        Prim::DotGeneral {
            lhs_contracting: vec![],
            rhs_contracting: vec![],
            lhs_batch: vec![],
            rhs_batch: vec![],
            preferred_element_type: None,
        },
        Prim::SegmentSum { num_segments: 0 },
        Prim::StopGradient,
        Prim::CustomJvpCall { fun: empty(), jvp: empty() },
        Prim::CustomVjpCall { fun: empty(), fwd: empty(), bwd: empty() },
        Prim::Scan { length: 0, reverse: false, num_consts: 0, num_carry: 0, body: empty() },
        Prim::WhileLoop { cond: empty(), body: empty(), cond_consts: 0, body_consts: 0, max_iters: None },
        Prim::Cond { branches: vec![Function::new()] },
        Prim::Call { body: empty() },
        Prim::Checkpoint { body: empty() },
    ]);
    s
}

/// Groups whose rows must together span a range of ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    /// Elementwise and conversions: ranks 0..=4 (of the largest operand or result).
    Elementwise,
    /// Shape primitives: ranks 0..=4.
    Shape,
    /// Reductions, scans, sort, dot: ranks 0..=4.
    Reduction,
    /// Gather: operand ranks 1..=4.
    Gather,
    /// Scatter: operand ranks 1..=4.
    Scatter,
    /// Only the two-ranks-per-primitive rule applies.
    Other,
}

fn group(p: &Prim) -> Group {
    match p {
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::Iota { .. }
        | Prim::Threefry2x32 => Group::Elementwise,
        Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. } => Group::Shape,
        Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::DotGeneral { .. } => Group::Reduction,
        Prim::Gather { .. } => Group::Gather,
        Prim::Scatter { .. } => Group::Scatter,
        Prim::SegmentSum { .. }
        | Prim::StopGradient
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => Group::Other,
    }
}

/// The rank a row exercises: that of its operand for gather/scatter, else the largest rank among its
/// operands and results.
fn case_rank(c: &Case) -> usize {
    match group(&c.prim) {
        Group::Gather | Group::Scatter => c.inputs[0].shape().rank(),
        Group::Elementwise | Group::Shape | Group::Reduction | Group::Other => {
            c.inputs.iter().chain(&c.expected).map(|a| a.shape().rank()).max().unwrap_or(0)
        }
    }
}

// ---------------------------------------------------------------- comparison

/// The NaN an expectation writes when any NaN will do: IEEE-754 does not fix the sign or payload of a
/// NaN an operation creates (x86 makes `0/0` negative, for one). Any other NaN bit pattern in an
/// expectation (bitcast, sort, gather moving a NaN) must be reproduced exactly.
fn any_nan32(want: f32) -> bool {
    want.to_bits() == f32::NAN.to_bits()
}
fn any_nan64(want: f64) -> bool {
    want.to_bits() == f64::NAN.to_bits()
}

/// Bitwise equality (`-0.0 != 0.0`, NaN payloads compared), except that an expected canonical NaN
/// accepts any NaN (see [`any_nan32`]).
fn same(got: &Array, want: &Array) -> bool {
    if got.ty() != want.ty() {
        return false;
    }
    match (got, want) {
        (Array::F32(g), Array::F32(w)) => {
            g.iter().zip(w.iter()).all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && any_nan32(*w)))
        }
        (Array::F64(g), Array::F64(w)) => {
            g.iter().zip(w.iter()).all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && any_nan64(*w)))
        }
        _ => got.bitwise_eq(want),
    }
}

/// Runs one row; `Err` describes the mismatch (or the panic).
fn check(sample: &Prim, c: &Case) -> Result<(), String> {
    let label = format!("{} / {}", sample.name(), c.name);
    if c.prim.name() != sample.name() || std::mem::discriminant(&c.prim) != std::mem::discriminant(sample) {
        return Err(format!("{label}: the row's primitive is {}", c.prim.name()));
    }
    let args: Vec<&Array> = c.inputs.iter().collect();
    let got = match catch_unwind(AssertUnwindSafe(|| eval_prim(&c.prim, &args))) {
        Ok(Ok(got)) => got,
        Ok(Err(e)) => return Err(format!("{label}: error {e}")),
        Err(_) => return Err(format!("{label}: panicked")),
    };
    let ok = got.len() == c.expected.len() && got.iter().zip(&c.expected).all(|(g, w)| same(g, w));
    if ok { Ok(()) } else { Err(format!("{label}:\n    got  {got:?}\n    want {:?}", c.expected)) }
}

// ---------------------------------------------------------------- the tests

#[test]
fn every_primitive_matches_its_hand_computed_rows() {
    let mut failures = Vec::new();
    let mut rows = 0;
    for sample in samples() {
        for c in cases(&sample) {
            rows += 1;
            if let Err(e) = check(&sample, &c) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{} of {rows} rows failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_sample_name_has_rows_and_every_variant_a_sample() {
    let samples = samples();
    let variants: HashSet<_> = samples.iter().map(std::mem::discriminant).collect();
    assert_eq!(variants.len(), PRIM_VARIANTS, "samples() misses a Prim variant");
    let names: BTreeSet<&str> = samples.iter().map(Prim::name).collect();
    // Family names are one per op (scatter's two ops under each mode share their names).
    let family_names = UnaryOp::ALL.len()
        + BinaryOp::ALL.len()
        + CompareOp::ALL.len()
        + ReduceOp::ALL.len()
        + ArgOp::ALL.len()
        + CumulativeOp::ALL.len()
        + ScatterOp::ALL.len();
    assert_eq!(names.len(), family_names + PRIM_VARIANTS - 7, "{names:?}");
    for s in &samples {
        assert!(!cases(s).is_empty(), "{} has no rows", s.name());
    }
}

#[test]
fn rows_span_ranks() {
    let mut by_group: BTreeMap<Group, BTreeSet<usize>> = BTreeMap::new();
    for s in samples() {
        let ranks: BTreeSet<usize> = cases(&s).iter().map(case_rank).collect();
        assert!(ranks.len() >= 2, "{} has rows at ranks {ranks:?} only", s.name());
        by_group.entry(group(&s)).or_default().extend(ranks);
    }
    for (g, want) in [
        (Group::Elementwise, 0..=4),
        (Group::Shape, 0..=4),
        (Group::Reduction, 0..=4),
        (Group::Gather, 1..=4),
        (Group::Scatter, 1..=4),
    ] {
        for r in want {
            assert!(by_group[&g].contains(&r), "{g:?} has no row at rank {r}: {:?}", by_group[&g]);
        }
    }
}

// ---------------------------------------------------------------- helpers for the rows

/// A row.
pub fn case(name: impl Into<String>, prim: Prim, inputs: Vec<Array>, expected: Vec<Array>) -> Case {
    Case { name: name.into(), prim, inputs, expected }
}

/// A row with one result.
pub fn case1(name: impl Into<String>, prim: Prim, inputs: Vec<Array>, expected: Array) -> Case {
    case(name, prim, inputs, vec![expected])
}

/// An array of shape `dims` from row-major data.
pub fn arr<T: Element>(dims: &[usize], v: &[T]) -> Array {
    Array::from_vec(dims, v.to_vec())
}
pub fn f32s(dims: &[usize], v: &[f32]) -> Array {
    arr(dims, v)
}
pub fn f64s(dims: &[usize], v: &[f64]) -> Array {
    arr(dims, v)
}
pub fn i32s(dims: &[usize], v: &[i32]) -> Array {
    arr(dims, v)
}
pub fn u32s(dims: &[usize], v: &[u32]) -> Array {
    arr(dims, v)
}
pub fn bools(dims: &[usize], v: &[bool]) -> Array {
    arr(dims, v)
}

/// `0, 1, 2, ...` in row-major order over `dims` (so element `[i, j, k]` of a `[_, J, K]` array is
/// `i*J*K + j*K + k`).
pub fn f32_iota(dims: &[usize]) -> Array {
    let n: usize = dims.iter().product();
    Array::from_vec(dims, (0..n).map(|i| i as f32).collect())
}
pub fn i32_iota(dims: &[usize]) -> Array {
    let n: usize = dims.iter().product();
    Array::from_vec(dims, (0..n).map(|i| i as i32).collect())
}

/// The same row in f32 and in f64: operands `ins` and result `out`, all of shape `dims`, written as f64
/// (each value is exact in f32 too, or at least gives the same expected result there).
pub fn floats(name: &str, prim: &Prim, dims: &[usize], ins: &[&[f64]], out: &[f64]) -> Vec<Case> {
    let to32 = |v: &[f64]| v.iter().map(|&x| narrow(x)).collect::<Vec<f32>>();
    vec![
        case1(
            format!("{name} (f32)"),
            prim.clone(),
            ins.iter().map(|v| f32s(dims, &to32(v))).collect(),
            f32s(dims, &to32(out)),
        ),
        case1(
            format!("{name} (f64)"),
            prim.clone(),
            ins.iter().map(|v| f64s(dims, v)).collect(),
            f64s(dims, out),
        ),
    ]
}

/// f64 → f32 that keeps the canonical NaN canonical (so it still means "any NaN").
fn narrow(x: f64) -> f32 {
    if any_nan64(x) { f32::NAN } else { x as f32 }
}

/// A type, for sub-function parameters.
pub fn ty(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims)
}

/// A function of parameters `params` whose outputs `build` returns (it appends the equations).
pub fn func(params: &[TensorType], build: impl FnOnce(&mut Function, &[Var]) -> Vec<Var>) -> Function {
    let mut f = Function::new();
    let ps: Vec<Var> = params.iter().map(|t| f.add_param(t.clone())).collect();
    f.outputs = build(&mut f, &ps);
    f
}

/// Appends `prim(inputs)` and returns its single output.
pub fn push(f: &mut Function, prim: Prim, inputs: &[Var]) -> Var {
    f.push(prim, inputs, None).expect("sub-function equation is well-typed")[0]
}

pub const NAN: f64 = f64::NAN;
pub const INF: f64 = f64::INFINITY;
pub const NAN32: f32 = f32::NAN;
pub const INF32: f32 = f32::INFINITY;
