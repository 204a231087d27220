//! The interpreter's `reduce_sum` over long runs: blocked-pairwise, as the CPU backend's kernels, so
//! eager sums keep their accuracy; short runs, `-0.0`, NaN and infinities behave as a sequential sum
//! from `+0.0`. `dot_general` sums each element's products the same way.

use kiln_ir::{Array, Prim, ReduceOp, eval_prim};

fn sum(x: &Array, axes: &[usize]) -> Array {
    eval_prim(&Prim::Reduce { op: ReduceOp::Sum, axes: axes.to_vec() }, &[x]).unwrap().remove(0)
}

#[test]
fn a_long_f32_sum_is_accurate() {
    // Regression: 2^20 copies of 0.1f32 summed in order gave 105891.84 (1 % over 104857.6: each add
    // rounds at the growing total's ulp). Blocked-pairwise, the relative error stays near 2e-6.
    let n = 1 << 20;
    let x = Array::from_vec(&[n], vec![0.1f32; n]);
    let got = sum(&x, &[0]).to_vec::<f32>().unwrap()[0];
    let exact = f64::from(0.1f32) * n as f64;
    assert!((f64::from(got) - exact).abs() < 0.5, "{got} vs {exact}");
    // Along an inner axis of a [2, n/2] array: each row the same way.
    let rows = sum(&Array::from_vec(&[2, n / 2], vec![0.1f32; n]), &[1]).to_vec::<f32>().unwrap();
    assert!(rows.iter().all(|&r| (f64::from(r) - exact / 2.0).abs() < 0.3), "{rows:?}");
}

#[test]
fn short_runs_sum_in_order_and_special_values_are_kept() {
    // 256 elements or fewer: in order from +0.0. (1e8 + 1) + ... + 1 - 1e8 in f32 loses every 1.
    let mut v = vec![1.0f32; 256];
    v[0] = 1e8;
    v[255] = -1e8;
    assert_eq!(sum(&Array::from_vec(&[256], v), &[0]).to_vec::<f32>().unwrap(), vec![0.0]);
    // 512: blocks [1e8, 1 × 255] and [1 × 256]: the first loses its ones (f32 spacing 8 at 1e8),
    // the second sums them, 1e8 + 256. In order, every one would be lost: 1e8.
    let mut v = vec![1.0f32; 512];
    v[0] = 1e8;
    assert_eq!(sum(&Array::from_vec(&[512], v), &[0]).to_vec::<f32>().unwrap(), vec![1e8 + 256.0]);
    // Long runs: only -0.0 sums to +0.0; a NaN, or +inf with -inf, gives NaN; +inf alone +inf.
    let n = 1000;
    let neg_zero = sum(&Array::from_vec(&[n], vec![-0.0f64; n]), &[0]).to_vec::<f64>().unwrap()[0];
    assert!(neg_zero == 0.0 && neg_zero.is_sign_positive());
    let with = |at: &[(usize, f64)]| {
        let mut v = vec![1.0f64; n];
        for &(i, x) in at {
            v[i] = x;
        }
        sum(&Array::from_vec(&[n], v), &[0]).to_vec::<f64>().unwrap()[0]
    };
    assert!(with(&[(999, f64::NAN)]).is_nan());
    assert!(with(&[(3, f64::INFINITY), (900, f64::NEG_INFINITY)]).is_nan());
    assert_eq!(with(&[(500, f64::INFINITY)]), f64::INFINITY);
    // Integers wrap whatever the order.
    let ints = sum(&Array::from_vec(&[300], vec![i32::MAX; 300]), &[0]).to_vec::<i32>().unwrap()[0];
    assert_eq!(ints, i32::MAX.wrapping_mul(300));
}

fn dot(l: &Array, r: &Array, lc: &[usize], rc: &[usize]) -> Array {
    let p = Prim::DotGeneral {
        lhs_contracting: lc.to_vec(),
        rhs_contracting: rc.to_vec(),
        lhs_batch: vec![],
        rhs_batch: vec![],
        preferred_element_type: None,
    };
    eval_prim(&p, &[l, r]).unwrap().remove(0)
}

#[test]
fn dot_general_sums_its_products_as_reduce_sum_does() {
    // Regression: a 2^20-long f32 contraction summed in order was 1 % off (as `reduce_sum` was).
    let n = 1 << 20;
    let (x, ones) = (Array::from_vec(&[n], vec![0.1f32; n]), Array::from_vec(&[n], vec![1.0f32; n]));
    let got = dot(&x, &ones, &[0], &[0]).to_vec::<f32>().unwrap()[0];
    let exact = f64::from(0.1f32) * n as f64;
    assert!((f64::from(got) - exact).abs() < 0.5, "{got} vs {exact}");
    // The block boundary by hand, as for the sum: [1e8, 1 × 511]·ones is 1e8 + 256 (in order: 1e8).
    let mut v = vec![1.0f32; 512];
    v[0] = 1e8;
    let d = dot(&Array::from_vec(&[512], v), &Array::from_vec(&[512], vec![1.0f32; 512]), &[0], &[0]);
    assert_eq!(d.to_vec::<f32>().unwrap(), vec![1e8 + 256.0]);
    // Two contracting dims ([3, 20, 40]·[40, 20, 2] over (1, 2) ~ (1, 0)): each element is bitwise
    // `reduce_sum` of its products over the contracted dims in row-major order (800 products, the
    // last contracting dim's rows of 40 cut into blocks).
    let vals = |n: usize, seed: u32| -> Vec<f32> {
        (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 2001) as f32 * 1e-3 - 1.0).collect()
    };
    let (l, r) = (Array::from_vec(&[3, 20, 40], vals(2400, 1)), Array::from_vec(&[40, 20, 2], vals(1600, 2)));
    let got = dot(&l, &r, &[1, 2], &[1, 0]).to_vec::<f32>().unwrap();
    let (lv, rv) = (l.to_vec::<f32>().unwrap(), r.to_vec::<f32>().unwrap());
    for i in 0..3 {
        for j in 0..2 {
            // Products in row-major order of (lhs dim 1, lhs dim 2) = (rhs dim 1, rhs dim 0).
            let prods: Vec<f32> = (0..20)
                .flat_map(|a| (0..40).map(move |b| (a, b)))
                .map(|(a, b)| lv[(i * 20 + a) * 40 + b] * rv[(b * 20 + a) * 2 + j])
                .collect();
            let want = sum(&Array::from_vec(&[20, 40], prods), &[0, 1]).to_vec::<f32>().unwrap()[0];
            assert_eq!(got[i * 2 + j].to_bits(), want.to_bits(), "element ({i}, {j})");
        }
    }
}
