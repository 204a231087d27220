//! A chain of steps computing a forward scan's xs row by row (W2's precomputed actuation: a sine
//! kernel, a matrix product, a tanh kernel) runs in blocks of rows on another thread while the
//! scan consumes them (`crate::pipeline`). Results must be bitwise those of one thread (no
//! pipeline), and the interpreter's up to the JIT's own transcendentals; chains the scan reads
//! whole, or a reversed scan, are not pipelined.

mod common;

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::{Array, Function, eval, parse};

fn opts(threads: usize) -> CompileOptions {
    CompileOptions { threads: Some(threads), dump_dir: None, min_task_work: None, multi_output: true }
}

/// The plan listing of `f` compiled on `threads` threads.
fn plan_text(f: &Function, threads: usize) -> String {
    common::plan_text(f, &opts(threads))
}

/// `c_{t+1} = 0.5·c_t + tanh(W·sin(t + φ))` (W2's shapes: `W: [120, 10]`) over `length` steps
/// (ys: each step's `0.5·c_t`), the
/// actuation computed for all steps before the loop. `reverse` and `whole`: the scan's direction,
/// and whether it also reads the actuation whole (as a loop constant); `transposed`: `W` comes
/// as `[10, 120]` and is transposed between the sines and the product (W2's gradient), a step
/// that is not in the chain and runs before it.
fn actuated(length: usize, reverse: bool, whole: bool, transposed: bool) -> Function {
    let (consts, k, read) =
        if whole { (1, format!("h:f32[{length},120] "), "h ") } else { (0, String::new(), "") };
    let (w_type, w_use) = if transposed {
        ("f32[10,120]", "wm:f32[120,10] = transpose[permutation=(1, 0)] w\n    ")
    } else {
        ("f32[120,10]", "")
    };
    let wm = if transposed { "wm" } else { "w" };
    let src = format!(
        "{{ lambda w:{w_type} c0:f32[120] ts:f32[{length}] ph:f32[10] . let
    tb:f32[{length},10] = broadcast_in_dim[shape=({length}, 10) broadcast_dimensions=(0,)] ts
    pb:f32[{length},10] = broadcast_in_dim[shape=({length}, 10) broadcast_dimensions=(1,)] ph
    a:f32[{length},10] = add tb pb
    s:f32[{length},10] = sin a
    {w_use}m:f32[{length},120] = dot_general[lhs_contracting=(1,) rhs_contracting=(1,) lhs_batch=() rhs_batch=() preferred_element_type=none] s {wm}
    h:f32[{length},120] = tanh m
    c:f32[120] ys:f32[{length},120] = scan[length={length} reverse={reverse} num_consts={consts} num_carry=1 body={{ lambda {k}c:f32[120] x:f32[120] ; half:f32[] = 0.5 . let
        hb:f32[120] = broadcast_in_dim[shape=(120,) broadcast_dimensions=()] half
        d:f32[120] = mul c hb
        e:f32[120] = add d x
      in (e, d) }}] {read}c0 h
  in (c, ys) }}"
    );
    parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// Inputs whose times are `t·dt`: calls with different `dt` leave different xs rows in the arena,
/// so a loop step that read its row before the producer wrote it would see another call's values.
fn args(length: usize, dt: f32, transposed: bool) -> Vec<Array> {
    let w = (0..1200).map(|i| ((i * 7 % 11) as f32 - 5.0) / 16.0).collect();
    let w_dims: &[usize] = if transposed { &[10, 120] } else { &[120, 10] };
    let c0 = (0..120).map(|i| if i == 3 { -0.0 } else { ((i * 5 % 9) as f32 - 4.0) / 3.0 }).collect();
    vec![
        Array::from_vec(w_dims, w),
        Array::from_vec(&[120], c0),
        Array::from_vec(&[length], (0..length).map(|t| t as f32 * dt).collect()),
        Array::from_vec(&[10], (0..10).map(|j| j as f32 * 0.628).collect()),
    ]
}

#[test]
fn a_pipelined_chain_gives_the_bits_of_one_thread() {
    // Lengths below, at and past one block per row (16 blocks), and not a multiple of 16.
    for (length, transposed) in [(2, false), (5, false), (16, false), (17, true), (1000, false), (1000, true)]
    {
        let f = actuated(length, false, false, transposed);
        let plan = plan_text(&f, 2);
        assert!(plan.contains("pipelined: steps"), "length {length}:\n{plan}");
        // Short, the product is inlined into one kernel with the sines and the tanh; at 1000
        // steps it is a gemm step between two kernels.
        if length == 1000 {
            let members = if transposed { "steps 0, 2, 3 " } else { "steps 0, 1, 2 " };
            assert!(plan.contains(&format!("pipelined: {members}")) && plan.contains("gemm"), "{plan}");
        }
        assert!(!plan_text(&f, 1).contains("pipelined"), "one thread never pipelines");
        let (a, b) = (args(length, 0.04, transposed), args(length, -0.03, transposed));
        let serial = compile_with(&f, &opts(1)).unwrap();
        let (one_a, one_b) = (serial.run(&a).unwrap(), serial.run(&b).unwrap());
        let exe = compile_with(&f, &opts(2)).unwrap();
        for call in 0..40 {
            let (x, want) = if call % 2 == 0 { (&a, &one_a) } else { (&b, &one_b) };
            for (k, (g, w)) in exe.run(x).unwrap().iter().zip(want).enumerate() {
                assert!(g.bitwise_eq(w), "output {k}, length {length}, call {call}:\n{g:?}\n{w:?}");
            }
        }
        // The interpreter, up to the JIT's sin and tanh (vmath, within 1.5 ulp) and the gemm's sums.
        for (g, w) in one_a.iter().zip(eval(&f, &a).unwrap()) {
            let (g, w) = (g.to_vec::<f32>().unwrap(), w.to_vec::<f32>().unwrap());
            for (x, y) in g.iter().zip(&w) {
                assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{x} vs interpreter {y}");
            }
        }
    }
}

#[test]
fn reversed_scans_and_xs_read_whole_are_not_pipelined() {
    for (reverse, whole) in [(true, false), (false, true)] {
        let f = actuated(40, reverse, whole, false);
        let plan = plan_text(&f, 2);
        assert!(!plan.contains("pipelined"), "reverse {reverse}, whole {whole}:\n{plan}");
        let a = args(40, 0.04, false);
        let (one, two) = (
            compile_with(&f, &opts(1)).unwrap().run(&a).unwrap(),
            compile_with(&f, &opts(2)).unwrap().run(&a).unwrap(),
        );
        for (g, w) in two.iter().zip(&one) {
            assert!(g.bitwise_eq(w));
        }
    }
}

#[test]
fn a_donated_input_read_by_the_chain_is_not_overwritten_by_a_step_run_before_it() {
    // `v` feeds the sines (a chain member); `-cumsum(v)`, a result of `v`'s type computed between
    // the sines and the product by a kernel that does not read `v` (not a member: it runs before
    // the chain), may take `v`'s donated buffer only if nothing reads `v` from the chain's first
    // step on: in the original order the sines read `v` before, in the pipelined one after.
    let n = 1000;
    let src = format!(
        "{{ lambda w:f32[120,10] c0:f32[120] v:f32[{n},10] . let
    s:f32[{n},10] = sin v
    q:f32[{n},10] = cumsum[axis=0 reverse=false] v
    r:f32[{n},10] = neg q
    m:f32[{n},120] = dot_general[lhs_contracting=(1,) rhs_contracting=(1,) lhs_batch=() rhs_batch=() preferred_element_type=none] s w
    h:f32[{n},120] = tanh m
    c:f32[120] = scan[length={n} reverse=false num_consts=0 num_carry=1 body={{ lambda c:f32[120] x:f32[120] . let
        e:f32[120] = add c x
      in (e,) }}] c0 h
  in (c, r) }}"
    );
    let f = parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let plan = plan_text(&f, 2);
    assert!(plan.contains("pipelined: steps 0, 3, 4 "), "{plan}");
    let a = args(n, 0.04, false);
    let v = Array::from_vec(&[n, 10], (0..n * 10).map(|i| (i % 97) as f32 * 0.05).collect());
    let want = compile_with(&f, &opts(1)).unwrap().run(&[a[0].clone(), a[1].clone(), v.clone()]).unwrap();
    let exe = compile_with(&f, &opts(2)).unwrap();
    for _ in 0..10 {
        let got =
            exe.run_donating(vec![a[0].clone(), a[1].clone(), v.clone()], &[false, false, true]).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(g.bitwise_eq(w));
        }
    }
}

#[test]
fn pipelined_ranges_never_overlap_and_a_donated_input_survives_two_scans() {
    // Two forward scans of different lengths, each fed by a kernel: `tanh v` (step 0) feeds the
    // 8-step scan (step 3), `sin u` (step 1) the 6-step one (step 2). The 8-step scan's range
    // 0..=3 would hold the 6-step one's 1..=2; only the first found is pipelined. With both,
    // the runtime ran the outer range (the inner scan before `tanh v`) while the donation check
    // counted `v`'s reads from the inner range's first step, so `c1` (of `v`'s type) took `v`'s
    // donated buffer before `tanh v` read it: `c2` came out as the sum of tanh(c1) rows.
    // (Found by review; the output is wrong without the fix.)
    let src = "{ lambda v:f32[8,4] u:f32[6,4] c0:f32[8,4] d0:f32[4] . let
    h2:f32[8,4] = tanh v
    h1:f32[6,4] = sin u
    c1:f32[8,4] = scan[length=6 reverse=false num_consts=0 num_carry=1 body={ lambda c:f32[8,4] x:f32[4] . let
        xb:f32[8,4] = broadcast_in_dim[shape=(8, 4) broadcast_dimensions=(1,)] x
        e:f32[8,4] = add c xb
      in (e,) }] c0 h1
    c2:f32[4] = scan[length=8 reverse=false num_consts=0 num_carry=1 body={ lambda d:f32[4] y:f32[4] . let
        g:f32[4] = add d y
      in (g,) }] d0 h2
  in (c1, c2) }";
    let f = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let plan = plan_text(&f, 2);
    assert_eq!(plan.matches("pipelined:").count(), 1, "{plan}");
    assert!(
        plan.contains("pipelined: steps 1 run in blocks of 1 rows on another thread while step 2"),
        "{plan}"
    );
    let a = vec![
        Array::from_vec(&[8, 4], (0..32).map(|i| (i as f32 - 16.0) / 10.0).collect()),
        Array::from_vec(&[6, 4], (0..24).map(|i| i as f32 * 0.3).collect()),
        Array::from_vec(&[8, 4], (0..32).map(|i| 5.0 + i as f32).collect()),
        Array::from_vec(&[4], vec![0.5f32, -0.5, 1.0, 2.0]),
    ];
    let want = compile_with(&f, &opts(1)).unwrap().run(&a).unwrap();
    // The interpreter agrees to rounding (its tanh and sin are not the kernels').
    for (w, r) in want.iter().zip(&eval(&f, &a).unwrap()) {
        let (w, r) = (w.to_vec::<f32>().unwrap(), r.to_vec::<f32>().unwrap());
        assert!(w.iter().zip(&r).all(|(x, y)| (x - y).abs() <= 1e-5 * y.abs().max(1.0)), "{w:?}\n{r:?}");
    }
    let exe = compile_with(&f, &opts(2)).unwrap();
    for donate in [[false; 4], [true, false, false, false]] {
        for _ in 0..10 {
            let got = exe.run_donating(a.clone(), &donate).unwrap();
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(g.bitwise_eq(w), "output {k}, donated {donate:?}:\n{g:?}\n{w:?}");
            }
        }
    }
}
