//! `dot_general` operand layouts: operands whose free and contracting dims each collapse to one
//! stride are read in place by the gemm, others are packed first. Checked against the interpreter
//! exactly (small-integer values, so every summation order gives the same float), and in-place vs
//! packed reads of the same numbers bitwise against each other (matrixmultiply's order depends on
//! m, k, n only, never on strides).

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::*;

fn opts() -> CompileOptions {
    CompileOptions { threads: Some(1), dump_dir: None, min_task_work: None, multi_output: true }
}

/// `len` small integers in [-4, 4] (exact sums in any order), as `dt`.
fn ints(dt: DType, dims: &[usize], seed: u32) -> Array {
    let n: usize = dims.iter().product();
    let v: Vec<i32> =
        (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 9) as i32 - 4).collect();
    match dt {
        DType::F32 => Array::from_vec(dims, v.iter().map(|&x| x as f32).collect()),
        DType::F64 => Array::from_vec(dims, v.iter().map(|&x| f64::from(x)).collect()),
        DType::I32 => Array::from_vec(dims, v),
        DType::U32 => Array::from_vec(dims, v.iter().map(|&x| x as u32).collect()),
        DType::Bool => unreachable!("dot_general takes numbers"),
    }
}

/// Non-integer f32 values in [-2, 2).
fn reals(dims: &[usize], seed: u32) -> Array {
    let n: usize = dims.iter().product();
    let v =
        (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 4000) as f32 / 1000.0 - 2.0 + 1e-4);
    Array::from_vec(dims, v.collect())
}

/// One `dot_general` layout: operand shapes, contracting and batch dims of each side.
struct Case {
    lhs: &'static [usize],
    rhs: &'static [usize],
    lc: &'static [usize],
    rc: &'static [usize],
    lb: &'static [usize],
    rb: &'static [usize],
}

fn dot(c: &Case, preferred: Option<DType>) -> Prim {
    Prim::DotGeneral {
        lhs_contracting: c.lc.to_vec(),
        rhs_contracting: c.rc.to_vec(),
        lhs_batch: c.lb.to_vec(),
        rhs_batch: c.rb.to_vec(),
        preferred_element_type: preferred,
    }
}

fn dot_function(lhs: TensorType, rhs: TensorType, prim: Prim) -> Function {
    let mut f = Function::new();
    let (a, b) = (f.add_param(lhs), f.add_param(rhs));
    let c = f.push(prim, &[a, b], None).unwrap()[0];
    f.outputs.push(c);
    f
}

/// The plan listing of `f` (through the dump).
fn plan_text(f: &Function) -> String {
    let dir = tempfile::tempdir().unwrap();
    compile_with(f, &CompileOptions { dump_dir: Some(dir.path().to_path_buf()), ..opts() }).unwrap();
    let folder = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    std::fs::read_to_string(folder.join("plan.txt")).unwrap()
}

// Contracting sizes above `SMALL_DOT_CONTRACTION` (16): smaller dots are kernels, not gemm steps.
const CASES: [Case; 9] = [
    // Plain matmul, bigger than one gemm micro-tile.
    Case { lhs: &[33, 70], rhs: &[70, 45], lc: &[1], rc: &[0], lb: &[], rb: &[] },
    // xᵀ·g (the MLP weight gradient): lhs contracted over its rows.
    Case { lhs: &[70, 33], rhs: &[70, 45], lc: &[0], rc: &[0], lb: &[], rb: &[] },
    // g·wᵀ: rhs contracted over its columns.
    Case { lhs: &[33, 45], rhs: &[70, 45], lc: &[1], rc: &[1], lb: &[], rb: &[] },
    // Matrix-vector, above `TINY_DOT_MACS` (4096; smaller ones are kernels).
    Case { lhs: &[230, 19], rhs: &[19], lc: &[1], rc: &[0], lb: &[], rb: &[] },
    // Batch dim in front on the lhs, last on the rhs.
    Case { lhs: &[5, 6, 17], rhs: &[17, 4, 5], lc: &[2], rc: &[0], lb: &[0], rb: &[2] },
    // Batch dim in the middle, two batch dims.
    Case { lhs: &[3, 2, 4, 17], rhs: &[2, 3, 17, 5], lc: &[3], rc: &[2], lb: &[1, 0], rb: &[0, 1] },
    // Two contracting dims that collapse to one stride.
    Case { lhs: &[8, 3, 6], rhs: &[3, 6, 5], lc: &[1, 2], rc: &[0, 1], lb: &[], rb: &[] },
    // Lhs contracting dims in reversed order: no single stride walks them, so the lhs is packed.
    Case { lhs: &[8, 3, 6], rhs: &[6, 3, 5], lc: &[2, 1], rc: &[0, 1], lb: &[], rb: &[] },
    // Free dims interleaved with the contracting one: the lhs is packed, the rhs read in place.
    Case { lhs: &[6, 17, 7], rhs: &[17, 3], lc: &[1], rc: &[0], lb: &[], rb: &[] },
];

#[test]
fn every_layout_matches_the_interpreter_exactly() {
    for c in &CASES {
        for dt in [DType::F32, DType::F64, DType::I32, DType::U32] {
            let (l, r) = (ints(dt, c.lhs, 1), ints(dt, c.rhs, 2));
            let f = dot_function(l.ty(), r.ty(), dot(c, None));
            let want = eval(&f, &[l.clone(), r.clone()]).unwrap();
            let got = compile_with(&f, &opts()).unwrap().run(&[l, r]).unwrap();
            assert!(
                got[0].bitwise_eq(&want[0]),
                "{dt:?} {:?}·{:?}: {:?} vs {:?}",
                c.lhs,
                c.rhs,
                got[0],
                want[0]
            );
        }
    }
}

#[test]
fn converting_operands_are_packed_and_match_the_interpreter() {
    // i32 operands with an f64 result, lhs read transposed: packing converts each element.
    let c = &CASES[1];
    let (l, r) = (ints(DType::I32, c.lhs, 3), ints(DType::I32, c.rhs, 4));
    let f = dot_function(l.ty(), r.ty(), dot(c, Some(DType::F64)));
    assert!(plan_text(&f).contains("lhs packed, rhs packed"));
    let want = eval(&f, &[l.clone(), r.clone()]).unwrap();
    let got = compile_with(&f, &opts()).unwrap().run(&[l, r]).unwrap();
    assert!(got[0].bitwise_eq(&want[0]));
}

#[test]
fn the_plan_reads_collapsible_operands_in_place_and_packs_the_rest() {
    let expect = [
        "lhs in place, rhs in place",
        "lhs in place, rhs in place",
        "lhs in place, rhs in place",
        "lhs in place, rhs in place",
        "lhs in place, rhs in place",
        "lhs in place, rhs in place",
        "lhs in place, rhs in place",
        "lhs packed, rhs in place",
        "lhs packed, rhs in place",
    ];
    for (c, want) in CASES.iter().zip(expect) {
        let f = dot_function(
            TensorType::new(DType::F32, c.lhs),
            TensorType::new(DType::F32, c.rhs),
            dot(c, None),
        );
        let plan = plan_text(&f);
        assert!(plan.contains(want), "{:?}·{:?}: expected '{want}' in\n{plan}", c.lhs, c.rhs);
    }
}

/// `x` transposed by `perm` as its own kernel, then dotted with `y` by `prim`.
fn transposed_then_dot(x: TensorType, perm: &[usize], y: TensorType, prim: Prim) -> Function {
    let mut f = Function::new();
    let (a, b) = (f.add_param(x), f.add_param(y));
    let t = f.push(Prim::Transpose { permutation: perm.to_vec() }, &[a], None).unwrap()[0];
    let c = f.push(prim, &[t, b], None).unwrap()[0];
    f.outputs.push(c);
    f
}

#[test]
fn in_place_and_packed_reads_give_the_same_bits() {
    let plain = |lc: &[usize], rc: &[usize]| Prim::DotGeneral {
        lhs_contracting: lc.to_vec(),
        rhs_contracting: rc.to_vec(),
        lhs_batch: vec![],
        rhs_batch: vec![],
        preferred_element_type: None,
    };
    // xᵀ·y read strided in place vs the same numbers transposed first into a row-major buffer.
    let (x, y) = (reals(&[70, 33], 5), reals(&[70, 45], 6));
    let strided = dot_function(x.ty(), y.ty(), plain(&[0], &[0]));
    let copied = transposed_then_dot(x.ty(), &[1, 0], y.ty(), plain(&[1], &[0]));
    let a = compile_with(&strided, &opts()).unwrap().run(&[x.clone(), y.clone()]).unwrap();
    let b = compile_with(&copied, &opts()).unwrap().run(&[x, y]).unwrap();
    assert!(a[0].bitwise_eq(&b[0]));
    // Packed (contracting dims in reversed order) vs transposed first and read in place.
    let (x, y) = (reals(&[8, 3, 4], 7), reals(&[4, 3, 5], 8));
    let packed = dot_function(x.ty(), y.ty(), plain(&[2, 1], &[0, 1]));
    let copied = transposed_then_dot(x.ty(), &[0, 2, 1], y.ty(), plain(&[1, 2], &[0, 1]));
    let a = compile_with(&packed, &opts()).unwrap().run(&[x.clone(), y.clone()]).unwrap();
    let b = compile_with(&copied, &opts()).unwrap().run(&[x.clone(), y.clone()]).unwrap();
    assert!(a[0].bitwise_eq(&b[0]));
    let want = eval(&packed, &[x, y]).unwrap();
    let (Array::F32(g), Array::F32(w)) = (&a[0], &want[0]) else { panic!("f32 expected") };
    assert!(g.iter().zip(w).all(|(g, w)| (g - w).abs() <= 1e-5 * w.abs().max(1.0)));
}

#[test]
fn small_contractions_are_kernels_unless_the_product_is_large() {
    // k = 10 ≤ SMALL_DOT_CONTRACTION: a kernel while output·k ≤ SMALL_DOT_MAX_MACS (2¹⁸), a gemm step
    // above (W5's backward g·W2ᵀ, [256,10]·[512,10]ᵀ). Both match the interpreter exactly.
    for (m, n, gemm) in [(8usize, 12usize, false), (256, 512, true)] {
        let c = Case { lhs: &[0, 10], rhs: &[0, 10], lc: &[1], rc: &[1], lb: &[], rb: &[] };
        let (lt, rt) = (TensorType::new(DType::F32, [m, 10]), TensorType::new(DType::F32, [n, 10]));
        let f = dot_function(lt, rt, dot(&c, None));
        let plan = plan_text(&f);
        assert_eq!(plan.contains("gemm 1×"), gemm, "{m}×10·{n}×10:\n{plan}");
        let (l, r) = (ints(DType::F32, &[m, 10], 5), ints(DType::F32, &[n, 10], 6));
        let want = eval(&f, &[l.clone(), r.clone()]).unwrap();
        let got = compile_with(&f, &opts()).unwrap().run(&[l, r]).unwrap();
        assert!(got[0].bitwise_eq(&want[0]), "{m}×10·{n}×10");
    }
}

#[test]
fn outer_products_are_kernels_however_large() {
    // No contraction (W2's batched backward accumulates ct[256,120] ⊗ s[10] into dW): a product
    // per output element, a kernel even past SMALL_DOT_MAX_MACS; bitwise the interpreter's.
    let c = Case { lhs: &[300, 120], rhs: &[10], lc: &[], rc: &[], lb: &[], rb: &[] };
    let (l, r) = (ints(DType::F32, c.lhs, 3), ints(DType::F32, c.rhs, 4));
    let f = dot_function(l.ty(), r.ty(), dot(&c, None));
    let plan = plan_text(&f);
    assert!(!plan.contains("gemm 1×"), "{plan}");
    let want = eval(&f, &[l.clone(), r.clone()]).unwrap();
    let got = compile_with(&f, &opts()).unwrap().run(&[l, r]).unwrap();
    assert!(got[0].bitwise_eq(&want[0]));
}

#[test]
fn tiny_matrix_vector_products_are_kernels_whatever_their_contraction() {
    // W4's backward step: ct[64]·state[64,4] → [4], 256 multiply-adds over a contraction of 64 (>
    // SMALL_DOT_CONTRACTION): a kernel, not a gemm step, as is [40,50]·[50] (2000), while a
    // matrix-vector product has at most TINY_DOT_MACS (4096) multiply-adds; [230,19]·[19] (4370) is a gemm step. A [16,20]·[20,16]
    // product (5120, no vector side) stays gemm. Both paths match the interpreter bit for bit.
    // A matrix-vector product with a small contraction (≤ SMALL_DOT_CONTRACTION) is a kernel
    // however many rows it has, past SMALL_DOT_MAX_MACS (2¹⁸): W2's batched `[256,120,10]·[10]`
    // (307 200), here [30000,10]·[10] and its transpose-side form [10]·[10,30000].
    let cases: [(Case, bool); 6] = [
        (Case { lhs: &[30000, 10], rhs: &[10], lc: &[1], rc: &[0], lb: &[], rb: &[] }, false),
        (Case { lhs: &[10], rhs: &[10, 30000], lc: &[0], rc: &[0], lb: &[], rb: &[] }, false),
        (Case { lhs: &[64], rhs: &[64, 4], lc: &[0], rc: &[0], lb: &[], rb: &[] }, false),
        (Case { lhs: &[40, 50], rhs: &[50], lc: &[1], rc: &[0], lb: &[], rb: &[] }, false),
        (Case { lhs: &[230, 19], rhs: &[19], lc: &[1], rc: &[0], lb: &[], rb: &[] }, true),
        (Case { lhs: &[16, 20], rhs: &[20, 16], lc: &[1], rc: &[0], lb: &[], rb: &[] }, true),
    ];
    for (c, gemm) in cases {
        let (l, r) = (ints(DType::F32, c.lhs, 9), ints(DType::F32, c.rhs, 10));
        let f = dot_function(l.ty(), r.ty(), dot(&c, None));
        let plan = plan_text(&f);
        assert_eq!(plan.contains("gemm 1×"), gemm, "{:?}·{:?}:\n{plan}", c.lhs, c.rhs);
        let want = eval(&f, &[l.clone(), r.clone()]).unwrap();
        let got = compile_with(&f, &opts()).unwrap().run(&[l, r]).unwrap();
        // Small integers: exact on both paths.
        assert!(got[0].bitwise_eq(&want[0]), "{:?}·{:?}", c.lhs, c.rhs);
    }
}

#[test]
fn gemm_row_blocks_give_the_same_bits_for_any_thread_count() {
    // Row blocks of each batch's gemm over threads (forced by `min_task_work: Some(0)`): the same
    // bits as one thread, non-integer values included, for an odd row count, a batch and every dtype.
    let cases = [
        Case { lhs: &[257, 70], rhs: &[70, 45], lc: &[1], rc: &[0], lb: &[], rb: &[] },
        Case { lhs: &[70, 33], rhs: &[70, 45], lc: &[0], rc: &[0], lb: &[], rb: &[] },
        Case { lhs: &[3, 41, 17], rhs: &[3, 17, 9], lc: &[2], rc: &[1], lb: &[0], rb: &[0] },
    ];
    for c in &cases {
        for dt in [DType::F32, DType::F64, DType::I32] {
            let real = |dims: &[usize], seed| {
                let x = reals(dims, seed);
                match dt {
                    DType::F64 => {
                        Array::from_vec(dims, x.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect())
                    }
                    _ => x,
                }
            };
            let (l, r) = match dt {
                DType::F32 | DType::F64 => (real(c.lhs, 11), real(c.rhs, 12)),
                _ => (ints(dt, c.lhs, 11), ints(dt, c.rhs, 12)),
            };
            let f = dot_function(l.ty(), r.ty(), dot(c, None));
            let serial = compile_with(&f, &opts()).unwrap().run(&[l.clone(), r.clone()]).unwrap();
            for threads in 2..=4 {
                let o = CompileOptions { threads: Some(threads), min_task_work: Some(0), ..opts() };
                let dir = tempfile::tempdir().unwrap();
                let exe = compile_with(&f, &CompileOptions { dump_dir: Some(dir.path().to_path_buf()), ..o })
                    .unwrap();
                let folder = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
                let plan = std::fs::read_to_string(folder.join("plan.txt")).unwrap();
                assert!(plan.contains(&format!("rows in {threads} blocks")), "{plan}");
                let got = exe.run(&[l.clone(), r.clone()]).unwrap();
                assert!(got[0].bitwise_eq(&serial[0]), "{dt:?} {:?}·{:?} on {threads} threads", c.lhs, c.rhs);
            }
        }
    }
}
