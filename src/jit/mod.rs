//! `jit`: trace once per input signature, compile with the CPU backend, cache, run native code.
//!
//! ```
//! use kiln::prelude::*;
//! let f = jit(|x: Tensor| x.exp() * 2.0);
//! let y = f.call(&Tensor::from_vec(&[2], vec![0.0f32, 1.0]))?;
//! assert_eq!(y.to_vec::<f32>(), vec![2.0, 2.0 * 1.0f32.exp()]);
//! # Ok::<(), kiln::Error>(())
//! ```
//!
//! # What a trace bakes in, and the cache key
//!
//! Tracing runs `f` once on tracers. Everything `f` reads besides its arguments is baked into the
//! compiled code as it was at that moment: captured tensors and Rust numbers (as constants), shapes,
//! and every decision Rust code made (loop counts, `if`s on configuration). The cache key is
//! therefore:
//! * the arguments' tree structure and every leaf's dtype and shape;
//! * the static argument's value ([`jit_static`]), compared with `Eq` (not only hashed);
//! * the [`JitOptions`], with the checkpoint policy resolved (a thread's [`crate::with_checkpoint`]
//!   changes what `grad` traces);
//! * and, for the compiled code itself, a fingerprint of the traced IR that includes the bits of every
//!   constant: the process-wide program cache never gives one closure the code of another that
//!   captured different values, and `jit(f)` re-created in a loop does not recompile.
//!
//! **The rule.** A [`Jit`] owns `f`, an `Fn`: by Rust's borrowing rules whatever `f` captures (by
//! value or by reference) cannot change while the `Jit` lives, so the first trace of a signature stays
//! valid — except for state `f` reads through interior mutability (`Cell`, `RefCell`, `Mutex`,
//! atomics, statics). Pass such a value as an argument (traced: no recompilation when it changes), as
//! the static argument of [`jit_static`] (one compilation per distinct value), or build the function
//! with [`Jit::retrace_every_call`] (traced on every call; its IR fingerprint, constants included,
//! selects the compiled code, so a changed value compiles anew and never reuses stale code).
//!
//! # Inside other transforms
//!
//! Called on tracers, or while any function is being traced (inside `grad`, `vmap`, another `jit`),
//! a jitted function is traced and bound as one `call` equation of the enclosing trace (tracers it
//! captures become extra operands), as in JAX: `grad(|x| f.call(&x).unwrap())`, `vmap` of it and
//! `jit(|x| g.call(&x).unwrap())` compose, and the outermost `jit` compiles everything at once.

mod cache;
mod compiled;
mod options;
mod staged;

pub use compiled::Compiled;
pub use options::{JitOptions, SimplifyOutcome};

use crate::Args;
use compiled::{jit_error, signature_mismatch};
use kiln_backend_cpu::Arg;
use kiln_ir::{Array, SrcLoc, TensorType};
use kiln_trace::{Result, Tensor, Tree};
use std::collections::HashMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::{Arc, Mutex};

/// What one traced signature compiled to: the program and the output structure (placeholder leaves).
struct Entry<R> {
    compiled: Arc<Compiled>,
    output: R,
}

/// The per-function cache key (module docs).
#[derive(PartialEq, Eq, Hash)]
struct Key<S> {
    static_arg: S,
    structure: String,
    types: Vec<TensorType>,
    options: JitOptions,
}

/// The state shared by [`Jit`] and [`JitStatic`]: flags, donation and the signature cache.
struct Dispatch<S, R> {
    options: JitOptions,
    donate: Vec<usize>,
    retrace: bool,
    cache: Mutex<HashMap<Key<S>, Entry<R>>>,
}

fn types(leaves: &[Tensor]) -> Vec<TensorType> {
    leaves.iter().map(Tensor::ty).collect()
}

/// The host arrays of concrete leaves (shared, not copied); a placeholder leaf is an error.
fn concrete(leaves: &[Tensor], at: &Location<'_>) -> Result<Vec<Arc<Array>>> {
    let mut out = Vec::with_capacity(leaves.len());
    for (i, l) in leaves.iter().enumerate() {
        match l.shared() {
            Some(a) => out.push(a.clone()),
            None => {
                let msg = format!(
                    "argument leaf {i} is a placeholder of type {} (a type, not a value): pass a concrete tensor",
                    l.ty()
                );
                return Err(jit_error(msg, types(leaves), at));
            }
        }
    }
    Ok(out)
}

/// True when the call must be staged into an enclosing trace rather than run.
fn in_trace(leaves: &[Tensor]) -> bool {
    kiln_trace::is_tracing() || leaves.iter().any(Tensor::is_tracer)
}

impl<S: Hash + Eq + Clone, R: Tree + Clone> Dispatch<S, R> {
    fn new() -> Self {
        Dispatch {
            options: JitOptions::default(),
            donate: Vec::new(),
            retrace: false,
            cache: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key<S>, Entry<R>>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The compiled program and output structure for `args`' signature (tracing and compiling if new).
    fn lookup<A: Tree>(
        &self,
        s: &S,
        f: impl FnOnce(A) -> R,
        args: &A,
        at: &Location<'_>,
    ) -> Result<Entry<R>> {
        let leaves = args.leaves();
        let options = self.options.resolved();
        let key = Key { static_arg: s.clone(), structure: args.structure(), types: types(&leaves), options };
        if !self.retrace
            && let Some(e) = self.lock().get(&key)
        {
            return Ok(Entry { compiled: e.compiled.clone(), output: e.output.clone() });
        }
        // The lock is not held while `f` runs: it may call other jitted functions.
        let traced = options.tracing(|| kiln_trace::trace(f, args))?;
        if !traced.captured.is_empty() {
            let msg =
                "the function captures tracers of an enclosing trace: inside a trace, use `call`".into();
            return Err(jit_error(msg, key.types, at));
        }
        let compiled = cache::compile_shared(&traced.function, &options).map_err(|e| {
            jit_error(format!("the backend cannot compile the traced function: {e}"), key.types.clone(), at)
        })?;
        let entry = Entry { compiled, output: traced.output };
        if !self.retrace {
            self.lock().insert(key, Entry { compiled: entry.compiled.clone(), output: entry.output.clone() });
        }
        Ok(entry)
    }

    fn call<A: Tree>(&self, s: &S, f: impl Fn(A) -> R, args: &A, at: &Location<'_>) -> Result<R> {
        let leaves = args.leaves();
        if in_trace(&leaves) {
            return Ok(staged::stage(f, args, &self.options, &SrcLoc::from_location(at)));
        }
        let arrays = concrete(&leaves, at)?;
        let entry = self.lookup(s, f, args, at)?;
        let outs = entry.compiled.run_args(arrays.iter().map(|a| Arg::Borrowed(a)).collect(), at)?;
        Ok(entry.output.rebuild(outs.into_iter().map(Tensor::from_array).collect()))
    }

    fn call_donated<A: Args>(&self, s: &S, f: impl Fn(A) -> R, args: A, at: &Location<'_>) -> Result<R> {
        let leaves = args.leaves();
        let ranges = args.element_ranges();
        if let Some(&k) = self.donate.iter().find(|&&k| k >= ranges.len()) {
            let msg = format!("donate argnum {k} is out of range for {} arguments", ranges.len());
            return Err(jit_error(msg, types(&leaves), at));
        }
        if in_trace(&leaves) {
            // Donation means nothing to a trace: the enclosing program owns the buffers.
            return Ok(staged::stage(f, &args, &self.options, &SrcLoc::from_location(at)));
        }
        let mut donated = vec![false; leaves.len()];
        for &k in &self.donate {
            donated[ranges[k].clone()].iter_mut().for_each(|d| *d = true);
        }
        let arrays = concrete(&leaves, at)?;
        let entry = self.lookup(s, f, &args, at)?;
        // Drop the caller's handles so that a tensor held nowhere else is uniquely ours to donate.
        drop((args, leaves));
        let mut owned: Vec<Option<Array>> = Vec::with_capacity(arrays.len());
        let mut shared: Vec<Option<Arc<Array>>> = Vec::with_capacity(arrays.len());
        for (a, d) in arrays.into_iter().zip(donated) {
            let unique = if d { Arc::try_unwrap(a) } else { Err(a) };
            match unique {
                Ok(a) => (owned.push(Some(a)), shared.push(None)),
                Err(a) => (owned.push(None), shared.push(Some(a))),
            };
        }
        let list: Vec<Arg<'_>> = owned
            .into_iter()
            .zip(&shared)
            .map(|(o, s)| match (o, s) {
                (Some(a), _) => Arg::Donated(a),
                (None, Some(a)) => Arg::Borrowed(a),
                (None, None) => unreachable!("every leaf is owned or shared"),
            })
            .collect();
        let outs = entry.compiled.run_args(list, at)?;
        Ok(entry.output.rebuild(outs.into_iter().map(Tensor::from_array).collect()))
    }

    fn specialize<A: Tree>(
        &self,
        s: &S,
        f: impl FnOnce(A) -> R,
        args: &A,
        at: &Location<'_>,
    ) -> Result<Specialized<A, R>> {
        let entry = self.lookup(s, f, args, at)?;
        let input = crate::ad::placeholders_like(args);
        Ok(Specialized {
            compiled: entry.compiled,
            structure: args.structure(),
            types: types(&input.leaves()),
            output: entry.output,
            _args: PhantomData,
        })
    }
}

/// The builder methods shared by [`Jit`] and [`JitStatic`].
macro_rules! builders {
    () => {
        /// Lets the compiled code use `n` worker threads (part of the cache key; at most 256, see
        /// [`JitOptions::threads`](crate::JitOptions::threads)).
        ///
        /// ```
        /// use kiln::prelude::*;
        /// let f = jit(|x: Tensor| x * 2.0).threads(2);
        /// assert_eq!(f.options().threads, Some(2));
        /// assert_eq!(f.call(&Tensor::scalar(1.5f32))?.item::<f32>(), 3.0);
        /// # Ok::<(), kiln::Error>(())
        /// ```
        pub fn threads(mut self, n: usize) -> Self {
            self.dispatch.options.threads = Some(n);
            self
        }

        /// Allows float reassociation and contraction (part of the cache key).
        ///
        /// ```
        /// use kiln::prelude::*;
        /// let f = jit(|x: Tensor| x + 1.0).fast_math(true);
        /// assert!(f.options().fast_math);
        /// assert_eq!(f.call(&Tensor::scalar(1.0f64))?.item::<f64>(), 2.0);
        /// # Ok::<(), kiln::Error>(())
        /// ```
        pub fn fast_math(mut self, on: bool) -> Self {
            self.dispatch.options.fast_math = on;
            self
        }

        /// Runs the egg simplifier before the backend (on by default; part of the cache key).
        ///
        /// ```
        /// use kiln::prelude::*;
        /// let f = jit(|x: Tensor| x + 1.0).simplify(false);
        /// assert!(!f.options().simplify);
        /// ```
        pub fn simplify(mut self, on: bool) -> Self {
            self.dispatch.options.simplify = on;
            self
        }

        /// Traces under this reverse-mode `scan` checkpoint policy (see [`crate::with_checkpoint`]);
        /// without it, the calling thread's policy applies. Part of the cache key.
        ///
        /// # Panics
        /// On `Checkpoint::Every(0)`, at the caller.
        ///
        /// ```
        /// use kiln::prelude::*;
        /// let prod = |x: Tensor| scan(|c: Tensor, x: Tensor| (&c * &x, ()), Tensor::scalar(1.0f64), x).0;
        /// let g = jit(grad(prod)).checkpoint_policy(Checkpoint::StoreAll);
        /// let dx = g.call(&Tensor::from_vec(&[3], vec![2.0f64, 3.0, 4.0]))?;
        /// assert_eq!(dx.to_vec::<f64>(), vec![12.0, 8.0, 6.0]);
        /// # Ok::<(), kiln::Error>(())
        /// ```
        #[track_caller]
        pub fn checkpoint_policy(mut self, policy: crate::Checkpoint) -> Self {
            assert!(policy != crate::Checkpoint::Every(0), "kiln: jit: Checkpoint::Every(k) needs k >= 1");
            self.dispatch.options.checkpoint = Some(policy);
            self
        }

        /// Donates the top-level arguments at `argnums` (JAX's `donate_argnums`) to `call_donated`:
        /// a donated leaf's buffer may be reused for an output of the same dtype and shape, saving that
        /// output's allocation. A leaf is donated only if the call holds its last reference (otherwise
        /// it is read in place and left intact). An argnum past the arguments is an error of the call.
        ///
        /// ```
        /// use kiln::prelude::*;
        /// let step = jit(|(u, dt): (Tensor, Tensor)| &u + &u * &dt).donate(&[0]);
        /// let u = Tensor::from_vec(&[3], vec![1.0f32, 2.0, 3.0]);
        /// let u = step.call_donated((u, Tensor::scalar(0.5f32)))?; // u's buffer holds the result
        /// assert_eq!(u.to_vec::<f32>(), vec![1.5, 3.0, 4.5]);
        /// # Ok::<(), kiln::Error>(())
        /// ```
        pub fn donate(mut self, argnums: &[usize]) -> Self {
            self.dispatch.donate = argnums.to_vec();
            self
        }

        /// Traces on every call instead of once per signature, for a function that reads state
        /// through interior mutability (module docs): the compiled code is looked up by the traced
        /// IR's fingerprint, constants included, so it is recompiled only when that IR changes.
        ///
        /// ```
        /// use kiln::prelude::*;
        /// use std::cell::Cell;
        /// let scale = Cell::new(2.0f32);
        /// let f = jit(|x: Tensor| x * scale.get()).retrace_every_call();
        /// assert_eq!(f.call(&Tensor::scalar(1.0f32))?.item::<f32>(), 2.0);
        /// scale.set(3.0);
        /// assert_eq!(f.call(&Tensor::scalar(1.0f32))?.item::<f32>(), 3.0);
        /// # Ok::<(), kiln::Error>(())
        /// ```
        pub fn retrace_every_call(mut self) -> Self {
            self.dispatch.retrace = true;
            self
        }

        /// The compilation flags.
        ///
        /// ```
        /// use kiln::prelude::*;
        /// assert_eq!(*jit(|x: Tensor| x).options(), JitOptions::default());
        /// ```
        pub fn options(&self) -> &JitOptions {
            &self.dispatch.options
        }
    };
}

/// A function compiled on first use for each input signature; see [`jit`].
pub struct Jit<F, A, R> {
    f: F,
    dispatch: Dispatch<(), R>,
    _args: PhantomData<fn(A)>,
}

/// Compiles `f` to native code (JAX's `jax.jit`): the first [`Jit::call`] for each input signature
/// (tree structure, dtypes and shapes) traces `f`, compiles the IR with the CPU backend and caches
/// it; later calls with that signature run the cached native code. See the module docs for what the
/// cache key holds and how a call inside another transform behaves.
pub fn jit<A: Tree, R: Tree + Clone, F: Fn(A) -> R>(f: F) -> Jit<F, A, R> {
    Jit { f, dispatch: Dispatch::new(), _args: PhantomData }
}

impl<A: Tree, R: Tree + Clone, F: Fn(A) -> R> Jit<F, A, R> {
    builders!();

    /// Runs `f` on `args` through the compiled code (tracing and compiling on a new signature). On
    /// tracers, or inside any trace, `f` is staged into the enclosing trace instead (module docs).
    ///
    /// # Errors
    /// A trace error of `f` (the op, shapes and the line in `f`); [`crate::Error::Op`] named `jit` with the
    /// caller's location for a placeholder argument or a backend compile error. Inside a trace,
    /// errors are recorded in the enclosing trace (whose entry point returns them) and the results
    /// are placeholders.
    #[track_caller]
    pub fn call(&self, args: &A) -> Result<R> {
        self.dispatch.call(&(), |a| (self.f)(a), args, Location::caller())
    }

    /// [`Jit::call`] taking the arguments by value, so that the arguments selected by [`Jit::donate`]
    /// can give their buffers to outputs. Values are the same as `call`'s.
    ///
    /// # Errors
    /// As [`Jit::call`], and a donate argnum past the arguments.
    ///
    /// ```
    /// use kiln::prelude::*;
    /// let f = jit(|x: Tensor| &x * 2.0 + 1.0).donate(&[0]);
    /// let y = f.call_donated(Tensor::from_vec(&[2], vec![0.0f64, 1.5]))?;
    /// assert_eq!(y.to_vec::<f64>(), vec![1.0, 4.0]);
    /// # Ok::<(), kiln::Error>(())
    /// ```
    #[track_caller]
    pub fn call_donated(&self, args: A) -> Result<R>
    where
        A: Args,
    {
        self.dispatch.call_donated(&(), |a| (self.f)(a), args, Location::caller())
    }

    /// The compiled program for `args`' signature (tracing and compiling it if new).
    ///
    /// # Errors
    /// A trace or compile error, as [`Jit::call`].
    ///
    /// ```
    /// use kiln::prelude::*;
    /// let f = jit(|x: Tensor| x.sin());
    /// let c = f.compiled(&Tensor::from_vec(&[4], vec![0.0f32; 4]))?;
    /// assert_eq!(c.param_types()[0].to_string(), "f32[4]");
    /// # Ok::<(), kiln::Error>(())
    /// ```
    #[track_caller]
    pub fn compiled(&self, args: &A) -> Result<Arc<Compiled>> {
        Ok(self.dispatch.lookup(&(), |a| (self.f)(a), args, Location::caller())?.compiled)
    }

    /// The function compiled for `args`' signature only (JAX's `jit(f).lower(x).compile()`): its
    /// [`Specialized::call`] never retraces, and arguments of another structure, count, dtype or
    /// shape are an error.
    ///
    /// # Errors
    /// A trace or compile error, as [`Jit::call`].
    ///
    /// ```
    /// use kiln::prelude::*;
    /// let f = jit(|(a, b): (Tensor, Tensor)| &a - &b);
    /// let x = Tensor::from_vec(&[2], vec![5.0f32, 7.0]);
    /// let sub = f.specialize(&(x.clone(), x.clone()))?;
    /// assert_eq!(sub.call(&(x.clone(), x.clone()))?.to_vec::<f32>(), vec![0.0, 0.0]);
    /// let err = sub.call(&(x, Tensor::scalar(1.0f32))).unwrap_err();
    /// assert!(err.to_string().contains("argument leaf 1 has shape"), "{err}");
    /// # Ok::<(), kiln::Error>(())
    /// ```
    #[track_caller]
    pub fn specialize(&self, args: &A) -> Result<Specialized<A, R>> {
        self.dispatch.specialize(&(), |a| (self.f)(a), args, Location::caller())
    }
}

/// A function with a static (compile-time) argument, compiled once per distinct static value and
/// input signature; see [`jit_static`].
pub struct JitStatic<S, F, A, R> {
    f: F,
    dispatch: Dispatch<S, R>,
    _args: PhantomData<fn(A)>,
}

/// [`jit`] with a static argument (JAX's `static_argnums`): `f(&cfg, args)` where `cfg` is plain Rust
/// data — sizes, step counts, flags, an enum — that Rust code in `f` branches on. Each distinct
/// `cfg` (compared with `Eq`, so `S: Hash + Eq + Clone`) is traced and compiled once; the tensors in
/// `args` are traced as usual. A value that changes often belongs in `args` instead (floats are not
/// `Eq`: pass them as tensors).
///
/// ```
/// use kiln::prelude::*;
/// #[derive(Clone, PartialEq, Eq, Hash)]
/// struct Cfg { steps: usize, clip: bool }
/// let f = jit_static(|c: &Cfg, x: Tensor| {
///     let mut y = x;
///     for _ in 0..c.steps {
///         y = &y * 2.0;
///     }
///     if c.clip { y.clip(-5.0, 5.0) } else { y }
/// });
/// let x = Tensor::from_vec(&[2], vec![1.0f32, -2.0]);
/// assert_eq!(f.call(&Cfg { steps: 2, clip: false }, &x)?.to_vec::<f32>(), vec![4.0, -8.0]);
/// assert_eq!(f.call(&Cfg { steps: 2, clip: true }, &x)?.to_vec::<f32>(), vec![4.0, -5.0]);
/// # Ok::<(), kiln::Error>(())
/// ```
pub fn jit_static<S, A, R, F>(f: F) -> JitStatic<S, F, A, R>
where
    S: Hash + Eq + Clone,
    A: Tree,
    R: Tree + Clone,
    F: Fn(&S, A) -> R,
{
    JitStatic { f, dispatch: Dispatch::new(), _args: PhantomData }
}

impl<S: Hash + Eq + Clone, A: Tree, R: Tree + Clone, F: Fn(&S, A) -> R> JitStatic<S, F, A, R> {
    builders!();

    /// Runs `f(static_arg, args)` through the code compiled for this static value and signature.
    ///
    /// # Errors
    /// As [`Jit::call`].
    #[track_caller]
    pub fn call(&self, static_arg: &S, args: &A) -> Result<R> {
        self.dispatch.call(static_arg, |a| (self.f)(static_arg, a), args, Location::caller())
    }

    /// [`JitStatic::call`] with donation ([`Jit::call_donated`]).
    ///
    /// # Errors
    /// As [`Jit::call_donated`].
    ///
    /// ```
    /// use kiln::prelude::*;
    /// let f = jit_static(|n: &usize, x: Tensor| &x * (*n as f64)).donate(&[0]);
    /// assert_eq!(f.call_donated(&3, Tensor::scalar(2.0f64))?.item::<f64>(), 6.0);
    /// # Ok::<(), kiln::Error>(())
    /// ```
    #[track_caller]
    pub fn call_donated(&self, static_arg: &S, args: A) -> Result<R>
    where
        A: Args,
    {
        self.dispatch.call_donated(static_arg, |a| (self.f)(static_arg, a), args, Location::caller())
    }

    /// The compiled program for this static value and `args`' signature.
    ///
    /// # Errors
    /// As [`Jit::compiled`].
    ///
    /// ```
    /// use kiln::prelude::*;
    /// let f = jit_static(|n: &usize, x: Tensor| x.sum(All) * (*n as f32));
    /// let x = Tensor::from_vec(&[3], vec![1.0f32; 3]);
    /// let (a, b) = (f.compiled(&1, &x)?, f.compiled(&2, &x)?);
    /// assert!(!std::sync::Arc::ptr_eq(&a, &b)); // one program per static value
    /// # Ok::<(), kiln::Error>(())
    /// ```
    #[track_caller]
    pub fn compiled(&self, static_arg: &S, args: &A) -> Result<Arc<Compiled>> {
        Ok(self.dispatch.lookup(static_arg, |a| (self.f)(static_arg, a), args, Location::caller())?.compiled)
    }
}

/// A jitted function compiled for one signature (see [`Jit::specialize`]).
pub struct Specialized<A, R> {
    compiled: Arc<Compiled>,
    structure: String,
    types: Vec<TensorType>,
    output: R,
    _args: PhantomData<fn(A)>,
}

impl<A: Tree, R: Tree> Specialized<A, R> {
    /// Runs the compiled code on `args`, which must have the signature it was compiled for.
    ///
    /// # Errors
    /// [`crate::Error::Op`] named `jit`, with the expected and given structure and leaf types and the
    /// caller's location, when the tree structure, leaf count, a dtype or a shape differs, or a leaf
    /// is not concrete.
    #[track_caller]
    pub fn call(&self, args: &A) -> Result<R> {
        let at = Location::caller();
        let leaves = args.leaves();
        let got = types(&leaves);
        let structure = args.structure();
        if let Some(msg) = signature_mismatch(Some(&self.structure), &self.types, Some(&structure), &got) {
            return Err(jit_error(msg, got, at));
        }
        let arrays = concrete(&leaves, at)?;
        let outs = self.compiled.run_args(arrays.iter().map(|a| Arg::Borrowed(a)).collect(), at)?;
        Ok(self.output.rebuild(outs.into_iter().map(Tensor::from_array).collect()))
    }

    /// The compiled program.
    pub fn compiled(&self) -> &Arc<Compiled> {
        &self.compiled
    }

    /// The output's structure, with placeholder leaves of the output types.
    pub(crate) fn output(&self) -> &R {
        &self.output
    }
}

impl<A, R> std::fmt::Debug for Specialized<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Specialized({} {:?})", self.structure, self.types)
    }
}

#[allow(dead_code)]
fn assert_compiled_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Compiled>();
}
