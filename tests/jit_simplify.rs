//! The simplifier in `jit`: on by default, results bitwise equal to the interpreter's and to the
//! unsimplified compile, fast math passed on.

use kiln::prelude::*;

fn special(n: usize) -> Vec<f32> {
    let v = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, 1.0, -1.0, 2.5, 1e30, -1e-40];
    (0..n).map(|i| v[i % v.len()]).collect()
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>().iter().map(|x| if x.is_nan() { f32::NAN.to_bits() } else { x.to_bits() }).collect()
}

/// x*1, x+(-0.0), neg(neg x), x*0 (kept without fast math), a broadcast-heavy expression.
fn program(x: Tensor) -> Tensor {
    let a = -(-(&x * 1.0 + (-0.0f32)));
    let z = &x * 0.0;
    let b = x.reshape(&[2, 8]).transpose(&[1, 0]).transpose(&[1, 0]).reshape(&[16]);
    &a + &z + &b
}

#[test]
fn simplified_jit_matches_unsimplified_and_eager_bitwise() {
    let x = Tensor::from_vec(&[16], special(16));
    let eager = program(x.clone());
    let on = jit(program);
    assert!(on.options().simplify);
    let off = jit(program).simplify(false);
    let a = on.call(&x).unwrap();
    let b = off.call(&x).unwrap();
    assert_eq!(bits(&a), bits(&eager));
    assert_eq!(bits(&a), bits(&b));
    // x*0 stays NaN for NaN and ±inf inputs without fast math.
    let v = a.to_vec::<f32>();
    assert!(v[0].is_nan() && v[1].is_nan() && v[2].is_nan());
}

#[test]
fn a_window_mask_of_abs_distances_is_not_decided_away() {
    // Regression (soundness audit): the range analysis gave `|i - 90|` (i in 0..100) the range of
    // `i - 90`, [-90, 9], so the simplifier decided `|i - 90| <= 9` true everywhere and the jitted
    // mask let every element through ([1, 2, 3, ...] where eager code gives zeros before 81).
    let window = |x: Tensor| {
        let i = Tensor::arange(100, DType::F32);
        let near = (i - 90.0).abs().le(&Tensor::scalar(9.0f32));
        where_(&near, &x, &x.zeros_like())
    };
    let x = Tensor::from_vec(&[100], (1..=100).map(|v| v as f32).collect());
    let want: Vec<f32> = (1..=100).map(|v| if v >= 82 { v as f32 } else { 0.0 }).collect();
    assert_eq!(window(x.clone()).to_vec::<f32>(), want);
    assert_eq!(jit(window).call(&x).unwrap().to_vec::<f32>(), want);
}

#[test]
fn the_compiled_program_reports_what_the_simplifier_did() {
    let x = Tensor::from_vec(&[16], special(16));
    let compiled = jit(program).compiled(&x).unwrap();
    let outcome = compiled.simplify_outcome().expect("jit simplifies by default");
    assert!(outcome.kept, "{}", outcome.report);
    let fired = outcome.report.rules_fired();
    for rule in ["mul_one", "add_neg_zero", "neg_neg", "transpose_transpose"] {
        assert!(fired.contains_key(rule), "{rule} in {fired:?}");
    }
    // x*0 is not 0 without fast math.
    assert!(!fired.contains_key("mul_zero"), "{fired:?}");
    let fast = jit(program).fast_math(true).compiled(&x).unwrap();
    assert_eq!(fast.simplify_outcome().unwrap().report.fired("mul_zero"), 1);
    assert!(jit(program).simplify(false).compiled(&x).unwrap().simplify_outcome().is_none());
}

#[test]
fn fast_math_reaches_the_simplifier() {
    let f = |x: Tensor| &x * 0.0 + &x;
    let x = Tensor::from_vec(&[4], vec![1.0f32, f32::INFINITY, 2.0, 3.0]);
    let exact = jit(f).call(&x).unwrap().to_vec::<f32>();
    assert!(exact[1].is_nan()); // inf*0 + inf = NaN
    let fast = jit(f).fast_math(true).call(&x).unwrap().to_vec::<f32>();
    assert_eq!(fast, vec![1.0, f32::INFINITY, 2.0, 3.0]); // x*0 → 0 under fast math
}

#[test]
fn simplify_on_forms_multi_output_kernels_with_the_same_bits() {
    // Three outputs over the same 64 rows, each its own kernel root: one multi-output kernel with
    // the simplifier on, three kernels with it off (the greedy baseline), the same bits.
    let f = |x: Tensor| (x.tanh(), &x * &x + 1.0, x.sum(1));
    let x = Tensor::from_vec(&[64, 3], (0..192).map(|i| (i as f32 - 96.0) / 17.0).collect());
    let (on, off) = (jit(f), jit(f).simplify(false));
    let kernels = |j: &kiln::Jit<_, Tensor, (Tensor, Tensor, Tensor)>| {
        j.compiled(&x).unwrap().executable().cost_report().kernels
    };
    assert_eq!((kernels(&on), kernels(&off)), (1, 3));
    let (a, b) = (on.call(&x).unwrap(), off.call(&x).unwrap());
    assert_eq!(bits(&a.0), bits(&b.0));
    assert_eq!(bits(&a.1), bits(&b.1));
    assert_eq!(bits(&a.2), bits(&b.2));
}

/// A fixed edge list of `e` edges over `n` nodes with repeated, negative and too-large sources.
fn edges(n: usize, e: usize) -> (Tensor, Tensor) {
    let hash = |i: usize, seed: u32| (i as u32).wrapping_mul(2_654_435_761) ^ seed;
    let src: Vec<i32> = (0..e).map(|i| (hash(i, 1) % (n as u32 + 40)) as i32 - 20).collect();
    let dst: Vec<i32> = (0..e).map(|i| (hash(i, 2) % n as u32) as i32).collect();
    (Tensor::from_vec(&[e], src), Tensor::from_vec(&[e], dst))
}

/// How many scatter-adds of `f`'s traced program `sort_scan_scatters` rewrites.
fn sortable_scatters(f: impl Fn(Tensor) -> Tensor, x: &Tensor) -> usize {
    let traced = trace(f, x).unwrap();
    kiln::transform::sort_scan_scatters(&kiln::transform::dce(&traced.function)).1
}

/// `grad` of a message pass in a `scan` over a fixed edge list (W3's shape): the backward's
/// `scatter_add` into the sources (the transpose of `take`, `Clip` after wrapping) has
/// loop-invariant indices, so `jit` runs it as a segment sum over the edges sorted once by source
/// (`sort_scan_scatters`; 30 steps, so that the backend estimates the sort paid for), split over
/// threads. Each source still sums its edges in input order:
/// the gradient has the same bits as the greedy compile (a sequential scatter) on one and two
/// threads. The same for a forward `at_add` (`FillOrDrop`: sources past the end dropped).
#[test]
fn message_passes_in_a_scan_keep_the_scatters_bits_as_sorted_segment_sums() {
    let (n, e) = (3000usize, 40_000usize);
    let (src, dst) = edges(n, e);
    let h0 = Tensor::from_vec(&[n], (0..n).map(|i| ((i * 7919) % 2001) as f32 * 1e-3 - 1.0).collect());
    let (s, d, h) = (src.clone(), dst.clone(), h0.clone());
    let backward = move |w: Tensor| {
        let step = |h: Tensor, _: Tensor| {
            let h2 = (h.take(&s, 0).segment_sum(&d, n) * &w).tanh();
            (h2.clone(), h2.sum_all())
        };
        let (_, ys) = scan(step, h.clone(), Tensor::zeros(DType::F32, &[30]));
        ys.sum_all()
    };
    let forward = move |w: Tensor| {
        let step = |h: Tensor, _: Tensor| {
            let h2 = (Tensor::zeros(DType::F32, &[n]).at_add(&src, &(h.take(&dst, 0) * &w))).tanh();
            (h2.clone(), h2.sum_all())
        };
        let (_, ys) = scan(step, h0.clone(), Tensor::zeros(DType::F32, &[30]));
        ys.sum_all()
    };
    let w = Tensor::scalar(0.3f32);
    let g = || grad(backward.clone());
    assert_eq!(sortable_scatters(g(), &w), 1, "the backward's scatter qualifies");
    assert_eq!(sortable_scatters(forward.clone(), &w), 1, "the at_add qualifies");
    let greedy = (
        jit(g()).simplify(false).threads(2).call(&w).unwrap(),
        jit(forward.clone()).simplify(false).threads(2).call(&w).unwrap(),
    );
    for threads in [1, 2] {
        let sorted = jit(g()).threads(threads).call(&w).unwrap();
        assert_eq!(bits(&sorted), bits(&greedy.0), "grad, {threads} threads");
        let sorted = jit(forward.clone()).threads(threads).call(&w).unwrap();
        assert_eq!(bits(&sorted), bits(&greedy.1), "at_add, {threads} threads");
    }
    // Eager evaluation rounds `tanh` (and the sums outside the scatter) its own way.
    for (got, want) in [(&greedy.0, g()(w.clone())), (&greedy.1, forward(w.clone()))] {
        let (got, want) = (got.to_vec::<f32>()[0], want.to_vec::<f32>()[0]);
        assert!(
            want.is_finite() && want != 0.0 && (got - want).abs() <= 1e-5 * want.abs(),
            "{got} against {want}"
        );
    }
}

#[test]
fn an_outer_product_in_a_gradient_fuses_into_its_consumer() {
    // d/dw sum(tanh(w·s)) = outer(1 - tanh², s): a dot_general without contraction, which the
    // simplifier rewrites to broadcasts and a product (plus the dot's +0.0 start, so -0.0 products
    // stay +0.0) under the fused-elementwise costs, and `jit` keeps that extraction where the
    // backend estimates it cheaper: the scaled gradient is computed in the kernel that reads the
    // product instead of reading a materialized outer product. The backend's estimate (`KILN_DUMP`
    // verdict): 356 bytes per call, against 544 for the every-result extraction (the dot a root of
    // its own) and 552 for the greedy compile. Same bits as the greedy compile and as eager.
    let s = Tensor::from_vec(&[3], vec![0.5f32, -0.0, 2.0]);
    let f = {
        let s = s.clone();
        move |w: Tensor| grad(|w: Tensor| w.matmul(&s).tanh().sum_all())(w) * 0.5
    };
    let w = Tensor::from_vec(&[8, 3], (0..24).map(|i| (i as f32 - 11.0) / 7.0).collect());
    let (on, off) = (jit(f.clone()), jit(f.clone()).simplify(false));
    let bytes =
        |j: &kiln::Jit<_, Tensor, Tensor>| j.compiled(&w).unwrap().executable().cost_report().bytes_moved;
    assert_eq!((bytes(&on), bytes(&off)), (356, 552));
    let (a, b) = (on.call(&w).unwrap(), off.call(&w).unwrap());
    assert_eq!(bits(&a), bits(&b));
    assert_eq!(bits(&a), bits(&f(w.clone())));
    // Column 1 is 0.5 · (1 - tanh²) · -0.0 + 0.0 = +0.0 (not -0.0).
    assert!(a.to_vec::<f32>().chunks(3).all(|row| row[1].to_bits() == 0));
}

/// A spring system in a `scan` whose captured spring ends are in range (W2's shape): `jit` sinks
/// the literal index arrays into the loop body (`sink_scan_constants`), where the backend drops
/// their gather clamps and segment range checks. Forward and gradient keep the greedy compile's
/// bits (no sinking there), and the eager value.
#[test]
fn in_range_captured_indices_in_a_scan_keep_the_greedy_compiles_bits() {
    let m = 7usize;
    let a = Tensor::from_vec(&[9], vec![0i32, 1, 2, 3, 4, 5, 0, 2, 4]);
    let b = Tensor::from_vec(&[9], vec![1i32, 2, 3, 4, 5, 6, 6, 5, 1]);
    let x0 = Tensor::from_vec(&[m, 2], (0..2 * m).map(|i| (i * i % 11) as f32 * 0.1).collect());
    let loss = move |k: Tensor| {
        let step = |x: Tensor, _: Tensor| {
            let d = x.take(&b, 0) - x.take(&a, 0);
            let f = &d * &k;
            let x2 = &x + &((f.segment_sum(&a, m) - f.segment_sum(&b, m)) * 0.01);
            (x2.clone(), (&x2 * &x2).sum_all())
        };
        let (_, ys) = scan(step, x0.clone(), Tensor::zeros(DType::F32, &[20]));
        ys.sum_all()
    };
    let k = Tensor::scalar(0.7f32);
    let greedy = |f: &dyn Fn(Tensor) -> Tensor| jit(f).simplify(false).call(&k).unwrap();
    let greedy = (greedy(&loss), greedy(&grad(loss.clone())));
    let on = |f: &dyn Fn(Tensor) -> Tensor| jit(f).threads(1).call(&k).unwrap();
    let on = (on(&loss), on(&grad(loss.clone())));
    assert_eq!(bits(&on.0), bits(&greedy.0));
    assert_eq!(bits(&on.1), bits(&greedy.1));
    let eager = loss(k.clone()).to_vec::<f32>()[0];
    let got = on.0.to_vec::<f32>()[0];
    assert!(eager.is_finite() && (got - eager).abs() <= 1e-5 * eager.abs(), "{got} against {eager}");
    // The gradient against a central difference of the eager loss.
    let h = 1e-2f32;
    let at = |k: f32| loss(Tensor::scalar(k)).to_vec::<f32>()[0];
    let fd = (at(0.7 + h) - at(0.7 - h)) / (2.0 * h);
    let g = on.1.to_vec::<f32>()[0];
    assert!(fd.abs() > 1e-3 && (g - fd).abs() <= 1e-2 * fd.abs(), "{g} against {fd}");
}

/// `Σ c_T²` for `c_{t+1} = 0.9·c_t + tanh(W · sin(t + φ))` over 50 steps; `w: f32[4, 3]`.
fn actuated_loss(w: Tensor) -> Tensor {
    let phase = Tensor::from_vec(&[3], vec![0.0f32, 1.0, 2.0]);
    let step = |c: Tensor, t: Tensor| {
        let act = w.matmul(&(&t + &phase).sin()).tanh();
        (&c * 0.9 + &act, ())
    };
    let ts = Tensor::from_vec(&[50], (0..50).map(|i| i as f32 * 0.1).collect());
    let (c, ()) = scan(step, Tensor::zeros(DType::F32, &[4]), ts);
    (&c * &c).sum_all()
}

/// A carry driven by `tanh(W · sin(t + φ))` with `t` the scanned input (W2's actuation): with the
/// simplifier on, `jit` computes the actuation for all 50 steps before the loop, and the forward
/// and the gradient with respect to `W` agree with the greedy compile and with eager evaluation (to
/// float rounding: the product's sums may be reassociated by the vector path); the gradient's saved
/// actuation is then read from the precomputed array, not copied per step.
#[test]
fn carry_independent_scan_work_runs_before_the_loop_with_the_same_values() {
    let w = Tensor::from_vec(&[4, 3], (0..12).map(|i| (i as f32 - 6.0) / 7.0).collect());
    let close = |a: &Tensor, b: &Tensor| {
        let (a, b) = (a.to_vec::<f32>(), b.to_vec::<f32>());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{a:?} vs {b:?}");
        }
    };
    let (on, off) = (jit(actuated_loss), jit(actuated_loss).simplify(false));
    // The precomputed actuation, `[50, 4]` f32 (800 bytes), lives in the arena before the loop;
    // the greedy compile never materializes it (its body computes each step's 4 values in place).
    let arena =
        |j: &kiln::Jit<_, Tensor, Tensor>| j.compiled(&w).unwrap().executable().cost_report().arena_bytes;
    let (a_on, a_off) = (arena(&on), arena(&off));
    assert!(a_on >= 800 && a_off < 800, "arena bytes: simplified {a_on}, greedy {a_off}");
    let eager = actuated_loss(w.clone());
    close(&on.call(&w).unwrap(), &eager);
    close(&off.call(&w).unwrap(), &eager);
    // The gradient's forward loop saves each step's actuation for the backward loop; once the
    // actuation is computed before the loop, that residual is the precomputed xs passed through,
    // and `jit` reads the xs instead (`reuse_scan_xs_echoes`).
    let traced = trace(grad(actuated_loss), &w).unwrap();
    let (precomputed, report) =
        kiln::transform::precompute_scan_xs_work(&kiln::transform::dce(&traced.function), &|_, _, _| true);
    assert!(report.scans > 0, "{}", traced.function);
    assert!(kiln::transform::reuse_scan_xs_echoes(&precomputed).1 >= 1, "{precomputed}");
    let (g_on, g_off) = (jit(grad(actuated_loss)), jit(grad(actuated_loss)).simplify(false));
    let g_eager = grad(actuated_loss)(w.clone());
    close(&g_on.call(&w).unwrap(), &g_eager);
    close(&g_off.call(&w).unwrap(), &g_eager);
}

/// Whether `jit`'s gate keeps the column split of `f`'s traced program: carries split, and the
/// backend's estimate of the split program no costlier than the unsplit one (bytes, then flops).
fn split_kept(traced: &kiln::ir::Function) -> usize {
    let live = kiln::transform::dce(traced);
    let (split, n) = kiln::transform::split_scan_carry_columns(&live);
    let cost = |f: &kiln::ir::Function| {
        let r = kiln_backend_cpu::estimate(f).unwrap();
        (r.bytes_moved, r.flops)
    };
    assert!(cost(&split) <= cost(&live), "the gate would refuse the split");
    n
}

/// A cart-pole-like rollout (rational arithmetic only), `vmap`ped over 16 environments: the
/// batched scan carries `[16, 4]` states, read by columns and by the policy's `w·s`, rebuilt by
/// `stack`. `jit` carries them as four columns (`split_scan_carry_columns`); the final states and
/// the returns have the same bits as the greedy compile and as eager evaluation, on one and two
/// threads.
fn batched_rollout((w, states): (Tensor, Tensor)) -> (Tensor, Tensor) {
    let env = |(s0, w): (Tensor, Tensor)| {
        let step = |s: Tensor, _: ()| {
            let (x, xd, th, thd) = (s.index(0), s.index(1), s.index(2), s.index(3));
            let u = w.dot(&s) / (1.0 + &th * &th);
            let tha = (9.8 * &th - &u * &xd) / (1.5 - 0.1 * &thd * &thd);
            let new =
                Tensor::stack(&[&x + 0.02 * &xd, &xd + 0.02 * &u, &th + 0.02 * &thd, &thd + 0.02 * &tha], 0);
            let reward = 1.0 - &x * &x;
            (new, reward)
        };
        let (last, rewards) = scan_with(step, s0, (), ScanOptions { length: Some(50), reverse: false });
        (last, rewards.sum_all())
    };
    vmap(env, (0, AxisSpec::NONE), 0)((states, w))
}

#[test]
fn a_batched_state_carried_as_columns_keeps_its_bits() {
    let w = Tensor::from_vec(&[4], vec![0.5f32, 1.0, -2.0, 0.25]);
    let states = Tensor::from_vec(&[16, 4], (0..64).map(|i| ((i * 37 % 23) as f32 - 11.0) / 200.0).collect());
    let args = (w, states);
    let traced = trace(batched_rollout, &args).unwrap();
    assert_eq!(split_kept(&traced.function), 1, "{}", traced.function);
    let (eager_last, eager_ret) = batched_rollout(args.clone());
    for threads in [1, 2] {
        let (on, off) =
            (jit(batched_rollout).threads(threads), jit(batched_rollout).simplify(false).threads(threads));
        for j in [&on, &off] {
            let (last, ret) = j.call(&args).unwrap();
            assert_eq!(bits(&last), bits(&eager_last), "final states, {threads} threads");
            assert_eq!(bits(&ret), bits(&eager_ret), "returns, {threads} threads");
        }
    }
}

/// A mass-spring system (W2's shape, rational arithmetic and `sqrt` only): positions and
/// velocities `[16, 2]` carried through 40 steps, springs gathering their ends (`take`),
/// `|d|` from a sum over the last axis, forces scattered back with `segment_sum`, and a ground
/// force stacked from columns. `jit` computes the loop column by column
/// (`split_scan_carry_columns`, both carries); the final state has the same bits as the greedy
/// compile and as eager evaluation, on one and two threads.
fn springs(x0: Tensor) -> (Tensor, Tensor) {
    let a = Tensor::from_vec(&[24], (0..24).map(|i| (i * 7 % 16) as i32).collect());
    let b = Tensor::from_vec(&[24], (0..24).map(|i| ((i * 7 + 1 + i / 16) % 16) as i32).collect());
    let step = |(x, v): (Tensor, Tensor), _: ()| {
        let d = x.take(&b, 0) - x.take(&a, 0);
        let length = (&d * &d).sum(1).sqrt() + 0.1;
        let f = ((&length - 0.5) / &length).expand_dims(1) * &d;
        let forces = f.segment_sum(&a, 16) - f.segment_sum(&b, 16);
        let y = x.index_axis(1, 1);
        let ground = Tensor::stack(&[-0.5 * &v.index_axis(1, 0), -9.8 - 0.25 * &y], 1);
        let v = (&v + &(0.01 * (forces + ground))) * 0.99;
        ((&x + &(0.01 * &v), v), ())
    };
    let v0 = Tensor::zeros(DType::F32, &[16, 2]);
    let ((x, v), ()) = scan_with(step, (x0, v0), (), ScanOptions { length: Some(40), reverse: false });
    (x, v)
}

#[test]
fn a_mass_spring_system_computed_by_columns_keeps_its_bits() {
    let x0 = Tensor::from_vec(&[16, 2], (0..32).map(|i| ((i * 29 % 31) as f32 - 15.0) / 8.0).collect());
    let traced = trace(springs, &x0).unwrap();
    assert_eq!(split_kept(&traced.function), 2, "{}", traced.function);
    let (eager_x, eager_v) = springs(x0.clone());
    for threads in [1, 2] {
        let (on, off) = (jit(springs).threads(threads), jit(springs).simplify(false).threads(threads));
        for j in [&on, &off] {
            let (x, v) = j.call(&x0).unwrap();
            assert_eq!(bits(&x), bits(&eager_x), "positions, {threads} threads");
            assert_eq!(bits(&v), bits(&eager_v), "velocities, {threads} threads");
        }
    }
}
