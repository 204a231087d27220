//! `kiln::optim`: SGD, Adam and global-norm clipping against hand-computed updates (optax's formulas).

use kiln::optim::{Adam, Sgd, clip_by_global_norm, global_norm};
use kiln::prelude::*;

fn v(x: &[f32]) -> Tensor {
    Tensor::from_vec(&[x.len()], x.to_vec())
}

fn close(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((*g as f64 - w).abs() <= 1e-6 * w.abs().max(1.0), "got {got:?}, want {want:?}");
    }
}

#[test]
fn sgd_plain_step() {
    // p − lr·g = [1 − 0.1·0.5, 2 + 0.1·1] = [0.95, 2.1]
    let mut opt = Sgd::new(0.1);
    let p = opt.update(&v(&[1.0, 2.0]), &v(&[0.5, -1.0])).unwrap();
    close(&p.to_vec::<f32>(), &[0.95, 2.1]);
}

#[test]
fn sgd_momentum_accumulates_velocity() {
    // step 1: v = g, p = 1 − 0.1·0.5 = 0.95; step 2: v = 0.9·0.5 + 0.5 = 0.95, p = 0.95 − 0.095 = 0.855
    let mut opt = Sgd::with_momentum(0.1, 0.9);
    let g = v(&[0.5]);
    let p = opt.update(&v(&[1.0]), &g).unwrap();
    let p = opt.update(&p, &g).unwrap();
    close(&p.to_vec::<f32>(), &[0.855]);
}

#[test]
fn adam_two_steps_match_hand_values() {
    // Step 1: m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25 → p = 1 − 0.1·0.5/(0.5 + 1e-8) = 0.9000000020.
    // Step 2 (g = −1): m = 0.045 − 0.1 = −0.055, v = 0.00024975 + 0.001 = 0.00124975,
    // m̂ = −0.055/0.19, v̂ = 0.00124975/0.001999 → p = 0.93661035 (computed in f64 by hand script).
    let mut opt = Adam::new(0.1);
    let p = opt.update(&v(&[1.0]), &v(&[0.5])).unwrap();
    close(&p.to_vec::<f32>(), &[0.900_000_002]);
    let p = opt.update(&p, &v(&[-1.0])).unwrap();
    close(&p.to_vec::<f32>(), &[0.936_610_354]);
    assert_eq!(opt.steps(), 2);
}

#[test]
fn adam_updates_every_leaf_of_a_tree() {
    // Step 1 of Adam moves every leaf by lr·sign(g) (|g| ≫ eps).
    let mut opt = Adam::new(0.5);
    let params = (v(&[1.0, 1.0]), Tensor::scalar(3.0f32));
    let grads = (v(&[2.0, -4.0]), Tensor::scalar(-0.25f32));
    let (a, b) = opt.update(&params, &grads).unwrap();
    close(&a.to_vec::<f32>(), &[0.5, 1.5]);
    close(&[b.item::<f32>()], &[3.5]);
}

#[test]
fn clip_by_global_norm_scales_only_above_the_bound() {
    // norm of ([3], [4]) = 5; max 1 → scaled by 1/5; max 10 → unchanged.
    let g = (v(&[3.0]), v(&[4.0]));
    assert_eq!(global_norm(&g).item::<f32>(), 5.0);
    let ((a, b), n) = clip_by_global_norm(&g, 1.0).unwrap();
    assert_eq!(n.item::<f32>(), 5.0);
    close(&[a.to_vec::<f32>()[0], b.to_vec::<f32>()[0]], &[0.6, 0.8]);
    let ((a, b), _) = clip_by_global_norm(&g, 10.0).unwrap();
    assert_eq!((a.to_vec::<f32>(), b.to_vec::<f32>()), (vec![3.0], vec![4.0]));
    assert!(clip_by_global_norm(&g, 0.0).is_err());
    assert!(clip_by_global_norm(&g, f64::NAN).is_err());
}

/// Regression: each leaf's sum of squares was converted to f32 before the sum, so f64 gradients
/// of norm 5e19 had norm inf and were clipped to zeros, and norms below f32's range became 0 and
/// were never clipped. The norm is now f64 when a leaf is (optax: jnp promotion of the sums).
#[test]
fn global_norm_of_f64_leaves_is_f64() {
    let f64s = |xs: &[f64]| Tensor::from_vec(&[xs.len()], xs.to_vec());
    let big = (f64s(&[3e19]), f64s(&[4e19]));
    let norm = global_norm(&big);
    assert_eq!((norm.dtype(), norm.item::<f64>()), (kiln::DType::F64, 5e19));
    let ((a, b), n) = clip_by_global_norm(&big, 1.0).unwrap();
    assert_eq!(n.item::<f64>(), 5e19);
    assert!((a.item::<f64>() - 0.6).abs() < 1e-15 && (b.item::<f64>() - 0.8).abs() < 1e-15, "{a:?} {b:?}");
    let tiny = (f64s(&[3e-30]), f64s(&[4e-30]));
    let ((a, b), n) = clip_by_global_norm(&tiny, 1e-31).unwrap();
    assert!((n.item::<f64>() - 5e-30).abs() < 1e-44, "{n:?}");
    assert!(
        (a.item::<f64>() - 6e-32).abs() < 1e-45 && (b.item::<f64>() - 8e-32).abs() < 1e-45,
        "{a:?} {b:?}"
    );
    // Mixed leaves: f64 norm; the f32 leaf is scaled in f32.
    let mixed = (v(&[3.0]), f64s(&[4.0]));
    assert_eq!(global_norm(&mixed).dtype(), kiln::DType::F64);
    let ((a, b), _) = clip_by_global_norm(&mixed, 1.0).unwrap();
    assert_eq!((a.dtype(), a.item::<f32>(), b.item::<f64>()), (kiln::DType::F32, 0.6, 0.8));
}

#[test]
fn mismatched_gradients_are_errors() {
    let mut opt = Adam::new(0.1);
    let e = opt.update(&v(&[1.0, 2.0]), &v(&[1.0])).unwrap_err();
    assert!(e.to_string().contains("Adam::update"), "{e}");
    let mut sgd = Sgd::new(0.1);
    let ints = Tensor::from_vec(&[1], vec![1i32]);
    assert!(sgd.update(&ints, &ints).unwrap_err().to_string().contains("float"));
}

/// Regression: an update refused because the parameters changed structure took the state first,
/// so the next update started from zero velocity / moments (and Adam's bias correction from a later
/// step). The refused call must leave the state as it was: same results as without it.
#[test]
fn a_refused_update_leaves_the_state_unchanged() {
    let (p0, g) = (v(&[1.0, 0.5]), v(&[0.5, -0.25]));
    let other = (v(&[1.0]), v(&[1.0]));
    // SGD, momentum 0.9, lr 0.1: velocities g, 1.9g, 2.71g, 3.439g → p = p0 − 0.1·9.049·g.
    let mut sgd = Sgd::with_momentum(0.1, 0.9);
    let mut p = p0.clone();
    for step in 0..4 {
        if step == 2 {
            assert!(sgd.update(&other, &other).is_err());
        }
        p = sgd.update(&p, &g).unwrap();
    }
    close(&p.to_vec::<f32>(), &[1.0 - 0.1 * 9.049 * 0.5, 0.5 + 0.1 * 9.049 * 0.25]);
    // Adam: two steps with g = 0.5 then −1 as in `adam_two_steps_match_hand_values`, a refused
    // call between them.
    let mut adam = Adam::new(0.1);
    let p = adam.update(&v(&[1.0]), &v(&[0.5])).unwrap();
    assert!(adam.update(&other, &other).is_err());
    let p = adam.update(&p, &v(&[-1.0])).unwrap();
    close(&p.to_vec::<f32>(), &[0.936_610_354]);
    assert_eq!(adam.steps(), 2);
}

#[test]
fn adam_fits_a_quadratic_through_jit_grad() {
    // argmin of Σ (p − t)² is t; Adam from 0 gets there.
    let target = v(&[1.0, -2.0, 0.5]);
    let g = jit(move |p: Tensor| grad(|p: Tensor| (&p - &target).square().sum_all())(p));
    let mut p = v(&[0.0, 0.0, 0.0]);
    let mut opt = Adam::new(0.05);
    for _ in 0..600 {
        let gp = g.call(&p).unwrap();
        p = opt.update(&p, &gp).unwrap();
    }
    for (x, t) in p.to_vec::<f32>().iter().zip([1.0f32, -2.0, 0.5]) {
        assert!((x - t).abs() < 1e-2, "{x} vs {t}");
    }
}
