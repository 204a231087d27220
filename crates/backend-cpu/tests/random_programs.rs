//! Random well-typed programs, JIT vs interpreter (issue 5, "Checked by").
//!
//! A seeded generator builds f32/f64 programs over shapes of rank 0–4 with sizes from
//! {1, 3, 4, 5, 17, 1000} (1000 only at rank ≤ 2, element counts capped to keep the run short):
//! chains of elementwise unary/binary ops and select-by-compare, `broadcast_in_dim` of smaller
//! operands, `reduce_sum/max/min` over random axes, `gather` (in-range, out-of-range and negative i32
//! indices, both index modes, with and without a batch dim) and `scan` with a small random body over a
//! carry. Inputs mix NaN, ±inf, ±0.0, subnormals and ordinary values, and reach the ops directly or
//! through a `transpose`, a strided `slice` or a `broadcast_in_dim` done inside the program (strided and
//! broadcast views for the backend's index arithmetic).
//!
//! Comparison: bitwise (-0.0 != 0.0) as in `differential.rs`, except that NaNs match whatever their
//! sign and payload (see `matches`). The reference is the interpreter with the JIT's transcendentals
//! (`common::eval_vmath`: `exp log tanh ...` through the vmath tile functions, whose accuracy
//! `vmath_ulp.rs` and `differential.rs` check): chained through `rem`, `floor`, `pow` or repeated
//! `exp`, a 1-ulp difference between two libms grows without bound, which would hide codegen bugs
//! behind a loose tolerance. A program containing a transcendental may still differ by at most
//! `TRANSCENDENTAL_ULPS` ulp per element, and one containing a float sum or product over an
//! innermost axis (which the vector path reassociates) by the largest reassociation bound
//! `2(n-1)·ε·Σ|x|` of its reductions (`common::eval_vmath_bound`); such tolerated differences are
//! counted and printed.
//!
//! `scatter_add` is being lowered on another branch: it is not generated here (nor is `scatter`,
//! `sort` or `segment_sum`, which are `Unsupported`).

mod common;

use kiln_backend_cpu::compile;
use kiln_ir::*;
use std::collections::BTreeMap;

/// Number of random programs.
const CASES: u64 = 2000;
/// Largest element count of any generated value (keeps the interpreter fast).
const MAX_ELEMS: usize = 20_000;
/// Tolerance, in ulp, for programs containing a transcendental (see the module docs).
const TRANSCENDENTAL_ULPS: u64 = 4;
const SIZES: [usize; 6] = [1, 3, 4, 5, 17, 1000];

/// splitmix64: a small, seedable, dependency-free RNG.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What the run covered, printed at the end.
#[derive(Default)]
struct Stats {
    ops: BTreeMap<String, usize>,
    ranks: BTreeMap<usize, usize>,
    sizes: BTreeMap<usize, usize>,
    dtypes: BTreeMap<&'static str, usize>,
    inputs: BTreeMap<&'static str, usize>,
    tolerated: usize,
    nan_bits_differ: usize,
    elements_compared: usize,
}

impl Stats {
    fn op(&mut self, name: impl Into<String>) {
        *self.ops.entry(name.into()).or_default() += 1;
    }
    fn shape(&mut self, dims: &[usize]) {
        *self.ranks.entry(dims.len()).or_default() += 1;
        for &d in dims {
            *self.sizes.entry(d).or_default() += 1;
        }
    }
}

/// Float unary ops (`is_finite` and `not` do not keep a float type).
const UNARY: [UnaryOp; 19] = [
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
];

/// Float binary ops (the bitwise/shift ops are integer-only).
const BINARY: [BinaryOp; 9] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Rem,
    BinaryOp::Pow,
    BinaryOp::Max,
    BinaryOp::Min,
    BinaryOp::Atan2,
];

/// Whether a result computed with `op` may (in a vectorized implementation) differ by a few ulp.
fn unary_is_transcendental(op: UnaryOp) -> bool {
    match op {
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Erf
        | UnaryOp::ErfInv => true,
        UnaryOp::Neg
        | UnaryOp::Abs
        | UnaryOp::Sign
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::IsFinite
        | UnaryOp::Not => false,
    }
}

fn binary_is_transcendental(op: BinaryOp) -> bool {
    match op {
        BinaryOp::Pow | BinaryOp::Atan2 => true,
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Rem
        | BinaryOp::Max
        | BinaryOp::Min
        | BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical => false,
    }
}

/// One random float: a special value (NaN, ±inf, ±0, subnormal, extremes) a third of the time.
fn random_value(rng: &mut Rng, dt: DType) -> f64 {
    let special = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.5,
        -2.5,
        // Subnormal in both dtypes (f32's smallest normal is ~1.18e-38); the f64-only one becomes
        // -0.0 in f32, which is fine.
        1e-40,
        -3e-42,
        5e-320,
        // Near the f32 overflow edge.
        3.0e38,
        -3.0e38,
    ];
    if rng.chance(33) {
        let v = rng.pick(&special);
        if dt == DType::F64 && rng.chance(20) { v * 1e200 } else { v }
    } else {
        let mag = rng.pick(&[1.0, 10.0, 1e-3, 100.0]);
        (rng.unit() * 2.0 - 1.0) * mag
    }
}

fn random_array(rng: &mut Rng, dt: DType, dims: &[usize]) -> Array {
    let n: usize = dims.iter().product();
    let v: Vec<f64> = (0..n).map(|_| random_value(rng, dt)).collect();
    match dt {
        DType::F32 => Array::from_vec(dims, v.iter().map(|&x| x as f32).collect()),
        DType::F64 => Array::from_vec(dims, v),
        DType::I32 | DType::U32 | DType::Bool => unreachable!("only float programs are generated"),
    }
}

/// A random shape of rank `rank`: sizes from `SIZES`, 1000 only at rank ≤ 2, at most `MAX_ELEMS`.
fn random_dims(rng: &mut Rng, rank: usize) -> Vec<usize> {
    let mut dims: Vec<usize> = Vec::with_capacity(rank);
    for _ in 0..rank {
        let so_far: usize = dims.iter().product();
        let ok: Vec<usize> = SIZES
            .iter()
            .copied()
            .filter(|&s| (s != 1000 || rank <= 2) && so_far * s <= MAX_ELEMS / 4)
            .collect();
        // Favour small sizes: 1000 and 17 are rarer.
        let s = if rng.chance(70) { rng.pick(&ok[..ok.len().min(4)]) } else { rng.pick(&ok) };
        dims.push(s);
    }
    dims
}

/// Builds one random program, with its arguments.
struct Gen<'a> {
    rng: &'a mut Rng,
    stats: &'a mut Stats,
    f: Function,
    args: Vec<Array>,
    dt: DType,
    transcendental: bool,
}

impl Gen<'_> {
    fn push(&mut self, prim: Prim, inputs: &[Var]) -> Var {
        self.stats.op(prim.name());
        let out = self
            .f
            .push(prim, inputs, None)
            .unwrap_or_else(|e| panic!("generator made an ill-typed eqn: {e}"));
        out[0]
    }

    fn param(&mut self, dims: &[usize]) -> Var {
        let a = random_array(self.rng, self.dt, dims);
        self.args.push(a);
        self.f.add_param(TensorType::new(self.dt, dims))
    }

    fn dims(&self, v: Var) -> Vec<usize> {
        self.f.var_type(v).shape.dims().to_vec()
    }

    /// A value of shape `dims`: a parameter, or one seen through a transpose, a strided slice or a
    /// broadcast done inside the program.
    fn input(&mut self, dims: &[usize]) -> Var {
        let rank = dims.len();
        match self.rng.below(5) {
            1 if rank >= 2 => {
                // transpose: result dim i is operand dim perm[i], so operand dim perm[i] = dims[i].
                let mut perm: Vec<usize> = (0..rank).collect();
                for i in (1..rank).rev() {
                    perm.swap(i, self.rng.below(i + 1));
                }
                let mut od = vec![0; rank];
                for i in 0..rank {
                    od[perm[i]] = dims[i];
                }
                *self.stats.inputs.entry("transpose").or_default() += 1;
                let p = self.param(&od);
                self.push(Prim::Transpose { permutation: perm }, &[p])
            }
            2 if rank >= 1 => {
                // strided slice out of a larger parameter.
                let n: usize = dims.iter().product();
                let stride_ok = n * 3usize.pow(rank as u32) <= MAX_ELEMS;
                let (mut start, mut limit, mut strides, mut od) = (vec![], vec![], vec![], vec![]);
                for &d in dims {
                    let s = if stride_ok { self.rng.pick(&[1, 2, 3]) } else { 1 };
                    let lo = self.rng.below(3);
                    let hi = self.rng.below(3);
                    let lim = lo + if d == 0 { 0 } else { (d - 1) * s + 1 };
                    start.push(lo);
                    limit.push(lim);
                    strides.push(s);
                    od.push(lim + hi);
                }
                if od.iter().product::<usize>() > 4 * MAX_ELEMS {
                    return self.param(dims);
                }
                *self.stats.inputs.entry("strided slice").or_default() += 1;
                let p = self.param(&od);
                self.push(Prim::Slice { start, limit, strides }, &[p])
            }
            3 => {
                // broadcast_in_dim of a smaller operand: keep a subset of dims, some shrunk to 1.
                let mut bdims = vec![];
                let mut od = vec![];
                for (i, &d) in dims.iter().enumerate() {
                    if self.rng.chance(50) {
                        bdims.push(i);
                        od.push(if self.rng.chance(30) { 1 } else { d });
                    }
                }
                *self.stats.inputs.entry("broadcast").or_default() += 1;
                let p = self.param(&od);
                self.push(Prim::BroadcastInDim { shape: Shape::new(dims), broadcast_dimensions: bdims }, &[p])
            }
            _ => {
                *self.stats.inputs.entry("parameter").or_default() += 1;
                self.param(dims)
            }
        }
    }

    fn unary(&mut self, x: Var) -> Var {
        let op = self.rng.pick(&UNARY);
        self.transcendental |= unary_is_transcendental(op);
        self.push(Prim::Unary(op), &[x])
    }

    fn binary(&mut self, x: Var, y: Var) -> Var {
        let op = self.rng.pick(&BINARY);
        self.transcendental |= binary_is_transcendental(op);
        let (a, b) = if self.rng.chance(50) { (x, y) } else { (y, x) };
        self.push(Prim::Binary(op), &[a, b])
    }

    /// `select(compare(x, y), x, y)` (sometimes with `is_finite` as the predicate).
    fn select(&mut self, x: Var, y: Var) -> Var {
        let pred = if self.rng.chance(25) {
            self.push(Prim::Unary(UnaryOp::IsFinite), &[x])
        } else {
            let op = self.rng.pick(&CompareOp::ALL);
            self.push(Prim::Compare(op), &[x, y])
        };
        self.push(Prim::Select, &[pred, x, y])
    }

    fn reduce(&mut self, x: Var) -> Var {
        let rank = self.dims(x).len();
        let mut axes: Vec<usize> = (0..rank).filter(|_| self.rng.chance(50)).collect();
        // Any order is allowed; shuffle sometimes.
        if axes.len() >= 2 && self.rng.chance(30) {
            axes.reverse();
        }
        let op = self.rng.pick(&[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]);
        self.push(Prim::Reduce { op, axes }, &[x])
    }

    /// Gather along a random axis with random i32 indices (in range, out of range, negative).
    fn gather(&mut self, x: Var) -> Option<Var> {
        let od = self.dims(x);
        if od.is_empty() {
            return None;
        }
        let axis = self.rng.below(od.len());
        let batch_dims = usize::from(axis >= 1 && self.rng.chance(30));
        let mut id: Vec<usize> = od[..batch_dims].to_vec();
        let extra = self.rng.below(3); // index rank beyond the batch dims: 0..=2
        for _ in 0..extra {
            id.push(self.rng.pick(&[1, 3, 4, 5]));
        }
        let out_rank = od.len() - 1 + id.len() - batch_dims;
        let out_elems =
            od.iter().product::<usize>() / od[axis].max(1) * id[batch_dims..].iter().product::<usize>();
        if out_rank > 4 || out_elems > MAX_ELEMS {
            return None;
        }
        let size = od[axis] as i64;
        let n: usize = id.iter().product();
        let idx: Vec<i32> = (0..n)
            .map(|_| match self.rng.below(10) {
                0 => -1,
                1 => self.rng.pick(&[i32::MIN, i32::MAX, -(size as i32), size as i32]),
                2 => (size + self.rng.below(5) as i64) as i32,
                3 => -(1 + self.rng.below(7) as i32),
                _ => self.rng.below(size as usize) as i32,
            })
            .collect();
        self.args.push(Array::from_vec(&id, idx));
        let iv = self.f.add_param(TensorType::new(DType::I32, id.as_slice()));
        let mode = self.rng.pick(&[IndexMode::Clip, IndexMode::FillOrDrop]);
        self.stats.op(format!("gather/{mode:?}/batch{batch_dims}"));
        Some(self.push(Prim::Gather { axis, batch_dims, mode }, &[x, iv]))
    }

    /// `scan` over the leading axis of `xs` with a carry of one slice's shape; returns the stacked ys
    /// (same type as `xs`) and records the final carry as an extra output.
    fn scan(&mut self, xs: Var) -> Option<Var> {
        let d = self.dims(xs);
        if d.is_empty() || d[0] > 100 {
            return None; // long scans are slow in both, and add nothing
        }
        let slice = &d[1..];
        let num_consts = usize::from(self.rng.chance(40));
        let mut operands = vec![];
        if num_consts == 1 {
            operands.push(self.input(slice));
        }
        operands.push(self.input(slice));
        operands.push(xs);
        let ty = TensorType::new(self.dt, slice);
        // body(k?, c, x) -> (c', y) with a few random elementwise ops.
        let mut body = Function::new();
        let k = (num_consts == 1).then(|| body.add_param(ty.clone()));
        let c = body.add_param(ty.clone());
        let x = body.add_param(ty.clone());
        let mut pool: Vec<Var> = [Some(c), Some(x), k].into_iter().flatten().collect();
        let steps = 1 + self.rng.below(3);
        for _ in 0..steps {
            let a = self.rng.pick(&pool);
            let b = self.rng.pick(&pool);
            let v = if self.rng.chance(70) {
                let op = self.rng.pick(&BINARY);
                self.transcendental |= binary_is_transcendental(op);
                body.push(Prim::Binary(op), &[a, b], None).unwrap()[0]
            } else {
                let op = self.rng.pick(&UNARY);
                self.transcendental |= unary_is_transcendental(op);
                body.push(Prim::Unary(op), &[a], None).unwrap()[0]
            };
            pool.push(v);
        }
        let new_c = *pool.last().unwrap();
        let y = self.rng.pick(&pool);
        body.outputs.extend([new_c, y]);
        let reverse = self.rng.chance(50);
        self.stats.op(if reverse { "scan/reverse" } else { "scan/forward" });
        let prim = Prim::Scan { length: d[0], reverse, num_consts, num_carry: 1, body: Box::new(body) };
        let outs = self.f.push(prim, &operands, None).expect("well-typed scan");
        self.f.outputs.push(outs[0]);
        Some(outs[1])
    }

    /// A chain of random ops starting from an input of random shape; the last value is an output.
    fn build(&mut self) {
        let rank = self.rng.below(5);
        let dims = random_dims(self.rng, rank);
        let mut cur = self.input(&dims);
        let steps = 1 + self.rng.below(6);
        for _ in 0..steps {
            let cd = self.dims(cur);
            self.stats.shape(&cd);
            cur = match self.rng.below(10) {
                0..=2 => self.unary(cur),
                3..=4 => {
                    let other = self.input(&cd);
                    self.binary(cur, other)
                }
                5 => {
                    let other = self.input(&cd);
                    self.select(cur, other)
                }
                6 => self.reduce(cur),
                7 => self.gather(cur).unwrap_or(cur),
                8 => self.scan(cur).unwrap_or(cur),
                _ => {
                    // keep an intermediate as an output too (multi-output programs)
                    self.f.outputs.push(cur);
                    self.binary(cur, cur)
                }
            };
        }
        self.stats.shape(&self.dims(cur));
        self.f.outputs.push(cur);
    }
}

/// Distance in ulp between two floats of one dtype, on the monotone integer line (±0 are 1 apart).
fn ulps(a: f64, b: f64, dt: DType) -> u64 {
    fn key(bits: i64) -> i64 {
        if bits < 0 { i64::MIN - bits } else { bits }
    }
    let (ka, kb) = match dt {
        DType::F32 => (key((a as f32).to_bits() as i32 as i64), key((b as f32).to_bits() as i32 as i64)),
        _ => (key(a.to_bits() as i64), key(b.to_bits() as i64)),
    };
    ka.abs_diff(kb)
}

/// Bitwise equality except that any NaN equals any NaN (the sign and payload of a NaN produced by
/// arithmetic are unspecified by IEEE-754 and differ between the JIT's instructions and the
/// interpreter's Rust code, e.g. `neg` of a fill NaN then `rem`); or elementwise closeness within
/// `TRANSCENDENTAL_ULPS` (when `tolerant`) or `sum_bound`.
fn matches(got: &Array, want: &Array, tolerant: bool, sum_bound: f64, stats: &mut Stats) -> bool {
    stats.elements_compared += want.len();
    if got.bitwise_eq(want) {
        return true;
    }
    if got.ty() != want.ty() {
        return false;
    }
    let dt = want.dtype();
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    if g.iter().zip(&w).all(|(&a, &b)| same(a, b)) {
        stats.nan_bits_differ += 1;
        return true;
    }
    let close = |a: f64, b: f64| {
        same(a, b)
            || (tolerant && ulps(a, b, dt) <= TRANSCENDENTAL_ULPS)
            || (a.is_finite() && b.is_finite() && (a - b).abs() <= sum_bound)
    };
    let ok = g.iter().zip(&w).all(|(&a, &b)| close(a, b));
    stats.tolerated += usize::from(ok);
    ok
}

/// Generates, compiles and checks program number `seed`.
fn run_one(seed: u64, stats: &mut Stats) {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5EED);
    let dt = if rng.chance(50) { DType::F32 } else { DType::F64 };
    *stats.dtypes.entry(dt.name()).or_default() += 1;
    let mut g = Gen { rng: &mut rng, stats, f: Function::new(), args: vec![], dt, transcendental: false };
    g.build();
    let (f, args, tolerant) = (g.f, g.args, g.transcendental);
    if let Err(e) = verify(&f) {
        panic!("seed {seed}: generated program does not verify: {e:?}\n{f}");
    }
    let (want, sum_bound) = common::eval_vmath_bound(&f, &args);
    let exe = compile(&f).unwrap_or_else(|e| panic!("seed {seed}: compile: {e}\n{f}"));
    let got = exe.run(&args).unwrap_or_else(|e| panic!("seed {seed}: run: {e}\n{f}"));
    assert_eq!(got.len(), want.len(), "seed {seed}: output count\n{f}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if !matches(g, w, tolerant, sum_bound, stats) {
            let bad: Vec<String> = g
                .to_f64_vec()
                .iter()
                .zip(w.to_f64_vec())
                .enumerate()
                .filter(|(_, (a, b))| a.to_bits() != b.to_bits())
                .take(8)
                .map(|(k, (a, b))| format!("[{k}] jit {a:e} want {b:e}"))
                .collect();
            panic!(
                "seed {seed}: output {i} ({}) differs: {bad:?}\nargs {:?}\n{f}",
                w.ty(),
                args.iter().map(Array::ty).collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn random_programs_match_the_interpreter() {
    let mut stats = Stats::default();
    for seed in 0..CASES {
        run_one(seed, &mut stats);
    }
    println!("{CASES} random programs, JIT == interpreter ({} elements compared)", stats.elements_compared);
    println!(
        "  within {TRANSCENDENTAL_ULPS} ulp or the sum reassociation bound, not bitwise: {}",
        stats.tolerated
    );
    println!("  outputs equal up to NaN sign/payload only: {}", stats.nan_bits_differ);
    println!("  dtypes: {:?}", stats.dtypes);
    println!("  ranks of values fed to ops: {:?}", stats.ranks);
    println!("  dimension sizes: {:?}", stats.sizes);
    println!("  input kinds: {:?}", stats.inputs);
    println!("  ops:");
    for (name, n) in &stats.ops {
        println!("    {name:<28} {n}");
    }
    // The generator must reach every kind it promises.
    for kind in [
        "reduce_sum",
        "reduce_max",
        "reduce_min",
        "scan/forward",
        "scan/reverse",
        "broadcast_in_dim",
        "transpose",
        "slice",
        "select",
    ] {
        assert!(stats.ops.keys().any(|k| k.starts_with(kind)), "never generated {kind}");
    }
    for mode in ["Clip", "FillOrDrop"] {
        assert!(stats.ops.keys().any(|k| k.contains(mode)), "never generated gather mode {mode}");
    }
    for r in 0..=4 {
        assert!(stats.ranks.contains_key(&r), "never generated rank {r}");
    }
    for s in SIZES {
        assert!(stats.sizes.contains_key(&s), "never generated size {s}");
    }
}
