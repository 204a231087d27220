//! The text form: printing then parsing gives the function back, for every primitive and parameter
//! variant; expected text for a few lines; errors with line and column; no panics on bad input.

#![allow(clippy::cloned_ref_to_slice_refs)] // `&[ty.clone()]` reads better in the samples

use kiln_ir::{
    ArgOp, Array, BinaryOp, CompareOp, CumulativeOp, DType, Eqn, Function, IndexMode, Prim, ReduceOp,
    ScatterOp, Shape, SrcLoc, TensorType, UnaryOp, Var, parse,
};
use proptest::prelude::*;
use smallvec::SmallVec;
use std::collections::BTreeSet;
use std::sync::Arc;

fn t(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims)
}

const F32: DType = DType::F32;

/// Appends an equation with explicit output types (no shape rules involved).
fn eqn(f: &mut Function, prim: Prim, inputs: &[Var], outs: &[TensorType]) -> Vec<Var> {
    eqn_at(f, prim, inputs, outs, None)
}

fn eqn_at(
    f: &mut Function,
    prim: Prim,
    inputs: &[Var],
    outs: &[TensorType],
    loc: Option<SrcLoc>,
) -> Vec<Var> {
    let outputs: SmallVec<[Var; 2]> = outs.iter().map(|ty| f.new_var(ty.clone())).collect();
    f.eqns.push(Eqn { prim, inputs: SmallVec::from_slice(inputs), outputs: outputs.clone(), loc });
    outputs.to_vec()
}

fn loc(file: &str, line: u32, column: u32) -> Option<SrcLoc> {
    Some(SrcLoc { file: Arc::from(file), line, column })
}

/// `x -> op(x)` on `ty`.
fn unary_fn(op: UnaryOp, ty: TensorType) -> Function {
    let mut f = Function::new();
    let x = f.add_param(ty.clone());
    let y = eqn(&mut f, Prim::Unary(op), &[x], &[ty])[0];
    f.outputs.push(y);
    f
}

/// `(x, y) -> (op(x, y), y)` on scalars, with a constant.
fn binary_fn(op: BinaryOp) -> Function {
    let mut f = Function::new();
    let x = f.add_param(t(F32, &[]));
    let y = f.add_param(t(F32, &[]));
    let c = f.add_const(Array::scalar(2.5f32));
    let z = eqn(&mut f, Prim::Binary(op), &[x, c], &[t(F32, &[])])[0];
    let z = eqn_at(&mut f, Prim::Binary(op), &[z, y], &[t(F32, &[])], loc("body.rs", 1, 2))[0];
    f.outputs.extend([z, y]);
    f
}

/// Which `Prim` variant `p` is. Exhaustive, so a new primitive fails to compile here until it gets
/// a sample in [`all_prims`].
fn variant(p: &Prim) -> &'static str {
    match p {
        Prim::Unary(_) => "Unary",
        Prim::Binary(_) => "Binary",
        Prim::Compare(_) => "Compare",
        Prim::Select => "Select",
        Prim::Clamp => "Clamp",
        Prim::ConvertElementType { .. } => "ConvertElementType",
        Prim::BitcastConvertType { .. } => "BitcastConvertType",
        Prim::Iota { .. } => "Iota",
        Prim::BroadcastInDim { .. } => "BroadcastInDim",
        Prim::Reshape { .. } => "Reshape",
        Prim::Transpose { .. } => "Transpose",
        Prim::Rev { .. } => "Rev",
        Prim::Slice { .. } => "Slice",
        Prim::DynamicSlice { .. } => "DynamicSlice",
        Prim::DynamicUpdateSlice => "DynamicUpdateSlice",
        Prim::Concatenate { .. } => "Concatenate",
        Prim::Pad { .. } => "Pad",
        Prim::Reduce { .. } => "Reduce",
        Prim::ArgReduce { .. } => "ArgReduce",
        Prim::Cumulative { .. } => "Cumulative",
        Prim::Sort { .. } => "Sort",
        Prim::DotGeneral { .. } => "DotGeneral",
        Prim::Gather { .. } => "Gather",
        Prim::Scatter { .. } => "Scatter",
        Prim::SegmentSum { .. } => "SegmentSum",
        Prim::Threefry2x32 => "Threefry2x32",
        Prim::StopGradient => "StopGradient",
        Prim::CustomJvpCall { .. } => "CustomJvpCall",
        Prim::CustomVjpCall { .. } => "CustomVjpCall",
        Prim::Scan { .. } => "Scan",
        Prim::WhileLoop { .. } => "WhileLoop",
        Prim::Cond { .. } => "Cond",
        Prim::Call { .. } => "Call",
        Prim::Checkpoint { .. } => "Checkpoint",
    }
}

/// Number of arms of [`variant`].
const NUM_VARIANTS: usize = 34;

/// A canonical function (ids in definition order) using every primitive, every op of every family,
/// every parameter variant, inline constants of every dtype with edge values, and locations.
fn all_prims() -> Function {
    let mut f = Function::new();
    let x = f.add_param(t(F32, &[3]));
    let y = f.add_param(t(F32, &[3]));
    let s = f.add_param(t(F32, &[]));
    let i = f.add_param(t(DType::I32, &[]));
    let u = f.add_param(t(DType::U32, &[3]));
    let p = f.add_param(t(DType::Bool, &[3]));
    let m = f.add_param(t(DType::F64, &[2, 2]));
    let e = f.add_param(t(F32, &[0]));
    let r4 = f.add_param(t(F32, &[1, 2, 1, 2]));
    let idx = f.add_param(t(DType::I32, &[2]));
    let ids = f.add_param(t(DType::I32, &[3]));
    // Constants: edge values of every dtype, ranks 0..4, an empty one, and exactly 16 elements.
    f.add_const(Array::scalar(0.1f32));
    f.add_const(Array::scalar(-0.0f32));
    let floats = vec![
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        f32::from_bits(0x7fc0_0001), // NaN with a payload
        f32::from_bits(0xffc0_0000), // negative NaN
        f32::from_bits(1),           // smallest subnormal
        f32::MAX,
        0.1,
        1e-7,
        1e20,
        -3.25,
    ];
    f.add_const(Array::from_vec(&[12], floats));
    f.add_const(Array::from_vec(&[4], vec![0.1f64, f64::from_bits(0x7ff8_0000_0000_0001), 1e300, 5e-324]));
    f.add_const(Array::from_vec(&[2, 2], vec![i32::MIN, -1, 0, i32::MAX]));
    f.add_const(Array::from_vec(&[2], vec![0u32, u32::MAX]));
    f.add_const(Array::from_vec(&[2], vec![true, false]));
    f.add_const(Array::scalar(true));
    f.add_const(Array::scalar(-7i32));
    f.add_const(Array::scalar(7u32));
    f.add_const(Array::scalar(f64::NAN));
    f.add_const(Array::from_vec::<f32>(&[0], vec![]));
    f.add_const(Array::from_vec(&[1, 2, 1, 2], vec![1.0f32, 2.0, 3.0, 4.0]));
    f.add_const(Array::from_vec(&[16], (0..16).map(|k| k as f32).collect()));

    let f3 = t(F32, &[3]);
    let b3 = t(DType::Bool, &[3]);
    let u3 = t(DType::U32, &[3]);
    let fs = t(F32, &[]);
    for op in UnaryOp::ALL {
        let (arg, ty) = match op {
            UnaryOp::Not => (p, b3.clone()),
            UnaryOp::IsFinite => (x, b3.clone()),
            _ => (x, f3.clone()),
        };
        eqn(&mut f, Prim::Unary(op), &[arg], &[ty]);
    }
    for op in BinaryOp::ALL {
        eqn(&mut f, Prim::Binary(op), &[x, y], &[f3.clone()]);
    }
    for op in CompareOp::ALL {
        eqn(&mut f, Prim::Compare(op), &[x, y], &[b3.clone()]);
    }
    eqn(&mut f, Prim::Select, &[p, x, y], &[f3.clone()]);
    eqn(&mut f, Prim::Clamp, &[s, x, s], &[f3.clone()]);
    eqn(&mut f, Prim::ConvertElementType { dtype: DType::I32 }, &[x], &[t(DType::I32, &[3])]);
    eqn(&mut f, Prim::BitcastConvertType { dtype: DType::U32 }, &[x], &[u3.clone()]);
    let iota = Prim::Iota { dtype: DType::I32, shape: Shape::new(&[2, 3]), dimension: 1 };
    eqn(&mut f, iota, &[], &[t(DType::I32, &[2, 3])]);
    let bcast = Prim::BroadcastInDim { shape: Shape::new(&[3, 3]), broadcast_dimensions: vec![1] };
    eqn(&mut f, bcast, &[x], &[t(F32, &[3, 3])]);
    let bcast0 = Prim::BroadcastInDim { shape: Shape::new(&[3]), broadcast_dimensions: vec![] };
    eqn(&mut f, bcast0, &[s], &[f3.clone()]);
    eqn(&mut f, Prim::Reshape { new_sizes: Shape::new(&[4]) }, &[r4], &[t(F32, &[4])]);
    eqn(&mut f, Prim::Reshape { new_sizes: Shape::scalar() }, &[s], &[fs.clone()]);
    eqn(&mut f, Prim::Transpose { permutation: vec![1, 0] }, &[m], &[t(DType::F64, &[2, 2])]);
    eqn(&mut f, Prim::Transpose { permutation: vec![3, 2, 1, 0] }, &[r4], &[t(F32, &[2, 1, 2, 1])]);
    eqn(&mut f, Prim::Rev { dimensions: vec![0] }, &[x], &[f3.clone()]);
    let slice = Prim::Slice { start: vec![1], limit: vec![3], strides: vec![1] };
    let sl = eqn(&mut f, slice, &[x], &[t(F32, &[2])])[0];
    eqn(&mut f, Prim::DynamicSlice { slice_sizes: vec![2] }, &[x, i], &[t(F32, &[2])]);
    eqn(&mut f, Prim::DynamicUpdateSlice, &[x, sl, i], &[f3.clone()]);
    eqn(&mut f, Prim::Concatenate { dimension: 0 }, &[x, y, e], &[t(F32, &[6])]);
    let pad = Prim::Pad { low: vec![-1], high: vec![2], interior: vec![1] };
    eqn(&mut f, pad, &[x, s], &[t(F32, &[6])]);
    for op in ReduceOp::ALL {
        eqn(&mut f, Prim::Reduce { op, axes: vec![0] }, &[x], &[fs.clone()]);
        eqn(&mut f, Prim::Reduce { op, axes: vec![1, 0] }, &[m], &[t(DType::F64, &[])]);
    }
    for (op, index_dtype) in ArgOp::ALL.into_iter().zip([DType::I32, DType::U32]) {
        eqn(&mut f, Prim::ArgReduce { op, axis: 0, index_dtype }, &[x], &[t(index_dtype, &[])]);
    }
    for (k, op) in CumulativeOp::ALL.into_iter().enumerate() {
        eqn(&mut f, Prim::Cumulative { op, axis: 0, reverse: k % 2 == 0 }, &[x], &[f3.clone()]);
    }
    eqn(&mut f, Prim::Sort { dimension: 0, num_keys: 1 }, &[x, y], &[f3.clone(), f3.clone()]);
    let dot = |preferred_element_type| Prim::DotGeneral {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        lhs_batch: vec![],
        rhs_batch: vec![],
        preferred_element_type,
    };
    eqn(&mut f, dot(None), &[m, m], &[t(DType::F64, &[2, 2])]);
    eqn(&mut f, dot(Some(DType::F32)), &[m, m], &[t(F32, &[2, 2])]);
    for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
        let g = eqn(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[x, idx], &[t(F32, &[2])])[0];
        for op in ScatterOp::ALL {
            eqn(&mut f, Prim::Scatter { op, axis: 0, batch_dims: 0, mode }, &[x, idx, g], &[f3.clone()]);
        }
    }
    eqn(&mut f, Prim::SegmentSum { num_segments: 4 }, &[x, ids], &[t(F32, &[4])]);
    eqn(&mut f, Prim::Threefry2x32, &[u, u, u, u], &[u3.clone(), u3.clone()]);
    eqn_at(&mut f, Prim::StopGradient, &[x], &[f3.clone()], loc("src/main.rs", 12, 9));

    // Control flow and calls, with sub-functions that have their own constants, locations and
    // nested sub-functions.
    let jvp = {
        let mut g = Function::new();
        let a = g.add_param(f3.clone());
        let da = g.add_param(f3.clone());
        let b = eqn(&mut g, Prim::Unary(UnaryOp::Sin), &[a], &[f3.clone()])[0];
        let c = eqn(&mut g, Prim::Unary(UnaryOp::Cos), &[a], &[f3.clone()])[0];
        let db = eqn(&mut g, Prim::Binary(BinaryOp::Mul), &[c, da], &[f3.clone()])[0];
        g.outputs.extend([b, db]);
        g
    };
    let jvp_call =
        Prim::CustomJvpCall { fun: Box::new(unary_fn(UnaryOp::Sin, f3.clone())), jvp: Box::new(jvp) };
    eqn(&mut f, jvp_call, &[x], &[f3.clone()]);
    let vjp_call = Prim::CustomVjpCall {
        fun: Box::new(unary_fn(UnaryOp::Exp, f3.clone())),
        fwd: Box::new(unary_fn(UnaryOp::Exp, f3.clone())),
        bwd: Box::new(binary_fn(BinaryOp::Mul)),
    };
    eqn(&mut f, vjp_call, &[x], &[f3.clone()]);
    let branches = vec![binary_fn(BinaryOp::Add), binary_fn(BinaryOp::Sub), binary_fn(BinaryOp::Max)];
    let cond = Prim::Cond { branches };
    // A scan whose body holds a cond (two levels of nesting).
    let body = {
        let mut g = Function::new();
        let k = g.add_param(t(DType::I32, &[]));
        let c = g.add_param(fs.clone());
        let xs = g.add_param(fs.clone());
        let outs = eqn(&mut g, cond.clone(), &[k, c, xs], &[fs.clone(), fs.clone()]);
        g.outputs.extend(outs);
        g
    };
    let scan = Prim::Scan { length: 3, reverse: true, num_consts: 1, num_carry: 1, body: Box::new(body) };
    eqn(&mut f, scan, &[i, s, x], &[fs.clone(), f3.clone()]);
    eqn(&mut f, cond, &[i, s, s], &[fs.clone(), fs.clone()]);
    let while_cond = {
        let mut g = Function::new();
        let a = g.add_param(fs.clone());
        let b = g.add_param(fs.clone());
        let c = eqn(&mut g, Prim::Compare(CompareOp::Lt), &[a, b], &[t(DType::Bool, &[])])[0];
        g.outputs.push(c);
        g
    };
    for max_iters in [None, Some(10), Some(u64::MAX)] {
        let w = Prim::WhileLoop {
            cond: Box::new(while_cond.clone()),
            body: Box::new(unary_fn(UnaryOp::Exp, fs.clone())),
            cond_consts: 1,
            body_consts: 0,
            max_iters,
        };
        eqn(&mut f, w, &[s, s], &[fs.clone()]);
    }
    eqn(&mut f, Prim::Call { body: Box::new(unary_fn(UnaryOp::Neg, f3.clone())) }, &[x], &[f3.clone()]);
    let ckpt = Prim::Checkpoint { body: Box::new(unary_fn(UnaryOp::Tanh, f3.clone())) };
    let weird = "dir with space/a \"quoted\" \\ name\tü.rs";
    let last = eqn_at(&mut f, ckpt, &[x], &[f3.clone()], loc(weird, 4_000_000_000, 1))[0];
    // No outputs; a function without parameters or outputs.
    eqn(&mut f, Prim::Call { body: Box::new(Function::new()) }, &[], &[]);
    f.outputs.extend([last, x, last]);
    f
}

#[test]
fn every_primitive_variant_is_sampled() {
    let f = all_prims();
    let mut seen = BTreeSet::new();
    fn walk(f: &Function, seen: &mut BTreeSet<&'static str>) {
        for e in &f.eqns {
            seen.insert(variant(&e.prim));
            for g in e.prim.subfunctions() {
                walk(g, seen);
            }
        }
    }
    walk(&f, &mut seen);
    assert_eq!(seen.len(), NUM_VARIANTS, "sampled: {seen:?}");
}

#[test]
fn every_primitive_round_trips() {
    let f = all_prims();
    let text = f.to_string();
    let g = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(g, f);
    assert_eq!(g.to_string(), text);
    // Every family op's name is printed.
    for name in UnaryOp::ALL.map(UnaryOp::name).into_iter().chain(BinaryOp::ALL.map(BinaryOp::name)) {
        assert!(text.contains(&format!(" = {name} ")), "{name}");
    }
    // The alternate form and the out-of-line form agree here (no large constants).
    assert_eq!(format!("{f:#}"), text);
    let (text2, table) = f.to_text_with_consts();
    assert_eq!((text2, table.len()), (text, 0));
}

#[test]
fn constants_print_bitwise() {
    let f = all_prims();
    let text = f.to_string();
    for expected in [
        "l:f32[] = 0.1, m:f32[] = -0.0, ",
        "n:f32[12] = [nan, inf, -inf, -0.0, f32bits(0x7fc00001), f32bits(0xffc00000), 1e-45, 3.4028235e38, 0.1, 1e-7, 1e20, -3.25], ",
        "o:f64[4] = [0.1, f64bits(0x7ff8000000000001), 1e300, 5e-324], ",
        "p:i32[2,2] = [-2147483648, -1, 0, 2147483647], q:u32[2] = [0, 4294967295], r:bool[2] = [true, false], ",
        "s:bool[] = true, t:i32[] = -7, u:u32[] = 7, v:f64[] = nan, w:f32[0] = [], x:f32[1,2,1,2] = [1.0, 2.0, 3.0, 4.0], ",
        "y:f32[16] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0] . let",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
}

#[test]
fn prints_expected_text() {
    let mut f = Function::new();
    let a = f.add_param(t(F32, &[3]));
    let b = f.add_param(t(F32, &[]));
    let c = f.add_const(Array::scalar(0.5f32));
    let bcast = Prim::BroadcastInDim { shape: Shape::new(&[3]), broadcast_dimensions: vec![] };
    let d = eqn_at(&mut f, bcast, &[c], &[t(F32, &[3])], loc("src/main.rs", 12, 9))[0];
    let e = eqn(&mut f, Prim::Binary(BinaryOp::Mul), &[a, d], &[t(F32, &[3])])[0];
    let cs = eqn(
        &mut f,
        Prim::Cumulative { op: CumulativeOp::Sum, axis: 0, reverse: true },
        &[e],
        &[t(F32, &[3])],
    );
    let body = {
        let mut g = Function::new();
        let x = g.add_param(t(F32, &[]));
        let y = g.add_param(t(F32, &[]));
        let z = eqn(&mut g, Prim::Binary(BinaryOp::Add), &[x, y], &[t(F32, &[])])[0];
        g.outputs.extend([z, z]);
        g
    };
    let scan = Prim::Scan { length: 3, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(body) };
    let h = eqn(&mut f, scan, &[b, cs[0]], &[t(F32, &[]), t(F32, &[3])])[1];
    let call = Prim::Call { body: Box::new(unary_fn(UnaryOp::Neg, t(F32, &[]))) };
    eqn(&mut f, call, &[b], &[t(F32, &[])]);
    let w = Prim::WhileLoop {
        cond: Box::new(Function::new()),
        body: Box::new(Function::new()),
        cond_consts: 0,
        body_consts: 0,
        max_iters: Some(7),
    };
    eqn(&mut f, w, &[], &[]);
    let pad = Prim::Pad { low: vec![-1, 0], high: vec![2, 0], interior: vec![0, 1] };
    eqn(&mut f, pad, &[a, b], &[t(F32, &[4, 0])]);
    f.outputs.extend([e, h]);
    let expected = r#"{ lambda a:f32[3] b:f32[] ; c:f32[] = 0.5 . let
    d:f32[3] = broadcast_in_dim[shape=(3,) broadcast_dimensions=()] c  @"src/main.rs":12:9
    e:f32[3] = mul a d
    f:f32[3] = cumsum[axis=0 reverse=true] e
    g:f32[] h:f32[3] = scan[length=3 reverse=false num_consts=0 num_carry=1 body={ lambda a:f32[] b:f32[] . let
        c:f32[] = add a b
      in (c, c) }] b f
    i:f32[] = call[body={ lambda a:f32[] . let
        b:f32[] = neg a
      in (b,) }] b
    () = while_loop[cond_consts=0 body_consts=0 max_iters=7 cond={ lambda . let in () } body={ lambda . let in () }]
    j:f32[4,0] = pad[low=(-1, 0) high=(2, 0) interior=(0, 1)] a b
  in (e, h) }"#;
    assert_eq!(f.to_string(), expected);
    assert_eq!(parse(expected), Ok(f));
}

#[test]
fn cond_branches_print_as_a_list() {
    let mut f = Function::new();
    let i = f.add_param(t(DType::I32, &[]));
    let x = f.add_param(t(F32, &[]));
    let cond = Prim::Cond {
        branches: vec![unary_fn(UnaryOp::Neg, t(F32, &[])), unary_fn(UnaryOp::Exp, t(F32, &[]))],
    };
    let y = eqn(&mut f, cond, &[i, x], &[t(F32, &[])])[0];
    f.outputs.push(y);
    let expected = "{ lambda a:i32[] b:f32[] . let
    c:f32[] = cond[branches=[{ lambda a:f32[] . let
        b:f32[] = neg a
      in (b,) }, { lambda a:f32[] . let
        b:f32[] = exp a
      in (b,) }]] a b
  in (c,) }";
    assert_eq!(f.to_string(), expected);
    assert_eq!(parse(expected), Ok(f));
}

#[test]
fn large_constants_go_out_of_line() {
    // 17 elements: one more than the inline limit. The same variable name `b` in the body must get
    // a distinct table name.
    let big: Arc<Array> = Arc::new(Array::from_vec(&[17], (0..17).map(|k| k as f32 * 0.5).collect()));
    let mut body = Function::new();
    let x = body.add_param(t(F32, &[17]));
    let c = body.add_const(big.clone());
    let y = eqn(&mut body, Prim::Binary(BinaryOp::Add), &[x, c], &[t(F32, &[17])])[0];
    body.outputs.push(y);
    let mut f = Function::new();
    let a = f.add_param(t(F32, &[17]));
    f.add_const(big.clone());
    let z = eqn(&mut f, Prim::Call { body: Box::new(body) }, &[a], &[t(F32, &[17])])[0];
    f.outputs.push(z);

    let (text, table) = f.to_text_with_consts();
    assert_eq!(
        text,
        "{ lambda a:f32[17] ; b:f32[17] = @b . let
    c:f32[17] = call[body={ lambda a:f32[17] ; b:f32[17] = @b_2 . let
        c:f32[17] = add a b
      in (c,) }] a
  in (c,) }"
    );
    let names: Vec<&str> = table.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["b", "b_2"]);
    assert!(table.iter().all(|(_, v)| **v == *big));
    assert_eq!(Function::parse_with_consts(&text, &table), Ok(f.clone()));
    // Display prints the same names; plain parse cannot resolve them.
    assert_eq!(f.to_string(), text);
    let err = parse(&text).unwrap_err();
    assert_eq!((err.line, err.column, err.message.as_str()), (1, 34, "unknown constant `@b`"));
    // The alternate form inlines everything and round-trips with plain parse.
    let full = format!("{f:#}");
    assert!(full.contains("b:f32[17] = [0.0, 0.5, 1.0, "), "{full}");
    assert_eq!(parse(&full), Ok(f.clone()));
    // A table entry of the wrong type is an error.
    let wrong = vec![("b".to_string(), Arc::new(Array::scalar(1.0f32))), table[1].clone()];
    let err = Function::parse_with_consts(&text, &wrong).unwrap_err();
    assert_eq!(err.to_string(), "1:34: constant `@b` has type f32[], not f32[17]");
}

#[test]
fn names_follow_jax_and_skip_keywords() {
    // 223 parameters: `a`..`z` (0..25), `ba` (26) ... `im` (220); `in` (221) is a keyword, so the
    // 222nd and 223rd parameters are `io` and `ip`.
    let mut f = Function::new();
    let ps: Vec<Var> = (0..223).map(|_| f.add_param(t(F32, &[]))).collect();
    f.outputs = vec![ps[25], ps[26], ps[27], ps[220], ps[221], ps[222]];
    let text = f.to_string();
    assert!(text.ends_with(". let in (z, ba, bb, im, io, ip) }"), "{text}");
    assert!(!text.contains(" in:"));
    assert_eq!(parse(&text), Ok(f));
}

#[test]
fn canonicalize_renumbers_in_printing_order() {
    // Ids out of definition order, with an unused slot (v1) and an equation output allocated first.
    let mut f = Function::new();
    let out = f.new_var(t(F32, &[2])); // v0: defined by the equation
    let _unused = f.new_var(t(DType::Bool, &[])); // v1: never referenced
    let c = f.new_var(t(F32, &[2])); // v2: constant
    let x = f.new_var(t(F32, &[2])); // v3: parameter
    f.params.push(x);
    f.consts.push(kiln_ir::ConstDef { var: c, value: Arc::new(Array::from_vec(&[2], vec![1.0f32, -2.0])) });
    f.eqns.push(Eqn {
        prim: Prim::Binary(BinaryOp::Add),
        inputs: SmallVec::from_slice(&[x, c]),
        outputs: SmallVec::from_slice(&[out]),
        loc: None,
    });
    f.outputs.push(out);
    let g = f.canonicalize();
    // Parameter, constant, output: v0, v1, v2; the unused bool slot is gone.
    assert_eq!(g.vars, vec![t(F32, &[2]); 3]);
    assert_eq!((g.params.clone(), g.consts[0].var, g.eqns[0].outputs[0]), (vec![Var(0)], Var(1), Var(2)));
    assert_eq!(g.eqns[0].inputs.as_slice(), &[Var(0), Var(1)]);
    assert_ne!(g, f);
    assert_eq!(g.canonicalize(), g);
    assert_eq!(parse(&f.to_string()), Ok(g));
    // Already canonical functions are unchanged.
    assert_eq!(all_prims().canonicalize(), all_prims());
}

#[test]
fn parser_is_lenient_about_ssa() {
    // `c` is used before its definition and `b` is defined twice (the first type wins).
    let src = "{ lambda a:f32[] . let
        b:f32[] = neg c
        c:f32[] = exp a
        b:f32[3] = sin a
      in (b,) }";
    let f = parse(src).unwrap();
    assert_eq!(f.vars, vec![t(F32, &[]); 3]);
    assert_eq!(f.eqns[0].inputs.as_slice(), &[Var(2)]);
    assert_eq!(f.eqns[0].outputs.as_slice(), &[Var(1)]);
    assert_eq!(f.eqns[2].outputs.as_slice(), &[Var(1)]);
    // Comments, hand-written names, params in any order, commas, bare prims and `prim[]`.
    let src = "# a comment
{ lambda u:f32[4] ; dt:f32[] = 1, # trailing comma
  . let
    s:f32[4] = cumsum[reverse=false, axis=0] u # params in any order
    r:f32[4] = stop_gradient[] s
  in (r, u,) }";
    let f = parse(src).unwrap();
    assert_eq!(f.consts[0].value.to_vec::<f32>(), Some(vec![1.0]));
    assert_eq!(f.eqns[0].prim, Prim::Cumulative { op: CumulativeOp::Sum, axis: 0, reverse: false });
    assert_eq!(f.outputs, vec![Var(3), Var(0)]);
}

/// Asserts that `src` fails at `line:col` with `message`.
#[track_caller]
fn parse_err(src: &str, line: usize, column: usize, message: &str) {
    let err = parse(src).unwrap_err();
    assert_eq!((err.line, err.column, err.message.as_str()), (line, column, message), "{src}");
}

#[test]
fn malformed_inputs_report_line_and_column() {
    // Columns hand-counted: "    b:f32[] = " is 14 characters, so the primitive starts at 15.
    parse_err(
        "{ lambda a:f32[] . let\n    b:f32[] = mull a a\n  in (b,) }",
        2,
        15,
        "unknown primitive `mull`",
    );
    // "    b:f32[] = mul a " is 20 characters.
    parse_err("{ lambda a:f32[] . let\n    b:f32[] = mul a q\n  in (b,) }", 2, 21, "undefined variable `q`");
    parse_err("{ lambda a:f32[] . let in (a, zz) }", 1, 31, "undefined variable `zz`");
    parse_err("{ lambda a:f33[] . let in (a,) }", 1, 12, "unknown dtype `f33`");
    parse_err("{ lambda ; c:f32[] = 1.2.3 . let in (c,) }", 1, 22, "malformed number `1.2.3`");
    parse_err(
        "{ lambda ; c:i32[] = 2147483648 . let in (c,) }",
        1,
        22,
        "integer `2147483648` out of range for i32",
    );
    parse_err("{ lambda ; c:u32[] = -1 . let in (c,) }", 1, 23, "integer `-1` out of range for u32");
    parse_err("{ lambda ; c:f32[3] = [1.0, 2.0] . let in (c,) }", 1, 23, "2 elements given for type f32[3]");
    parse_err(
        "{ lambda ; c:f32[] = f64bits(0x0) . let in (c,) }",
        1,
        22,
        "expected a f32 number, found `f64bits`",
    );
    parse_err("{ lambda ; c:bool[] = 1 . let in (c,) }", 1, 23, "expected `true` or `false`, found `1`");
    // Unbalanced braces: the missing `}` is reported at the end of input (30 characters + 1).
    parse_err("{ lambda a:f32[] . let in (a,)", 1, 31, "expected `}`, found end of input");
    parse_err("{ lambda a:f32[] . let in (a,) } }", 1, 34, "unexpected `}` after the function");
    parse_err(
        "{ lambda a:f32[] . let\n  b:f32[] = call[body={ lambda . let in () ] a\n in (b,) }",
        2,
        44,
        "expected `}`, found `]`",
    );
    // Parameters: missing (at the primitive), unknown (at the key), ill-typed (at the value).
    let eq = |p: &str| format!("{{ lambda a:f32[3] . let\n  b:f32[3] = {p} a\n in (b,) }}");
    parse_err(&eq("cumsum[axis=0]"), 2, 14, "missing parameter `reverse` of `cumsum`");
    parse_err(&eq("cumsum[axis=0 reverse=false foo=1]"), 2, 42, "unknown parameter `foo` of `cumsum`");
    parse_err(
        &eq("cumsum[axis=0 reverse=maybe]"),
        2,
        36,
        "parameter `reverse` of `cumsum` must be `true` or `false`",
    );
    parse_err(&eq("cumsum[axis=0 axis=1 reverse=true]"), 2, 28, "duplicate parameter `axis`");
    parse_err(
        &eq("reduce_max[axes=(0, -1)]"),
        2,
        34,
        "parameter `axes` of `reduce_max` must be a tuple of integers",
    );
    parse_err(
        &eq("gather[axis=0 batch_dims=0 mode=wrap]"),
        2,
        46,
        "parameter `mode` of `gather` must be `clip` or `fill`",
    );
    parse_err(&eq("neg[x=1]"), 2, 18, "unknown parameter `x` of `neg`");
    // Lexical errors and locations.
    parse_err(
        "{ lambda a:f32[] . let\n  b:f32[] = neg a  @\"unterminated\n in (b,) }",
        2,
        21,
        "unterminated string",
    );
    parse_err("{ lambda a:f32[] % . let in (a,) }", 1, 18, "unexpected character `%`");
    parse_err(
        "{ lambda a:f32[] . let\n  b:f32[] = neg a @x.rs:1:2\n in (b,) }",
        2,
        20,
        "expected a location `\"file\":line:col`, found `x`",
    );
    parse_err("{ lambda a:f32[] . let\n  } in (a,) }", 2, 3, "expected an equation or `in`, found `}`");
    parse_err("{ lambda in:f32[] . let in (in,) }", 1, 10, "expected `.`, found `in`");
    parse_err("", 1, 1, "expected `{`, found end of input");
    // Too deep nesting is an error, not a stack overflow.
    let deep = format!("{{ lambda a:f32[] . let\n b:f32[] = call[body={}] a in (b,) }}", "(".repeat(1000));
    parse_err(&deep, 2, 85, "nesting too deep");
}

#[test]
fn a_constant_rebinding_a_parameter_name_prints_and_parses_back() {
    // Found by `mutated_printed_functions_never_panic`: the lenient parse binds the constant to the
    // parameter `a` (first type f32[3]); printing the constant with that type gave `a:f32[3] = 7`,
    // which does not parse. It prints with the value's own type.
    let f = parse("{ lambda a:f32[3] ; a:u32[] = 7 . let in (a,) }").unwrap();
    assert_eq!(f.consts[0].value.to_vec::<u32>(), Some(vec![7]));
    assert_eq!(f.to_string(), "{ lambda a:f32[3] ; a:u32[] = 7 . let in (a,) }");
    assert_eq!(parse(&f.to_string()), Ok(f.canonicalize()));
}

proptest! {
    // A fixed seed: the suite is deterministic (a failure found by another seed becomes a test).
    #![proptest_config(ProptestConfig {
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_6c6e),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_text_never_panics(s in "\\PC{0,200}") {
        let _ = parse(&s);
    }

    #[test]
    fn random_grammar_soup_never_panics(s in "[{}\\[\\]():;=.,@#\"a-f0-9x \n-]{0,200}|(lambda|let|in|f32|\\[|\\]|\\{|\\}|\\(|\\)|=|:|;|\\.|,|@|-|a|b|0|1\\.5|nan|\"f\"| )*") {
        let _ = parse(&s);
    }

    #[test]
    fn mutated_printed_functions_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, "[{}\\[\\]():;=.,@#\"a-z0-9 \n-]"), 1..4)
    ) {
        let mut chars: Vec<char> = all_prims().to_string().chars().collect();
        for (at, kind, c) in edits {
            let i = at.index(chars.len());
            match kind {
                0 => { chars.remove(i); }
                1 => chars.insert(i, c.chars().next().unwrap()),
                _ => chars[i] = c.chars().next().unwrap(),
            }
        }
        let s: String = chars.into_iter().collect();
        if let Ok(f) = parse(&s) {
            // Whatever parses prints and parses back to itself.
            prop_assert_eq!(parse(&f.to_string()), Ok(f.canonicalize()));
        }
    }
}
