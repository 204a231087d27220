//! Finite differences in f64 for the JVP and the VJP of every primitive (issue 3, "Checked by").
//!
//! One table-driven test: [`rows`] is an exhaustive `match` over [`Prim`] (and over every op enum),
//! so a new primitive does not compile until it has rows here. For each row, at several random points
//! (a seeded xorshift) and shapes of rank 0..3:
//! * the Jacobian `J` is built by central differences (`h = 1e-6`) of the eagerly evaluated function;
//! * `kiln::jvp` at random tangents must give `J·t`, and `kiln::vjp` at random cotangents `J^T·ct`
//!   (relative tolerance ~1e-6);
//! * non-differentiable primitives (comparisons, iota, arg-reductions, bit ops, threefry, conversions
//!   to or from integers, stop_gradient) get rows asserting that their tangents and cotangents are
//!   symbolic zeros (`None`) or all zero.
//!
//! Points avoid kinks (ties for max/min/sort, 0 for abs, integer boundaries for floor/round/rem).

use kiln::ir::{
    ArgOp, BinaryOp, CompareOp, CumulativeOp, DType, Function, IndexMode, Prim, ReduceOp, ScatterOp, Shape,
    UnaryOp,
};
use kiln::transform::ad::{jvp_replay, vjp_replay};
use kiln::{ScanOptions, Tensor, lax};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

// ---------------------------------------------------------------------------------------------------
// Random points.

/// xorshift64*: a tiny deterministic generator (no dependencies, same numbers everywhere).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * u
    }
    fn sign(&mut self) -> f64 {
        if self.next() & 1 == 0 { 1.0 } else { -1.0 }
    }
    /// Uniform integer in `[lo, hi]`.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// Where a row's float inputs are drawn from (away from the primitive's kinks and singularities).
#[derive(Clone, Copy)]
enum Dom {
    /// `[-2, 2]`.
    Any,
    /// `[0.5, 2]`: log, sqrt, rsqrt, pow's base, prod.
    Pos,
    /// `[-0.9, 0.9]`: erf_inv.
    Unit,
    /// `±[0.3, 2]`: abs, sign, divisors.
    AwayZero,
    /// An integer in `[-3, 3]` plus a fraction in `[0.1, 0.4] ∪ [0.6, 0.9]`: floor, ceil, round.
    Frac,
}

fn sample(rng: &mut Rng, dom: Dom) -> f64 {
    match dom {
        Dom::Any => rng.uniform(-2.0, 2.0),
        Dom::Pos => rng.uniform(0.5, 2.0),
        Dom::Unit => rng.uniform(-0.9, 0.9),
        Dom::AwayZero => rng.sign() * rng.uniform(0.3, 2.0),
        Dom::Frac => {
            let f = rng.uniform(0.1, 0.4);
            rng.int(-3, 3) as f64 + if rng.next() & 1 == 0 { f } else { 1.0 - f }
        }
    }
}

fn size(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// An f64 tensor of `shape` drawn from `dom`.
fn rand(rng: &mut Rng, dom: Dom, shape: &[usize]) -> Tensor {
    let v = (0..size(shape)).map(|_| sample(rng, dom)).collect();
    Tensor::from_vec(shape, v)
}

/// Distinct values (no ties) of `shape`, a random permutation of `0.3 * (k + 1) + noise`.
fn distinct(rng: &mut Rng, shape: &[usize]) -> Tensor {
    let n = size(shape);
    let mut v: Vec<f64> =
        (0..n).map(|k| 0.3 * (k as f64 + 1.0) + rng.uniform(0.0, 0.1) - 0.3 * n as f64 / 2.0).collect();
    for i in (1..n).rev() {
        let j = rng.int(0, i as i64) as usize;
        v.swap(i, j);
    }
    Tensor::from_vec(shape, v)
}

fn i32s(shape: &[usize], v: Vec<i32>) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn rand_i32(rng: &mut Rng, shape: &[usize], lo: i64, hi: i64) -> Tensor {
    i32s(shape, (0..size(shape)).map(|_| rng.int(lo, hi) as i32).collect())
}

fn rand_u32(rng: &mut Rng, shape: &[usize]) -> Tensor {
    Tensor::from_vec(shape, (0..size(shape)).map(|_| rng.next() as u32).collect::<Vec<u32>>())
}

fn rand_bool(rng: &mut Rng, shape: &[usize]) -> Tensor {
    Tensor::from_vec(shape, (0..size(shape)).map(|_| rng.next() & 1 == 0).collect::<Vec<bool>>())
}

/// The shapes every elementwise row is checked at: ranks 0 to 3.
const SHAPES: [&[usize]; 4] = [&[], &[3], &[2, 3], &[2, 1, 2]];

// ---------------------------------------------------------------------------------------------------
// Rows.

type Fun = Rc<dyn Fn(&[Tensor]) -> Vec<Tensor>>;

enum Check {
    /// JVP (if `jvp`) and VJP (if `vjp`) against finite differences.
    Fd { jvp: bool, vjp: bool },
    /// Tangents and cotangents are symbolic zeros or all zero.
    Zero,
}

struct Row {
    name: String,
    f: Fun,
    inputs: Vec<Tensor>,
    check: Check,
    /// Relative tolerance.
    tol: f64,
    /// Finite-difference step.
    h: f64,
}

fn bind_fun(p: Prim) -> Fun {
    Rc::new(move |xs: &[Tensor]| {
        let refs: Vec<&Tensor> = xs.iter().collect();
        lax::bind(p.clone(), &refs)
    })
}

fn fd(p: Prim, inputs: Vec<Tensor>) -> Row {
    // Sub-functions would make the name unreadable: the primitive's name is enough there.
    let name = if p.subfunctions().is_empty() { format!("{p:?}") } else { p.name().to_string() };
    fd_fn(&name, bind_fun(p), inputs)
}

fn fd_fn(name: &str, f: Fun, inputs: Vec<Tensor>) -> Row {
    let shapes: Vec<String> = inputs.iter().map(|t| t.ty().to_string()).collect();
    Row {
        name: format!("{name} on ({})", shapes.join(", ")),
        f,
        inputs,
        check: Check::Fd { jvp: true, vjp: true },
        tol: 1e-6,
        h: 1e-6,
    }
}

fn zero(p: Prim, inputs: Vec<Tensor>) -> Row {
    let mut r = fd(p, inputs);
    r.check = Check::Zero;
    r
}

/// A closed function traced from `f` on parameters of the given types.
fn closed(types: &[(DType, &[usize])], f: impl FnOnce(Vec<Tensor>) -> Vec<Tensor>) -> Function {
    let ps: Vec<Tensor> = types.iter().map(|(d, s)| Tensor::placeholder(*d, s)).collect();
    kiln::trace(f, &ps).expect("trace").function
}

/// The elementwise unary rows of `op`: FD on each shape, or a zero row for non-float ops.
fn unary_rows(op: UnaryOp, rng: &mut Rng) -> Vec<Row> {
    let dom = match op {
        UnaryOp::Neg
        | UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Erf => Dom::Any,
        UnaryOp::Abs | UnaryOp::Sign => Dom::AwayZero,
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::RoundEven => Dom::Frac,
        UnaryOp::Log | UnaryOp::Log1p | UnaryOp::Sqrt | UnaryOp::Rsqrt => Dom::Pos,
        UnaryOp::ErfInv => Dom::Unit,
        UnaryOp::IsFinite => {
            return SHAPES.iter().map(|s| zero(Prim::Unary(op), vec![rand(rng, Dom::Any, s)])).collect();
        }
        UnaryOp::Not => {
            return SHAPES
                .iter()
                .flat_map(|s| {
                    [
                        zero(Prim::Unary(op), vec![rand_i32(rng, s, -9, 9)]),
                        zero(Prim::Unary(op), vec![rand_bool(rng, s)]),
                    ]
                })
                .collect();
        }
    };
    SHAPES.iter().map(|s| fd(Prim::Unary(op), vec![rand(rng, dom, s)])).collect()
}

/// Operands of a binary op, away from its kinks.
fn binary_operands(op: BinaryOp, rng: &mut Rng, s: &[usize]) -> Vec<Tensor> {
    let n = size(s);
    let pair = |x: Vec<f64>, y: Vec<f64>| vec![Tensor::from_vec(s, x), Tensor::from_vec(s, y)];
    match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => vec![rand(rng, Dom::Any, s), rand(rng, Dom::Any, s)],
        BinaryOp::Div => vec![rand(rng, Dom::Any, s), rand(rng, Dom::AwayZero, s)],
        BinaryOp::Pow => vec![rand(rng, Dom::Pos, s), rand(rng, Dom::Any, s)],
        BinaryOp::Atan2 => vec![rand(rng, Dom::AwayZero, s), rand(rng, Dom::AwayZero, s)],
        BinaryOp::Rem => {
            // x = q*y with q an integer plus a fraction in (0.2, 0.8): away from the jumps of trunc(x/y).
            let y: Vec<f64> = (0..n).map(|_| sample(rng, Dom::AwayZero)).collect();
            let x =
                y.iter().map(|&y| (rng.int(-2, 2) as f64 + rng.sign() * rng.uniform(0.2, 0.8)) * y).collect();
            pair(x, y)
        }
        BinaryOp::Max | BinaryOp::Min => {
            // No ties: y = x ± [0.1, 1].
            let x: Vec<f64> = (0..n).map(|_| sample(rng, Dom::Any)).collect();
            let y = x.iter().map(|&x| x + rng.sign() * rng.uniform(0.1, 1.0)).collect();
            pair(x, y)
        }
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => {
            vec![rand_i32(rng, s, 0, 40), rand_i32(rng, s, 0, 40)]
        }
    }
}

fn binary_rows(op: BinaryOp, rng: &mut Rng) -> Vec<Row> {
    let differentiable = match op {
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Rem
        | BinaryOp::Pow
        | BinaryOp::Max
        | BinaryOp::Min
        | BinaryOp::Atan2 => true,
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => {
            false
        }
    };
    let mut rows: Vec<Row> = SHAPES
        .iter()
        .map(|s| {
            let ops = binary_operands(op, rng, s);
            if differentiable { fd(Prim::Binary(op), ops) } else { zero(Prim::Binary(op), ops) }
        })
        .collect();
    if !differentiable && matches!(op, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor) {
        rows.push(zero(Prim::Binary(op), vec![rand_bool(rng, &[4]), rand_bool(rng, &[4])]));
    }
    rows
}

fn reduce_rows(op: ReduceOp, rng: &mut Rng) -> Vec<Row> {
    let cases: [(&[usize], &[usize]); 6] = [
        (&[4], &[0]),
        (&[2, 3], &[1]),
        (&[2, 3], &[0, 1]),
        (&[2, 3, 2], &[0, 2]),
        (&[2, 3], &[]),
        (&[], &[]),
    ];
    cases
        .iter()
        .map(|(s, axes)| {
            let x = match op {
                ReduceOp::Sum => rand(rng, Dom::Any, s),
                ReduceOp::Max | ReduceOp::Min => distinct(rng, s),
                ReduceOp::Prod => Tensor::from_vec(
                    s,
                    (0..size(s)).map(|_| rng.sign() * rng.uniform(0.5, 1.5)).collect::<Vec<f64>>(),
                ),
            };
            fd(Prim::Reduce { op, axes: axes.to_vec() }, vec![x])
        })
        .collect()
}

fn cumulative_rows(op: CumulativeOp, rng: &mut Rng) -> Vec<Row> {
    let cases: [(&[usize], usize); 3] = [(&[5], 0), (&[2, 3], 1), (&[3, 2, 2], 0)];
    let mut rows = Vec::new();
    for reverse in [false, true] {
        for (s, axis) in cases {
            let x = match op {
                CumulativeOp::Sum => rand(rng, Dom::Any, s),
                CumulativeOp::Prod => rand(rng, Dom::AwayZero, s),
                CumulativeOp::Max | CumulativeOp::Min => distinct(rng, s),
            };
            rows.push(fd(Prim::Cumulative { op, axis, reverse }, vec![x]));
        }
    }
    rows
}

fn scatter_rows(op: ScatterOp, rng: &mut Rng) -> Vec<Row> {
    let mut rows = Vec::new();
    for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
        // Operand [5], indices with an out-of-range one (clamped or dropped); for `Add` a duplicate
        // (accumulates); `Set` gets distinct in-range indices here and duplicates below.
        let idx = match op {
            ScatterOp::Add => i32s(&[4], vec![3, 0, 3, 7]),
            ScatterOp::Set => i32s(&[3], vec![4, 1, 2]),
        };
        let n = idx.size();
        let p = Prim::Scatter { op, axis: 0, batch_dims: 0, mode };
        rows.push(fd(p.clone(), vec![rand(rng, Dom::Any, &[5]), idx, rand(rng, Dom::Any, &[n])]));
        // Operand [3, 4] along axis 1, indices [2].
        let p = Prim::Scatter { op, axis: 1, batch_dims: 0, mode };
        let idx = i32s(&[2], vec![3, 1]);
        rows.push(fd(p, vec![rand(rng, Dom::Any, &[3, 4]), idx, rand(rng, Dom::Any, &[3, 2])]));
        // batch_dims = 1: operand [2, 4], indices [2, 2], updates [2, 2].
        let p = Prim::Scatter { op, axis: 1, batch_dims: 1, mode };
        let idx = i32s(&[2, 2], vec![0, 2, 3, 1]);
        rows.push(fd(p, vec![rand(rng, Dom::Any, &[2, 4]), idx, rand(rng, Dom::Any, &[2, 2])]));
    }
    if op == ScatterOp::Set {
        // Duplicates: the last update in row-major order wins, the others get no cotangent.
        let p = Prim::Scatter { op, axis: 0, batch_dims: 0, mode: IndexMode::Clip };
        rows.push(fd(
            p,
            vec![rand(rng, Dom::Any, &[4]), i32s(&[3], vec![1, 1, 9]), rand(rng, Dom::Any, &[3])],
        ));
    }
    rows
}

/// Every row of `p`'s primitive (the parameters of `p` other than the op are chosen here).
fn rows(p: &Prim, rng: &mut Rng) -> Vec<Row> {
    match p {
        Prim::Unary(op) => unary_rows(*op, rng),
        Prim::Binary(op) => binary_rows(*op, rng),
        Prim::Compare(op) => {
            let op = *op;
            match op {
                CompareOp::Eq
                | CompareOp::Ne
                | CompareOp::Lt
                | CompareOp::Le
                | CompareOp::Gt
                | CompareOp::Ge => SHAPES
                    .iter()
                    .map(|s| zero(Prim::Compare(op), vec![rand(rng, Dom::Any, s), rand(rng, Dom::Any, s)]))
                    .collect(),
            }
        }
        Prim::Select => {
            let mut rows: Vec<Row> = SHAPES
                .iter()
                .map(|s| {
                    fd(Prim::Select, vec![rand_bool(rng, s), rand(rng, Dom::Any, s), rand(rng, Dom::Any, s)])
                })
                .collect();
            // A scalar predicate, both ways.
            for b in [true, false] {
                let s = [2, 3];
                rows.push(fd(
                    Prim::Select,
                    vec![Tensor::scalar(b), rand(rng, Dom::Any, &s), rand(rng, Dom::Any, &s)],
                ));
            }
            rows
        }
        Prim::Clamp => {
            // x strictly inside or outside [lo, hi], never on a bound: lo in [-1.5,-0.5], hi in [0.5,1.5],
            // x in ±[0.1, 0.4] (inside) or ±[1.6, 2] (outside).
            let xs = |rng: &mut Rng, s: &[usize]| {
                let v = (0..size(s))
                    .map(|_| {
                        let m =
                            if rng.next() & 1 == 0 { rng.uniform(0.1, 0.4) } else { rng.uniform(1.6, 2.0) };
                        rng.sign() * m
                    })
                    .collect::<Vec<f64>>();
                Tensor::from_vec(s, v)
            };
            let lo = |rng: &mut Rng, s: &[usize]| {
                Tensor::from_vec(s, (0..size(s)).map(|_| -rng.uniform(0.5, 1.5)).collect::<Vec<f64>>())
            };
            let hi = |rng: &mut Rng, s: &[usize]| {
                Tensor::from_vec(s, (0..size(s)).map(|_| rng.uniform(0.5, 1.5)).collect::<Vec<f64>>())
            };
            let mut rows = Vec::new();
            for s in SHAPES {
                rows.push(fd(Prim::Clamp, vec![lo(rng, s), xs(rng, s), hi(rng, s)]));
                rows.push(fd(Prim::Clamp, vec![lo(rng, &[]), xs(rng, s), hi(rng, &[])]));
            }
            rows
        }
        Prim::ConvertElementType { .. } => {
            // f64 -> f32 -> f64 is the identity up to f32 rounding: a larger step and tolerance.
            let round_trip: Fun = Rc::new(|xs: &[Tensor]| {
                vec![lax::convert_element_type(&lax::convert_element_type(&xs[0], DType::F32), DType::F64)]
            });
            let mut r =
                fd_fn("convert_element_type f64->f32->f64", round_trip, vec![rand(rng, Dom::Any, &[2, 3])]);
            r.h = 1e-2;
            r.tol = 1e-4;
            let to_int = Prim::ConvertElementType { dtype: DType::I32 };
            let from_int = Prim::ConvertElementType { dtype: DType::F64 };
            let to_bool = Prim::ConvertElementType { dtype: DType::Bool };
            vec![
                r,
                zero(to_int, vec![rand(rng, Dom::Frac, &[3])]),
                zero(from_int.clone(), vec![rand_i32(rng, &[3], -5, 5)]),
                zero(from_int, vec![rand_bool(rng, &[2])]),
                zero(to_bool, vec![rand(rng, Dom::Any, &[3])]),
            ]
        }
        Prim::BitcastConvertType { .. } => {
            let f32s = Tensor::from_vec(&[3], vec![1.5f32, -0.25, 3.0]);
            vec![
                zero(Prim::BitcastConvertType { dtype: DType::U32 }, vec![f32s.clone()]),
                zero(Prim::BitcastConvertType { dtype: DType::I32 }, vec![f32s]),
                zero(Prim::BitcastConvertType { dtype: DType::F32 }, vec![rand_u32(rng, &[2])]),
            ]
        }
        Prim::Iota { .. } => vec![
            zero(Prim::Iota { dtype: DType::F64, shape: Shape::new(&[2, 3]), dimension: 1 }, vec![]),
            zero(Prim::Iota { dtype: DType::I32, shape: Shape::new(&[4]), dimension: 0 }, vec![]),
        ],
        Prim::BroadcastInDim { .. } => {
            let cases: [(&[usize], &[usize], &[usize]); 5] = [
                (&[], &[2, 2], &[]),
                (&[3], &[2, 3], &[1]),
                (&[3], &[3, 2], &[0]),
                (&[2, 1], &[2, 3], &[0, 1]),
                (&[2, 1, 3], &[4, 2, 2, 3], &[1, 2, 3]),
            ];
            cases
                .iter()
                .map(|(s, out, dims)| {
                    let p =
                        Prim::BroadcastInDim { shape: Shape::new(out), broadcast_dimensions: dims.to_vec() };
                    fd(p, vec![rand(rng, Dom::Any, s)])
                })
                .collect()
        }
        Prim::Reshape { .. } => {
            let cases: [(&[usize], &[usize]); 4] =
                [(&[2, 3], &[3, 2]), (&[6], &[1, 2, 3]), (&[], &[1, 1]), (&[2, 2, 2], &[8])];
            cases
                .iter()
                .map(|(s, out)| {
                    fd(Prim::Reshape { new_sizes: Shape::new(out) }, vec![rand(rng, Dom::Any, s)])
                })
                .collect()
        }
        Prim::Transpose { .. } => {
            let cases: [(&[usize], &[usize]); 4] =
                [(&[2, 3], &[1, 0]), (&[2, 3, 4], &[2, 0, 1]), (&[3], &[0]), (&[], &[])];
            cases
                .iter()
                .map(|(s, perm)| {
                    fd(Prim::Transpose { permutation: perm.to_vec() }, vec![rand(rng, Dom::Any, s)])
                })
                .collect()
        }
        Prim::Rev { .. } => {
            let cases: [(&[usize], &[usize]); 4] =
                [(&[4], &[0]), (&[2, 3], &[0, 1]), (&[2, 3, 2], &[1]), (&[], &[])];
            cases
                .iter()
                .map(|(s, d)| fd(Prim::Rev { dimensions: d.to_vec() }, vec![rand(rng, Dom::Any, s)]))
                .collect()
        }
        Prim::Slice { .. } => {
            let cases: [(&[usize], &[usize], &[usize], &[usize]); 3] = [
                (&[5], &[1], &[4], &[1]),
                (&[4, 5], &[0, 1], &[3, 5], &[2, 2]),
                (&[2, 3, 4], &[1, 0, 3], &[2, 3, 4], &[1, 2, 1]),
            ];
            cases
                .iter()
                .map(|(s, a, b, st)| {
                    let p = Prim::Slice { start: a.to_vec(), limit: b.to_vec(), strides: st.to_vec() };
                    fd(p, vec![rand(rng, Dom::Any, s)])
                })
                .collect()
        }
        Prim::DynamicSlice { .. } => {
            let mut rows = Vec::new();
            // In range, past the end (clamped to 3) and negative (clamped to 0).
            for start in [1, 7, -2] {
                let p = Prim::DynamicSlice { slice_sizes: vec![2] };
                rows.push(fd(p, vec![rand(rng, Dom::Any, &[5]), Tensor::scalar(start)]));
            }
            let p = Prim::DynamicSlice { slice_sizes: vec![2, 3] };
            rows.push(fd(p, vec![rand(rng, Dom::Any, &[3, 4]), Tensor::scalar(1i32), Tensor::scalar(5i32)]));
            rows
        }
        Prim::DynamicUpdateSlice => {
            let mut rows = Vec::new();
            for start in [1, 9, -3] {
                rows.push(fd(
                    Prim::DynamicUpdateSlice,
                    vec![rand(rng, Dom::Any, &[5]), rand(rng, Dom::Any, &[2]), Tensor::scalar(start)],
                ));
            }
            rows.push(fd(
                Prim::DynamicUpdateSlice,
                vec![
                    rand(rng, Dom::Any, &[3, 4]),
                    rand(rng, Dom::Any, &[2, 2]),
                    Tensor::scalar(2i32),
                    Tensor::scalar(1i32),
                ],
            ));
            rows
        }
        Prim::Concatenate { .. } => vec![
            fd(
                Prim::Concatenate { dimension: 0 },
                vec![rand(rng, Dom::Any, &[2]), rand(rng, Dom::Any, &[3])],
            ),
            fd(
                Prim::Concatenate { dimension: 1 },
                vec![
                    rand(rng, Dom::Any, &[2, 1]),
                    rand(rng, Dom::Any, &[2, 3]),
                    rand(rng, Dom::Any, &[2, 2]),
                ],
            ),
            fd(Prim::Concatenate { dimension: 0 }, vec![rand(rng, Dom::Any, &[1, 2, 2])]),
        ],
        Prim::Pad { .. } => {
            let cases: [(&[usize], &[i64], &[i64], &[usize]); 4] = [
                (&[3], &[1], &[2], &[1]),
                (&[4], &[-1], &[1], &[0]),
                (&[2, 3], &[0, 1], &[1, -1], &[1, 0]),
                (&[], &[], &[], &[]),
            ];
            cases
                .iter()
                .map(|(s, lo, hi, int)| {
                    let p = Prim::Pad { low: lo.to_vec(), high: hi.to_vec(), interior: int.to_vec() };
                    fd(p, vec![rand(rng, Dom::Any, s), rand(rng, Dom::Any, &[])])
                })
                .collect()
        }
        Prim::Reduce { op, .. } => match op {
            ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min | ReduceOp::Prod => reduce_rows(*op, rng),
        },
        Prim::ArgReduce { op, .. } => {
            let op = *op;
            match op {
                ArgOp::Max | ArgOp::Min => vec![
                    zero(Prim::ArgReduce { op, axis: 0, index_dtype: DType::I32 }, vec![distinct(rng, &[4])]),
                    zero(
                        Prim::ArgReduce { op, axis: 1, index_dtype: DType::U32 },
                        vec![distinct(rng, &[2, 3])],
                    ),
                ],
            }
        }
        Prim::Cumulative { op, .. } => match op {
            CumulativeOp::Sum | CumulativeOp::Prod | CumulativeOp::Max | CumulativeOp::Min => {
                cumulative_rows(*op, rng)
            }
        },
        Prim::Sort { .. } => vec![
            fd(Prim::Sort { dimension: 0, num_keys: 1 }, vec![distinct(rng, &[5])]),
            fd(
                Prim::Sort { dimension: 1, num_keys: 1 },
                vec![distinct(rng, &[2, 3]), rand(rng, Dom::Any, &[2, 3])],
            ),
            // Integer keys carry values along (the keys get no tangent).
            fd(
                Prim::Sort { dimension: 0, num_keys: 1 },
                vec![i32s(&[4], vec![3, 0, 2, 1]), rand(rng, Dom::Any, &[4])],
            ),
            fd(
                Prim::Sort { dimension: 0, num_keys: 2 },
                vec![i32s(&[4], vec![1, 0, 1, 0]), distinct(rng, &[4]), rand(rng, Dom::Any, &[4])],
            ),
        ],
        Prim::DotGeneral { .. } => {
            let dot = |lc: &[usize], rc: &[usize], lb: &[usize], rb: &[usize]| Prim::DotGeneral {
                lhs_contracting: lc.to_vec(),
                rhs_contracting: rc.to_vec(),
                lhs_batch: lb.to_vec(),
                rhs_batch: rb.to_vec(),
                preferred_element_type: None,
            };
            vec![
                fd(
                    dot(&[1], &[0], &[], &[]),
                    vec![rand(rng, Dom::Any, &[2, 3]), rand(rng, Dom::Any, &[3, 4])],
                ),
                fd(dot(&[0], &[0], &[], &[]), vec![rand(rng, Dom::Any, &[3]), rand(rng, Dom::Any, &[3])]),
                fd(dot(&[], &[], &[], &[]), vec![rand(rng, Dom::Any, &[2]), rand(rng, Dom::Any, &[3])]),
                fd(
                    dot(&[2], &[1], &[0], &[0]),
                    vec![rand(rng, Dom::Any, &[2, 2, 3]), rand(rng, Dom::Any, &[2, 3, 2])],
                ),
                fd(
                    dot(&[0, 2], &[2, 0], &[], &[]),
                    vec![rand(rng, Dom::Any, &[2, 3, 4]), rand(rng, Dom::Any, &[4, 1, 2])],
                ),
                fd(dot(&[], &[], &[], &[]), vec![rand(rng, Dom::Any, &[]), rand(rng, Dom::Any, &[2])]),
            ]
        }
        Prim::Gather { .. } => {
            let mut rows = Vec::new();
            for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
                // Indices past the end: clamped (Clip) or read the fill value NaN (its derivative is 0).
                let g = |axis, batch_dims| Prim::Gather { axis, batch_dims, mode };
                rows.push(fd(g(0, 0), vec![rand(rng, Dom::Any, &[4]), i32s(&[5], vec![0, 2, 2, 6, 3])]));
                rows.push(fd(g(1, 0), vec![rand(rng, Dom::Any, &[3, 4]), i32s(&[2, 2], vec![3, 1, 0, 3])]));
                rows.push(fd(g(0, 0), vec![rand(rng, Dom::Any, &[3, 2]), i32s(&[], vec![1])]));
                rows.push(fd(
                    g(1, 1),
                    vec![rand(rng, Dom::Any, &[2, 4]), i32s(&[2, 3], vec![0, 3, 3, 1, 2, 9])],
                ));
            }
            rows.push(fd(
                Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip },
                vec![rand(rng, Dom::Any, &[3]), Tensor::from_vec(&[2], vec![2u32, 7])],
            ));
            rows
        }
        Prim::Scatter { op, .. } => match op {
            ScatterOp::Set | ScatterOp::Add => scatter_rows(*op, rng),
        },
        Prim::SegmentSum { .. } => vec![
            // Id 7 is out of range (dropped); segment 2 gets a duplicate; segment 3 is empty.
            fd(
                Prim::SegmentSum { num_segments: 4 },
                vec![rand(rng, Dom::Any, &[5]), i32s(&[5], vec![0, 2, 2, 1, 7])],
            ),
            fd(
                Prim::SegmentSum { num_segments: 2 },
                vec![rand(rng, Dom::Any, &[4, 2]), i32s(&[4], vec![1, 1, 0, -1])],
            ),
        ],
        Prim::Threefry2x32 => {
            let s: &[usize] = &[3];
            vec![zero(
                Prim::Threefry2x32,
                vec![rand_u32(rng, s), rand_u32(rng, s), rand_u32(rng, s), rand_u32(rng, s)],
            )]
        }
        Prim::StopGradient => {
            SHAPES.iter().map(|s| zero(Prim::StopGradient, vec![rand(rng, Dom::Any, s)])).collect()
        }
        Prim::CustomJvpCall { .. } => {
            // fun(x, y) = sin(x)·y with its true derivative as the rule.
            let xy: [(DType, &[usize]); 2] = [(DType::F64, &[3]), (DType::F64, &[3])];
            let fun = closed(&xy, |a| vec![&a[0].sin() * &a[1]]);
            let jvp_types: [(DType, &[usize]); 4] = [xy[0], xy[1], xy[0], xy[1]];
            let jvp = closed(&jvp_types, |a| {
                let (x, y, tx, ty) = (&a[0], &a[1], &a[2], &a[3]);
                vec![&x.sin() * y, &(&(&x.cos() * y) * tx) + &(&x.sin() * ty)]
            });
            let p = Prim::CustomJvpCall { fun: Box::new(fun), jvp: Box::new(jvp) };
            vec![fd(p, vec![rand(rng, Dom::Any, &[3]), rand(rng, Dom::Any, &[3])])]
        }
        Prim::CustomVjpCall { .. } => {
            // fun(x, y) = sin(x)·y; fwd saves (cos x, sin x, y); bwd(c, s, y, ct) = (ct·c·y, ct·s).
            let xy: [(DType, &[usize]); 2] = [(DType::F64, &[3]), (DType::F64, &[3])];
            let fun = closed(&xy, |a| vec![&a[0].sin() * &a[1]]);
            let fwd = closed(&xy, |a| vec![&a[0].sin() * &a[1], a[0].cos(), a[0].sin(), a[1].clone()]);
            let bwd_types: [(DType, &[usize]); 4] = [xy[0], xy[0], xy[0], xy[0]];
            let bwd = closed(&bwd_types, |a| vec![&(&a[3] * &a[0]) * &a[2], &a[3] * &a[1]]);
            let p = Prim::CustomVjpCall { fun: Box::new(fun), fwd: Box::new(fwd), bwd: Box::new(bwd) };
            // Reverse mode only: forward mode of a custom_vjp function is an error (as in JAX).
            let mut r = fd(p, vec![rand(rng, Dom::Any, &[3]), rand(rng, Dom::Any, &[3])]);
            r.check = Check::Fd { jvp: false, vjp: true };
            vec![r]
        }
        Prim::Scan { .. } => {
            let mut rows = Vec::new();
            for reverse in [false, true] {
                // consts w, carry c, xs: c' = sin(c)·w + x, y = c·x.
                let f: Fun = Rc::new(move |a: &[Tensor]| {
                    let w = a[0].clone();
                    let body = move |c: Tensor, x: Tensor| (&(&c.sin() * &w) + &x, &c * &x);
                    let (c, ys) = kiln::scan_with(
                        body,
                        a[1].clone(),
                        a[2].clone(),
                        ScanOptions { length: None, reverse },
                    );
                    vec![c, ys]
                });
                let name = format!("scan(reverse={reverse})");
                let ins =
                    vec![rand(rng, Dom::Any, &[2]), rand(rng, Dom::Any, &[2]), rand(rng, Dom::Any, &[3, 2])];
                rows.push(fd_fn(&name, f, ins));
            }
            // Two carries (one integer), no xs.
            let f: Fun = Rc::new(|a: &[Tensor]| {
                let body = |(i, c): (Tensor, Tensor), (): ()| {
                    let c2 = &c.cos() + &(&c * &i.astype(DType::F64));
                    ((&i + 1.0, c2), c.tanh())
                };
                let opts = ScanOptions { length: Some(4), reverse: false };
                let ((i, c), ys) = kiln::scan_with(body, (Tensor::scalar(1i32), a[0].clone()), (), opts);
                vec![i, c, ys]
            });
            rows.push(fd_fn("scan(int carry, no xs)", f, vec![rand(rng, Dom::Any, &[2])]));
            // Length 0: the carry passes through, ys are empty.
            let f: Fun = Rc::new(|a: &[Tensor]| {
                let (c, ys) =
                    kiln::scan(|c: Tensor, x: Tensor| (&c * &x, c.sin()), a[0].clone(), a[1].clone());
                vec![c, ys]
            });
            rows.push(fd_fn(
                "scan(length 0)",
                f,
                vec![rand(rng, Dom::Any, &[2]), Tensor::zeros(DType::F64, &[0, 2])],
            ));
            rows
        }
        Prim::WhileLoop { .. } => {
            let mut rows = Vec::new();
            // (i, x) -> (i + 1, sin(x)·w + x) while i < 3, bounded (reverse-differentiable) and not.
            let body_f = |w: Tensor| move |(i, x): (Tensor, Tensor)| (&i + 1.0, &(&x.sin() * &w) + &x);
            let cond_f = |n: i32| move |s: &(Tensor, Tensor)| s.0.lt(&Tensor::scalar(n));
            for (name, max_iters) in
                [("while_loop bounded by cond", 10), ("while_loop bounded by max_iters", 2)]
            {
                let f: Fun = Rc::new(move |a: &[Tensor]| {
                    let s = kiln::while_loop_bounded(
                        cond_f(3),
                        body_f(a[0].clone()),
                        (Tensor::scalar(0i32), a[1].clone()),
                        max_iters,
                    );
                    vec![s.0, s.1]
                });
                rows.push(fd_fn(name, f, vec![rand(rng, Dom::Any, &[2]), rand(rng, Dom::Any, &[2])]));
            }
            let f: Fun = Rc::new(move |a: &[Tensor]| {
                let s =
                    kiln::while_loop(cond_f(3), body_f(a[0].clone()), (Tensor::scalar(0i32), a[1].clone()));
                vec![s.0, s.1]
            });
            let mut r = fd_fn(
                "while_loop unbounded (JVP only)",
                f,
                vec![rand(rng, Dom::Any, &[2]), rand(rng, Dom::Any, &[2])],
            );
            r.check = Check::Fd { jvp: true, vjp: false };
            rows.push(r);
            rows
        }
        Prim::Cond { .. } => {
            let mut rows = Vec::new();
            // Index 0, 1, and out of range (clamped: -4 -> 0, 5 -> 1). Branch 1 captures w.
            for index in [0, 1, -4, 5] {
                let f: Fun = Rc::new(|a: &[Tensor]| {
                    let w = a[2].clone();
                    let b0: kiln::Branch<'_, (Tensor, Tensor), Tensor> =
                        Box::new(|(x, y): (Tensor, Tensor)| &x.sin() * &y);
                    let b1: kiln::Branch<'_, (Tensor, Tensor), Tensor> =
                        Box::new(move |(x, y): (Tensor, Tensor)| &(&x * &w) - &y.cos());
                    vec![kiln::switch(&a[0], vec![b0, b1], (a[1].clone(), a[3].clone()))]
                });
                let ins = vec![
                    Tensor::scalar(index),
                    rand(rng, Dom::Any, &[3]),
                    rand(rng, Dom::Any, &[3]),
                    rand(rng, Dom::Any, &[3]),
                ];
                rows.push(fd_fn(&format!("cond(index {index})"), f, ins));
            }
            rows
        }
        Prim::Call { .. } => {
            let body = closed(&[(DType::F64, &[2, 3]), (DType::F64, &[3])], |a| {
                vec![(&a[0] * &a[1]).tanh(), a[1].exp()]
            });
            vec![fd(
                Prim::Call { body: Box::new(body) },
                vec![rand(rng, Dom::Any, &[2, 3]), rand(rng, Dom::Any, &[3])],
            )]
        }
        Prim::Checkpoint { .. } => {
            let body = closed(&[(DType::F64, &[3]), (DType::F64, &[])], |a| {
                let s = &a[0].sin() * &a[1];
                vec![&s * &s.cos()]
            });
            vec![fd(
                Prim::Checkpoint { body: Box::new(body) },
                vec![rand(rng, Dom::Any, &[3]), rand(rng, Dom::Any, &[])],
            )]
        }
    }
}

/// One representative of every primitive (and every op of every family): the keys of the table. The
/// `match` in [`rows`] makes a new variant a compile error; this list makes it run.
fn all_prims() -> Vec<Prim> {
    let f: Box<Function> = Box::default();
    let mut ps: Vec<Prim> = Vec::new();
    ps.extend(UnaryOp::ALL.iter().map(|&o| Prim::Unary(o)));
    ps.extend(BinaryOp::ALL.iter().map(|&o| Prim::Binary(o)));
    ps.extend(CompareOp::ALL.iter().map(|&o| Prim::Compare(o)));
    ps.extend(ReduceOp::ALL.iter().map(|&op| Prim::Reduce { op, axes: vec![] }));
    ps.extend(ArgOp::ALL.iter().map(|&op| Prim::ArgReduce { op, axis: 0, index_dtype: DType::I32 }));
    ps.extend(CumulativeOp::ALL.iter().map(|&op| Prim::Cumulative { op, axis: 0, reverse: false }));
    ps.extend(ScatterOp::ALL.iter().map(|&op| Prim::Scatter {
        op,
        axis: 0,
        batch_dims: 0,
        mode: IndexMode::Clip,
    }));
    ps.extend([
        Prim::Select,
        Prim::Clamp,
        Prim::ConvertElementType { dtype: DType::F64 },
        Prim::BitcastConvertType { dtype: DType::F32 },
        Prim::Iota { dtype: DType::F64, shape: Shape::new(&[1]), dimension: 0 },
        Prim::BroadcastInDim { shape: Shape::new(&[]), broadcast_dimensions: vec![] },
        Prim::Reshape { new_sizes: Shape::new(&[]) },
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
        Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip },
        Prim::SegmentSum { num_segments: 1 },
        Prim::Threefry2x32,
        Prim::StopGradient,
        Prim::CustomJvpCall { fun: f.clone(), jvp: f.clone() },
        Prim::CustomVjpCall { fun: f.clone(), fwd: f.clone(), bwd: f.clone() },
        Prim::Scan { length: 0, reverse: false, num_consts: 0, num_carry: 0, body: f.clone() },
        Prim::WhileLoop { cond: f.clone(), body: f.clone(), cond_consts: 0, body_consts: 0, max_iters: None },
        Prim::Cond { branches: vec![] },
        Prim::Call { body: f.clone() },
        Prim::Checkpoint { body: f },
    ]);
    ps
}

// ---------------------------------------------------------------------------------------------------
// Checks.

fn values(t: &Tensor) -> Vec<f64> {
    t.to_array().expect("concrete").to_f64_vec()
}

fn is_float(t: &Tensor) -> bool {
    t.dtype().is_float()
}

/// `t` with element `j` moved by `d`.
fn perturb(t: &Tensor, j: usize, d: f64) -> Tensor {
    let mut v = values(t);
    v[j] += d;
    Tensor::from_vec(t.shape().dims(), v).astype(t.dtype())
}

/// Random values of `t`'s type for a float tensor, zeros of its own dtype otherwise.
fn direction(rng: &mut Rng, t: &Tensor) -> Tensor {
    if is_float(t) {
        rand(rng, Dom::Any, t.shape().dims()).astype(t.dtype())
    } else {
        Tensor::zeros(t.dtype(), t.shape().dims())
    }
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * (1.0 + want.abs())
}

fn assert_all_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, tol), "{what}[{k}]: got {g}, want {w} (all: got {got:?}, want {want:?})");
    }
}

/// FD Jacobian: `jac[(k, j)]` is the flattened derivative of the float outputs along input `k`'s
/// element `j`. An output that is NaN on both sides (a fill value) has derivative 0.
fn fd_jacobian(row: &Row, outs0: &[Tensor]) -> Vec<((usize, usize), Vec<f64>)> {
    let mut cols = Vec::new();
    for (k, x) in row.inputs.iter().enumerate() {
        if !is_float(x) {
            continue;
        }
        for j in 0..x.size() {
            let at = |d: f64| {
                let mut xs = row.inputs.clone();
                xs[k] = perturb(x, j, d);
                (row.f)(&xs)
            };
            let (p, m) = (at(row.h), at(-row.h));
            let mut col = Vec::new();
            for ((yp, ym), y0) in p.iter().zip(&m).zip(outs0) {
                if !is_float(y0) {
                    continue;
                }
                for (a, b) in values(yp).into_iter().zip(values(ym)) {
                    col.push(if a.is_nan() && b.is_nan() { 0.0 } else { (a - b) / (2.0 * row.h) });
                }
            }
            cols.push(((k, j), col));
        }
    }
    cols
}

fn float_out_values(ts: &[Tensor], like: &[Tensor]) -> Vec<f64> {
    ts.iter().zip(like).filter(|(_, l)| is_float(l)).flat_map(|(t, _)| values(t)).collect()
}

fn assert_same_values(what: &str, got: &[Tensor], want: &[Tensor]) {
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.ty(), w.ty(), "{what}: output type");
        let (g, w) = (values(g), values(w));
        for (a, b) in g.iter().zip(&w) {
            assert!(a == b || (a.is_nan() && b.is_nan()), "{what}: got {g:?}, want {w:?}");
        }
    }
}

fn check_fd(row: &Row, jvp: bool, vjp: bool, rng: &mut Rng) {
    let outs0 = (row.f)(&row.inputs);
    let jac = fd_jacobian(row, &outs0);
    let f = row.f.clone();
    for _ in 0..2 {
        // JVP: J·t.
        let ts: Vec<Tensor> = row.inputs.iter().map(|x| direction(rng, x)).collect();
        if jvp {
            let g = f.clone();
            let (outs, touts) = kiln::jvp(move |a: Vec<Tensor>| g(&a), row.inputs.clone(), ts.clone());
            assert_same_values("jvp primal outputs", &outs, &outs0);
            let n_out: usize = outs0.iter().filter(|o| is_float(o)).map(|o| o.size()).sum();
            let mut want = vec![0.0; n_out];
            for ((k, j), col) in &jac {
                let tj = values(&ts[*k])[*j];
                want.iter_mut().zip(col).for_each(|(w, c)| *w += c * tj);
            }
            assert_all_close("jvp tangent", &float_out_values(&touts, &outs0), &want, row.tol);
            for (t, o) in touts.iter().zip(&outs0) {
                assert_eq!(t.ty(), o.ty(), "tangent type");
                if !is_float(o) {
                    assert!(values(t).iter().all(|&v| v == 0.0), "tangent of an integer output");
                }
            }
        } else {
            // Forward mode is refused (custom_vjp, as JAX): an error recorded in the enclosing trace.
            let g = f.clone();
            let r = kiln::trace(
                move |a: Vec<Tensor>| kiln::jvp(move |b: Vec<Tensor>| g(&b), a, ts).1,
                &row.inputs,
            );
            assert!(r.is_err(), "forward mode should be refused");
        }
        if !vjp {
            continue;
        }
        // VJP: J^T·ct.
        let cts: Vec<Tensor> = outs0.iter().map(|o| direction(rng, o)).collect();
        let ct_flat = float_out_values(&cts, &outs0);
        let g = f.clone();
        let (outs, pull) = kiln::vjp(move |a: Vec<Tensor>| g(&a), row.inputs.clone());
        assert_same_values("vjp primal outputs", &outs, &outs0);
        let got = pull(cts);
        for (k, (g, x)) in got.iter().zip(&row.inputs).enumerate() {
            assert_eq!(g.ty(), x.ty(), "cotangent type of input {k}");
            if !is_float(x) {
                assert!(values(g).iter().all(|&v| v == 0.0), "cotangent of integer input {k}");
                continue;
            }
            let want: Vec<f64> = (0..x.size())
                .map(|j| {
                    let col = &jac.iter().find(|(kj, _)| *kj == (k, j)).expect("column").1;
                    col.iter().zip(&ct_flat).map(|(a, b)| a * b).sum()
                })
                .collect();
            assert_all_close(&format!("vjp cotangent of input {k}"), &values(g), &want, row.tol);
        }
    }
}

fn none_or_zero(what: &str, t: &Option<Tensor>) {
    if let Some(t) = t {
        let v = values(t);
        assert!(v.iter().all(|&x| x == 0.0), "{what}: expected a zero, got {v:?}");
    }
}

fn check_zero(row: &Row, rng: &mut Rng) {
    let traced = kiln::trace(|a: Vec<Tensor>| (row.f)(&a), &row.inputs).expect("trace");
    let ts: Vec<Option<Tensor>> = row.inputs.iter().map(|x| Some(direction(rng, x))).collect();
    let (outs, touts) = jvp_replay(&traced.function, &row.inputs, &ts);
    assert_same_values("jvp primal outputs", &outs, &(row.f)(&row.inputs));
    for t in &touts {
        none_or_zero("tangent", t);
    }
    let cts: Vec<Option<Tensor>> = outs.iter().map(|o| Some(direction(rng, o))).collect();
    let (_, cts_in) = vjp_replay(&traced.function, &row.inputs, &cts);
    for c in &cts_in {
        none_or_zero("cotangent", c);
    }
}

fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(non-string panic)".into())
}

#[test]
fn every_primitive_jvp_and_vjp_match_finite_differences() {
    // Failing rows are caught and listed at the end; keep their panics (and backtraces) quiet here.
    let this = std::thread::current().id();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != this {
            prev(info)
        }
    }));
    let mut failures = Vec::new();
    let mut n_rows = 0;
    for p in all_prims() {
        // Several random points per primitive.
        for seed in 1..=3u64 {
            let mut rng = Rng::new(seed * 7919 + p.name().len() as u64);
            let rows = match catch_unwind(AssertUnwindSafe(|| rows(&p, &mut rng))) {
                Ok(r) => r,
                Err(e) => {
                    failures.push(format!("{}: building rows panicked: {}", p.name(), panic_message(&*e)));
                    continue;
                }
            };
            assert!(!rows.is_empty(), "{} has no rows", p.name());
            for row in rows {
                n_rows += 1;
                let res = catch_unwind(AssertUnwindSafe(|| match row.check {
                    Check::Fd { jvp, vjp } => check_fd(&row, jvp, vjp, &mut rng),
                    Check::Zero => check_zero(&row, &mut rng),
                }));
                if let Err(e) = res {
                    failures.push(format!("{} [{}] seed {seed}: {}", p.name(), row.name, panic_message(&*e)));
                }
            }
        }
    }
    drop(std::panic::take_hook()); // back to the default hook
    if !failures.is_empty() {
        failures.dedup_by(|a, b| a.split(" seed").next() == b.split(" seed").next());
        panic!("{} of {n_rows} rows failed:\n{}", failures.len(), failures.join("\n"));
    }
}

/// The custom rules are the ones used (not the derivative of `fun`): a rule that doubles the true
/// tangent/cotangent must show through.
#[test]
fn custom_rules_are_used() {
    let x_ty: [(DType, &[usize]); 1] = [(DType::F64, &[])];
    let fun = closed(&x_ty, |a| vec![a[0].sin()]);
    // jvp(x, t) = (sin x, 2 cos(x) t); bwd(c, ct) = 3 c ct.
    let jvp =
        closed(&[(DType::F64, &[]), (DType::F64, &[])], |a| vec![a[0].sin(), &(&a[0].cos() * &a[1]) * 2.0]);
    let fwd = closed(&x_ty, |a| vec![a[0].sin(), a[0].cos()]);
    let bwd = closed(&[(DType::F64, &[]), (DType::F64, &[])], |a| vec![&(&a[0] * &a[1]) * 3.0]);
    let x = 0.5f64;
    let pj = Prim::CustomJvpCall { fun: Box::new(fun.clone()), jvp: Box::new(jvp) };
    let pj2 = pj.clone();
    let (_, t) = kiln::jvp(
        move |a: Tensor| lax::bind(pj2.clone(), &[&a]).remove(0),
        Tensor::scalar(x),
        Tensor::scalar(1.0f64),
    );
    assert!((t.item::<f64>() - 2.0 * x.cos()).abs() < 1e-15);
    let pv = Prim::CustomVjpCall { fun: Box::new(fun), fwd: Box::new(fwd), bwd: Box::new(bwd) };
    let g = kiln::grad(move |a: Tensor| lax::bind(pv.clone(), &[&a]).remove(0))(Tensor::scalar(x));
    assert!((g.item::<f64>() - 3.0 * x.cos()).abs() < 1e-15);
}
