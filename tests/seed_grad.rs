//! The gradient of the seed program (issue 3, "Checked by"): 64-point periodic diffusion
//! `u' = u + dt·alpha·(roll(u,1) - 2u + roll(u,-1))`, dt = 0.1, alpha = 0.5, 5 steps from
//! u[0] = 1, u[1] = 0.5, u[63] = -0.25 (see `tests/seed_program.rs`), loss `Σ u_5²`, in f64.
//!
//! Hand derivation. With `L` the periodic Laplacian (symmetric) and `M = I + dt·alpha·L` (symmetric,
//! commuting with `L`): `u_5 = M^5 u_0`, so
//! * `∂loss/∂u_0 = 2 (M^5)^T M^5 u_0 = 2 M^10 u_0`;
//! * `∂M/∂alpha = dt·L`, `∂u_5/∂alpha = Σ_k M^k (dt L) M^(4-k) u_0 = 5 dt L M^4 u_0`, so
//!   `∂loss/∂alpha = 2 <u_5, 5 dt L M^4 u_0> = 10 dt <M^5 u_0, L M^4 u_0>`.
//!
//! Exactly: `M = A/20` with the integer matrix `A = 18 I + S + S^-1` (S the cyclic shift), and
//! `v = 4 u_0` is integer, so `∂loss/∂u_0 = 2 A^10 v / (4·20^10)` and
//! `∂loss/∂alpha = 10·(1/10)·<A^5 v, L A^4 v> / (16·20^9)` — integers (i128) divided once, below.
//! These are compared with kiln's `grad` (unrolled and as a `scan`) and with central differences.

use kiln::prelude::*;

const N: usize = 64;
const DT: f64 = 0.1;
const ALPHA: f64 = 0.5;

fn start() -> Vec<f64> {
    let mut u = vec![0.0; N];
    u[0] = 1.0;
    u[1] = 0.5;
    u[63] = -0.25;
    u
}

fn step(u: &Tensor, alpha: &Tensor) -> Tensor {
    let lap = u.roll(1, 0) - 2.0 * u + u.roll(-1, 0);
    u + &(&(DT * alpha) * &lap)
}

fn loss_unrolled((u, alpha): (Tensor, Tensor)) -> Tensor {
    let mut u = u;
    for _ in 0..5 {
        u = step(&u, &alpha);
    }
    (&u * &u).sum(All)
}

fn loss_scan((u, alpha): (Tensor, Tensor)) -> Tensor {
    let opts = ScanOptions { length: Some(5), reverse: false };
    let u5 = scan_with(|u: Tensor, (): ()| (step(&u, &alpha), ()), u, (), opts).0;
    (&u5 * &u5).sum(All)
}

/// `A w` with `A = 18 I + S + S^-1` in exact integers.
fn apply_a(w: &[i128]) -> Vec<i128> {
    (0..N).map(|i| 18 * w[i] + w[(i + N - 1) % N] + w[(i + 1) % N]).collect()
}

/// `L w = w[i-1] - 2 w[i] + w[i+1]`.
fn apply_l(w: &[i128]) -> Vec<i128> {
    (0..N).map(|i| w[(i + N - 1) % N] - 2 * w[i] + w[(i + 1) % N]).collect()
}

fn a_pow(v: &[i128], k: usize) -> Vec<i128> {
    (0..k).fold(v.to_vec(), |w, _| apply_a(&w))
}

/// The hand-derived gradients: (∂/∂u_0, ∂/∂alpha), each computed exactly then rounded once.
fn exact_gradients() -> (Vec<f64>, f64) {
    let v: Vec<i128> = start().iter().map(|&x| (4.0 * x) as i128).collect();
    let denom_u = 4 * 20i128.pow(10);
    let g_u = a_pow(&v, 10).iter().map(|&n| (2 * n) as f64 / denom_u as f64).collect();
    // ∂/∂alpha = 10·dt·<A^5 v, L A^4 v>/(4·20^5 · 4·20^4); 10·dt = 1.
    let (a5, la4) = (a_pow(&v, 5), apply_l(&a_pow(&v, 4)));
    let dot: i128 = a5.iter().zip(&la4).map(|(a, b)| a * b).sum();
    let g_alpha = dot as f64 / (16 * 20i128.pow(9)) as f64;
    (g_u, g_alpha)
}

/// The same derivation in plain f64 loops (M applied directly), an independent second check.
fn loop_gradients() -> (Vec<f64>, f64) {
    let c = DT * ALPHA;
    let lap =
        |u: &[f64]| (0..N).map(|i| u[(i + N - 1) % N] - 2.0 * u[i] + u[(i + 1) % N]).collect::<Vec<_>>();
    let m = |u: &[f64]| lap(u).iter().zip(u).map(|(l, x)| x + c * l).collect::<Vec<_>>();
    let m_pow = |u: &[f64], k: usize| (0..k).fold(u.to_vec(), |w, _| m(&w));
    let u0 = start();
    let g_u = m_pow(&u0, 10).iter().map(|x| 2.0 * x).collect();
    let dot: f64 = m_pow(&u0, 5).iter().zip(lap(&m_pow(&u0, 4))).map(|(a, b)| a * b).sum();
    (g_u, 10.0 * DT * dot)
}

fn args(u: &[f64], alpha: f64) -> (Tensor, Tensor) {
    (Tensor::from_vec(&[N], u.to_vec()), Tensor::scalar(alpha))
}

/// Central differences of `loss` (evaluated eagerly by kiln) at the seed point.
fn fd_gradients(loss: fn((Tensor, Tensor)) -> Tensor) -> (Vec<f64>, f64) {
    let h = 1e-6;
    let eval = |u: &[f64], a: f64| loss(args(u, a)).item::<f64>();
    let u0 = start();
    let g_u = (0..N)
        .map(|i| {
            let (mut p, mut m) = (u0.clone(), u0.clone());
            p[i] += h;
            m[i] -= h;
            (eval(&p, ALPHA) - eval(&m, ALPHA)) / (2.0 * h)
        })
        .collect();
    let g_a = (eval(&u0, ALPHA + h) - eval(&u0, ALPHA - h)) / (2.0 * h);
    (g_u, g_a)
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: got {g}, want {w}");
    }
}

#[test]
fn hand_derivations_agree() {
    let (eu, ea) = exact_gradients();
    let (lu, la) = loop_gradients();
    assert_close("exact vs loops, u", &eu, &lu, 1e-14);
    assert!((ea - la).abs() <= 1e-14 * ea.abs(), "{ea} vs {la}");
    // Sanity: ∂loss/∂alpha < 0 (diffusion lowers Σu², faster with larger alpha) and the gradient
    // is large where the start is.
    assert!(ea < 0.0);
    assert!(eu[0] > eu[2] && eu[0] > 1.0);
}

fn check(loss: fn((Tensor, Tensor)) -> Tensor) {
    let (eu, ea) = exact_gradients();
    let (gu, ga) = grad(loss)(args(&start(), ALPHA));
    let (gu, ga) = (gu.to_vec::<f64>(), ga.item::<f64>());
    assert_close("grad u vs hand derivation", &gu, &eu, 1e-12);
    assert!((ga - ea).abs() <= 1e-12 * ea.abs(), "grad alpha {ga}, hand derivation {ea}");
    let (fu, fa) = fd_gradients(loss);
    assert_close("grad u vs finite differences", &gu, &fu, 1e-7);
    assert!((ga - fa).abs() <= 1e-7 * (1.0 + fa.abs()), "grad alpha {ga}, finite differences {fa}");
    // value_and_grad's value is the loss.
    let (v, _) = value_and_grad(loss)(args(&start(), ALPHA));
    let u5: f64 = {
        let c = DT * ALPHA;
        let mut u = start();
        for _ in 0..5 {
            u = (0..N).map(|i| u[i] + c * (u[(i + N - 1) % N] - 2.0 * u[i] + u[(i + 1) % N])).collect();
        }
        u.iter().map(|x| x * x).sum()
    };
    assert!((v.item::<f64>() - u5).abs() <= 1e-14);
}

#[test]
fn seed_gradient_unrolled() {
    check(loss_unrolled);
}

#[test]
fn seed_gradient_through_scan() {
    check(loss_scan);
}

#[test]
fn seed_gradient_as_traced_ir_contains_one_reverse_scan_pass() {
    // The gradient of the scan version traced to IR evaluates to the same numbers.
    let traced = trace(
        |(u, a): (Tensor, Tensor)| grad(loss_scan)((u, a)),
        &(Tensor::placeholder(DType::F64, &[N]), Tensor::placeholder(DType::F64, &[])),
    )
    .unwrap();
    let scans = traced.function.eqns.iter().filter(|e| e.prim.name() == "scan").count();
    assert!(scans >= 1, "the gradient of a scan is computed by a scan:\n{}", traced.function);
    let (gu, ga) = traced.eval(&args(&start(), ALPHA)).unwrap();
    let (eu, ea) = exact_gradients();
    assert_close("traced grad u", &gu.to_vec::<f64>(), &eu, 1e-12);
    assert!((ga.item::<f64>() - ea).abs() <= 1e-12 * ea.abs());
}
