//! `vmap` for users: JAX's `jax.vmap` over kiln's batching transform (`kiln_transform::batching`).
//!
//! `vmap(f, in_axes, out_axes)(args)` traces `f` once on one batch element's types into IR, then
//! replays that IR with every mapped argument carrying a batch dimension: each primitive's batching
//! rule emits ordinary primitives, recorded into the enclosing trace (so `jit(vmap(f))`,
//! `grad(vmap(f))`, `vmap(vmap(f))` and `vmap(grad(f))` compose) or computed at once on concrete
//! tensors. Nothing is unrolled over the batch.

use crate::ad::{Args, flatten, placeholders_like};
use kiln_trace::{Tensor, Tree, report_error};
use kiln_transform::batching::{Batched, batch_replay};
use std::ops::Range;

/// Where the batch axis of each leaf of a value is (see [`vmap`] for the forms a spec takes).
#[derive(Clone, Debug, PartialEq)]
pub enum AxisSpec {
    /// One axis (`None`: unbatched) for every leaf.
    All(Option<i32>),
    /// One per leaf, in leaf order.
    Leaves(Vec<Option<i32>>),
    /// One spec per top-level element (of a tuple or `Vec` of arguments).
    Elements(Vec<AxisSpec>),
}

impl AxisSpec {
    /// Unbatched: the same value for every batch element (JAX's `None`).
    pub const NONE: AxisSpec = AxisSpec::All(None);

    /// One axis per leaf, in leaf order.
    pub fn leaves(axes: &[Option<i32>]) -> AxisSpec {
        AxisSpec::Leaves(axes.to_vec())
    }

    /// The axes written as a value of the argument's own type whose leaves are [`axis`] and
    /// [`unmapped`] markers (e.g. the same `#[derive(Tree)]` struct with markers in its fields).
    ///
    /// # Panics
    /// If a leaf is not a marker.
    #[track_caller]
    pub fn tree<T: Tree>(axes: &T) -> AxisSpec {
        let per_leaf = axes
            .leaves()
            .iter()
            .map(|l| match l.dtype() {
                kiln_ir::DType::I32 if l.ndim() == 0 => Some(l.item::<i32>()),
                kiln_ir::DType::Bool if l.ndim() == 0 => None,
                _ => panic!(
                    "kiln: AxisSpec::tree: a leaf of type {} is not an axis()/unmapped() marker",
                    l.ty()
                ),
            })
            .collect();
        AxisSpec::Leaves(per_leaf)
    }
}

/// A marker leaf for [`AxisSpec::tree`]: mapped along `axis` (negative counts from the end).
pub fn axis(axis: i32) -> Tensor {
    Tensor::scalar(axis)
}

/// A marker leaf for [`AxisSpec::tree`]: unbatched.
pub fn unmapped() -> Tensor {
    Tensor::scalar(false)
}

impl From<i32> for AxisSpec {
    fn from(a: i32) -> AxisSpec {
        AxisSpec::All(Some(a))
    }
}

impl From<Option<i32>> for AxisSpec {
    fn from(a: Option<i32>) -> AxisSpec {
        AxisSpec::All(a)
    }
}

impl From<Vec<AxisSpec>> for AxisSpec {
    fn from(v: Vec<AxisSpec>) -> AxisSpec {
        AxisSpec::Elements(v)
    }
}

macro_rules! tuple_spec {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: Into<AxisSpec>),+> From<($($name,)+)> for AxisSpec {
            fn from(t: ($($name,)+)) -> AxisSpec {
                AxisSpec::Elements(vec![$(t.$idx.into()),+])
            }
        }
    };
}
tuple_spec!(A 0);
tuple_spec!(A 0, B 1);
tuple_spec!(A 0, B 1, C 2);
tuple_spec!(A 0, B 1, C 2, D 3);
tuple_spec!(A 0, B 1, C 2, D 3, E 4);
tuple_spec!(A 0, B 1, C 2, D 3, E 4, F 5);

/// The spec as one `Option<i32>` per leaf of a value with `n` leaves whose top-level elements span
/// `ranges` (`None`: every leaf is an element, as for outputs).
pub(crate) fn resolve(
    spec: &AxisSpec,
    n: usize,
    ranges: Option<&[Range<usize>]>,
    what: &str,
) -> Result<Vec<Option<i32>>, String> {
    match spec {
        AxisSpec::All(a) => Ok(vec![*a; n]),
        AxisSpec::Leaves(v) if v.len() == n => Ok(v.clone()),
        AxisSpec::Leaves(v) => Err(format!("{what} gives {} per-leaf axes for {n} leaves", v.len())),
        AxisSpec::Elements(es) => {
            let singles: Vec<Range<usize>>;
            let ranges = match ranges {
                Some(r) => r,
                None => {
                    singles = (0..n).map(|i| i..i + 1).collect();
                    &singles
                }
            };
            if es.len() != ranges.len() {
                return Err(format!("{what} gives {} element specs for {} elements", es.len(), ranges.len()));
            }
            let mut out = Vec::with_capacity(n);
            for (e, r) in es.iter().zip(ranges) {
                if matches!(e, AxisSpec::Elements(_)) {
                    return Err(format!(
                        "{what}: nested tuples of specs are not supported; use AxisSpec::leaves"
                    ));
                }
                out.extend(resolve(e, r.len(), None, what)?);
            }
            Ok(out)
        }
    }
}

/// `axis` (negative from the end) as a position in `0..rank`.
pub(crate) fn normalize(axis: i32, rank: usize) -> Option<usize> {
    let r = i64::try_from(rank).expect("rank fits i64");
    let a = if axis < 0 { i64::from(axis) + r } else { i64::from(axis) };
    (0..r).contains(&a).then(|| usize::try_from(a).expect("non-negative"))
}

/// `jax.vmap(f, in_axes, out_axes)`: `f` mapped over the batch axis of its arguments.
///
/// # Axis specs
/// An [`AxisSpec`] says where each argument leaf (or output leaf) is mapped:
/// * `0`, `-1`, ... (any `i32`): that axis of every leaf (negative counts from the end);
/// * `None` ([`AxisSpec::NONE`]): unbatched — the same value for every batch element;
/// * a tuple `(0, None, 1)` of specs: one per top-level argument of a tuple (each a whole-element
///   spec, or a per-leaf spec of that element);
/// * [`AxisSpec::leaves`]: one `Option<i32>` per leaf, in leaf order;
/// * [`AxisSpec::tree`]: a value *of the argument's own type* whose leaves are [`axis`] / [`unmapped`]
///   markers — for a `#[derive(Tree)]` struct, "the same struct of axes":
///
/// ```
/// use kiln::prelude::*;
/// use kiln::{axis, unmapped, AxisSpec};
/// #[derive(Tree, Clone)]
/// struct Params { w: Tensor, b: Tensor }
/// let p = Params { w: Tensor::from_vec(&[2, 3], vec![1.0f32, 2., 3., 4., 5., 6.]), b: Tensor::scalar(1.0f32) };
/// // w mapped along axis 0, b shared: one struct of axes ...
/// let spec = AxisSpec::tree(&Params { w: axis(0), b: unmapped() });
/// let f = vmap(|(p,): (Params,)| p.w.sum(All) + &p.b, (spec,), 0);
/// assert_eq!(f((p.clone(),)).to_vec::<f32>(), vec![7.0, 16.0]); // 1+2+3+1, 4+5+6+1
/// // ... or one value for every field (here both mapped along axis 0 would need b batched too).
/// # let _ = p;
/// ```
///
/// Arguments are tuples, `Vec`s or one tensor (as for `grad`'s `argnums`); wrap a single struct
/// argument in a 1-tuple. Outputs may be any pytree; their spec is one axis for all, per leaf, or a
/// tuple with one whole-element spec per output leaf.
///
/// # Errors
/// Recorded in the enclosing trace (so `kiln::trace` returns `Err`), or a panic in eager mode: mapped
/// axes of different sizes (naming every mapped argument leaf, its type, axis and size), an axis out
/// of range, a spec that does not fit the arguments, no mapped argument without an `axis_size`, and
/// `out_axes = None` for an output that depends on the batch.
///
/// ```
/// use kiln::prelude::*;
/// let w = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
/// let f = vmap(move |x: Tensor| x.matmul(&w), 0, 0);
/// let xs = Tensor::from_vec(&[2, 2], vec![1.0f32, 0.0, 0.0, 1.0]); // rows e0, e1
/// assert_eq!(f(xs).to_vec::<f32>(), vec![1.0, 2.0, 3.0, 4.0]);
/// ```
#[track_caller]
pub fn vmap<A: Args, R: Tree>(
    f: impl Fn(A) -> R,
    in_axes: impl Into<AxisSpec>,
    out_axes: impl Into<AxisSpec>,
) -> impl Fn(A) -> R {
    let (in_axes, out_axes) = (in_axes.into(), out_axes.into());
    let at = crate::ad::here();
    move |args: A| {
        kiln_trace::with_api_location(&at, || vmap_impl("vmap", &f, args, &in_axes, &out_axes, None))
    }
}

/// [`vmap`] with an explicit batch size (JAX's `axis_size`): required when no argument is mapped,
/// and checked against the mapped arguments otherwise.
#[track_caller]
pub fn vmap_sized<A: Args, R: Tree>(
    f: impl Fn(A) -> R,
    in_axes: impl Into<AxisSpec>,
    out_axes: impl Into<AxisSpec>,
    axis_size: usize,
) -> impl Fn(A) -> R {
    let (in_axes, out_axes) = (in_axes.into(), out_axes.into());
    let at = crate::ad::here();
    move |args: A| {
        kiln_trace::with_api_location(&at, || {
            vmap_impl("vmap", &f, args, &in_axes, &out_axes, Some(axis_size))
        })
    }
}

/// The body of [`vmap`]; its own errors (axis specs, batch sizes) are reported as `op`.
#[track_caller]
pub(crate) fn vmap_impl<A: Args, R: Tree>(
    op: &str,
    f: impl FnOnce(A) -> R,
    args: A,
    in_axes: &AxisSpec,
    out_axes: &AxisSpec,
    axis_size: Option<usize>,
) -> R {
    let leaves = args.leaves();
    let refs: Vec<&Tensor> = leaves.iter().collect();
    let mut error: Option<String> = None;
    let axes: Vec<Option<usize>> =
        match resolve(in_axes, leaves.len(), Some(&args.element_ranges()), "in_axes") {
            Ok(axes) => leaves
                .iter()
                .zip(axes)
                .enumerate()
                .map(|(i, (l, a))| {
                    let a = a?;
                    let norm = normalize(a, l.ndim());
                    if norm.is_none() && error.is_none() {
                        error = Some(format!(
                            "in_axes {a} is out of range for argument leaf {i} of type {} (rank {})",
                            l.ty(),
                            l.ndim()
                        ));
                    }
                    norm
                })
                .collect(),
            Err(msg) => {
                error = Some(msg);
                vec![None; leaves.len()]
            }
        };
    // One batch element's types (lenient after an error, so `f` can still be traced for its output).
    let elem: Vec<Tensor> = leaves
        .iter()
        .zip(&axes)
        .map(|(l, a)| {
            let mut dims = l.shape().dims().to_vec();
            if let Some(a) = a {
                dims.remove(*a);
            }
            Tensor::placeholder(l.dtype(), &dims)
        })
        .collect();
    let mapped: Vec<(usize, usize, usize)> =
        axes.iter().enumerate().filter_map(|(i, a)| a.map(|a| (i, a, leaves[i].shape().dims()[a]))).collect();
    let size = axis_size.or(mapped.first().map(|m| m.2));
    if error.is_none() {
        if mapped.iter().any(|m| Some(m.2) != size) {
            let list: Vec<String> = mapped
                .iter()
                .map(|&(i, a, s)| {
                    format!("argument leaf {i} of type {} has size {s} along axis {a}", leaves[i].ty())
                })
                .collect();
            let given = axis_size.map_or(String::new(), |n| format!(" (axis_size {n})"));
            error = Some(format!("mapped axes have different sizes{given}: {}", list.join("; ")));
        } else if size.is_none() {
            error = Some(
                "no argument is mapped (every in_axes is None); give the batch size with vmap_sized".into(),
            );
        }
    }
    if let Some(msg) = &error {
        // Report the axis error first: it is the cause of anything that fails below.
        report_error(op, &refs, msg.clone());
    }
    let flat = match flatten(f, &args.rebuild(elem)) {
        Ok(flat) => flat,
        Err(placeholder) => return placeholder,
    };
    if error.is_some() {
        return placeholders_like(&flat.output);
    }
    let n = size.expect("checked above");
    let mut bargs: Vec<Batched> =
        leaves.iter().zip(&axes).map(|(l, a)| Batched { value: l.clone(), bdim: *a }).collect();
    bargs.extend(flat.captured.iter().cloned().map(Batched::unbatched));
    let outs = batch_replay(&flat.function, &bargs, n);
    let out_spec = match resolve(out_axes, outs.len(), None, "out_axes") {
        Ok(s) => s,
        Err(msg) => {
            report_error(op, &refs, msg);
            return placeholders_like(&flat.output);
        }
    };
    let mut results = Vec::with_capacity(outs.len());
    for (j, (o, a)) in outs.iter().zip(out_spec).enumerate() {
        let elem = o.elem_type();
        match a {
            Some(a) => match normalize(a, elem.rank() + 1) {
                Some(p) => results.push(o.at(p, n)),
                None => {
                    let msg =
                        format!("out_axes {a} is out of range for output leaf {j} of type {elem} batched");
                    report_error(op, &refs, msg);
                    return placeholders_like(&flat.output);
                }
            },
            None if o.is_batched() => {
                let msg =
                    format!("out_axes is None for output leaf {j} ({elem}), but it depends on the batch");
                report_error(op, &refs, msg);
                return placeholders_like(&flat.output);
            }
            None => results.push(o.value.clone()),
        }
    }
    flat.output.rebuild(results)
}
