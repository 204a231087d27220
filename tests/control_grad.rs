//! AD through control flow and user rules: `while_loop` (JVP; VJP with `max_iters` as a masked scan;
//! the error without it), `cond`/`switch`, `checkpoint` (remat), `custom_jvp`, `custom_vjp`.

use kiln::ir::{Function, Prim, UnaryOp};
use kiln::prelude::*;

fn s(x: f64) -> Tensor {
    Tensor::scalar(x)
}

fn v(xs: &[f64]) -> Tensor {
    Tensor::from_vec(&[xs.len()], xs.to_vec())
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * (1.0 + want.abs())
}

#[track_caller]
fn assert_close(got: f64, want: f64, tol: f64) {
    assert!(close(got, want, tol), "got {got}, want {want} (tol {tol})");
}

/// Central finite difference of a function of several f64 scalars, with respect to argument `i`.
fn fd(f: impl Fn(&[f64]) -> f64, at: &[f64], i: usize) -> f64 {
    let h = 1e-6;
    let (mut p, mut m) = (at.to_vec(), at.to_vec());
    p[i] += h;
    m[i] -= h;
    (f(&p) - f(&m)) / (2.0 * h)
}

// ---------------------------------------------------------------------------------------------
// while_loop

/// x ← x·a while x < 10 (`a` is captured: a body const). From x0 = 1, a = 3: 1 → 3 → 9 → 27 stops
/// after three steps, so locally x_final = x0·a³: ∂/∂x0 = a³ = 27, ∂/∂a = 3·x0·a² = 27.
fn grow(x: Tensor, a: Tensor, max_iters: Option<u64>) -> Tensor {
    let below = |x: &Tensor| x.lt(&Tensor::scalar_like(10.0, x.dtype()));
    let body = |x: Tensor| &x * &a;
    match max_iters {
        Some(n) => while_loop_bounded(below, body, x, n),
        None => while_loop(below, body, x),
    }
}

#[test]
fn while_bounded_grad_exact() {
    let g = grad(|(x, a): (Tensor, Tensor)| grow(x, a, Some(10)))((s(1.0), s(3.0)));
    assert_eq!((g.0.item::<f64>(), g.1.item::<f64>()), (27.0, 27.0));
    // max_iters = 2 stops first: x = x0·a² = 9, ∂/∂x0 = a² = 9, ∂/∂a = 2·x0·a = 6.
    let g = grad(|(x, a): (Tensor, Tensor)| grow(x, a, Some(2)))((s(1.0), s(3.0)));
    assert_eq!((g.0.item::<f64>(), g.1.item::<f64>()), (9.0, 6.0));
    // max_iters = 0: the identity, ∂/∂x0 = 1, ∂/∂a = 0.
    let g = grad(|(x, a): (Tensor, Tensor)| grow(x, a, Some(0)))((s(1.0), s(3.0)));
    assert_eq!((g.0.item::<f64>(), g.1.item::<f64>()), (1.0, 0.0));
    // Already ≥ 10: the body never runs.
    let g = grad(|(x, a): (Tensor, Tensor)| grow(x, a, Some(5)))((s(12.0), s(3.0)));
    assert_eq!((g.0.item::<f64>(), g.1.item::<f64>()), (1.0, 0.0));
}

/// A damped pendulum-like step on state (i: i32, x, v), `k` captured; 4 steps by the counter.
fn pendulum_step(i: &Tensor, x: &Tensor, v: &Tensor, k: &Tensor) -> (Tensor, Tensor, Tensor) {
    let x2 = x + 0.1 * v;
    let v2 = v - 0.1 * k * x.sin() - 0.05 * v * v;
    (i + &Tensor::scalar(1i32), x2, v2)
}

fn pendulum_loop(x: Tensor, v: Tensor, k: Tensor, max_iters: u64) -> Tensor {
    let (_, x, v) = while_loop_bounded(
        |(i, _, _): &(Tensor, Tensor, Tensor)| i.lt(&Tensor::scalar(4i32)),
        |(i, x, v)| pendulum_step(&i, &x, &v, &k),
        (Tensor::scalar(0i32), x, v),
        max_iters,
    );
    &x * &x + v
}

fn pendulum_unrolled(x: Tensor, v: Tensor, k: Tensor) -> Tensor {
    let mut st = (Tensor::scalar(0i32), x, v);
    for _ in 0..4 {
        st = pendulum_step(&st.0, &st.1, &st.2, &k);
    }
    &st.1 * &st.1 + st.2
}

#[test]
fn while_bounded_grad_matches_unrolled_and_finite_differences() {
    let at = [0.7, -0.3, 2.5];
    let args = (s(at[0]), s(at[1]), s(at[2]));
    let g = grad(|(x, v, k): (Tensor, Tensor, Tensor)| pendulum_loop(x, v, k, 10))(args.clone());
    let u = grad(|(x, v, k): (Tensor, Tensor, Tensor)| pendulum_unrolled(x, v, k))(args);
    let g = [g.0.item::<f64>(), g.1.item::<f64>(), g.2.item::<f64>()];
    let u = [u.0.item::<f64>(), u.1.item::<f64>(), u.2.item::<f64>()];
    let value = |p: &[f64]| pendulum_unrolled(s(p[0]), s(p[1]), s(p[2])).item::<f64>();
    for i in 0..3 {
        assert_close(g[i], u[i], 1e-13);
        assert_close(g[i], fd(value, &at, i), 1e-7);
    }
}

#[test]
fn while_bounded_grad_ignores_steps_after_the_stop() {
    // x ← sqrt(x − 4) while x > 20: 29 → 5 stops after one step (of 5 allowed). Had the masked steps
    // run the body, it would go on to sqrt(1) = 1 and sqrt(−3) = NaN; the gradient is that of one
    // step, d/dx sqrt(x − 4) = 1/(2·5) = 0.1.
    let f = |x: Tensor| {
        while_loop_bounded(
            |x: &Tensor| x.gt(&Tensor::scalar_like(20.0, x.dtype())),
            |x: Tensor| (x - 4.0).sqrt(),
            x,
            5,
        )
    };
    assert_eq!(grad(f)(s(29.0)).item::<f64>(), 0.1);
    // Traced: reverse mode is a scan (not unrolled), and the traced gradient evaluates the same.
    let t = trace(grad(f), &Tensor::placeholder(DType::F64, &[])).unwrap();
    let is_scan = |p: &Prim| matches!(p, Prim::Scan { .. });
    assert!(count(&t.function, &is_scan, true) >= 1, "{}", t.function);
    assert_eq!(t.eval(&s(29.0)).unwrap().item::<f64>(), 0.1);
}

#[test]
fn while_grad_without_max_iters_is_an_error() {
    let r =
        trace(|x: Tensor| grad(|x: Tensor| grow(x, s(3.0), None))(x), &Tensor::placeholder(DType::F64, &[]));
    let msg = r.expect_err("reverse mode of an unbounded while_loop must fail").to_string();
    assert!(msg.contains("max_iters") && msg.contains("while_loop"), "{msg}");
}

#[test]
#[should_panic(expected = "max_iters")]
fn while_grad_without_max_iters_panics_eagerly() {
    let _ = grad(|x: Tensor| grow(x, s(3.0), None))(s(1.0));
}

#[test]
fn while_jvp_unbounded() {
    // x0·a³ (three steps, see `grow`): tangent along x0 is a³ = 27, along a is 3·x0·a² = 27.
    let f = |(x, a): (Tensor, Tensor)| grow(x, a, None);
    let (y, t) = jvp(f, (s(1.0), s(3.0)), (s(1.0), s(0.0)));
    assert_eq!((y.item::<f64>(), t.item::<f64>()), (27.0, 27.0));
    let (_, t) = jvp(f, (s(1.0), s(3.0)), (s(0.0), s(1.0)));
    assert_eq!(t.item::<f64>(), 27.0);
    let (_, t) = jvp(f, (s(1.0), s(3.0)), (s(2.0), s(-1.0)));
    assert_eq!(t.item::<f64>(), 2.0 * 27.0 - 27.0);
    // A bounded loop keeps its bound: two steps, x0·a², tangent along a = 2·x0·a = 6.
    let (y, t) = jvp(|(x, a): (Tensor, Tensor)| grow(x, a, Some(2)), (s(1.0), s(3.0)), (s(0.0), s(1.0)));
    assert_eq!((y.item::<f64>(), t.item::<f64>()), (9.0, 6.0));
}

#[test]
fn while_jvp_with_integer_counter_in_state() {
    // (i, x) → (i + 1, x²) while i < 3: x⁸; d/dx = 8·x⁷ = 8·1.5⁷ = 8·17.0859375 = 136.6875.
    let f = |x: Tensor| {
        let (_, x) = while_loop(
            |(i, _): &(Tensor, Tensor)| i.lt(&Tensor::scalar(3i32)),
            |(i, x)| (i + &Tensor::scalar(1i32), &x * &x),
            (Tensor::scalar(0i32), x),
        );
        x
    };
    let (y, t) = jvp(f, s(1.5), s(1.0));
    assert_eq!((y.item::<f64>(), t.item::<f64>()), (25.62890625, 136.6875));
    // Forward over forward: the JVP is a while loop again; f''(x) = 56·x⁶ = 56·11.390625 = 637.875.
    let (_, t2) = jvp(|x: Tensor| jvp(f, x, s(1.0)).1, s(1.5), s(1.0));
    assert_eq!(t2.item::<f64>(), 637.875);
}

#[test]
fn grad_of_grad_through_bounded_while() {
    // a ↦ grow(1, a) = a³ (three steps at a = 3): second derivative 6·a = 18.
    let g2 = grad(grad(|a: Tensor| grow(s(1.0), a, Some(8))))(s(3.0));
    assert_eq!(g2.item::<f64>(), 18.0);
}

// ---------------------------------------------------------------------------------------------
// cond / switch

fn branchy(p: &Tensor, x: Tensor) -> Tensor {
    cond(p, |x: Tensor| x.sin() * 2.0, |x: Tensor| &x * &x, x)
}

#[test]
fn cond_grad_both_branches() {
    let g = grad(|x: Tensor| branchy(&Tensor::scalar(true), x))(s(0.5));
    assert_eq!(g.item::<f64>(), 2.0 * 0.5f64.cos());
    let g = grad(|x: Tensor| branchy(&Tensor::scalar(false), x))(s(0.5));
    assert_eq!(g.item::<f64>(), 1.0); // 2·x
    // Predicate computed from the input (the index carries no cotangent).
    let f = |x: Tensor| {
        let p = x.gt(&s(0.0));
        branchy(&p, x)
    };
    assert_eq!(grad(f)(s(0.5)).item::<f64>(), 2.0 * 0.5f64.cos());
    assert_eq!(grad(f)(s(-3.0)).item::<f64>(), -6.0);
}

#[test]
fn cond_jvp_both_branches() {
    let (y, t) = jvp(|x: Tensor| branchy(&Tensor::scalar(true), x), s(0.5), s(3.0));
    assert_eq!((y.item::<f64>(), t.item::<f64>()), (2.0 * 0.5f64.sin(), 6.0 * 0.5f64.cos()));
    let (y, t) = jvp(|x: Tensor| branchy(&Tensor::scalar(false), x), s(0.5), s(3.0));
    assert_eq!((y.item::<f64>(), t.item::<f64>()), (0.25, 3.0)); // 2·x·3
}

fn three_way(index: i32, x: Tensor) -> Tensor {
    switch(
        &Tensor::scalar(index),
        vec![Box::new(|x: Tensor| &x * &x), Box::new(|x: Tensor| x.sin()), Box::new(|x: Tensor| x * 3.0)],
        x,
    )
}

#[test]
fn switch_grad_and_jvp_with_clamped_index() {
    // Branch 0: 2x = 4 at 2; branch 1: cos 2; branch 2: 3. Indices clamp into 0..=2.
    let want = [(-3, 4.0), (0, 4.0), (1, 2.0f64.cos()), (2, 3.0), (7, 3.0), (i32::MAX, 3.0)];
    for (i, w) in want {
        assert_eq!(grad(|x: Tensor| three_way(i, x))(s(2.0)).item::<f64>(), w, "index {i}");
        assert_eq!(jvp(|x: Tensor| three_way(i, x), s(2.0), s(1.0)).1.item::<f64>(), w, "index {i}");
    }
}

#[test]
fn cond_grad_with_captured_operand() {
    // cond(x > 0, x·a, x − a): at x = 2 ∂x = a = 5, ∂a = x = 2; at x = −1 ∂x = 1, ∂a = −1.
    let f = |(x, a): (Tensor, Tensor)| {
        let p = x.gt(&s(0.0));
        cond(&p, |x: Tensor| &x * &a, |x: Tensor| &x - &a, x.clone())
    };
    let g = grad(f)((s(2.0), s(5.0)));
    assert_eq!((g.0.item::<f64>(), g.1.item::<f64>()), (5.0, 2.0));
    let g = grad(f)((s(-1.0), s(5.0)));
    assert_eq!((g.0.item::<f64>(), g.1.item::<f64>()), (1.0, -1.0));
}

#[test]
fn cond_with_integer_output_and_vector_operands() {
    // Outputs (sum of squares or of x, count): the integer output carries no cotangent.
    let f = |x: Tensor| {
        let (y, n) = cond(
            &x.sum(All).gt(&s(0.0)),
            |x: Tensor| ((&x * &x).sum(All), Tensor::scalar(1i32)),
            |x: Tensor| (x.sum(All), Tensor::scalar(2i32)),
            x,
        );
        y * n.astype(DType::F64)
    };
    assert_eq!(grad(f)(v(&[1.0, -0.5, 2.0])).to_vec::<f64>(), vec![2.0, -1.0, 4.0]);
    assert_eq!(grad(f)(v(&[-1.0, -0.5, 1.0])).to_vec::<f64>(), vec![2.0, 2.0, 2.0]);
}

#[test]
fn grad_of_grad_through_cond() {
    // x > 0: x³ (f'' = 6x = 12 at 2); else −x² (f'' = −2).
    let f = |x: Tensor| {
        let p = x.gt(&s(0.0));
        cond(&p, |x: Tensor| &x * &x * &x, |x: Tensor| -(&x * &x), x)
    };
    assert_eq!(grad(grad(f))(s(2.0)).item::<f64>(), 12.0);
    assert_eq!(grad(grad(f))(s(-1.0)).item::<f64>(), -2.0);
    // Forward over reverse (Hessian-vector product).
    assert_eq!(jvp(grad(f), s(2.0), s(1.0)).1.item::<f64>(), 12.0);
}

// ---------------------------------------------------------------------------------------------
// checkpoint

fn body(x: Tensor) -> Tensor {
    x.sin().sin() * &x
}

#[test]
fn checkpoint_gives_the_same_gradient() {
    let x = v(&[0.0, 0.5, -1.25, 3.0]);
    let plain = grad(|x: Tensor| body(x).sum(All))(x.clone()).to_vec::<f64>();
    let remat = grad(|x: Tensor| checkpoint(body)(x).sum(All))(x.clone()).to_vec::<f64>();
    // d/dx [sin(sin x)·x] = cos(sin x)·cos x·x + sin(sin x)
    for (i, &xi) in x.to_vec::<f64>().iter().enumerate() {
        let want = xi.sin().cos() * xi.cos() * xi + xi.sin().sin();
        assert_close(plain[i], want, 1e-15);
        assert_close(remat[i], want, 1e-15);
    }
    // Values are unchanged.
    assert_eq!(checkpoint(body)(x.clone()).to_vec::<f64>(), body(x).to_vec::<f64>());
}

fn count(f: &Function, pred: &dyn Fn(&Prim) -> bool, nested: bool) -> usize {
    f.eqns
        .iter()
        .map(|e| {
            let inner: usize =
                if nested { e.prim.subfunctions().iter().map(|g| count(g, pred, true)).sum() } else { 0 };
            usize::from(pred(&e.prim)) + inner
        })
        .sum()
}

#[test]
fn checkpoint_ir_recomputes_the_body() {
    let is_sin = |p: &Prim| matches!(p, Prim::Unary(UnaryOp::Sin));
    let is_ckpt = |p: &Prim| matches!(p, Prim::Checkpoint { .. });
    let x = Tensor::placeholder(DType::F64, &[4]);
    let t = trace(|x: Tensor| value_and_grad(|x: Tensor| checkpoint(body)(x).sum(All))(x), &x).unwrap();
    let f = &t.function;
    // The forward pass is one checkpoint equation holding the body (two sins) …
    assert_eq!(count(f, &is_ckpt, false), 1);
    let ckpt = f.eqns.iter().find(|e| is_ckpt(&e.prim)).unwrap();
    assert_eq!(count(ckpt.prim.subfunctions()[0], &is_sin, true), 2);
    // … and the backward pass recomputes the body outside it: the body appears twice.
    assert!(count(f, &is_sin, false) >= 2, "{f}");
    // Without checkpoint the forward's sins are shared with the backward pass.
    let t = trace(|x: Tensor| value_and_grad(|x: Tensor| body(x).sum(All))(x), &x).unwrap();
    assert_eq!(count(&t.function, &is_ckpt, true), 0);
    assert_eq!(
        count(&t.function, &is_sin, true) + 2,
        count(f, &is_sin, true),
        "remat adds exactly one copy of the body's two sins"
    );
}

#[test]
fn checkpoint_with_captured_tracer_and_jvp() {
    // f(x, a) = Σ sin(x·a): ∂/∂a = Σ cos(x·a)·x, with `a` captured inside the checkpoint.
    let f = |(x, a): (Tensor, Tensor)| checkpoint(|x: Tensor| (&x * &a).sin())(x).sum(All);
    let xs = [0.5, -2.0];
    let g = grad(f)((v(&xs), s(1.5)));
    let want: f64 = xs.iter().map(|&x| (x * 1.5f64).cos() * x).sum();
    assert_close(g.1.item::<f64>(), want, 1e-15);
    assert_eq!(g.0.to_vec::<f64>(), xs.iter().map(|&x| (x * 1.5f64).cos() * 1.5).collect::<Vec<_>>());
    let (_, t) = jvp(f, (v(&xs), s(1.5)), (v(&[0.0, 0.0]), s(1.0)));
    assert_close(t.item::<f64>(), want, 1e-15);
}

// ---------------------------------------------------------------------------------------------
// custom_jvp

fn log1pexp() -> impl Fn(Tensor) -> Tensor {
    custom_jvp(
        |x: Tensor| x.exp().log1p(),
        |x: Tensor, t: Tensor| (x.exp().log1p(), t * (1.0 - 1.0 / (x.exp() + 1.0))),
    )
}

#[test]
fn custom_jvp_safe_log1pexp() {
    // d/dx log(1 + eˣ) = 1 − 1/(1 + eˣ): 1/2 at 0; at 100 (eˣ = inf in f32) 1 − 1/inf = 1 where the
    // naive quotient eˣ/(1 + eˣ) is inf/inf; at −100, 1 + e⁻¹⁰⁰ rounds to 1 in f32: 1 − 1 = 0.
    let f = log1pexp();
    let x = Tensor::from_vec(&[3], vec![0.0f32, 100.0, -100.0]);
    let g = grad(|x: Tensor| f(x).sum(All))(x.clone());
    assert_eq!(g.to_vec::<f32>(), vec![0.5, 1.0, 0.0]);
    let (_, t) = jvp(&f, x, Tensor::from_vec(&[3], vec![2.0f32, 2.0, 2.0]));
    assert_eq!(t.to_vec::<f32>(), vec![1.0, 2.0, 0.0]);
    // Second order through the transposed rule: d²/dx² = eˣ/(1 + eˣ)² = 1/4 at 0.
    let g2 = grad(grad(|x: Tensor| log1pexp()(x)))(s(0.0));
    assert_eq!(g2.item::<f64>(), 0.25);
}

#[test]
fn custom_jvp_rule_is_used_not_the_function() {
    // f = x², but the rule says 10·t: grad, jvp and vjp all give 10 (transposing a linear rule).
    let f = custom_jvp(|x: Tensor| &x * &x, |x: Tensor, t: Tensor| (&x * &x, t * 10.0));
    assert_eq!(grad(&f)(s(3.0)).item::<f64>(), 10.0);
    assert_eq!(jvp(&f, s(3.0), s(0.5)).1.item::<f64>(), 5.0);
    let (y, pull) = vjp(&f, s(3.0));
    assert_eq!((y.item::<f64>(), pull(s(2.0)).item::<f64>()), (9.0, 20.0));
}

#[test]
fn custom_jvp_of_two_arguments() {
    // x·y with its product rule: ∇ = (y, x) = (3, 2); the tangent along (1, 1) is 5.
    let f = custom_jvp(
        |(x, y): (Tensor, Tensor)| &x * &y,
        |(x, y): (Tensor, Tensor), (tx, ty): (Tensor, Tensor)| (&x * &y, &tx * &y + &x * &ty),
    );
    let g = grad(&f)((s(2.0), s(3.0)));
    assert_eq!((g.0.item::<f64>(), g.1.item::<f64>()), (3.0, 2.0));
    assert_eq!(jvp(&f, (s(2.0), s(3.0)), (s(1.0), s(1.0))).1.item::<f64>(), 5.0);
}

#[test]
fn custom_jvp_rule_with_wrong_types_is_an_error() {
    let f = custom_jvp(|x: Tensor| x.clone(), |x: Tensor, _t: Tensor| (x.clone(), x.sum(All)));
    let err = trace(&f, &Tensor::placeholder(DType::F32, &[3])).expect_err("wrong tangent shape");
    assert!(err.to_string().contains("jvp rule"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// custom_vjp

fn clip_grad() -> impl Fn(Tensor) -> Tensor {
    custom_vjp(|x: Tensor| x, |x: Tensor| (x, ()), |(), g: Tensor| g.clip(-1.0, 1.0))
}

#[test]
fn custom_vjp_gradient_clipping() {
    let c = clip_grad();
    // The cotangent reaching clip_grad is 5 (or −5, or 0.25): clipped to [−1, 1].
    let x = v(&[1.0, -2.0]);
    assert_eq!(grad(|x: Tensor| (c(x) * 5.0).sum(All))(x.clone()).to_vec::<f64>(), vec![1.0, 1.0]);
    assert_eq!(grad(|x: Tensor| (c(x) * -5.0).sum(All))(x.clone()).to_vec::<f64>(), vec![-1.0, -1.0]);
    assert_eq!(grad(|x: Tensor| (c(x) * 0.25).sum(All))(x.clone()).to_vec::<f64>(), vec![0.25, 0.25]);
    // Values pass through.
    assert_eq!(c(x).to_vec::<f64>(), vec![1.0, -2.0]);
}

#[test]
fn custom_vjp_with_residuals_and_under_trace() {
    let sin = custom_vjp(|x: Tensor| x.sin(), |x: Tensor| (x.sin(), x.cos()), |c: Tensor, g: Tensor| c * g);
    let g = grad(|x: Tensor| sin(x).sum(All));
    assert_eq!(g(v(&[0.0, 1.0])).to_vec::<f64>(), vec![1.0, 1.0f64.cos()]);
    // The same traced to IR (the custom_vjp_call equation is staged, its rule inlined), then run.
    let t = trace(&g, &Tensor::placeholder(DType::F64, &[2])).unwrap();
    assert_eq!(t.eval(&v(&[0.0, 1.0])).unwrap().to_vec::<f64>(), vec![1.0, 1.0f64.cos()]);
}

#[test]
fn custom_vjp_bwd_capturing_an_outer_tracer() {
    // bwd scales the cotangent by `k`, an argument of the outer function: ∂/∂x = k = 4; the value
    // does not depend on k, and the rule treats k as a constant, so ∂/∂k = 0.
    let f = |(x, k): (Tensor, Tensor)| {
        let scaled = custom_vjp(|x: Tensor| x, |x: Tensor| (x, ()), |(), g: Tensor| g * &k);
        scaled(x).sum(All)
    };
    let g = grad(f)((v(&[1.0, 2.0]), s(4.0)));
    assert_eq!(g.0.to_vec::<f64>(), vec![4.0, 4.0]);
    assert_eq!(g.1.item::<f64>(), 0.0);
}

#[test]
fn custom_vjp_forward_mode_is_an_error() {
    let r = trace(|x: Tensor| jvp(clip_grad(), x.clone(), x).1, &Tensor::placeholder(DType::F64, &[2]));
    let msg = r.expect_err("jvp of custom_vjp must fail").to_string();
    assert!(msg.contains("forward-mode differentiation of a custom_vjp function is not supported"), "{msg}");
}

/// `sin` whose bwd rule is deliberately 3·cos: forward over reverse differentiates the rules, so its
/// "second derivative" is −3·sin, which tells the rules' ops from `f`'s.
fn sin_with_3cos_rule(x: Tensor) -> Tensor {
    custom_vjp(
        |x: Tensor| x.sin(),
        |x: Tensor| (x.sin(), x.clone()),
        |x: Tensor, g: Tensor| &g * &x.cos() * 3.0,
    )(x)
}

/// Regression: the program `grad` records kept the `custom_vjp_call` for the primal value, and
/// forward mode over it (`hessian`, `jvp(grad(f))`, `jacfwd(jacrev(f))`) refused it, while JAX runs
/// `fwd` there and differentiates `fwd` and `bwd` as ordinary code. Values: JAX 0.10.2, float64.
#[test]
fn forward_over_reverse_through_custom_vjp_differentiates_the_rules_as_jax() {
    let x = v(&[0.3, 1.0, -0.7]);
    let want = [-0.8865606199840186, -2.5244129544236893, 1.932653061713073];
    let check = |what: &str, got: Vec<f64>| {
        for (g, w) in got.iter().zip(want) {
            assert!(close(*g, w, 1e-13), "{what}: {got:?}, JAX {want:?}");
        }
    };
    let loss = |x: Tensor| sin_with_3cos_rule(x).sum(All);
    check("jvp(grad)", jvp(grad(loss), x.clone(), x.ones_like()).1.to_vec::<f64>());
    let h = hessian(loss)(x.clone());
    check("hessian diagonal", (0..3).map(|i| h.to_vec::<f64>()[4 * i]).collect());
    assert_eq!(h.abs().sum(All).item::<f64>(), want.iter().map(|w| w.abs()).sum::<f64>(), "off-diagonal");
    // `jacrev(f)` is `Clone`, as `jacfwd` needs.
    let j = jacfwd(jacrev(sin_with_3cos_rule))(x.clone());
    assert_eq!(j.shape().dims(), &[3, 3, 3]);
    check("jacfwd(jacrev) diagonal", (0..3).map(|i| j.to_vec::<f64>()[13 * i]).collect());
    // Under jit, the same program compiled.
    let h_jit = jit(move |x: Tensor| hessian(loss)(x)).call(&x).unwrap();
    check("jit(hessian) diagonal", (0..3).map(|i| h_jit.to_vec::<f64>()[4 * i]).collect());
    // Inside a scan body: JAX's jvp(grad(f)) of f(xs) = scan(c ↦ cv(c·x), 0.9, xs).
    let f = |xs: Tensor| scan(|c: Tensor, x: Tensor| (sin_with_3cos_rule(&c * &x), ()), s(0.9), xs).0;
    let got = jvp(grad(f), x.clone(), x.ones_like()).1.to_vec::<f64>();
    let want_scan = [16.80909449034844, -2.262320800383024, 3.1534941656126083];
    assert!(got.iter().zip(want_scan).all(|(g, w)| close(*g, w, 1e-13)), "{got:?}, JAX {want_scan:?}");
}

#[test]
#[should_panic(expected = "custom_vjp")]
fn custom_vjp_forward_mode_panics_eagerly() {
    let _ = jvp(clip_grad(), s(1.0), s(1.0));
}
