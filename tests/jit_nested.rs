//! `jit` inside other transforms (JAX's composition): a jitted function called on tracers, or while
//! another function is traced, is staged as one `call` equation, so `grad`, `jvp`, `vmap` and an
//! outer `jit` of it give the same values as the plain function (hand-computed here).

use kiln::ir::{DType, Prim};
use kiln::prelude::*;

/// f(x) = Σ sin(x)·x; ∂f/∂x = cos(x)·x + sin(x).
fn f(x: Tensor) -> Tensor {
    (x.sin() * &x).sum(All)
}

fn df(x: f64) -> f64 {
    x.cos() * x + x.sin()
}

fn xs() -> Tensor {
    Tensor::from_vec(&[3], vec![0.5f64, -1.0, 2.0])
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{a:?} vs {b:?}");
    }
}

#[test]
fn a_jit_call_inside_a_trace_is_one_call_equation() {
    let jf = jit(f);
    let traced =
        trace(|x: Tensor| jf.call(&x).unwrap() * 2.0, &Tensor::placeholder(DType::F64, &[3])).unwrap();
    let calls = traced.function.eqns.iter().filter(|e| matches!(e.prim, Prim::Call { .. })).count();
    assert_eq!(calls, 1, "{}", traced.function);
    // The staged program evaluates to 2·f(x) with the interpreter.
    let want: f64 = [0.5f64, -1.0, 2.0].iter().map(|x| 2.0 * x.sin() * x).sum();
    assert!((traced.eval(&xs()).unwrap().item::<f64>() - want).abs() < 1e-12);
}

#[test]
fn grad_of_a_jitted_function() {
    let jf = jit(f);
    let g = grad(|x: Tensor| jf.call(&x).unwrap())(xs());
    close(&g.to_vec::<f64>(), &[df(0.5), df(-1.0), df(2.0)]);
    // Forward mode through the call: J·t with t = 1 is the sum of the gradient.
    let (y, t) = jvp(|x: Tensor| jf.call(&x).unwrap(), xs(), Tensor::ones(DType::F64, &[3]));
    close(&[y.item::<f64>()], &[f(xs()).item::<f64>()]);
    close(&[t.item::<f64>()], &[df(0.5) + df(-1.0) + df(2.0)]);
}

#[test]
fn vmap_of_a_jitted_function() {
    let jf = jit(f);
    let batch = Tensor::from_vec(&[2, 3], vec![0.5f64, -1.0, 2.0, 1.0, 0.0, -0.5]);
    let ys = vmap(|x: Tensor| jf.call(&x).unwrap(), 0, 0)(batch);
    let row = |r: [f64; 3]| r.iter().map(|x| x.sin() * x).sum::<f64>();
    close(&ys.to_vec::<f64>(), &[row([0.5, -1.0, 2.0]), row([1.0, 0.0, -0.5])]);
}

#[test]
fn jit_of_jit_and_jit_of_grad_of_jit() {
    let inner = jit(|x: Tensor| x.exp() + 1.0);
    let outer = jit(|x: Tensor| inner.call(&x).unwrap() * 3.0);
    let y = outer.call(&Tensor::from_vec(&[2], vec![0.0f64, 1.0])).unwrap();
    close(&y.to_vec::<f64>(), &[3.0 * 2.0, 3.0 * (1.0f64.exp() + 1.0)]);
    let jf = jit(f);
    let g = jit(grad(|x: Tensor| jf.call(&x).unwrap()));
    close(&g.call(&xs()).unwrap().to_vec::<f64>(), &[df(0.5), df(-1.0), df(2.0)]);
}

#[test]
fn a_jitted_closure_over_an_outer_tracer_takes_it_as_an_operand() {
    // d/da Σ (x·a)² = Σ 2·x²·a; x = [1, 2, 3], a = 0.5: 2·14·0.5 = 14.
    let x = Tensor::from_vec(&[3], vec![1.0f64, 2.0, 3.0]);
    let g = grad(|a: Tensor| {
        let scaled = jit(|x: Tensor| (&x * &a).square().sum(All));
        scaled.call(&x).unwrap()
    })(Tensor::scalar(0.5f64));
    assert_eq!(g.item::<f64>(), 14.0);
    // Compiled as a whole: the same value.
    let outer = jit(grad(|a: Tensor| jit(|x: Tensor| (&x * &a).square().sum(All)).call(&x).unwrap()));
    assert_eq!(outer.call(&Tensor::scalar(0.5f64)).unwrap().item::<f64>(), 14.0);
}

#[test]
fn a_trace_error_inside_a_nested_jit_is_the_outer_calls_err() {
    let bad = jit(|x: Tensor| &x + &Tensor::from_vec(&[2], vec![1.0f64, 2.0]));
    let outer = jit(|x: Tensor| bad.call(&x).unwrap() * 2.0);
    let err = outer.call(&xs()).unwrap_err();
    let Error::Op { op, at, .. } = &err else { panic!("{err}") };
    assert_eq!(op, "add", "{err}");
    assert!(at.as_ref().is_some_and(|l| l.file.ends_with("jit_nested.rs")), "{err}");
}
