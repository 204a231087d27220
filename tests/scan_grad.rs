//! Autodiff through `scan` (DESIGN §5, issue 3): reverse mode by a reverse scan under each
//! checkpoint policy, checked against the same program unrolled; the transformed IR's size does not
//! grow with the number of steps; ad-cases 18, 19 and 22; forward mode against finite differences.

use kiln::ir::{Function, Prim};
use kiln::methods::All;
use kiln::prelude::*;
use kiln::{Checkpoint, lax, with_checkpoint};

const POLICIES: [Checkpoint; 4] =
    [Checkpoint::Auto, Checkpoint::Sqrt, Checkpoint::Every(7), Checkpoint::StoreAll];

fn f64s(shape: &[usize], v: Vec<f64>) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn f32s(shape: &[usize], v: Vec<f32>) -> Tensor {
    Tensor::from_vec(shape, v)
}

/// Deterministic pseudo-random values in [-1, 1) (a 64-bit LCG).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

const S: usize = 3;

/// The step of the test program: `c' = c + 0.01·tanh(a·c + x)`, `y = c²`.
fn step(a: &Tensor, c: &Tensor, x: &Tensor) -> (Tensor, Tensor) {
    let c1 = c + &((a * c + x).tanh() * 0.01);
    (c1, c * c)
}

/// `loss(a, c0, xs) = Σ c_T² + 10⁻³·Σ ys` with the steps run by `scan`.
fn loss_scan((a, c0, xs): (Tensor, Tensor, Tensor)) -> Tensor {
    let (c, ys) = scan(|c: Tensor, x: Tensor| step(&a, &c, &x), c0, xs);
    (&c * &c).sum(All) + ys.sum(All) * 1e-3
}

/// The same loss with the steps unrolled in Rust.
fn loss_unrolled((a, c0, xs): (Tensor, Tensor, Tensor)) -> Tensor {
    let t = xs.shape().dims()[0];
    let mut c = c0;
    let mut ysum = Tensor::scalar(0.0f64);
    for i in 0..t {
        let x = lax::reshape(&lax::slice(&xs, &[i, 0], &[i + 1, S], &[1, 1]), &[S]);
        let (c1, y) = step(&a, &c, &x);
        ysum = ysum + y.sum(All);
        c = c1;
    }
    (&c * &c).sum(All) + ysum * 1e-3
}

fn program_args(t: usize) -> (Tensor, Tensor, Tensor) {
    (Tensor::scalar(1.3f64), f64s(&[S], vec![0.5, -0.25, 1.0]), f64s(&[t, S], values(t * S, 7)))
}

fn assert_close(got: &Tensor, want: &Tensor, rtol: f64, what: &str) {
    let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
    assert_eq!(g.len(), w.len(), "{what}: length");
    for (i, (g, w)) in g.iter().zip(&w).enumerate() {
        assert!((g - w).abs() <= rtol * w.abs().max(1e-300), "{what}[{i}]: {g} vs {w}");
    }
}

#[test]
fn grad_of_1000_step_scan_equals_unrolled_for_each_policy() {
    let args = program_args(1000);
    let want = grad(loss_unrolled)(args.clone());
    for policy in POLICIES {
        let got = with_checkpoint(policy, || grad(loss_scan)(args.clone()));
        assert_close(&got.0, &want.0, 1e-10, &format!("{policy:?} d/da"));
        assert_close(&got.1, &want.1, 1e-10, &format!("{policy:?} d/dc0"));
        assert_close(&got.2, &want.2, 1e-10, &format!("{policy:?} d/dxs"));
    }
}

/// Every equation, recursively through sub-functions.
fn eqn_count(f: &Function) -> usize {
    f.eqns.iter().map(|e| 1 + e.prim.subfunctions().into_iter().map(eqn_count).sum::<usize>()).sum()
}

fn has_reverse_scan(f: &Function) -> bool {
    f.eqns.iter().any(|e| {
        matches!(e.prim, Prim::Scan { reverse: true, .. })
            || e.prim.subfunctions().into_iter().any(has_reverse_scan)
    })
}

fn traced_grad(t: usize, policy: Checkpoint) -> Function {
    let args = (
        Tensor::placeholder(DType::F64, &[]),
        Tensor::placeholder(DType::F64, &[S]),
        Tensor::placeholder(DType::F64, &[t, S]),
    );
    with_checkpoint(policy, || trace(grad(loss_scan), &args)).expect("traces").function
}

#[test]
fn grad_ir_is_a_reverse_scan_whose_size_does_not_grow_with_length() {
    for policy in POLICIES {
        let (small, large) = (traced_grad(10, policy), traced_grad(1000, policy));
        assert!(has_reverse_scan(&large), "{policy:?}: no reverse scan in\n{large}");
        // T = 10 and T = 1000 both have a remainder segment for Auto (k = 4, 32) and Every(7).
        assert_eq!(eqn_count(&small), eqn_count(&large), "{policy:?}: IR size depends on T");
        assert!(eqn_count(&large) < 1000, "{policy:?}: {} equations", eqn_count(&large));
    }
}

/// ad-cases 18 `reverse_scan_and_flip`: a reverse scan consumes xs from the end but stores ys at the
/// input positions; its gradient and flip's.
#[test]
fn case_18_reverse_scan_and_flip() {
    let xs = f32s(&[4], vec![1.0, 2.0, 3.0, 4.0]);
    let w = f32s(&[4], vec![1.0, 2.0, 3.0, 4.0]);
    let body = |c: Tensor, x: Tensor| {
        let s = &c + &x;
        (s.clone(), s)
    };
    let rev = ScanOptions { length: None, reverse: true };
    let (c, ys) = scan_with(body, Tensor::scalar(0.0f32), xs.clone(), rev);
    assert_eq!(c.item::<f32>(), 10.0);
    // Visits 4, 3, 2, 1: running sums 4, 7, 9, 10 stored at positions 3, 2, 1, 0.
    assert_eq!(ys.to_vec::<f32>(), vec![10.0, 9.0, 7.0, 4.0]);
    let (_, ys_fwd) = scan(body, Tensor::scalar(0.0f32), xs.clone());
    assert_eq!(ys_fwd.to_vec::<f32>(), vec![1.0, 3.0, 6.0, 10.0]);
    for policy in POLICIES {
        // ys[i] = Σ_{j ≥ i} x_j, so d Σ w·ys / dx_j = Σ_{i ≤ j} w_i = cumsum(w) = [1, 3, 6, 10].
        let g = with_checkpoint(policy, || {
            grad(|x: Tensor| (&w * &scan_with(body, Tensor::scalar(0.0f32), x, rev).1).sum(All))(xs.clone())
        });
        assert_eq!(g.to_vec::<f32>(), vec![1.0, 3.0, 6.0, 10.0], "{policy:?}");
    }
    let g = grad(|x: Tensor| (&w * &lax::rev(&x, &[0])).sum(All))(xs);
    assert_eq!(g.to_vec::<f32>(), vec![4.0, 3.0, 2.0, 1.0]);
}

/// ad-cases 19 `scan_vjp_wrt_xs`: reverse mode with respect to the scanned sequence.
#[test]
fn case_19_scan_vjp_wrt_xs() {
    let ns = f32s(&[5], vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    let run = |a: Tensor, ns: Tensor| {
        scan(
            |x: Tensor, n: Tensor| {
                let s = &x + &(&a * &n);
                (s.clone(), s)
            },
            Tensor::scalar(0.0f32),
            ns,
        )
        .1
    };
    let a = Tensor::scalar(1.0f32);
    assert_eq!(run(a.clone(), ns.clone()).to_vec::<f32>(), vec![0.0, 1.0, 3.0, 6.0, 10.0]);
    // xs_i = Σ_{j ≤ i} a·n_j: the Jacobian is lower-triangular ones.
    let tril: Vec<f32> = (0..25).map(|k| if k % 5 <= k / 5 { 1.0 } else { 0.0 }).collect();
    for policy in POLICIES {
        let a2 = a.clone();
        let j = with_checkpoint(policy, || jacrev(move |n: Tensor| run(a2.clone(), n))(ns.clone()));
        assert_eq!(j.shape().dims(), &[5, 5]);
        assert_eq!(j.to_vec::<f32>(), tril, "{policy:?} jacrev");
        // d/da Σ xs = Σ_i Σ_{j ≤ i} n_j = 0 + 1 + 3 + 6 + 10 = 20.
        let g = with_checkpoint(policy, || grad(|a: Tensor| run(a, ns.clone()).sum(All))(a.clone()));
        assert_eq!(g.item::<f32>(), 20.0, "{policy:?} grad a");
    }
    let a2 = a.clone();
    let j = jacfwd(move |n: Tensor| run(a2.clone(), n))(ns);
    assert_eq!(j.to_vec::<f32>(), tril, "jacfwd");
}

/// ad-cases 22 `scan_zero_length`: a length-0 scan returns init and empty ys, and differentiates as
/// the identity in init.
#[test]
fn case_22_scan_zero_length() {
    let xs = Tensor::zeros(DType::F32, &[0]);
    let body = |c: Tensor, x: Tensor| (&c + &x, &c * &x);
    let (c, ys) = scan(body, Tensor::scalar(1.5f32), xs.clone());
    assert_eq!(c.item::<f32>(), 1.5);
    assert_eq!(ys.shape().dims(), &[0]);
    let (_, ys2) = scan(
        |c: Tensor, x: Tensor| (&c * 2.0, Tensor::stack(&[c.clone(), x], 0)),
        Tensor::scalar(1.0f32),
        xs.clone(),
    );
    assert_eq!(ys2.shape().dims(), &[0, 2]);
    for policy in POLICIES {
        let g = with_checkpoint(policy, || {
            grad(|c0: Tensor| scan(body, c0, xs.clone()).0)(Tensor::scalar(1.5f32))
        });
        assert_eq!(g.item::<f32>(), 1.0, "{policy:?}");
        // With respect to the (empty) xs: an empty gradient of the right shape.
        let gx = with_checkpoint(policy, || {
            grad(|xs: Tensor| scan(body, Tensor::scalar(1.5f32), xs).0)(Tensor::zeros(DType::F32, &[0]))
        });
        assert_eq!(gx.shape().dims(), &[0]);
    }
}

/// A scan with an integer carry (a step counter) beside a float one, a float const and float xs.
fn counter_scan((a, c0, xs): (Tensor, Tensor, Tensor)) -> Tensor {
    let ((c, _), ys) = scan(
        |(c, i): (Tensor, Tensor), x: Tensor| {
            let i1 = &i + &Tensor::scalar(1i32);
            let c1 = (&a * &c).sin() + &x * &i1.astype(DType::F64);
            let y = &c1 * &c;
            ((c1, i1), y)
        },
        (c0, Tensor::scalar(0i32)),
        xs,
    );
    (&c * &c).sum(All) + (&ys * &ys).sum(All)
}

/// Central differences of a scalar function along `dir`.
fn finite_difference(
    f: impl Fn((Tensor, Tensor, Tensor)) -> Tensor,
    p: &(Tensor, Tensor, Tensor),
    d: &(Tensor, Tensor, Tensor),
) -> f64 {
    let h = 1e-6;
    let at = |s: f64| (&p.0 + &(&d.0 * s), &p.1 + &(&d.1 * s), &p.2 + &(&d.2 * s));
    (f(at(h)).item::<f64>() - f(at(-h)).item::<f64>()) / (2.0 * h)
}

fn dot(a: &(Tensor, Tensor, Tensor), b: &(Tensor, Tensor, Tensor)) -> f64 {
    [(&a.0, &b.0), (&a.1, &b.1), (&a.2, &b.2)]
        .iter()
        .map(|(x, y)| x.to_vec::<f64>().iter().zip(y.to_vec::<f64>()).map(|(x, y)| x * y).sum::<f64>())
        .sum()
}

#[test]
fn jvp_of_scan_matches_finite_differences() {
    let t = 12;
    let p = (Tensor::scalar(0.7f64), f64s(&[S], values(S, 1)), f64s(&[t, S], values(t * S, 2)));
    for seed in 0..3 {
        let d = (
            f64s(&[], values(1, 10 + seed)),
            f64s(&[S], values(S, 20 + seed)),
            f64s(&[t, S], values(t * S, 30 + seed)),
        );
        let (_, tangent) = jvp(counter_scan, p.clone(), d.clone());
        let fd = finite_difference(counter_scan, &p, &d);
        let tv = tangent.item::<f64>();
        assert!((tv - fd).abs() <= 1e-6 * fd.abs().max(1.0), "seed {seed}: jvp {tv} vs fd {fd}");
        // Reverse mode agrees: ⟨grad, d⟩ = jvp.
        for policy in POLICIES {
            let g = with_checkpoint(policy, || grad(counter_scan)(p.clone()));
            let gd = dot(&g, &d);
            assert!((gd - tv).abs() <= 1e-10 * tv.abs().max(1.0), "{policy:?} seed {seed}: {gd} vs {tv}");
        }
    }
}

#[test]
fn jvp_with_tangent_only_in_consts_reaches_the_carry() {
    // c' = a·c over 3 steps from c0 = 2: c_T = a³·2, d c_T / da = 3a²·2 = 24 at a = 2 (a enters the
    // scan as a const; the carry's tangent slot comes from the fixed point).
    let f = |a: Tensor| {
        scan(|c: Tensor, _x: Tensor| (&a * &c, ()), Tensor::scalar(2.0f64), Tensor::zeros(DType::F64, &[3])).0
    };
    let (v, t) = jvp(f, Tensor::scalar(2.0f64), Tensor::scalar(1.0f64));
    assert_eq!(v.item::<f64>(), 16.0);
    assert_eq!(t.item::<f64>(), 24.0);
}

#[test]
fn reverse_scan_gradient_matches_unrolled_for_each_policy() {
    // A reverse nonlinear scan of 23 steps (prime: remainder segments for Auto and Every(7)).
    let t = 23;
    let args = (Tensor::scalar(0.9f64), f64s(&[S], vec![0.1, 0.2, -0.3]), f64s(&[t, S], values(t * S, 5)));
    let rev = ScanOptions { length: None, reverse: true };
    let f = |(a, c0, xs): (Tensor, Tensor, Tensor)| {
        let (c, ys) = scan_with(|c: Tensor, x: Tensor| step(&a, &c, &x), c0, xs.clone(), rev);
        (&c * &c).sum(All) + (&ys * &xs).sum(All)
    };
    let unrolled = |(a, c0, xs): (Tensor, Tensor, Tensor)| {
        let mut c = c0;
        let mut acc = Tensor::scalar(0.0f64);
        for i in (0..t).rev() {
            let x = lax::reshape(&lax::slice(&xs, &[i, 0], &[i + 1, S], &[1, 1]), &[S]);
            let (c1, y) = step(&a, &c, &x);
            acc = acc + (&y * &x).sum(All);
            c = c1;
        }
        (&c * &c).sum(All) + acc
    };
    let want = grad(unrolled)(args.clone());
    for policy in POLICIES {
        let got = with_checkpoint(policy, || grad(f)(args.clone()));
        assert_close(&got.0, &want.0, 1e-12, &format!("{policy:?} d/da"));
        assert_close(&got.1, &want.1, 1e-12, &format!("{policy:?} d/dc0"));
        assert_close(&got.2, &want.2, 1e-12, &format!("{policy:?} d/dxs"));
    }
}

#[test]
fn second_order_through_scan() {
    // c' = c·x over xs = [x0, x1] from c0 = a: c_T = a·x0·x1, and Σ over a 2-step scan of c² ...
    // f(a) = (a·x0·x1)² with x0 = 2, x1 = 3: f = 36a², f'' = 72.
    let f = |a: Tensor| {
        let c = scan(|c: Tensor, x: Tensor| (&c * &x, ()), a, f64s(&[2], vec![2.0, 3.0])).0;
        &c * &c
    };
    for policy in POLICIES {
        let h = with_checkpoint(policy, || grad(grad(f))(Tensor::scalar(0.5f64)));
        assert_eq!(h.item::<f64>(), 72.0, "{policy:?}");
    }
}

#[test]
fn hessian_through_scan() {
    // c' = c·(1 + x) from c0 = 1: c_T = Π(1 + x_i). At xs = [1, 2, 3]: ∂²/∂x_i∂x_j = Π_{k ≠ i, j}(1 + x_k)
    // off the diagonal (H01 = 4, H02 = 3, H12 = 2) and 0 on it.
    let f = |xs: Tensor| scan(|c: Tensor, x: Tensor| (&c * &(&x + 1.0), ()), Tensor::scalar(1.0f64), xs).0;
    let xs = f64s(&[3], vec![1.0, 2.0, 3.0]);
    for policy in POLICIES {
        let h = with_checkpoint(policy, || hessian(f)(xs.clone()));
        assert_eq!(h.to_vec::<f64>(), vec![0.0, 4.0, 3.0, 4.0, 0.0, 2.0, 3.0, 2.0, 0.0], "{policy:?}");
    }
}

#[test]
fn integer_xs_get_no_cotangent() {
    // c' = c + a·x with integer xs [1, 2, 3, 4] (an IR constant): c_T = c0 + 10a, d/da = 10, d/dc0 = 1.
    let f = |(a, c0): (Tensor, Tensor)| {
        let xs = Tensor::from_vec(&[4], vec![1i32, 2, 3, 4]);
        scan(|c: Tensor, x: Tensor| (&c + &(&a * &x.astype(DType::F64)), ()), c0, xs).0
    };
    for policy in POLICIES {
        let (ga, gc) = with_checkpoint(policy, || grad(f)((Tensor::scalar(0.5f64), Tensor::scalar(2.0f64))));
        assert_eq!((ga.item::<f64>(), gc.item::<f64>()), (10.0, 1.0), "{policy:?}");
    }
}

/// Scans in `f` (nested ones too).
fn scan_count(f: &Function) -> usize {
    f.eqns
        .iter()
        .map(|e| {
            usize::from(matches!(e.prim, Prim::Scan { .. }))
                + e.prim.subfunctions().into_iter().map(scan_count).sum::<usize>()
        })
        .sum()
}

/// Top-level scans of `f` with their output counts.
fn top_scan_outputs(f: &Function) -> Vec<usize> {
    f.eqns.iter().filter(|e| matches!(e.prim, Prim::Scan { .. })).map(|e| e.outputs.len()).collect()
}

#[test]
fn value_and_grad_runs_the_forward_scan_once() {
    // Store-all: one forward scan (primal outputs and residuals together) and one reverse scan;
    // before, the primal scan ran as well, a whole extra forward pass.
    let args = (
        Tensor::placeholder(DType::F64, &[]),
        Tensor::placeholder(DType::F64, &[S]),
        Tensor::placeholder(DType::F64, &[50, S]),
    );
    let f = with_checkpoint(Checkpoint::StoreAll, || trace(value_and_grad(loss_scan), &args))
        .expect("traces")
        .function;
    let f = kiln::transform::dce(&f);
    assert_eq!(top_scan_outputs(&f).len(), 2, "forward + reverse scans in\n{f}");
    assert_eq!(scan_count(&f), 2);
    // Sqrt checkpointing: the outer forward scan over segments (inner scan of the body), the
    // remainder's store-all forward, and the backward over segments with its recompute — no
    // separate primal scan either. T = 50: k = 8, 6 segments, remainder 2.
    let g = with_checkpoint(Checkpoint::Sqrt, || trace(value_and_grad(loss_scan), &args))
        .expect("traces")
        .function;
    let g = kiln::transform::dce(&g);
    assert_eq!(
        top_scan_outputs(&g).len(),
        4,
        "segments fwd, remainder fwd, remainder bwd, segments bwd\n{g}"
    );
}

#[test]
fn a_scan_seen_only_through_stop_gradient_saves_no_residuals() {
    // loss(a) = Σ stop_gradient(c_T(a)) · a: d/da = Σ c_T (the scan is data for the gradient).
    let loss = |(a, c0, xs): (Tensor, Tensor, Tensor)| {
        let (c, _) = scan(|c: Tensor, x: Tensor| step(&a, &c, &x), c0, xs);
        (lax::stop_gradient(&c) * &a).sum(All)
    };
    let (a, c0, xs) = program_args(20);
    let (c_t, _) = scan(|c: Tensor, x: Tensor| step(&a, &c, &x), c0.clone(), xs.clone());
    let g = grad(loss)((a.clone(), c0.clone(), xs.clone()));
    assert_close(&g.0, &c_t.sum(All), 1e-12, "d/da");
    // Its forward is the plain scan: the primal's outputs only (carry c and ys), no stacks.
    let args = (
        Tensor::placeholder(DType::F64, &[]),
        Tensor::placeholder(DType::F64, &[S]),
        Tensor::placeholder(DType::F64, &[20, S]),
    );
    let f = trace(grad(loss), &args).expect("traces").function;
    assert_eq!(top_scan_outputs(&kiln::transform::dce(&f)), vec![2], "{f}");
}

/// `with_checkpoint(Checkpoint::Every(0), ..)` panics (documented) at the caller's line, not inside
/// kiln's scan transform.
#[test]
fn checkpoint_every_0_panics_at_the_callers_line() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (record, this) = (seen.clone(), std::thread::current().id());
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| match std::thread::current().id() == this {
        true => *record.lock().unwrap() = info.location().map(|l| (l.file().to_string(), l.line())),
        false => prev(info),
    }));
    let line = line!() + 1;
    let r = std::panic::catch_unwind(|| with_checkpoint(Checkpoint::Every(0), || 0));
    assert!(r.is_err());
    let (file, at) = seen.lock().unwrap().clone().expect("a panic location");
    assert!(file.ends_with("scan_grad.rs") && at == line, "{file}:{at}");
}
