//! Inputs and checksums shared by the workloads, bit-exact with `../shared/anchors/jax/common.py`.

use kiln::Tensor;
use kiln::ir::Array;

/// lowbias32 (C. Wellons) of `(i + seed * 0x9E3779B9) mod 2^32` for `i = 0..n` (row-major flat
/// index), as `common.py`'s `hash_u32`.
pub fn hash_u32(n: usize, seed: u32) -> Vec<u32> {
    let base = seed.wrapping_mul(0x9E37_79B9);
    (0..n)
        .map(|i| {
            // `i mod 2^32`: the anchor wraps the sum in 64 bits, then keeps the low 32.
            let mut x = base.wrapping_add(i as u32);
            x ^= x >> 16;
            x = x.wrapping_mul(0x7FEB_352D);
            x ^= x >> 15;
            x = x.wrapping_mul(0x846C_A68B);
            x ^ (x >> 16)
        })
        .collect()
}

/// f32 uniforms of `shape` (row-major): `u = ((h >> 9) + 0.5) / 2^23` (exact in f32, in
/// `[2^-24, 1 - 2^-24]`), then `lo + (hi - lo) * u` in f32 (multiply, then add; no FMA), as
/// `common.py`'s `uniform`. `hi - lo` is rounded once to f32 from the f64 difference of the
/// arguments, as Python does.
pub fn uniform(seed: u32, shape: &[usize], lo: f32, hi: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let span = (f64::from(hi) - f64::from(lo)) as f32;
    let data = hash_u32(n, seed)
        .into_iter()
        .map(|h| {
            let u = ((f64::from(h >> 9) + 0.5) / f64::from(1u32 << 23)) as f32;
            lo + span * u
        })
        .collect();
    Tensor::from_vec(shape, data)
}

/// i32 in `[0, m)`: `h mod m`, as `common.py`'s `randint`.
pub fn randint(seed: u32, n: usize, m: u32) -> Vec<i32> {
    hash_u32(n, seed).into_iter().map(|h| (h % m) as i32).collect()
}

/// Per output leaf, `[sum, sum of |x|, first element]` in f64 (as `common.py`'s `checksum`).
pub fn checksum(outs: &[Array]) -> Vec<[f64; 3]> {
    outs.iter()
        .map(|a| {
            let x = to_f64(a);
            let sum = x.iter().sum();
            let abs = x.iter().map(|v| v.abs()).sum();
            [sum, abs, x.first().copied().unwrap_or(f64::NAN)]
        })
        .collect()
}

/// The elements in row-major order, as f64.
fn to_f64(a: &Array) -> Vec<f64> {
    match a {
        Array::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Array::F64(v) => v.iter().copied().collect(),
        Array::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Array::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Array::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
    }
}
