//! Dimension collapsing (`src/codegen/collapse.rs`) against the interpreter, bitwise (NaN == NaN):
//! vmap-shaped kernels (`[n, 9, 3]`, `[n, 9, 1]`, odd `n`) with elementwise chains, broadcasts
//! along the batch or the last axis, transposes of inner axes (which must not collapse), slices of
//! the last axis, reshapes, iota, reductions over kept and reduced axes, concatenates along the
//! last axis; inputs full of NaN, ±inf, ±0 and subnormals. Every program runs once on one thread
//! and once with its rows split over two threads at every row (`min_task_work = 0`), which checks
//! the mapping of the runtime's row ranges onto collapsed axes. The dumped Cranelift IR checks the
//! collapse decision and that collapsed kernels take the vector path.

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `n` values: every fifth a special (NaN, ±inf, ±0, ±subnormal, huge), the others in [-10, 10).
fn values(n: usize, seed: usize) -> Vec<f64> {
    let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 1e-40, -1e-41, 3e38, -2.5, 0.5];
    (0..n)
        .map(|i| {
            let k = i + 7 * seed;
            let u = ((k as f64 + 0.5) * 0.618_033_988_749_895).fract();
            if k.is_multiple_of(5) { special[(k / 5) % 10] } else { 20.0 * u - 10.0 }
        })
        .collect()
}

fn array(dt: DType, dims: &[usize], seed: usize) -> Array {
    let v = values(dims.iter().product(), seed);
    match dt {
        DType::F32 => Array::from_vec(dims, v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        DType::F64 => Array::from_vec(dims, v),
        _ => unreachable!("test dtypes"),
    }
}

fn push(f: &mut Function, p: Prim, ins: &[Var]) -> Var {
    f.push(p, ins, None).unwrap()[0]
}

fn bin(f: &mut Function, op: BinaryOp, x: Var, y: Var) -> Var {
    push(f, Prim::Binary(op), &[x, y])
}

fn slice(f: &mut Function, x: Var, start: &[usize], limit: &[usize]) -> Var {
    let strides = vec![1; start.len()];
    push(f, Prim::Slice { start: start.to_vec(), limit: limit.to_vec(), strides }, &[x])
}

fn dump_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let k = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("kiln-collapse-test-{}-{k}", std::process::id()))
}

/// Every `kernel*.clif` text of one dump, concatenated.
fn clif_text(dir: &PathBuf) -> String {
    let mut text = String::new();
    for sub in std::fs::read_dir(dir).expect("dump folder") {
        for file in std::fs::read_dir(sub.unwrap().path()).unwrap() {
            let p = file.unwrap().path();
            if p.extension().is_some_and(|e| e == "clif") {
                text += &std::fs::read_to_string(p).unwrap();
            }
        }
    }
    text
}

/// Runs `f` one-threaded (with a dump) and with rows split over two threads; both must equal the
/// interpreter bitwise. Returns the dumped Cranelift IR.
fn check(f: &Function, args: &[Array]) -> String {
    let want = eval(f, args).expect("interpreter");
    let dir = dump_dir();
    let one = CompileOptions {
        threads: Some(1),
        dump_dir: Some(dir.clone()),
        min_task_work: None,
        multi_output: true,
    };
    let split =
        CompileOptions { threads: Some(2), dump_dir: None, min_task_work: Some(0), multi_output: true };
    for opts in [one, split] {
        let exe = compile_with(f, &opts).unwrap_or_else(|e| panic!("compile: {e}\n{f}"));
        let got = exe.run(args).expect("run");
        for (g, w) in got.iter().zip(&want) {
            assert!(g.bitwise_eq(w), "{f}\n jit  {g:?}\n want {w:?}");
        }
    }
    let text = clif_text(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    text
}

fn vty(dt: DType) -> &'static str {
    if dt == DType::F32 { "f32x4" } else { "f64x2" }
}

const BATCHES: [usize; 3] = [1, 5, 128];

#[test]
fn elementwise_chains_collapse_to_one_vector_row() {
    for dt in [DType::F32, DType::F64] {
        for n in BATCHES {
            for inner in [[9, 3], [9, 1], [4, 2]] {
                let dims = [n, inner[0], inner[1]];
                let mut f = Function::new();
                let ty = TensorType::new(dt, Shape::new(&dims));
                let (a, b, c) = (f.add_param(ty.clone()), f.add_param(ty.clone()), f.add_param(ty));
                let ab = bin(&mut f, BinaryOp::Mul, a, b);
                let s = bin(&mut f, BinaryOp::Add, ab, c);
                let m = bin(&mut f, BinaryOp::Max, a, c);
                let out = bin(&mut f, BinaryOp::Sub, s, m);
                f.outputs.push(out);
                let args = [array(dt, &dims, 1), array(dt, &dims, 2), array(dt, &dims, 3)];
                let text = check(&f, &args);
                let total: usize = dims.iter().product();
                assert!(text.contains(&format!("axes collapsed {dims:?} -> [{total}]")), "{text}");
                if total * dt.size_bytes() >= 16 {
                    assert!(text.contains(vty(dt)), "{dims:?}: {text}");
                }
            }
        }
    }
}

#[test]
fn broadcasts_along_the_batch_or_the_last_axis() {
    for dt in [DType::F32, DType::F64] {
        for n in BATCHES {
            let dims = [n, 9, 3];
            let mut f = Function::new();
            let x = f.add_param(TensorType::new(dt, Shape::new(&dims)));
            let per_env = f.add_param(TensorType::new(dt, Shape::new(&[n, 9])));
            let per_axis = f.add_param(TensorType::new(dt, Shape::new(&[3])));
            let shared = f.add_param(TensorType::new(dt, Shape::new(&[9, 3])));
            let bd = |f: &mut Function, v: Var, b: &[usize]| {
                let p = Prim::BroadcastInDim { shape: Shape::new(&dims), broadcast_dimensions: b.to_vec() };
                push(f, p, &[v])
            };
            let e = bd(&mut f, per_env, &[0, 1]);
            let a = bd(&mut f, per_axis, &[2]);
            let s = bd(&mut f, shared, &[1, 2]);
            let xa = bin(&mut f, BinaryOp::Mul, x, a);
            let xe = bin(&mut f, BinaryOp::Add, xa, e);
            let out = bin(&mut f, BinaryOp::Div, xe, s);
            f.outputs.push(out);
            let args =
                [array(dt, &dims, 1), array(dt, &[n, 9], 2), array(dt, &[3], 3), array(dt, &[9, 3], 4)];
            let text = check(&f, &args);
            // Read along the batch and 9 but not 3 (per_env), along 9 and 3 but not the batch
            // (shared): no two axes merge (but a unit batch merges with anything).
            if n == 1 {
                assert!(text.contains("axes collapsed [1, 9, 3] -> [9, 3]"), "{text}");
            } else {
                assert!(!text.contains("axes collapsed"), "{text}");
            }
            // Without `shared`: batch and 9 merge, 3 stays apart; with `shared` only: 9 and 3 merge.
            let shared_only = if n == 1 { "[27]".to_string() } else { format!("[{n}, 27]") };
            for (v, expect) in [(e, format!("[{}, 3]", 9 * n)), (s, shared_only)] {
                let mut g = f.clone();
                let y = bin(&mut g, BinaryOp::Mul, x, v);
                g.outputs = vec![y];
                let text = check(&g, &args);
                assert!(text.contains(&format!("axes collapsed {dims:?} -> {expect}")), "{text}");
            }
        }
    }
}

#[test]
fn transposes_of_inner_axes_do_not_collapse() {
    for n in BATCHES {
        let mut f = Function::new();
        let x = f.add_param(TensorType::new(DType::F32, Shape::new(&[n, 9, 3])));
        let y = f.add_param(TensorType::new(DType::F32, Shape::new(&[n, 3, 9])));
        let t = push(&mut f, Prim::Transpose { permutation: vec![0, 2, 1] }, &[y]);
        let out = bin(&mut f, BinaryOp::Add, x, t);
        f.outputs.push(out);
        let args = [array(DType::F32, &[n, 9, 3], 1), array(DType::F32, &[n, 3, 9], 2)];
        let text = check(&f, &args);
        assert!(!text.contains("axes collapsed"), "{text}");
        // A transpose that moves a block of axes keeps the block together.
        let mut f = Function::new();
        let x = f.add_param(TensorType::new(DType::F32, Shape::new(&[n, 9, 3])));
        let y = f.add_param(TensorType::new(DType::F32, Shape::new(&[9, 3, n])));
        let t = push(&mut f, Prim::Transpose { permutation: vec![2, 0, 1] }, &[y]);
        let out = bin(&mut f, BinaryOp::Mul, x, t);
        f.outputs.push(out);
        let args = [array(DType::F32, &[n, 9, 3], 3), array(DType::F32, &[9, 3, n], 4)];
        let text = check(&f, &args);
        assert!(text.contains(&format!("axes collapsed [{n}, 9, 3] -> [{n}, 27]")), "{text}");
    }
}

#[test]
fn slices_of_the_last_axis_and_quaternion_style_math() {
    // q[..., k:k+1] products (the rigid-body code's quaternion components) and a partial last-axis
    // slice, plus a concatenate of the pieces along the last axis (a roll).
    for dt in [DType::F32, DType::F64] {
        for n in BATCHES {
            let mut f = Function::new();
            let q = f.add_param(TensorType::new(dt, Shape::new(&[n, 9, 4])));
            let comp = |f: &mut Function, k: usize| slice(f, q, &[0, 0, k], &[n, 9, k + 1]);
            let (w, x) = (comp(&mut f, 0), comp(&mut f, 1));
            let (y, z) = (comp(&mut f, 2), comp(&mut f, 3));
            let wx = bin(&mut f, BinaryOp::Mul, w, x);
            let yz = bin(&mut f, BinaryOp::Mul, y, z);
            let c = bin(&mut f, BinaryOp::Sub, wx, yz);
            f.outputs.push(c);
            let tail = slice(&mut f, q, &[0, 0, 1], &[n, 9, 4]);
            let head = slice(&mut f, q, &[0, 0, 0], &[n, 9, 1]);
            let roll = push(&mut f, Prim::Concatenate { dimension: 2 }, &[tail, head]);
            let r = bin(&mut f, BinaryOp::Add, roll, q);
            f.outputs.push(r);
            let text = check(&f, &[array(dt, &[n, 9, 4], 5)]);
            assert!(text.contains(&format!("axes collapsed [{n}, 9, 1] -> [{}]", 9 * n)), "{text}");
            assert!(text.contains(&format!("axes collapsed [{n}, 9, 4] -> [{}, 4]", 9 * n)), "{text}");
        }
    }
}

#[test]
fn reshapes_iota_and_reductions() {
    for dt in [DType::F32, DType::F64] {
        for n in BATCHES {
            let mut f = Function::new();
            let flat = f.add_param(TensorType::new(dt, Shape::new(&[n, 27])));
            let x = f.add_param(TensorType::new(dt, Shape::new(&[n, 9, 3])));
            let r = push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[n, 9, 3]) }, &[flat]);
            let e = bin(&mut f, BinaryOp::Mul, r, x);
            let iota =
                push(&mut f, Prim::Iota { dtype: dt, shape: Shape::new(&[n, 9, 3]), dimension: 2 }, &[]);
            let ei = bin(&mut f, BinaryOp::Add, e, iota);
            f.outputs.push(ei);
            // Sum over the last axis (3 elements: the interpreter's fold), over the batch (one
            // sequential accumulator per lane), max over the middle axis.
            let s_last = push(&mut f, Prim::Reduce { op: ReduceOp::Sum, axes: vec![2] }, &[ei]);
            let s_batch = push(&mut f, Prim::Reduce { op: ReduceOp::Sum, axes: vec![0] }, &[e]);
            let m_mid = push(&mut f, Prim::Reduce { op: ReduceOp::Max, axes: vec![1] }, &[e]);
            f.outputs.extend([s_last, s_batch, m_mid]);
            let back = push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[n, 27]) }, &[e]);
            let neg = push(&mut f, Prim::Unary(UnaryOp::Neg), &[back]);
            f.outputs.push(neg);
            check(&f, &[array(dt, &[n, 27], 1), array(dt, &[n, 9, 3], 2)]);
        }
    }
}

#[test]
fn reshapes_that_split_and_merge_inner_axes_read_the_right_elements() {
    // [n, 6, 2] -> [n, 3, 4]: the inner block needs the flat round trip, the batch maps directly.
    for n in [1, 3, 7] {
        let mut f = Function::new();
        let x = f.add_param(TensorType::new(DType::F32, Shape::new(&[n, 6, 2])));
        let r = push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[n, 3, 4]) }, &[x]);
        let t = push(&mut f, Prim::Transpose { permutation: vec![0, 2, 1] }, &[r]);
        let out = push(&mut f, Prim::Unary(UnaryOp::Neg), &[t]);
        f.outputs.push(out);
        check(&f, &[array(DType::F32, &[n, 6, 2], 3)]);
    }
}

#[test]
fn slices_of_slices_and_unit_axis_reshapes_vectorize() {
    // The rigid-body pattern: v = q[..., 1:4], components v[..., k:k+1], products, reshaped to
    // [n]: one strided slice of the leaf per component, loaded lane by lane.
    for dt in [DType::F32, DType::F64] {
        for n in [3, 128] {
            let mut f = Function::new();
            let q = f.add_param(TensorType::new(dt, Shape::new(&[n, 4])));
            let v = slice(&mut f, q, &[0, 1], &[n, 4]);
            let x = slice(&mut f, v, &[0, 0], &[n, 1]);
            let z = slice(&mut f, v, &[0, 2], &[n, 3]);
            let w = slice(&mut f, q, &[0, 0], &[n, 1]);
            let xz = bin(&mut f, BinaryOp::Mul, x, z);
            let d = bin(&mut f, BinaryOp::Sub, xz, w);
            let r = push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[n]) }, &[d]);
            let out = push(&mut f, Prim::Unary(UnaryOp::Abs), &[r]);
            f.outputs.push(out);
            let text = check(&f, &[array(dt, &[n, 4], 6)]);
            assert!(text.contains(&format!("axes collapsed [{n}] -> [{n}]")), "{text}");
            if n * dt.size_bytes() >= 16 {
                assert!(text.contains("insertlane"), "{text}");
            }
        }
    }
}
