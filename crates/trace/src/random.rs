//! `jax.random` on raw `u32[2]` threefry keys, built from IR primitives the way JAX 0.10.2 builds it
//! (`jax/_src/random/threefry2x32.py`, `prng.py`, `core.py`), in JAX's default
//! `jax_threefry_partitionable = True` mode. Bit for bit with JAX: keys, `split`, `fold_in`, the
//! random bits, `uniform` on `[0, 1)`, `bernoulli`, `randint`, `categorical`. Within a few ulp:
//! `uniform` on other bounds (XLA fuses `u·(max−min)+min` into one FMA, kiln rounds twice),
//! `normal` (kiln's `erf_inv` is a more accurate f64 routine than XLA's f32 polynomial) and `gumbel`
//! (`log`).
//!
//! Keys are plain `u32[2]` tensors, as `jax.random.PRNGKey(seed)` gives them (not typed key arrays).
//! Every function works eagerly and inside [`crate::trace`], and reports misuse (a key that is not
//! `u32[2]`, a non-float dtype, shapes that do not fit) at the caller's line.
//!
//! kiln has no 64-bit integer dtype, so where JAX computes in `u64` (the counter iota of
//! `iota_2x32_shape`, the 64 random bits of an `f64` uniform) the same values are computed on the two
//! `u32` halves; the results are identical. One limit follows: at most `2^32` values per call.
//!
//! ```
//! use kiln_trace::random;
//! use kiln_ir::DType;
//! let k = random::key(42u32);
//! let [a, _b] = random::split2(&k);
//! let u = random::uniform(&a, &[3], DType::F32, 0.0, 1.0);
//! assert!(u.to_vec::<f32>().iter().all(|&x| (0.0..1.0).contains(&x)));
//! ```

use crate::context::fail;
use crate::numpy::{bin, broadcast_shapes};
use crate::{Tensor, lax};
use kiln_ir::{ArgOp, BinaryOp, DType, Shape};

/// JAX's `random_seed` for a Rust integer seed: `[seed >> 32, seed & 0xFFFFFFFF]` (`threefry_seed`),
/// so a seed below `2^32` gives `[0, seed]`. Returns a concrete `u32[2]` key.
///
/// Matches `jax.random.PRNGKey(seed)` for every `u32` seed, and for `u64` seeds matches JAX with
/// `jax_enable_x64` (in JAX's default 32-bit mode a Python int seed is first narrowed to 32 bits).
pub fn key(seed: impl Into<u64>) -> Tensor {
    let seed: u64 = seed.into();
    Tensor::from_vec(&[2], vec![(seed >> 32) as u32, seed as u32])
}

/// [`key`] of a seed tensor (a `u32` or `i32` scalar, possibly traced), built as JAX's `threefry_seed`
/// builds it: `concatenate([u32(seed >> 32), u32(seed & 0xFFFFFFFF)])`. For 32-bit seeds the high
/// word is 0 (a logical shift by 32 gives 0) and an `i32` seed is reinterpreted (wraps), as JAX's
/// `convert_element_type` to `uint32` does. Returns `u32[2]`.
#[track_caller]
pub fn key_from_seed(seed: &Tensor) -> Tensor {
    let seed = match as_u32_scalar("key_from_seed", seed) {
        Ok(s) => s,
        Err(poisoned) => return poisoned,
    };
    // `seed & 0xFFFFFFFF` is the identity on 32 bits; only the shift needs emitting.
    let hi = bin(BinaryOp::ShiftRightLogical, &seed, &Tensor::scalar(32u32));
    lax::concatenate(&[lax::reshape(&hi, &[1]), lax::reshape(&seed, &[1])], 0)
}

/// `jax.extend.random.threefry_2x32(key, count)`: the raw Threefry-2x32 block function applied to a
/// `u32` array of any shape. The flattened count (padded with one 0 when its size is odd) is split
/// into halves `x0`, `x1`; the result is `concatenate(threefry2x32(k0, k1, x0, x1))`, unpadded and
/// reshaped to `count`'s shape. `key: u32[2]`, `count: u32[...]` → `u32[...]`.
#[track_caller]
pub fn threefry_2x32(key: &Tensor, count: &Tensor) -> Tensor {
    let (k0, k1) = match key_words("threefry_2x32", key) {
        Ok(k) => k,
        Err(poisoned) => return poisoned,
    };
    if count.dtype() != DType::U32 {
        let msg = format!("count dtype {} is not u32", count.dtype());
        return fail("threefry_2x32", &[key, count], msg, 1).remove(0);
    }
    let shape = count.shape();
    let n = shape.size();
    let flat = lax::reshape(count, &[n]);
    let odd = n % 2;
    let padded =
        if odd == 1 { lax::concatenate(&[flat, Tensor::from_vec(&[1], vec![0u32])], 0) } else { flat };
    let half = (n + odd) / 2;
    let x0 = lax::slice(&padded, &[0], &[half], &[1]);
    let x1 = lax::slice(&padded, &[half], &[2 * half], &[1]);
    let (y0, y1) = block(&k0, &k1, &x0, &x1);
    let out = lax::concatenate(&[y0, y1], 0);
    let out = if odd == 1 { lax::slice(&out, &[0], &[n], &[1]) } else { out };
    lax::reshape(&out, shape.dims())
}

/// `jax.random.split(key, n)`: `n` new keys, `u32[2]` → `u32[n, 2]` (JAX's `_threefry_split_foldlike`).
#[track_caller]
pub fn split(key: &Tensor, n: usize) -> Tensor {
    split_shape(key, &[n])
}

/// `jax.random.split(key, shape)`: keys of shape `shape`, `u32[2]` → `u32[*shape, 2]`. Key `i` (in
/// row-major order) is the threefry block of counter `(0, i)`: `[y0, y1]`.
#[track_caller]
pub fn split_shape(key: &Tensor, shape: &[usize]) -> Tensor {
    let (y0, y1) = match counter_block("split", key, shape) {
        Ok(b) => b,
        Err(poisoned) => return poisoned,
    };
    // jnp.stack([y0, y1], axis=ndim)
    let mut one_more = shape.to_vec();
    one_more.push(1);
    lax::concatenate(&[lax::reshape(&y0, &one_more), lax::reshape(&y1, &one_more)], shape.len())
}

/// `split(key, 2)` as two `u32[2]` keys (the `k1, k2 = split(key)` idiom).
#[track_caller]
pub fn split2(key: &Tensor) -> [Tensor; 2] {
    let keys = split(key, 2);
    [key_row(&keys, 0), key_row(&keys, 1)]
}

/// `jax.random.fold_in(key, data)`: a new `u32[2]` key mixing in a 32-bit integer, computed as
/// `threefry_2x32(key, [0, data])`.
#[track_caller]
pub fn fold_in(key: &Tensor, data: u32) -> Tensor {
    threefry_2x32(key, &self::key(data))
}

/// [`fold_in`] with the data as a `u32` or `i32` scalar tensor (possibly traced); an `i32` is
/// reinterpreted, as JAX's `jnp.asarray(data, dtype='uint32')`.
#[track_caller]
pub fn fold_in_tensor(key: &Tensor, data: &Tensor) -> Tensor {
    threefry_2x32(key, &key_from_seed(data))
}

/// `jax.random.bits(key, shape)` for 32 bits (JAX's `_threefry_random_bits_partitionable`): element
/// `i` (row-major) is `y0 ^ y1` of the threefry block of the 64-bit counter `i` split into
/// `(hi, lo)` words. `u32[2]` → `u32[shape]`.
#[track_caller]
pub fn random_bits(key: &Tensor, shape: &[usize]) -> Tensor {
    match counter_block("random_bits", key, shape) {
        Ok((y0, y1)) => lax::binary(BinaryOp::Xor, &y0, &y1),
        Err(poisoned) => poisoned,
    }
}

/// `jax.random.uniform(key, shape, dtype, minval, maxval)`: floats in `[minval, maxval)` of `dtype`
/// (`f32` or `f64`) and shape `shape`. `minval`/`maxval` are converted to `dtype` and must broadcast
/// to `shape`.
///
/// The mantissa trick: `f32` takes `bits >> 9 | bits(1.0f32)` (32 random bits), reinterprets it as a
/// float in `[1, 2)` and subtracts 1; `f64` does the same with 64 bits (`hi << 32 | lo` of the
/// threefry block, not their xor) shifted right by 12, computed here without `u64` as
/// `f64(hi) * 2^-32 + f64(lo >> 12) * 2^-52`, which is exact and equal. Then
/// `max(minval, floats * (maxval - minval) + minval)`.
#[track_caller]
pub fn uniform(
    key: &Tensor,
    shape: &[usize],
    dtype: DType,
    minval: impl Into<Tensor>,
    maxval: impl Into<Tensor>,
) -> Tensor {
    let (minval, maxval) = (minval.into(), maxval.into());
    match dtype {
        DType::F32 | DType::F64 => {}
        DType::I32 | DType::U32 | DType::Bool => {
            let msg = format!("dtype {dtype} is not a float dtype (f32 or f64)");
            return fail("uniform", &[key, &minval, &maxval], msg, 1).remove(0);
        }
    }
    for bound in [&minval, &maxval] {
        if broadcast_shapes(bound.shape().dims(), shape).as_deref() != Some(shape) {
            let msg =
                format!("minval/maxval shape {} does not broadcast to {}", bound.shape(), Shape::new(shape));
            return fail("uniform", &[key, &minval, &maxval], msg, 1).remove(0);
        }
    }
    let minval = lax::convert_element_type(&minval, dtype);
    let maxval = lax::convert_element_type(&maxval, dtype);
    let floats = match unit_floats("uniform", key, shape, dtype) {
        Ok(f) => f,
        Err(poisoned) => return poisoned,
    };
    let scaled = &floats * &(&maxval - &minval) + &minval;
    minval.maximum(&scaled)
}

/// `jax.random.normal(key, shape, dtype)`: standard normal `f32`/`f64` values,
/// `sqrt(2) * erf_inv(u)` with `u = uniform(key, shape, dtype, nextafter(-1, 0), 1)` (the open
/// interval, so `erf_inv` never sees -1).
#[track_caller]
pub fn normal(key: &Tensor, shape: &[usize], dtype: DType) -> Tensor {
    let lo = match dtype {
        // nextafter(-1, 0): -1 with the mantissa's last bit below 1.
        DType::F32 => Tensor::scalar(-(1.0 - f32::EPSILON / 2.0)),
        DType::F64 => Tensor::scalar(-(1.0 - f64::EPSILON / 2.0)),
        DType::I32 | DType::U32 | DType::Bool => return float_only("normal", key, dtype),
    };
    let u = uniform(key, shape, dtype, lo, Tensor::scalar_like(1.0, dtype));
    u.erf_inv() * std::f64::consts::SQRT_2
}

/// `jax.random.gumbel(key, shape, dtype)` in JAX's default `mode="low"`: standard Gumbel `f32`/`f64`
/// values, `-log(-log(uniform(key, shape, dtype, tiny, 1)))` with `tiny` the smallest normal float.
#[track_caller]
pub fn gumbel(key: &Tensor, shape: &[usize], dtype: DType) -> Tensor {
    let tiny = match dtype {
        DType::F32 => Tensor::scalar(f32::MIN_POSITIVE),
        DType::F64 => Tensor::scalar(f64::MIN_POSITIVE),
        DType::I32 | DType::U32 | DType::Bool => return float_only("gumbel", key, dtype),
    };
    let u = uniform(key, shape, dtype, tiny, Tensor::scalar_like(1.0, dtype));
    -(-u.log()).log()
}

/// `jax.random.bernoulli(key, p, shape)` in JAX's default `mode="low"`: bool values of `shape`, true
/// with probability `p` (a float tensor or scalar broadcasting to `shape`), computed as
/// `uniform(key, shape, dtype(p), 0, 1) < p`. An `f32` `p` matches JAX's default (a Python float is
/// `f32` there).
#[track_caller]
pub fn bernoulli(key: &Tensor, p: impl Into<Tensor>, shape: &[usize]) -> Tensor {
    let p = p.into();
    match p.dtype() {
        DType::F32 | DType::F64 => {}
        DType::I32 | DType::U32 | DType::Bool => {
            let msg = format!("probability dtype {} is not a float dtype", p.dtype());
            return fail("bernoulli", &[key, &p], msg, 1).remove(0);
        }
    }
    if broadcast_shapes(p.shape().dims(), shape).as_deref() != Some(shape) {
        let msg = format!("p shape {} does not broadcast to {}", p.shape(), Shape::new(shape));
        return fail("bernoulli", &[key, &p], msg, 1).remove(0);
    }
    let dtype = p.dtype();
    let u = uniform(key, shape, dtype, Tensor::scalar_like(0.0, dtype), Tensor::scalar_like(1.0, dtype));
    u.lt(&p)
}

/// `jax.random.randint(key, shape, minval, maxval)` with JAX's default `int32` dtype: `i32` values in
/// `[minval, maxval)` (`minval`/`maxval` `i32` tensors broadcasting to `shape`; where
/// `maxval <= minval` the result is `minval`).
///
/// As JAX: `k1, k2 = split(key)`, two 32-bit draws `hi`, `lo`, `span = u32(maxval - minval)`, and
/// `(hi % span * m + lo % span) % span` with `m = (2^16 % span)^2 % span` in wrapping `u32`
/// arithmetic (so the result is slightly biased unless `span` is a power of two, like JAX's).
#[track_caller]
pub fn randint(key: &Tensor, shape: &[usize], minval: &Tensor, maxval: &Tensor) -> Tensor {
    for bound in [minval, maxval] {
        if bound.dtype() != DType::I32 {
            let msg = format!("minval/maxval dtype {} is not i32", bound.dtype());
            return fail("randint", &[key, minval, maxval], msg, 1).remove(0);
        }
        if broadcast_shapes(bound.shape().dims(), shape).as_deref() != Some(shape) {
            let msg =
                format!("minval/maxval shape {} does not broadcast to {}", bound.shape(), Shape::new(shape));
            return fail("randint", &[key, minval, maxval], msg, 1).remove(0);
        }
    }
    if let Err(poisoned) = key_words("randint", key) {
        return poisoned;
    }
    let [k1, k2] = split2(key);
    let higher = random_bits(&k1, shape);
    let lower = random_bits(&k2, shape);
    // i32 → u32 wraps (XLA's integer convert); a bitcast is the same and says so.
    let span = lax::bitcast_convert_type(&(maxval - minval), DType::U32);
    // maxval <= minval: span 1, so the result is minval (jax#222).
    let span = crate::where_(&maxval.le(minval), &Tensor::scalar(1u32), &span);
    let rem = |x: &Tensor, y: &Tensor| bin(BinaryOp::Rem, x, y);
    let multiplier = rem(&Tensor::scalar(1u32 << 16), &span);
    let multiplier = rem(&(&multiplier * &multiplier), &span);
    let offset = &(&rem(&higher, &span) * &multiplier) + &rem(&lower, &span);
    let offset = rem(&offset, &span);
    minval + &lax::bitcast_convert_type(&offset, DType::I32)
}

/// `jax.random.categorical(key, logits, axis)` with replacement and JAX's default `mode="low"`: one
/// `i32` category index per distribution, `argmax(gumbel(key, logits.shape) + logits, axis)`; the
/// result has `logits`' shape without `axis` (negative counts from the end).
#[track_caller]
pub fn categorical(key: &Tensor, logits: &Tensor, axis: isize) -> Tensor {
    let rank = logits.ndim() as isize;
    let ax = if axis < 0 { axis + rank } else { axis };
    if ax < 0 || ax >= rank {
        let msg = format!("axis {axis} is out of range for rank {rank}");
        return fail("categorical", &[key, logits], msg, 1).remove(0);
    }
    let g = gumbel(key, logits.shape().dims(), logits.dtype());
    lax::arg_reduce(ArgOp::Max, &(&g + logits), ax as usize, DType::I32)
}

/// The recorded-or-panicking error for a non-float dtype, as a poisoned result.
#[track_caller]
fn float_only(op: &str, key: &Tensor, dtype: DType) -> Tensor {
    fail(op, &[key], format!("dtype {dtype} is not a float dtype (f32 or f64)"), 1).remove(0)
}

/// The two words of a `u32[2]` key as `u32` scalars, or the poisoned result of a recorded error.
#[track_caller]
fn key_words(op: &str, key: &Tensor) -> Result<(Tensor, Tensor), Tensor> {
    let ty = key.ty();
    if ty.dtype != DType::U32 || ty.shape.dims() != [2] {
        let msg = format!("a key is a u32[2] tensor (raw key data), got {ty}");
        return Err(fail(op, &[key], msg, 1).remove(0));
    }
    let word = |i: usize| lax::reshape(&lax::slice(key, &[i], &[i + 1], &[1]), &[]);
    Ok((word(0), word(1)))
}

/// Row `i` of a `u32[n, 2]` array of keys, as a `u32[2]` key.
#[track_caller]
fn key_row(keys: &Tensor, i: usize) -> Tensor {
    lax::reshape(&lax::slice(keys, &[i, 0], &[i + 1, 2], &[1, 1]), &[2])
}

/// A `u32` or `i32` scalar as `u32` (reinterpreted), or the poisoned result of a recorded error.
#[track_caller]
fn as_u32_scalar(op: &str, x: &Tensor) -> Result<Tensor, Tensor> {
    let ty = x.ty();
    if ty.shape.rank() == 0 {
        match ty.dtype {
            DType::U32 => return Ok(x.clone()),
            DType::I32 => return Ok(lax::bitcast_convert_type(x, DType::U32)),
            DType::F32 | DType::F64 | DType::Bool => {}
        }
    }
    Err(fail(op, &[x], format!("expected a u32 or i32 scalar, got {ty}"), 1).remove(0))
}

/// `threefry2x32_p.bind(k0, k1, x0, x1)` with JAX's broadcasting of the scalar key words, which
/// kiln's primitive (equal shapes) needs explicit.
#[track_caller]
fn block(k0: &Tensor, k1: &Tensor, x0: &Tensor, x1: &Tensor) -> (Tensor, Tensor) {
    let shape = x0.shape();
    let k0 = lax::broadcast_in_dim(k0, shape.dims(), &[]);
    let k1 = lax::broadcast_in_dim(k1, shape.dims(), &[]);
    lax::threefry2x32(&k0, &k1, x0, x1)
}

/// The threefry block of the counters `0..size` laid over `shape` (JAX's `iota_2x32_shape` then
/// `threefry2x32_p`): `(y0, y1)`, both `u32[shape]`.
#[track_caller]
fn counter_block(op: &str, key: &Tensor, shape: &[usize]) -> Result<(Tensor, Tensor), Tensor> {
    let (k0, k1) = key_words(op, key)?;
    let size = shape.iter().try_fold(1u128, |n, &d| n.checked_mul(d as u128));
    if size.is_none_or(|n| n > 1u128 << 32) {
        let shown = size.map_or_else(|| format!("shape {shape:?}: more than 2^128"), |n| n.to_string());
        let msg = format!("{shown} values in one call; kiln supports at most 2^32 (no u64 counters)");
        return Err(fail(op, &[key], msg, 1).remove(0));
    }
    let (hi, lo) = iota_2x32_shape(shape);
    Ok(block(&k0, &k1, &hi, &lo))
}

/// JAX's `iota_2x32_shape`: the row-major index of each element of `shape` as a 64-bit counter split
/// into `(hi, lo)` `u32` words. JAX lowers it as `sum_d iota_d * stride_d` in `u64`; with at most
/// `2^32` elements (checked by the caller) `hi` is 0 and `lo` is that sum in wrapping `u32`.
#[track_caller]
fn iota_2x32_shape(shape: &[usize]) -> (Tensor, Tensor) {
    let zero = Tensor::scalar(0u32);
    if shape.is_empty() {
        return (zero.clone(), zero);
    }
    let hi = lax::broadcast_in_dim(&zero, shape, &[]);
    let mut stride = 1usize;
    let mut lo: Option<Tensor> = None;
    for d in (0..shape.len()).rev() {
        let iota = lax::iota(DType::U32, shape, d);
        // A stride that does not fit u32 belongs to an empty shape, whose values do not matter.
        let term = if stride == 1 { iota } else { bin(BinaryOp::Mul, &iota, &Tensor::scalar(stride as u32)) };
        lo = Some(match lo {
            None => term,
            Some(acc) => &term + &acc,
        });
        stride = stride.wrapping_mul(shape[d]);
    }
    (hi, lo.expect("rank >= 1"))
}

/// `uniform`'s floats in `[0, 1)` of shape `shape` before scaling, by the mantissa trick.
#[track_caller]
fn unit_floats(op: &str, key: &Tensor, shape: &[usize], dtype: DType) -> Result<Tensor, Tensor> {
    match dtype {
        DType::F32 => {
            let (y0, y1) = counter_block(op, key, shape)?;
            let bits = lax::binary(BinaryOp::Xor, &y0, &y1);
            // 32 - 23 mantissa bits; 0x3F80_0000 is 1.0f32.
            let mantissa = bin(BinaryOp::ShiftRightLogical, &bits, &Tensor::scalar(9u32));
            let one_to_two = bin(BinaryOp::Or, &mantissa, &Tensor::scalar(1.0f32.to_bits()));
            Ok(lax::bitcast_convert_type(&one_to_two, DType::F32) - 1.0)
        }
        DType::F64 => {
            // JAX: bits = u64(y0) << 32 | u64(y1); bitcast(bits >> 12 | bits(1.0)) - 1 equals
            // (bits >> 12) * 2^-52 = y0 * 2^-32 + (y1 >> 12) * 2^-52, each step exact in f64.
            let (y0, y1) = counter_block(op, key, shape)?;
            let hi = lax::convert_element_type(&y0, DType::F64) * 2f64.powi(-32);
            let lo_bits = bin(BinaryOp::ShiftRightLogical, &y1, &Tensor::scalar(12u32));
            let lo = lax::convert_element_type(&lo_bits, DType::F64) * 2f64.powi(-52);
            Ok(&hi + &lo)
        }
        DType::I32 | DType::U32 | DType::Bool => Err(float_only(op, key, dtype)),
    }
}
