//! `chunked_vmap`: a data-parallel batched executor over CPU cores (JAX's `lax.map(f, xs,
//! batch_size=C)` run like `pmap` over cores).

use crate::ad::Args;
use crate::jit::{Compiled, jit};
use crate::vmap::{AxisSpec, normalize, resolve, vmap_impl};
use kiln_backend_cpu::{Arg, CompileOptions};
use kiln_ir::{Array, SrcLoc, TensorType};
use kiln_trace::{Error, Result, Tensor, Tree};
use ndarray::{Axis, Slice};
use rayon::prelude::*;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::{Arc, Mutex, OnceLock};

/// The chunk size when none is given: the faster of 32 and 128 on the ant rollout (batch 1024, 2
/// shared cores; see `kiln_sims::rigid::rollout::DEFAULT_ENV_CHUNK`): smaller chunks pay per-kernel
/// overhead on more calls, larger ones spill their intermediates out of cache.
pub const DEFAULT_CHUNK: usize = 128;

/// A per-example function run over a batch in chunks on threads; built by [`chunked_vmap`].
pub struct ChunkedVmap<F, A, R> {
    f: F,
    in_axes: AxisSpec,
    out_axes: AxisSpec,
    chunk: usize,
    threads: Option<usize>,
    cache: Mutex<HashMap<(String, Vec<TensorType>), Arc<ChunkedSpecialized<A, R>>>>,
}

/// `f` mapped over a batch (as [`vmap`](crate::vmap)`(f, in_axes, out_axes)`), compiled for chunks of
/// [`DEFAULT_CHUNK`] examples (change with [`ChunkedVmap::chunk`]) that run in parallel on CPU threads.
///
/// `chunked_vmap(f, in_axes, out_axes).chunk(C)` traces `vmap(f)` for a batch of `C` examples, compiles
/// it once (single-threaded: the parallelism is over chunks, never nested pools), splits the batched
/// arguments along their mapped axes into `ceil(B / C)` chunks, runs the chunks on rayon threads and
/// concatenates the outputs along their `out_axes`. Because `f` is a per-example function, every row
/// of the output depends only on the same row of the inputs — the row independence that makes the
/// split exact holds by construction, not by analysis of the program.
///
/// Why: a batched program whose kernels each stream a `[B, ...]` intermediate through memory is
/// bandwidth-bound once `B` rows no longer fit in cache, and kernels below the backend's thread-split
/// threshold run serially. A chunk of `C` examples keeps its intermediates cache-resident (for a
/// `scan` inside `f`, across all its steps), and the chunks fill the cores.
///
/// **The last chunk.** When `C` does not divide `B`, the remainder `B mod C` runs through a second
/// program compiled for that size (no padding: no wasted rows, no garbage rows that could produce
/// NaNs or traps; the cost is one more compilation, done by [`ChunkedVmap::specialize`]).
///
/// **Threads.** [`ChunkedVmap::threads`], else `KILN_NUM_THREADS`, else one per core (rayon's global
/// pool); `1` runs the chunks in order on the calling thread. Each chunk's result is the same whatever
/// the thread count. Results agree with `jit(vmap(f))` over the whole batch up to the reassociation of
/// float sums that a different batch size may choose (e.g. `dot_general`'s kernel), bit for bit for
/// elementwise programs.
///
/// Shapes: a mapped argument leaf `[..., B, ...]` (batch axis where `in_axes` says) is cut into
/// `[..., C, ...]` pieces; unmapped leaves (`None`) go whole to every chunk; each mapped output leaf
/// is the concatenation of the chunks' along its `out_axes`, and an unmapped output (`None`, which
/// must not depend on the batch) is the first chunk's. Any dtype.
///
/// ```
/// use kiln::prelude::*;
/// use kiln::{AxisSpec, chunked_vmap};
/// // Per example: x [3] (mapped) and a shared scale s [] (None) → (x·s summed, x + s).
/// let f = chunked_vmap(
///     |(x, s): (Tensor, Tensor)| ((&x * &s).sum(All), &x + &s),
///     (0, AxisSpec::NONE),
///     0,
/// )
/// .chunk(2)
/// .threads(2);
/// let xs = Tensor::from_vec(&[5, 3], (0..15).map(|v| v as f32).collect());
/// let (sums, shifted) = f.call(&(xs, Tensor::scalar(2.0f32)))?; // chunks of 2, 2 and 1 rows
/// assert_eq!(sums.to_vec::<f32>(), vec![6.0, 24.0, 42.0, 60.0, 78.0]);
/// assert_eq!(shifted.shape().dims(), &[5, 3]);
/// // Mapped leaves must agree on the batch size: an error naming chunked_vmap and this line.
/// let bad = (Tensor::zeros(DType::F32, &[5, 3]), Tensor::zeros(DType::F32, &[4]));
/// let g = chunked_vmap(|(x, y): (Tensor, Tensor)| x.sum(All) + y, 0, 0);
/// let err = g.call(&bad).unwrap_err().to_string();
/// assert!(err.starts_with("chunked_vmap: mapped axes have different sizes"), "{err}");
/// # Ok::<(), kiln::Error>(())
/// ```
///
/// # Errors
/// From [`ChunkedVmap::call`] and [`ChunkedVmap::specialize`], as [`Error::Op`] named `chunked_vmap`
/// with the argument types and the caller's file:line: mapped axes of different sizes, an axis out of
/// range (`in_axes` or `out_axes`), a spec that does not fit the arguments or the outputs, an
/// unmapped (`None`) output that depends on the batch, no mapped argument, a placeholder argument;
/// trace errors of `f` as its ops report them; a backend compile error (named `jit`).
#[track_caller]
pub fn chunked_vmap<A: Args, R: Tree + Clone, F: Fn(A) -> R>(
    f: F,
    in_axes: impl Into<AxisSpec>,
    out_axes: impl Into<AxisSpec>,
) -> ChunkedVmap<F, A, R> {
    ChunkedVmap {
        f,
        in_axes: in_axes.into(),
        out_axes: out_axes.into(),
        chunk: DEFAULT_CHUNK,
        threads: None,
        cache: Mutex::default(),
    }
}

impl<A: Args, R: Tree + Clone, F: Fn(A) -> R> ChunkedVmap<F, A, R> {
    /// Examples per chunk (`C`): each chunk's program is compiled for this batch size (a smaller batch
    /// is one chunk).
    ///
    /// # Panics
    /// If `c` is 0, at the caller.
    #[track_caller]
    pub fn chunk(mut self, c: usize) -> Self {
        assert!(c > 0, "kiln: chunked_vmap: the chunk size must be at least 1");
        self.chunk = c;
        self
    }

    /// Runs the chunks on `n` threads (`0`: one per core; `1`: in order on the calling thread).
    /// Without it, `KILN_NUM_THREADS` decides, else one per core.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    /// The chunk size.
    pub fn chunk_size(&self) -> usize {
        self.chunk
    }

    /// Runs `f` over the batch (compiling on the first call for each argument signature). Inside a
    /// trace, or on tracers, it is plain [`vmap`](crate::vmap) recorded into the enclosing trace (the compiler
    /// sees the whole batch).
    ///
    /// # Errors
    /// See [`chunked_vmap`].
    #[track_caller]
    pub fn call(&self, args: &A) -> Result<R> {
        let at = Location::caller();
        let leaves = args.leaves();
        if kiln_trace::is_tracing() || leaves.iter().any(Tensor::is_tracer) {
            return Ok(self.batched(args.rebuild(leaves), &SrcLoc::from_location(at)));
        }
        let key = (args.structure(), leaves.iter().map(Tensor::ty).collect::<Vec<_>>());
        let found = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        let spec = match found {
            Some(s) => s,
            None => {
                let s = Arc::new(self.build(args, at)?);
                self.cache.lock().unwrap_or_else(|p| p.into_inner()).insert(key, s.clone());
                s
            }
        };
        spec.run(args, at)
    }

    /// Compiles for `args`' signature (batch size included) without running: the programs for a
    /// full chunk and, when `C` does not divide `B`, for the remainder.
    ///
    /// # Errors
    /// See [`chunked_vmap`].
    ///
    /// ```
    /// use kiln::prelude::*;
    /// let f = kiln::chunked_vmap(|x: Tensor| x.exp(), 0, 0).chunk(4);
    /// let xs = Tensor::zeros(DType::F64, &[10]);
    /// let spec = f.specialize(&xs)?;
    /// assert_eq!((spec.batch_size(), spec.chunk_size(), spec.chunks()), (10, 4, 3));
    /// assert_eq!(spec.call(&xs)?.to_vec::<f64>(), vec![1.0; 10]);
    /// # Ok::<(), kiln::Error>(())
    /// ```
    #[track_caller]
    pub fn specialize(&self, args: &A) -> Result<ChunkedSpecialized<A, R>> {
        self.build(args, Location::caller())
    }

    /// `vmap` of `f` over `args`, its own errors (axis specs) named `chunked_vmap` at `at`.
    fn batched(&self, args: A, at: &SrcLoc) -> R {
        kiln_trace::with_api_location(at, || {
            vmap_impl("chunked_vmap", |a: A| (self.f)(a), args, &self.in_axes, &self.out_axes, None)
        })
    }

    fn build(&self, args: &A, at: &'static Location<'static>) -> Result<ChunkedSpecialized<A, R>> {
        let leaves = args.leaves();
        let types: Vec<TensorType> = leaves.iter().map(Tensor::ty).collect();
        let in_axes = input_axes(&self.in_axes, args, &types).map_err(|m| op_error(m, &types, at))?;
        let batch = batch_size(&in_axes, &types).map_err(|m| op_error(m, &types, at))?;
        let chunk = self.chunk.min(batch);
        let rest = batch.checked_rem(chunk).unwrap_or(0);
        // Placeholder arguments of one chunk of `n` examples.
        let chunk_args = |n: usize| {
            let elems = leaves.iter().zip(&in_axes).map(|(l, a)| {
                let mut dims = l.shape().dims().to_vec();
                if let Some(a) = a {
                    dims[*a] = n;
                }
                Tensor::placeholder(l.dtype(), &dims)
            });
            args.rebuild(elems.collect())
        };
        // The batching's own errors (out_axes) are chunked_vmap's, at the user's call site and
        // with the user's argument types rather than one chunk's.
        let user_at = SrcLoc::from_location(at);
        let own_error = |e: Error| match e {
            Error::Op { op, message, at: Some(loc), .. } if op == "chunked_vmap" && loc == user_at => {
                op_error(message, &types, at)
            }
            e => e,
        };
        // One thread inside a chunk: the chunks are the parallelism.
        let program = jit(|a: A| self.batched(a, &user_at)).threads(1);
        let full = program.specialize(&chunk_args(chunk)).map_err(own_error)?;
        let tail = match rest {
            0 => None,
            _ => Some(program.specialize(&chunk_args(rest)).map_err(own_error)?.compiled().clone()),
        };
        let output = full.output().clone();
        let out_types: Vec<TensorType> = output.leaves().iter().map(Tensor::ty).collect();
        let out_spec = resolve(&self.out_axes, out_types.len(), None, "out_axes")
            .map_err(|m| op_error(m, &types, at))?;
        let out_axes =
            out_spec.iter().zip(&out_types).map(|(a, t)| a.and_then(|a| normalize(a, t.rank()))).collect();
        Ok(ChunkedSpecialized {
            structure: args.structure(),
            types,
            plan: Plan { in_axes, batch, chunk, full: full.compiled().clone(), tail },
            out_axes,
            output,
            runner: Runner::new(self.threads.or(CompileOptions::from_env().threads)),
            _args: PhantomData,
        })
    }
}

/// A [`chunked_vmap`] compiled for one argument signature (batch size included); see
/// [`ChunkedVmap::specialize`].
pub struct ChunkedSpecialized<A, R> {
    structure: String,
    types: Vec<TensorType>,
    plan: Plan,
    /// Per output leaf, its batch axis (`None`: unmapped, taken from the first chunk).
    out_axes: Vec<Option<usize>>,
    output: R,
    runner: Runner,
    _args: PhantomData<fn(A)>,
}

/// How the batch is cut and run (the `Sync` part the chunk threads share).
struct Plan {
    /// Per argument leaf, its batch axis (`None`: unmapped).
    in_axes: Vec<Option<usize>>,
    batch: usize,
    chunk: usize,
    full: Arc<Compiled>,
    tail: Option<Arc<Compiled>>,
}

impl<A: Tree, R: Tree> ChunkedSpecialized<A, R> {
    /// The batch size `B` it was compiled for.
    pub fn batch_size(&self) -> usize {
        self.plan.batch
    }

    /// Examples per chunk (`min(C, B)`).
    pub fn chunk_size(&self) -> usize {
        self.plan.chunk
    }

    /// Number of chunks per call, `ceil(B / C)` (1 for an empty batch).
    pub fn chunks(&self) -> usize {
        self.plan.chunks()
    }

    /// The program of one full chunk (for kernel counts and cost reports).
    pub fn compiled(&self) -> &Arc<Compiled> {
        &self.plan.full
    }

    /// Runs on `args`, which must have the signature it was compiled for.
    ///
    /// # Errors
    /// [`Error::Op`] named `chunked_vmap` with the expected and given leaf types and the caller's
    /// location, when the tree structure, a dtype or a shape (the batch size included) differs, or a
    /// leaf is not concrete.
    #[track_caller]
    pub fn call(&self, args: &A) -> Result<R> {
        self.run(args, Location::caller())
    }

    fn run(&self, args: &A, at: &'static Location<'static>) -> Result<R> {
        let leaves = args.leaves();
        let got: Vec<TensorType> = leaves.iter().map(Tensor::ty).collect();
        if args.structure() != self.structure || got != self.types {
            let msg = format!(
                "compiled for arguments {} with leaves {} (batch size {}), got {} with leaves {}",
                self.structure,
                list(&self.types),
                self.plan.batch,
                args.structure(),
                list(&got)
            );
            return Err(op_error(msg, &got, at));
        }
        let mut arrays: Vec<&Array> = Vec::with_capacity(leaves.len());
        for (i, l) in leaves.iter().enumerate() {
            match l.shared() {
                Some(a) => arrays.push(a),
                None => {
                    let msg = format!("argument leaf {i} of type {} is not a concrete tensor", l.ty());
                    return Err(op_error(msg, &got, at));
                }
            }
        }
        let n = self.chunks();
        let plan = &self.plan;
        let parts: Vec<Result<Vec<Array>>> = self.runner.map(n, &|k| plan.run_chunk(&arrays, k, at));
        let parts = parts.into_iter().collect::<Result<Vec<_>>>()?;
        let outs = if n == 1 {
            parts.into_iter().next().expect("one chunk")
        } else {
            self.out_axes
                .iter()
                .enumerate()
                .map(|(j, a)| match a {
                    Some(a) => concatenate(&parts.iter().map(|p| &p[j]).collect::<Vec<_>>(), *a),
                    None => parts[0][j].clone(),
                })
                .collect()
        };
        Ok(self.output.rebuild(outs.into_iter().map(Tensor::from_array).collect()))
    }
}

impl Plan {
    /// Number of chunks per call.
    fn chunks(&self) -> usize {
        self.batch.div_ceil(self.chunk.max(1)).max(1)
    }

    /// Runs chunk `k`: rows `k·C .. min((k+1)·C, B)` of every mapped leaf.
    fn run_chunk(&self, arrays: &[&Array], k: usize, at: &'static Location<'static>) -> Result<Vec<Array>> {
        let (lo, hi) = (k * self.chunk, ((k + 1) * self.chunk).min(self.batch));
        let program =
            if hi - lo == self.chunk { &self.full } else { self.tail.as_ref().expect("a tail program") };
        if self.chunks() == 1 {
            return program.run_args(arrays.iter().map(|a| Arg::Borrowed(a)).collect(), at);
        }
        let sliced: Vec<Option<Array>> = arrays
            .iter()
            .zip(&self.in_axes)
            .map(|(a, ax)| {
                ax.map(|ax| {
                    kiln_ir::with_array!(a, x => x.slice_axis(Axis(ax), Slice::from(lo..hi)).as_standard_layout().into_owned().into())
                })
            })
            .collect();
        let args = arrays.iter().zip(&sliced).map(|(a, s)| Arg::Borrowed(s.as_ref().unwrap_or(a))).collect();
        program.run_args(args, at)
    }
}

impl<A, R> std::fmt::Debug for ChunkedSpecialized<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ChunkedSpecialized({} {}, batch {} in chunks of {})",
            self.structure,
            list(&self.types),
            self.plan.batch,
            self.plan.chunk
        )
    }
}

/// Where the chunks run.
enum Runner {
    Serial,
    Global,
    Pool(Arc<rayon::ThreadPool>),
}

/// Thread pools by size, shared process-wide (building one spawns its threads).
static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();

impl Runner {
    /// `threads` as in [`ChunkedVmap::threads`]; a pool the OS refuses degrades to serial.
    fn new(threads: Option<usize>) -> Runner {
        match threads {
            None | Some(0) => Runner::Global,
            Some(1) => Runner::Serial,
            Some(n) => {
                let mut pools = POOLS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
                if let Some(p) = pools.get(&n) {
                    return Runner::Pool(p.clone());
                }
                match rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .thread_name(move |i| format!("kiln-chunks-{n}-{i}"))
                    .build()
                {
                    Ok(p) => {
                        let p = Arc::new(p);
                        pools.insert(n, p.clone());
                        Runner::Pool(p)
                    }
                    Err(_) => Runner::Serial,
                }
            }
        }
    }

    /// `[f(0), ..., f(n-1)]`, computed on this runner's threads (one task per chunk, so threads that
    /// finish early take the next chunk).
    fn map<T: Send>(&self, n: usize, f: &(dyn Fn(usize) -> T + Sync)) -> Vec<T> {
        let par = || (0..n).into_par_iter().with_max_len(1).map(f).collect();
        match self {
            _ if n <= 1 => (0..n).map(f).collect(),
            Runner::Serial => (0..n).map(f).collect(),
            Runner::Global => par(),
            Runner::Pool(p) => p.install(par),
        }
    }
}

/// Per argument leaf, its batch axis as a position, from the spec.
fn input_axes<A: Args>(
    spec: &AxisSpec,
    args: &A,
    types: &[TensorType],
) -> std::result::Result<Vec<Option<usize>>, String> {
    let axes = resolve(spec, types.len(), Some(&args.element_ranges()), "in_axes")?;
    axes.iter()
        .zip(types)
        .enumerate()
        .map(|(i, (a, t))| match a {
            None => Ok(None),
            Some(a) => normalize(*a, t.rank()).map(Some).ok_or_else(|| {
                format!("in_axes {a} is out of range for argument leaf {i} of type {t} (rank {})", t.rank())
            }),
        })
        .collect()
}

/// The common size of the mapped axes.
fn batch_size(axes: &[Option<usize>], types: &[TensorType]) -> std::result::Result<usize, String> {
    let mapped: Vec<(usize, usize, usize)> =
        axes.iter().enumerate().filter_map(|(i, a)| a.map(|a| (i, a, types[i].shape.dims()[a]))).collect();
    let Some(&(_, _, size)) = mapped.first() else {
        return Err("no argument is mapped (every in_axes is None): there is no batch to split".into());
    };
    if mapped.iter().any(|m| m.2 != size) {
        let each: Vec<String> = mapped
            .iter()
            .map(|&(i, a, s)| format!("argument leaf {i} of type {} has size {s} along axis {a}", types[i]))
            .collect();
        return Err(format!("mapped axes have different sizes: {}", each.join("; ")));
    }
    Ok(size)
}

/// The chunks' outputs joined along `axis` (all have one dtype: the program's output type).
fn concatenate(parts: &[&Array], axis: usize) -> Array {
    macro_rules! join {
        ($variant:ident) => {{
            let views: Vec<_> = parts
                .iter()
                .map(|p| match p {
                    Array::$variant(x) => x.view(),
                    _ => unreachable!("every chunk's output has the program's dtype"),
                })
                .collect();
            Array::$variant(
                ndarray::concatenate(Axis(axis), &views)
                    .expect("chunk outputs differ only along the batch axis"),
            )
        }};
    }
    match parts[0] {
        Array::F32(_) => join!(F32),
        Array::F64(_) => join!(F64),
        Array::I32(_) => join!(I32),
        Array::U32(_) => join!(U32),
        Array::Bool(_) => join!(Bool),
    }
}

fn list(types: &[TensorType]) -> String {
    let v: Vec<String> = types.iter().map(ToString::to_string).collect();
    format!("[{}]", v.join(", "))
}

/// `chunked_vmap: {message} (operands: ...) at {caller}`.
fn op_error(message: String, operands: &[TensorType], at: &Location<'_>) -> Error {
    Error::Op {
        op: "chunked_vmap".into(),
        operands: operands.to_vec(),
        message,
        at: Some(SrcLoc::from_location(at)),
    }
}
