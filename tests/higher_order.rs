//! Higher-order derivatives and the user API (issue 3): `hessian` and `grad(grad(.))` against analytic
//! values on polynomials and `tanh`; Hessian-vector products by `jvp(grad(f))`; `jacfwd` = `jacrev` =
//! the analytic Jacobian; `value_and_grad_aux` keeps aux; `grad_argnums` selects arguments.

use kiln::prelude::*;

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * (1.0 + want.abs())
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, tol), "{what}[{k}]: got {g}, want {w} (got {got:?}, want {want:?})");
    }
}

/// f(x) = x³ + 2x²: f' = 3x² + 4x, f'' = 6x + 4.
fn cubic(x: Tensor) -> Tensor {
    &(&(&x * &x) * &x) + &(2.0 * &(&x * &x))
}

#[test]
fn grad_grad_of_a_cubic() {
    for x in [-2.0f64, -0.5, 0.0, 1.5, 3.0] {
        let d1 = grad(cubic)(Tensor::scalar(x)).item::<f64>();
        assert!(close(d1, 3.0 * x * x + 4.0 * x, 1e-12), "f'({x}) = {d1}");
        let d2 = grad(|x: Tensor| grad(cubic)(x))(Tensor::scalar(x)).item::<f64>();
        assert!(close(d2, 6.0 * x + 4.0, 1e-12), "f''({x}) = {d2}");
        // Third derivative: 6 everywhere.
        let d3 = grad(|x: Tensor| grad(|x: Tensor| grad(cubic)(x))(x))(Tensor::scalar(x)).item::<f64>();
        assert!(close(d3, 6.0, 1e-12), "f'''({x}) = {d3}");
    }
}

#[test]
fn grad_grad_in_f32() {
    // f''(1.5) = 6·1.5 + 4 = 13, exact in f32.
    let d2 = grad(|x: Tensor| grad(cubic)(x))(Tensor::scalar(1.5f32)).item::<f32>();
    assert_eq!(d2, 13.0);
}

#[test]
fn hessian_of_a_cubic_is_diagonal() {
    // f(x) = Σ x_i³ + 2 x_i²: H = diag(6 x_i + 4).
    let x = [0.5f64, -1.0, 2.0];
    let h = hessian(|x: Tensor| cubic(x).sum(All))(Tensor::from_vec(&[3], x.to_vec()));
    assert_eq!(h.shape().dims(), &[3, 3]);
    let mut want = vec![0.0; 9];
    for i in 0..3 {
        want[i * 3 + i] = 6.0 * x[i] + 4.0;
    }
    assert_close("hessian", &h.to_vec::<f64>(), &want, 1e-12);
}

/// A = [[1, 2, 0], [-1, 3, 4], [0.5, 0, -2]] (not symmetric).
fn a_matrix() -> Tensor {
    Tensor::from_vec(&[3, 3], vec![1.0f64, 2.0, 0.0, -1.0, 3.0, 4.0, 0.5, 0.0, -2.0])
}

/// x^T A x.
fn quad(x: Tensor) -> Tensor {
    x.dot(&a_matrix().dot(&x))
}

#[test]
fn hessian_of_a_quadratic_form_is_a_plus_a_transpose() {
    let a = a_matrix().to_vec::<f64>();
    let mut want = vec![0.0; 9];
    for i in 0..3 {
        for j in 0..3 {
            want[i * 3 + j] = a[i * 3 + j] + a[j * 3 + i];
        }
    }
    for x in [[0.0f64, 0.0, 0.0], [1.0, -2.0, 0.5]] {
        let h = hessian(quad)(Tensor::from_vec(&[3], x.to_vec()));
        assert_eq!(h.shape().dims(), &[3, 3]);
        assert_close("hessian x^T A x", &h.to_vec::<f64>(), &want, 1e-12);
        // grad = (A + A^T) x.
        let g = grad(quad)(Tensor::from_vec(&[3], x.to_vec())).to_vec::<f64>();
        let want_g: Vec<f64> = (0..3).map(|i| (0..3).map(|j| want[i * 3 + j] * x[j]).sum()).collect();
        assert_close("grad x^T A x", &g, &want_g, 1e-12);
    }
}

#[test]
fn second_derivative_of_tanh() {
    // d/dx tanh = sech² = 1 - tanh²; d²/dx² tanh = -2 tanh sech².
    for x in [-2.0f64, -0.3, 0.0, 0.7, 1.9] {
        let t = x.tanh();
        let sech2 = 1.0 - t * t;
        let d1 = grad(|x: Tensor| x.tanh())(Tensor::scalar(x)).item::<f64>();
        assert!(close(d1, sech2, 1e-12), "tanh'({x}) = {d1}");
        let d2 = grad(|x: Tensor| grad(|x: Tensor| x.tanh())(x))(Tensor::scalar(x)).item::<f64>();
        assert!(close(d2, -2.0 * t * sech2, 1e-12), "tanh''({x}) = {d2}");
        let h = hessian(|x: Tensor| x.tanh().sum(All))(Tensor::from_vec(&[1], vec![x])).to_vec::<f64>();
        assert!(close(h[0], -2.0 * t * sech2, 1e-12), "hessian tanh({x}) = {h:?}");
    }
}

#[test]
fn hessian_vector_products_by_jvp_of_grad() {
    // f(x) = x^T A x + Σ tanh(x_i): H = A + A^T + diag(-2 tanh sech²). Hv by forward over reverse.
    let x = [0.3f64, -0.8, 1.2];
    let v = [1.0f64, 2.0, -1.0];
    let f = |x: Tensor| &quad(x.clone()) + &x.tanh().sum(All);
    let (g, hv) =
        jvp(|x: Tensor| grad(f)(x), Tensor::from_vec(&[3], x.to_vec()), Tensor::from_vec(&[3], v.to_vec()));
    let a = a_matrix().to_vec::<f64>();
    let h = |i: usize, j: usize| {
        let t = x[i].tanh();
        a[i * 3 + j] + a[j * 3 + i] + if i == j { -2.0 * t * (1.0 - t * t) } else { 0.0 }
    };
    let want: Vec<f64> = (0..3).map(|i| (0..3).map(|j| h(i, j) * v[j]).sum()).collect();
    assert_close("Hv", &hv.to_vec::<f64>(), &want, 1e-12);
    let want_g: Vec<f64> = (0..3)
        .map(|i| {
            (0..3).map(|j| (a[i * 3 + j] + a[j * 3 + i]) * x[j]).sum::<f64>() + 1.0 - x[i].tanh().powi(2)
        })
        .collect();
    assert_close("grad", &g.to_vec::<f64>(), &want_g, 1e-12);
}

/// f(x0, x1, x2) = (x0 x1, sin x2, x0 + x2², exp(x1)) with the analytic Jacobian (4×3).
fn vec_fn(x: Tensor) -> Tensor {
    let c = |i: i64| x.index(i).reshape(&[1]);
    let (x0, x1, x2) = (c(0), c(1), c(2));
    Tensor::concatenate(&[&x0 * &x1, x2.sin(), &x0 + &(&x2 * &x2), x1.exp()], 0)
}

#[test]
fn jacfwd_and_jacrev_agree_with_the_analytic_jacobian() {
    let x = [0.5f64, -1.5, 2.0];
    #[rustfmt::skip]
    let want = vec![
        x[1], x[0], 0.0,
        0.0, 0.0, x[2].cos(),
        1.0, 0.0, 2.0 * x[2],
        0.0, x[1].exp(), 0.0,
    ];
    let jf = jacfwd(vec_fn)(Tensor::from_vec(&[3], x.to_vec()));
    let jr = jacrev(vec_fn)(Tensor::from_vec(&[3], x.to_vec()));
    assert_eq!(jf.shape().dims(), &[4, 3]);
    assert_eq!(jr.shape().dims(), &[4, 3]);
    assert_close("jacfwd", &jf.to_vec::<f64>(), &want, 1e-12);
    assert_close("jacrev", &jr.to_vec::<f64>(), &want, 1e-12);
}

#[test]
fn jacobians_of_a_matrix_function_have_out_in_shape() {
    // f(X) = X ⊙ X for X [2, 2]: J[i, j, k, l] = 2 X[i, j] δ_ik δ_jl; shape [2, 2, 2, 2].
    let xv = [1.0f64, -2.0, 0.5, 3.0];
    let x = Tensor::from_vec(&[2, 2], xv.to_vec());
    let jf = jacfwd(|x: Tensor| &x * &x)(x.clone());
    let jr = jacrev(|x: Tensor| &x * &x)(x);
    let mut want = vec![0.0; 16];
    for p in 0..4 {
        want[p * 4 + p] = 2.0 * xv[p];
    }
    for j in [jf, jr] {
        assert_eq!(j.shape().dims(), &[2, 2, 2, 2]);
        assert_close("jacobian of x*x", &j.to_vec::<f64>(), &want, 0.0);
    }
}

#[test]
fn value_and_grad_aux_returns_aux_unchanged() {
    // loss = Σ x², aux = (x + 1, an i32 counter): aux comes back as computed, not differentiated.
    let f = |x: Tensor| {
        let loss = (&x * &x).sum(All);
        (loss, (&x + 1.0, Tensor::scalar(7i32)))
    };
    let ((loss, (aux_x, aux_n)), g) = value_and_grad_aux(f)(Tensor::from_vec(&[3], vec![1.0f64, -2.0, 0.5]));
    assert_eq!(loss.item::<f64>(), 1.0 + 4.0 + 0.25);
    assert_eq!(aux_x.to_vec::<f64>(), vec![2.0, -1.0, 1.5]);
    assert_eq!(aux_n.item::<i32>(), 7);
    assert_eq!(g.to_vec::<f64>(), vec![2.0, -4.0, 1.0]);
    // value_and_grad agrees.
    let (v, g2) = value_and_grad(|x: Tensor| (&x * &x).sum(All))(Tensor::from_vec(&[2], vec![3.0f64, 4.0]));
    assert_eq!(v.item::<f64>(), 25.0);
    assert_eq!(g2.to_vec::<f64>(), vec![6.0, 8.0]);
}

#[test]
fn grad_argnums_selects_arguments() {
    // f(x, y, n) = Σ x² y + n (n an i32 that is never differentiated): ∂/∂x = 2 x y, ∂/∂y = Σ x².
    let f = |(x, y, n): (Tensor, Tensor, Tensor)| &(&(&x * &x) * &y).sum(All) + &n.astype(DType::F64);
    let args = || (Tensor::from_vec(&[2], vec![1.0f64, 3.0]), Tensor::scalar(2.0f64), Tensor::scalar(5i32));
    let (gx, gy, gn) = grad_argnums(f, &[0])(args());
    assert_eq!(gx.to_vec::<f64>(), vec![4.0, 12.0]);
    assert_eq!(gy.item::<f64>(), 0.0, "unselected argument gets zeros");
    assert_eq!(gn.item::<i32>(), 0);
    let (gx, gy, _) = grad_argnums(f, &[1])(args());
    assert_eq!(gx.to_vec::<f64>(), vec![0.0, 0.0]);
    assert_eq!(gy.item::<f64>(), 10.0);
    let (gx, gy, _) = grad_argnums(f, &[0, 1])(args());
    assert_eq!(gx.to_vec::<f64>(), vec![4.0, 12.0]);
    assert_eq!(gy.item::<f64>(), 10.0);
}

#[test]
fn grad_of_grad_inside_a_trace_is_a_function() {
    // Tracing grad(grad(cubic)) gives IR that evaluates to f''(x) = 6x + 4.
    let traced =
        trace(|x: Tensor| grad(|x: Tensor| grad(cubic)(x))(x), &Tensor::placeholder(DType::F64, &[]))
            .unwrap();
    let v = traced.eval(&Tensor::scalar(2.0f64)).unwrap().item::<f64>();
    assert_eq!(v, 16.0);
}
