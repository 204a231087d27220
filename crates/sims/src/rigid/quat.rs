//! Vector and quaternion math as composites of kiln ops, on tensors whose last axis holds the
//! components: vectors `[..., 3]`, quaternions `[..., 4]` (w, x, y, z). Leading axes broadcast
//! (numpy rules), so one call handles every link, and `vmap` adds a batch axis in front. Any float
//! dtype; the result has the operands' dtype.
//!
//! Each function restates the `brax/math.py` function it names, with the same arithmetic order, so
//! f32 results round like Brax's.
//!
//! Inside, components are kept as `[..., 1]` slices (`part`) and joined by a concatenate
//! (`cat`) rather than squeezed to `[...]` and stacked: a stride-1 slice of the last axis is an
//! index remap the CPU backend recomputes in every kernel that reads it, where each squeezing
//! reshape of a component read by several products was a kernel of its own (205 of the 499
//! kernels of the ant's spring step). The arithmetic, and so every rounding, is unchanged.

use kiln::prelude::*;

/// Component `k` of the last axis: `[..., n]` → `[...]`.
pub fn comp(x: &Tensor, k: i64) -> Tensor {
    x.index_axis(-1, k)
}

/// Stacks components along a new last axis: `n` tensors `[...]` → `[..., n]`.
pub fn join(parts: &[Tensor]) -> Tensor {
    Tensor::stack(parts, -1)
}

/// Component `k` of the last axis, kept as size 1: `[..., n]` → `[..., 1]`.
fn part(x: &Tensor, k: i64) -> Tensor {
    x.slice_axis(-1, Some(k), Some(k + 1), 1)
}

/// Joins `[..., 1]` components along the last axis: `n` tensors `[..., 1]` → `[..., n]`.
fn cat(parts: &[Tensor]) -> Tensor {
    Tensor::concatenate(parts, -1)
}

/// `Σ a·b` over the last axis, keeping it as size 1: `[..., n]`, `[..., n]` → `[..., 1]` (summed
/// left to right, `(a0 b0 + a1 b1) + a2 b2`, as XLA evaluates `jp.dot` of short vectors).
pub fn dot(a: &Tensor, b: &Tensor) -> Tensor {
    let last = |x: &Tensor| x.shape().dims().last().copied();
    if last(a) != last(b) || last(a).is_none() {
        // A last axis broadcast against the other's (or scalars): multiply first.
        let p = a * b;
        let n = p.shape().dims().last().copied().unwrap_or(1) as i64;
        return (1..n).fold(comp(&p, 0), |acc, k| &acc + &comp(&p, k)).expand_dims(-1);
    }
    let n = last(a).unwrap_or(1) as i64;
    (1..n).fold(&part(a, 0) * &part(b, 0), |acc, k| &acc + &(&part(a, k) * &part(b, k)))
}

/// `a × b`: `[..., 3]`, `[..., 3]` → `[..., 3]` (`jp.cross`).
pub fn cross(a: &Tensor, b: &Tensor) -> Tensor {
    let (a0, a1, a2) = (part(a, 0), part(a, 1), part(a, 2));
    let (b0, b1, b2) = (part(b, 0), part(b, 1), part(b, 2));
    cat(&[&a1 * &b2 - &a2 * &b1, &a2 * &b0 - &a0 * &b2, &a0 * &b1 - &a1 * &b0])
}

/// The vector part `[..., 4]` → `[..., 3]`.
fn vector_part(q: &Tensor) -> Tensor {
    q.slice_axis(-1, Some(1), None, 1)
}

/// `v` rotated by the unit quaternion `q` (Brax `math.rotate`):
/// `2 (u·v) u + (s² − u·u) v + 2 s (u × v)` with `q = (s, u)`. `v: [..., 3]`, `q: [..., 4]`.
pub fn rotate(v: &Tensor, q: &Tensor) -> Tensor {
    let s = q.slice_axis(-1, Some(0), Some(1), 1);
    let u = vector_part(q);
    let r = &(2.0 * &(&dot(&u, v) * &u)) + &(&(&(&s * &s) - &dot(&u, &u)) * v);
    &r + &(&(2.0 * &s) * &cross(&u, v))
}

/// The conjugate `(w, −x, −y, −z)`: the inverse of a unit quaternion (Brax `math.quat_inv`).
pub fn quat_inv(q: &Tensor) -> Tensor {
    q * &super::model::constant(q.dtype(), &[4], &[1.0, -1.0, -1.0, -1.0])
}

/// `v` rotated by the inverse of `q` (Brax `math.inv_rotate`).
pub fn inv_rotate(v: &Tensor, q: &Tensor) -> Tensor {
    rotate(v, &quat_inv(q))
}

/// Hamilton product `u ⊗ v` (apply `v`, then `u`; Brax `math.quat_mul`): `[..., 4]` × `[..., 4]`.
pub fn quat_mul(u: &Tensor, v: &Tensor) -> Tensor {
    let [u0, u1, u2, u3] = [0, 1, 2, 3].map(|k| part(u, k));
    let [v0, v1, v2, v3] = [0, 1, 2, 3].map(|k| part(v, k));
    cat(&[
        &(&(&(&u0 * &v0) - &(&u1 * &v1)) - &(&u2 * &v2)) - &(&u3 * &v3),
        &(&(&(&u0 * &v1) + &(&u1 * &v0)) + &(&u2 * &v3)) - &(&u3 * &v2),
        &(&(&(&u0 * &v2) - &(&u1 * &v3)) + &(&u2 * &v0)) + &(&u3 * &v1),
        &(&(&(&u0 * &v3) + &(&u1 * &v2)) - &(&u2 * &v1)) + &(&u3 * &v0),
    ])
}

/// `(0, u) ⊗ v` without forming the pure quaternion (Brax `math.vec_quat_mul`):
/// `u: [..., 3]`, `v: [..., 4]` → `[..., 4]`.
pub fn vec_quat_mul(u: &Tensor, v: &Tensor) -> Tensor {
    let [u0, u1, u2] = [0, 1, 2].map(|k| part(u, k));
    let [v0, v1, v2, v3] = [0, 1, 2, 3].map(|k| part(v, k));
    cat(&[
        &(&(&(-&u0) * &v1) - &(&u1 * &v2)) - &(&u2 * &v3),
        &(&(&u0 * &v0) + &(&u1 * &v3)) - &(&u2 * &v2),
        &(&(&(-&u0) * &v3) + &(&u1 * &v0)) + &(&u2 * &v1),
        &(&(&u0 * &v2) - &(&u1 * &v1)) + &(&u2 * &v0),
    ])
}

/// The rotation by `angle` about the unit `axis` (Brax `math.quat_rot_axis`):
/// `axis: [..., 3]`, `angle: [...]` → `[..., 4]`.
pub fn quat_rot_axis(axis: &Tensor, angle: &Tensor) -> Tensor {
    let half = &angle.expand_dims(-1) / 2.0;
    let s = half.sin();
    cat(&[half.cos(), &part(axis, 0) * &s, &part(axis, 1) * &s, &part(axis, 2) * &s])
}

/// Euclidean norm over the last axis, kept as size 1 (`jp.linalg.norm`): `[..., n]` → `[..., 1]`.
pub fn norm(x: &Tensor) -> Tensor {
    x.square().sum_keepdims(-1).sqrt()
}

/// Brax `math.safe_norm` over the last axis: the norm, but 0 with a zero gradient when every
/// component is within 1e-8 of 0 (`jp.allclose(x, 0)`), so `normalize(0)` has no NaN gradient.
/// `[..., n]` → `[..., 1]`.
pub fn safe_norm(x: &Tensor) -> Tensor {
    let tiny = Tensor::scalar_like(1e-8, x.dtype());
    let is_zero = x.abs().le(&tiny).astype(x.dtype()).min_keepdims(-1);
    let shifted = x + &is_zero;
    &norm(&shifted) * &(1.0 - &is_zero)
}

/// Brax `math.normalize`: `x / |x|` over the last axis, with `x / 1e-6` (that is 0) for a zero
/// vector. `[..., n]` → `[..., n]`.
pub fn normalize(x: &Tensor) -> Tensor {
    let n = safe_norm(x);
    let at_zero = n.eq(&Tensor::scalar_like(0.0, x.dtype())).astype(x.dtype());
    x / &(&n + &(&at_zero * 1e-6))
}

/// Brax `math.signed_angle`: the angle from `ref_p` to `ref_c` about `axis`,
/// `atan2((ref_p × ref_c)·axis, ref_p·ref_c)`. Vectors `[..., 3]` → `[...]`.
pub fn signed_angle(axis: &Tensor, ref_p: &Tensor, ref_c: &Tensor) -> Tensor {
    let y = dot(&cross(ref_p, ref_c), axis);
    let x = dot(ref_p, ref_c);
    y.atan2(&x).squeeze(-1)
}

/// `m @ v` for stacks of 3×3 matrices: `[..., 3, 3]`, `[..., 3]` → `[..., 3]`.
pub fn mat_vec(m: &Tensor, v: &Tensor) -> Tensor {
    let rows: Vec<Tensor> = (0..3).map(|i| dot(&m.index_axis(-2, i), v)).collect();
    cat(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(data: &[f64]) -> Tensor {
        Tensor::from_vec(&[data.len()], data.to_vec())
    }

    fn close(a: &Tensor, b: &[f64]) {
        let a = a.to_vec::<f64>();
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn rotation_by_a_quarter_turn_about_z() {
        let h = 0.5f64.sqrt();
        let q = v(&[h, 0.0, 0.0, h]);
        close(&rotate(&v(&[1.0, 0.0, 0.0]), &q), &[0.0, 1.0, 0.0]);
        close(&inv_rotate(&v(&[1.0, 0.0, 0.0]), &q), &[0.0, -1.0, 0.0]);
        // Two quarter turns = a half turn (w = 0, z = 1).
        close(&quat_mul(&q, &q), &[0.0, 0.0, 0.0, 1.0]);
        close(
            &quat_rot_axis(&v(&[0.0, 0.0, 1.0]), &Tensor::scalar(std::f64::consts::FRAC_PI_2)),
            &[h, 0.0, 0.0, h],
        );
    }

    #[test]
    fn vector_times_quaternion_is_the_pure_quaternion_product() {
        // i ⊗ k = −j.
        close(&vec_quat_mul(&v(&[1.0, 0.0, 0.0]), &v(&[0.0, 0.0, 0.0, 1.0])), &[0.0, 0.0, -1.0, 0.0]);
        // (0, 1, 2, 3) ⊗ (4, 5, 6, 7) by hand: w = −(5 + 12 + 21), x = 4 + 14 − 18,
        // y = −7 + 8 + 15, z = 6 − 10 + 12.
        close(&vec_quat_mul(&v(&[1.0, 2.0, 3.0]), &v(&[4.0, 5.0, 6.0, 7.0])), &[-38.0, 0.0, 16.0, 8.0]);
    }

    #[test]
    fn cross_dot_norm_and_signed_angle() {
        close(&cross(&v(&[1.0, 0.0, 0.0]), &v(&[0.0, 1.0, 0.0])), &[0.0, 0.0, 1.0]);
        close(&dot(&v(&[1.0, 2.0, 3.0]), &v(&[4.0, 5.0, 6.0])), &[32.0]);
        close(&normalize(&v(&[3.0, 0.0, 4.0])), &[0.6, 0.0, 0.8]);
        close(&normalize(&v(&[0.0, 0.0, 0.0])), &[0.0, 0.0, 0.0]);
        let angle = signed_angle(&v(&[0.0, 0.0, 1.0]), &v(&[1.0, 0.0, 0.0]), &v(&[0.0, -1.0, 0.0]));
        close(&angle.reshape(&[1]), &[-std::f64::consts::FRAC_PI_2]);
    }
}
