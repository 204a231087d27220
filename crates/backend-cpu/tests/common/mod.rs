//! Tolerances shared by the JIT-vs-interpreter tests, and where they come from (and the plan
//! listing helper, [`plan_text`]).
//!
//! - Transcendentals: the JIT computes `exp expm1 log log1p sin cos tanh logistic` with the vmath tile
//!   functions (on the scalar path too), the interpreter with std/libm. `src/vmath/mod.rs` documents
//!   the measured distance from glibc: at most 1 ulp (exp, expm1, log, log1p, sin, cos) and 2 ulp
//!   (tanh, logistic) in f64. In f32 vmath is within 1.48 ulp of the exact value (exp 1.0, expm1
//!   1.44, log and log1p 0.84, tanh 0.85, logistic 1.48, sin and cos 0.5, over every f32); glibc's
//!   f32 exp, log, log1p, sin and cos are within ~0.5 ulp, so those differ by at most 1 ulp, but its
//!   `expm1f` and `tanhf` are off by up to ~0.7 and ~1.5 ulp and the interpreter's f32 logistic
//!   is e/(1 + e) in f32 (~1.75 ulp): measured over every f32 on 2026-12-01, expm1 and tanh differ
//!   by at most 2 ulp and logistic by 3, which the f32 bounds below allow. NaN matches NaN; zeros
//!   and infinities are compared on the same integer line, so with a bound of 1 or more +0 and -0,
//!   and the largest finite value and infinity, count as 1 apart.
//! - Innermost-axis float sums and products: the JIT keeps several vector accumulators (see
//!   `src/codegen/vector.rs`), the interpreter folds left to right (past 256 elements it blocks
//!   exactly as the JIT's other paths do, `kiln_ir`'s `fold_run`). Either order is within
//!   `(n-1)·ε·R(|x|)` of the exact result, where `R` is the same reduction of the absolute values and
//!   ε the unit roundoff (2⁻²⁴ for f32, 2⁻⁵³ for f64), so they differ by at most `2(n-1)·ε·R(|x|)`
//!   per output element. Max/min and integer reductions stay bitwise. Float sums and products over
//!   more than `BLOCK` = 256 elements are blocked-pairwise (`src/codegen/pairwise.rs`): within
//!   `(BLOCK + ⌈log₂(n/BLOCK)⌉ + 3)·ε·R(|x|)` of the exact result, far inside the bound above, which
//!   therefore still covers JIT vs interpreter; `tests/segments.rs` checks a 10⁶-element f32 sum
//!   against its f64 value to 10⁻⁶ relative.
#![allow(dead_code)]

use kiln_ir::*;

/// The documented max ulp distance between the JIT's and the interpreter's `op` on `dtype` (0:
/// bitwise; see the module docs).
pub fn transcendental_ulps(op: UnaryOp, dtype: DType) -> u64 {
    let f32 = dtype == DType::F32;
    match op {
        UnaryOp::Exp | UnaryOp::Log | UnaryOp::Log1p | UnaryOp::Sin | UnaryOp::Cos => 1,
        UnaryOp::Expm1 => 1 + u64::from(f32),
        UnaryOp::Tanh => 2,
        UnaryOp::Logistic => 2 + u64::from(f32),
        UnaryOp::Neg
        | UnaryOp::Abs
        | UnaryOp::Sign
        | UnaryOp::Not
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Erf
        | UnaryOp::ErfInv
        | UnaryOp::IsFinite => 0,
    }
}

/// Distance in ulp between two floats of one dtype, on the monotone integer line (±0 are 1 apart).
pub fn ulps(a: f64, b: f64, dt: DType) -> u64 {
    fn key(bits: i64) -> i64 {
        if bits < 0 { i64::MIN - bits } else { bits }
    }
    let (ka, kb) = match dt {
        DType::F32 => (key((a as f32).to_bits() as i32 as i64), key((b as f32).to_bits() as i32 as i64)),
        _ => (key(a.to_bits() as i64), key(b.to_bits() as i64)),
    };
    ka.abs_diff(kb)
}

/// Same bits, or both NaN.
pub fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Elementwise within `max_ulps` (NaN matches NaN).
pub fn within_ulps(got: &Array, want: &Array, max_ulps: u64) -> bool {
    if got.ty() != want.ty() {
        return false;
    }
    let dt = want.dtype();
    got.to_f64_vec().iter().zip(want.to_f64_vec()).all(|(&a, b)| same(a, b) || ulps(a, b, dt) <= max_ulps)
}

/// Whether `got` is within the documented reordering tolerance of the interpreter's `want` for
/// `reduce(op, axes)` of `x` (see the module docs); bitwise for max/min and integers.
pub fn reduction_close(got: &Array, want: &Array, x: &Array, op: ReduceOp, axes: &[usize]) -> bool {
    if got.bitwise_eq(want) {
        return true;
    }
    let dt = want.dtype();
    if got.ty() != want.ty() || !dt.is_float() || matches!(op, ReduceOp::Max | ReduceOp::Min) {
        return false;
    }
    let n: usize = axes.iter().map(|&a| x.shape().dims()[a]).product();
    let abs = eval_prim(&Prim::Unary(UnaryOp::Abs), &[x]).unwrap().remove(0);
    let magnitude = eval_prim(&Prim::Reduce { op, axes: axes.to_vec() }, &[&abs]).unwrap().remove(0);
    let eps = if dt == DType::F32 { 2f64.powi(-24) } else { 2f64.powi(-53) };
    let (g, w, m) = (got.to_f64_vec(), want.to_f64_vec(), magnitude.to_f64_vec());
    g.iter().zip(&w).zip(&m).all(|((&a, &b), &r)| {
        let bound = 2.0 * (n.saturating_sub(1)) as f64 * eps * r;
        same(a, b) || (a.is_finite() && b.is_finite() && (a - b).abs() <= bound)
    })
}

/// The interpreter, except that `exp expm1 log log1p sin cos tanh logistic` on floats are computed
/// with the vmath tile functions, as JIT code computes them (scan bodies included; the other nested
/// primitives go to the interpreter whole). A reference for whole programs: composing a function
/// with its 1-ulp differences through ill-conditioned ops (rem, floor, pow, chains of exp) amplifies
/// them without bound, so a per-element ulp tolerance against the plain interpreter cannot hold
/// there; this reference isolates the code generator from the choice of libm.
pub fn eval_vmath(f: &Function, args: &[Array]) -> Vec<Array> {
    eval_vmath_bound(f, args).0
}

/// [`eval_vmath`], plus the largest finite reassociation bound `2(n-1)·ε·R(|x|)` (see the module
/// docs) over the elements of every float sum or product whose axes include the innermost one
/// (0 when there is none): how far such a result of the JIT may be from this reference.
pub fn eval_vmath_bound(f: &Function, args: &[Array]) -> (Vec<Array>, f64) {
    use kiln_backend_cpu::vmath::{Func, table};
    let mut bound = 0f64;
    let mut env: Vec<Option<Array>> = vec![None; f.vars.len()];
    for (p, a) in f.params.iter().zip(args) {
        env[p.index()] = Some(a.clone());
    }
    for c in &f.consts {
        env[c.var.index()] = Some((*c.value).clone());
    }
    let func = |op: UnaryOp| match op {
        UnaryOp::Exp => Some(Func::Exp),
        UnaryOp::Expm1 => Some(Func::Expm1),
        UnaryOp::Log => Some(Func::Log),
        UnaryOp::Log1p => Some(Func::Log1p),
        UnaryOp::Sin => Some(Func::Sin),
        UnaryOp::Cos => Some(Func::Cos),
        UnaryOp::Tanh => Some(Func::Tanh),
        UnaryOp::Logistic => Some(Func::Logistic),
        _ => None,
    };
    for e in &f.eqns {
        let ins: Vec<&Array> = e.inputs.iter().map(|v| env[v.index()].as_ref().expect("defined")).collect();
        let outs = match (&e.prim, ins.first()) {
            (Prim::Unary(op), Some(Array::F32(x))) if func(*op).is_some() => {
                let src: Vec<f32> = x.iter().copied().collect();
                let mut dst = vec![0.0; src.len()];
                table().map_f32(func(*op).unwrap(), &src, &mut dst);
                vec![Array::from_vec(x.shape(), dst)]
            }
            (Prim::Unary(op), Some(Array::F64(x))) if func(*op).is_some() => {
                let src: Vec<f64> = x.iter().copied().collect();
                let mut dst = vec![0.0; src.len()];
                table().map_f64(func(*op).unwrap(), &src, &mut dst);
                vec![Array::from_vec(x.shape(), dst)]
            }
            (Prim::Scan { length, reverse, num_consts, num_carry, body }, _) => {
                let (outs, b) = scan(body, *length, *reverse, *num_consts, *num_carry, &ins);
                bound = bound.max(b);
                outs
            }
            (Prim::Reduce { op: op @ (ReduceOp::Sum | ReduceOp::Prod), axes }, Some(x))
                if x.dtype().is_float() && axes.contains(&(x.shape().dims().len().wrapping_sub(1))) =>
            {
                bound = bound.max(reassociation_bound(x, *op, axes));
                eval_prim(&e.prim, &ins).expect("interpreter")
            }
            _ => eval_prim(&e.prim, &ins).expect("interpreter"),
        };
        for (v, a) in e.outputs.iter().zip(outs) {
            env[v.index()] = Some(a);
        }
    }
    (f.outputs.iter().map(|v| env[v.index()].clone().expect("defined")).collect(), bound)
}

/// The largest finite `2(n-1)·ε·R(|x|)` over the outputs of `reduce(op, axes)` of `x`.
fn reassociation_bound(x: &Array, op: ReduceOp, axes: &[usize]) -> f64 {
    let n: usize = axes.iter().map(|&a| x.shape().dims()[a]).product();
    let abs = eval_prim(&Prim::Unary(UnaryOp::Abs), &[x]).unwrap().remove(0);
    let r = eval_prim(&Prim::Reduce { op, axes: axes.to_vec() }, &[&abs]).unwrap().remove(0);
    let eps = if x.dtype() == DType::F32 { 2f64.powi(-24) } else { 2f64.powi(-53) };
    let k = 2.0 * n.saturating_sub(1) as f64 * eps;
    r.to_f64_vec().iter().map(|m| k * m).filter(|b| b.is_finite()).fold(0.0, f64::max)
}

/// `scan` as the interpreter runs it, with the body through [`eval_vmath`].
fn scan(
    body: &Function,
    length: usize,
    reverse: bool,
    nc: usize,
    ncarry: usize,
    args: &[&Array],
) -> (Vec<Array>, f64) {
    let mut bound = 0f64;
    let (consts, rest) = args.split_at(nc);
    let (init, xs) = rest.split_at(ncarry);
    let mut carry: Vec<Array> = init.iter().map(|a| (*a).clone()).collect();
    let out_types = body.output_types();
    let mut ys: Vec<Vec<Option<Array>>> = vec![vec![None; length]; out_types.len() - ncarry];
    for step in 0..length {
        let t = if reverse { length - 1 - step } else { step };
        let x_t: Vec<Array> = xs.iter().map(|x| row(x, t)).collect();
        let step_args: Vec<Array> =
            consts.iter().map(|a| (*a).clone()).chain(carry.clone()).chain(x_t).collect();
        let (mut outs, b) = eval_vmath_bound(body, &step_args);
        bound = bound.max(b);
        let y_t = outs.split_off(ncarry);
        carry = outs;
        for (y, v) in ys.iter_mut().zip(y_t) {
            y[t] = Some(v);
        }
    }
    let stacked = ys.into_iter().zip(&out_types[ncarry..]).map(|(rows, ty)| {
        let dims = [&[length], ty.shape.dims()].concat();
        if length == 0 {
            return Array::zeros(&TensorType::new(ty.dtype, dims));
        }
        let one = [&[1], ty.shape.dims()].concat();
        let parts: Vec<Array> = rows
            .into_iter()
            .map(|r| {
                let r = r.expect("every step ran");
                eval_prim(&Prim::Reshape { new_sizes: Shape::new(&one) }, &[&r]).unwrap().remove(0)
            })
            .collect();
        eval_prim(&Prim::Concatenate { dimension: 0 }, &parts.iter().collect::<Vec<_>>()).unwrap().remove(0)
    });
    (carry.into_iter().chain(stacked).collect(), bound)
}

/// Row `t` of `x` along axis 0.
fn row(x: &Array, t: usize) -> Array {
    let d = x.shape().dims().to_vec();
    let mut start = vec![0; d.len()];
    start[0] = t;
    let mut limit = d.clone();
    limit[0] = t + 1;
    let s = eval_prim(&Prim::Slice { start, limit, strides: vec![1; d.len()] }, &[x]).unwrap().remove(0);
    eval_prim(&Prim::Reshape { new_sizes: Shape::new(&d[1..]) }, &[&s]).unwrap().remove(0)
}

/// The plan listing of `f` compiled with `o` (the `plan.txt` of its `KILN_DUMP`-style dump).
pub fn plan_text(f: &Function, o: &kiln_backend_cpu::CompileOptions) -> String {
    let dir = tempfile::tempdir().unwrap();
    let o = kiln_backend_cpu::CompileOptions { dump_dir: Some(dir.path().to_path_buf()), ..o.clone() };
    kiln_backend_cpu::compile_with(f, &o).unwrap();
    let folder = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    std::fs::read_to_string(folder.join("plan.txt")).unwrap()
}
