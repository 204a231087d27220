//! The seed program: a 64-point 1-D periodic explicit diffusion step
//! `u + dt*alpha*(roll(u,1) - 2u + roll(u,-1))`, dt = 0.1, alpha = 0.5, applied 5 times to an
//! asymmetric start (u[0] = 1, u[1] = 0.5, u[63] = -0.25), so a reversed roll or a missing wrap-around
//! shows. Traced (unrolled and as a `scan`), printed, re-parsed and evaluated.

use kiln::ir::{Prim, parse};
use kiln::prelude::*;

const N: usize = 64;

/// Exact values after 5 steps, by hand derivation: with c = dt*alpha = 1/20 each step is
/// u'[i] = (9/10) u[i] + (1/20)(u[i-1] + u[i+1]) (indices mod 64), applied 5 times in exact rational
/// arithmetic (nonzero entries only; the total 5/4 is conserved, a check on the derivation).
const EXACT: [(usize, f64); 13] = [
    (0, 4280801.0 / 6400000.0),
    (1, 761657.0 / 1600000.0),
    (2, 260139.0 / 2560000.0),
    (3, 521.0 / 51200.0),
    (4, 6849.0 / 12800000.0),
    (5, 23.0 / 1600000.0),
    (6, 1.0 / 6400000.0),
    (58, -1.0 / 12800000.0),
    (59, -43.0 / 6400000.0),
    (60, -2883.0 / 12800000.0),
    (61, -569.0 / 160000.0),
    (62, -1467.0 / 64000.0),
    (63, 62263.0 / 3200000.0),
];

fn start() -> Tensor {
    let mut u = vec![0.0f32; N];
    u[0] = 1.0;
    u[1] = 0.5;
    u[63] = -0.25;
    Tensor::from_vec(&[N], u)
}

fn step(u: &Tensor) -> Tensor {
    let (dt, alpha) = (0.1, 0.5);
    u + dt * alpha * (u.roll(1, 0) - 2.0 * u + u.roll(-1, 0))
}

fn check_exact(u: &[f32]) {
    assert_eq!(u.len(), N);
    for (i, &x) in u.iter().enumerate() {
        let want = EXACT.iter().find(|(j, _)| *j == i).map_or(0.0, |&(_, v)| v);
        // f32 rounding over 5 steps of a dozen operations: a few ulp of the largest value.
        assert!((x as f64 - want).abs() <= 1e-6, "u[{i}] = {x}, want {want}");
    }
    let total: f64 = u.iter().map(|&x| x as f64).sum();
    assert!((total - 1.25).abs() < 1e-6, "total {total}");
}

#[test]
fn seed_program_unrolled_traces_prints_and_evaluates() {
    let traced = trace(
        |u: Tensor| {
            let mut u = u;
            for _ in 0..5 {
                u = step(&u);
            }
            u
        },
        &Tensor::placeholder(DType::F32, &[N]),
    )
    .unwrap();
    let text = traced.function.to_string();
    assert!(text.starts_with("{ lambda a:f32[64]"), "{text}");
    assert!(text.contains("concatenate"), "{text}");
    let u5 = traced.eval(&start()).unwrap();
    check_exact(&u5.to_vec::<f32>());
    // The printed IR parses back to the same function and evaluates to the same bits.
    let reparsed = parse(&text).unwrap();
    assert_eq!(reparsed, traced.function.canonicalize());
    let again = kiln::ir::eval(&reparsed, &[start().to_array().unwrap()]).unwrap();
    assert_eq!(again[0], u5.to_array().unwrap());
}

#[test]
fn seed_program_as_a_scan() {
    let traced = trace(
        |u: Tensor| {
            let opts = ScanOptions { length: Some(5), reverse: false };
            scan_with(|u: Tensor, (): ()| (step(&u), ()), u, (), opts).0
        },
        &Tensor::placeholder(DType::F32, &[N]),
    )
    .unwrap();
    let scans =
        traced.function.eqns.iter().filter(|e| matches!(e.prim, Prim::Scan { length: 5, .. })).count();
    assert_eq!(scans, 1);
    check_exact(&traced.eval(&start()).unwrap().to_vec::<f32>());
}

#[test]
fn seed_program_eagerly() {
    let mut u = start();
    for _ in 0..5 {
        u = step(&u);
    }
    check_exact(&u.to_vec::<f32>());
}

#[test]
fn roll_direction_and_wrap_around() {
    // jnp.roll(u, 1)[i] = u[i-1]: the 1 at index 0 moves to index 1, the -0.25 at 63 wraps to 0.
    let r = start().roll(1, 0).to_vec::<f32>();
    assert_eq!((r[0], r[1], r[2], r[63]), (-0.25, 1.0, 0.5, 0.0));
    let l = start().roll(-1, 0).to_vec::<f32>();
    assert_eq!((l[0], l[62], l[63]), (0.5, -0.25, 1.0));
}
