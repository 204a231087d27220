//! Integer-array indexing: `take`, `take_along_axis`, `.at[i].add/set` and `segment_sum`, on the
//! `gather`/`scatter`/`segment_sum` primitives.
//!
//! Negative indices are wrapped numpy-style first (`i + n` where `i < 0`); what happens to indices
//! still out of range then depends on the op: reads clamp (`Clip`, as `x[i]` in JAX, see
//! jax-ml/jax#5760), `.at[]` updates drop them (`FillOrDrop`, as JAX's `.at[].add`).

use super::{check, fail1, resolve_axis};
use crate::numpy::broadcast_shapes;
use crate::{Tensor, lax, where_};
use kiln_ir::{DType, IndexMode, ScatterOp, Shape};

/// Indices must be i32 or u32.
fn check_indices(indices: &Tensor) -> Result<(), String> {
    match indices.dtype() {
        DType::I32 | DType::U32 => Ok(()),
        d @ (DType::F32 | DType::F64 | DType::Bool) => Err(format!("indices dtype {d} is not i32 or u32")),
    }
}

/// A non-empty read from an empty axis has nothing to clamp into (numpy refuses it too).
fn check_nonempty(axis_size: usize, indices: &Tensor, shape: &Shape) -> Result<(), String> {
    if axis_size == 0 && indices.size() > 0 {
        return Err(format!("cannot do a non-empty take from an empty axis (shape {shape})"));
    }
    Ok(())
}

/// `i + n` where `i < 0` (numpy's negative indices); u32 indices are never negative. On an axis
/// longer than `i32::MAX` the i32 indices become u32 first (`convert` wraps a negative `i` to
/// `2^32 + i`, and adding `n` in u32 gives `i + n`, which is then in `[n - 2^31, n)`): exact up to
/// `2^32` elements. Longer axes are refused for i32 indices, even non-negative ones (a wrapped index
/// may not fit u32, and traced values are unknown): use u32 indices there.
#[track_caller]
fn wrap_negative(indices: &Tensor, n: usize) -> Result<Tensor, String> {
    match indices.dtype() {
        DType::I32 => {
            let negative = indices.lt(&Tensor::scalar(0i32));
            if let Ok(n) = i32::try_from(n) {
                Ok(where_(&negative, &(indices + &Tensor::scalar(n)), indices))
            } else if n <= 1 << 32 {
                // `n mod 2^32` (0 for an axis of exactly 2^32): the u32 sum wraps to `i + n`.
                let u = indices.astype(DType::U32);
                Ok(where_(&negative, &(&u + &Tensor::scalar(n as u32)), &u))
            } else {
                Err(format!(
                    "an axis of {n} elements is too long for i32 indices: a negative index i wraps to \
                     i + {n}, which u32 cannot hold; use u32 indices"
                ))
            }
        }
        DType::U32 | DType::F32 | DType::F64 | DType::Bool => Ok(indices.clone()),
    }
}

impl Tensor {
    /// `jnp.take(x, indices, axis)` with kiln's index policy: negative indices wrap once (`-1` is the
    /// last), then out-of-range ones are clamped into range — the semantics of `x[indices]` in JAX
    /// (note `jnp.take`'s own default is `mode="fill"`; use [`Tensor::take_with_mode`] for that).
    /// The result shape is `x.shape[:axis] + indices.shape + x.shape[axis+1:]`.
    #[track_caller]
    pub fn take(&self, indices: &Tensor, axis: i32) -> Tensor {
        self.take_with_mode(indices, axis, IndexMode::Clip)
    }

    /// [`Tensor::take`] with an explicit out-of-range `mode` (after the negative wrap): `Clip` clamps,
    /// `FillOrDrop` reads NaN for floats (the dtype's fill value otherwise), as `mode="fill"`.
    #[track_caller]
    pub fn take_with_mode(&self, indices: &Tensor, axis: i32, mode: IndexMode) -> Tensor {
        let ops = [self, indices];
        let shape = self.shape();
        check!(check_indices(indices), "take", &ops);
        let ax = check!(resolve_axis(axis.into(), &shape), "take", &ops);
        check!(check_nonempty(shape[ax], indices, &shape), "take", &ops);
        let idx = check!(wrap_negative(indices, shape[ax]), "take", &ops);
        lax::gather(self, &idx, ax, 0, mode)
    }

    /// `jnp.take_along_axis(x, indices, axis)`: `result[.., j, ..] = x[.., indices[.., j, ..], ..]`
    /// along `axis`. `indices` has `x`'s rank; the other axes broadcast against each other. Negative
    /// indices wrap, then out-of-range ones clamp (as [`Tensor::take`]).
    #[track_caller]
    pub fn take_along_axis(&self, indices: &Tensor, axis: i32) -> Tensor {
        let ops = [self, indices];
        let (sx, si) = (self.shape(), indices.shape());
        check!(check_indices(indices), "take_along_axis", &ops);
        let ax = check!(resolve_axis(axis.into(), &sx), "take_along_axis", &ops);
        if si.rank() != sx.rank() {
            let msg = format!("indices shape {si} and array shape {sx} have different ranks");
            return fail1("take_along_axis", &ops, msg);
        }
        check!(check_nonempty(sx[ax], indices, &sx), "take_along_axis", &ops);
        // The broadcast of every axis but `ax`.
        let others = |s: &Shape| {
            s.dims().iter().enumerate().filter(|&(i, _)| i != ax).map(|(_, &d)| d).collect::<Vec<_>>()
        };
        let Some(batch) = broadcast_shapes(&others(&sx), &others(&si)) else {
            let msg = format!("shapes {sx} and {si} cannot be broadcast outside axis {ax}");
            return fail1("take_along_axis", &ops, msg);
        };
        let full = |n: usize| {
            let mut d = batch.clone();
            d.insert(ax, n);
            d
        };
        let x = self.broadcast_unchecked(&full(sx[ax]));
        let idx = check!(
            wrap_negative(&indices.broadcast_unchecked(&full(si[ax])), sx[ax]),
            "take_along_axis",
            &ops
        );
        // Move `ax` last so the other axes are gather's leading batch dims, then move it back.
        let r = sx.rank();
        let perm: Vec<usize> = (0..r).filter(|&i| i != ax).chain([ax]).collect();
        let mut inverse = vec![0; r];
        for (j, &p) in perm.iter().enumerate() {
            inverse[p] = j;
        }
        let g = lax::gather(
            &super::transpose_if_needed(&x, &perm),
            &super::transpose_if_needed(&idx, &perm),
            r - 1,
            r - 1,
            IndexMode::Clip,
        );
        super::transpose_if_needed(&g, &inverse)
    }

    /// `x.at[indices].add(updates)` along axis 0 (`scatter_add`): duplicate indices accumulate;
    /// negative indices wrap once, indices still out of range are dropped (JAX's default). `updates`
    /// broadcasts to `indices.shape + x.shape[1:]`.
    #[track_caller]
    pub fn at_add(&self, indices: &Tensor, updates: &Tensor) -> Tensor {
        at_impl(ScatterOp::Add, self, indices, updates)
    }

    /// `x.at[indices].set(updates)` along axis 0 (`scatter`): with duplicate indices the last update
    /// in row-major order wins; negatives wrap, out-of-range updates are dropped.
    #[track_caller]
    pub fn at_set(&self, indices: &Tensor, updates: &Tensor) -> Tensor {
        at_impl(ScatterOp::Set, self, indices, updates)
    }

    /// `jax.ops.segment_sum(self, segment_ids, num_segments)`: `result[s] = Σ self[i]` over the `i`
    /// with `segment_ids[i] == s`; ids outside `[0, num_segments)` (negatives included) are dropped.
    /// `segment_ids` is a 1-D integer tensor of length `self.shape[0]`.
    #[track_caller]
    pub fn segment_sum(&self, segment_ids: &Tensor, num_segments: usize) -> Tensor {
        let ops = [self, segment_ids];
        let (sd, si) = (self.shape(), segment_ids.shape());
        check!(check_indices(segment_ids), "segment_sum", &ops);
        if sd.rank() == 0 || self.dtype() == DType::Bool {
            let msg = format!("data must be numeric with rank >= 1, got {}", self.ty());
            return fail1("segment_sum", &ops, msg);
        }
        if si.rank() != 1 || si[0] != sd[0] {
            let msg = format!("segment ids shape {si} is not ({},) for data shape {sd}", sd[0]);
            return fail1("segment_sum", &ops, msg);
        }
        lax::segment_sum(self, segment_ids, num_segments)
    }
}

/// `.at[indices].add/set(updates)` along axis 0.
#[track_caller]
fn at_impl(op: ScatterOp, x: &Tensor, indices: &Tensor, updates: &Tensor) -> Tensor {
    let name = match op {
        ScatterOp::Set => "at_set",
        ScatterOp::Add => "at_add",
    };
    let ops = [x, indices, updates];
    let sx = x.shape();
    check!(check_indices(indices), name, &ops);
    if sx.rank() == 0 {
        return fail1(name, &ops, format!("cannot index an array of shape {sx}"));
    }
    if updates.dtype() != x.dtype() {
        let msg =
            format!("updates dtype {} differs from array dtype {} (use astype)", updates.dtype(), x.dtype());
        return fail1(name, &ops, msg);
    }
    if op == ScatterOp::Add && x.dtype() == DType::Bool {
        return fail1(name, &ops, "dtype bool is not numeric".into());
    }
    let target: Vec<usize> = indices.shape().dims().iter().chain(&sx.dims()[1..]).copied().collect();
    let su = updates.shape();
    let fits = su.rank() <= target.len()
        && su.dims().iter().rev().zip(target.iter().rev()).all(|(&u, &t)| u == t || u == 1);
    if !fits {
        let msg =
            format!("updates shape {su} cannot be broadcast to the indexed shape {}", Shape::new(&target));
        return fail1(name, &ops, msg);
    }
    let idx = check!(wrap_negative(indices, sx[0]), name, &ops);
    lax::scatter(op, x, &idx, &updates.broadcast_unchecked(&target), 0, 0, IndexMode::FillOrDrop)
}
