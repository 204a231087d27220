//! `jit`: trace once per input signature, compile with the CPU backend, cache, run native code.
//!
//! ```
//! use kiln::prelude::*;
//! let f = jit(|x: Tensor| x.exp() * 2.0);
//! let y = f.call(&Tensor::from_vec(&[2], vec![0.0f32, 1.0]))?;
//! assert_eq!(y.to_vec::<f32>(), vec![2.0, 2.0 * 1.0f32.exp()]);
//! # Ok::<(), kiln::Error>(())
//! ```

use kiln_backend_cpu::Executable;
use kiln_ir::{Array, TensorType};
use kiln_trace::{Error, Result, Tensor, Tree};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// A compiled program for one input signature: `Send + Sync`, callable from many threads at once.
pub struct Compiled {
    exe: Executable,
}

impl Compiled {
    /// Runs the native code on host arrays (one per input leaf, in tree order).
    ///
    /// # Errors
    /// [`Error::Input`] when the count, dtypes or shapes differ from the traced signature.
    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>> {
        self.exe.run(args).map_err(|e| Error::Input { message: e.to_string() })
    }

    /// The compiled executable (kernel count and types, for reports and tests).
    pub fn executable(&self) -> &Executable {
        &self.exe
    }
}

struct Entry<R> {
    compiled: Arc<Compiled>,
    output: R,
}

/// A function compiled on first use for each input signature; see [`jit`].
pub struct Jit<F, A, R> {
    f: F,
    cache: Mutex<HashMap<String, Entry<R>>>,
    _args: PhantomData<fn(A)>,
}

/// Compiles `f` to native code (JAX's `jax.jit`): the first [`Jit::call`] for each input signature
/// (tree structure, dtypes and shapes) traces `f`, compiles the IR with the CPU backend and caches
/// it; later calls with that signature run the cached native code.
pub fn jit<A: Tree, R: Tree + Clone, F: Fn(A) -> R>(f: F) -> Jit<F, A, R> {
    Jit { f, cache: Mutex::new(HashMap::new()), _args: PhantomData }
}

fn concrete(leaves: &[Tensor]) -> Result<Vec<Array>> {
    leaves
        .iter()
        .map(|t| {
            t.to_array().ok_or_else(|| Error::Input {
                message: "jit: arguments must be concrete tensors (jit inside a trace is not supported yet)"
                    .into(),
            })
        })
        .collect()
}

impl<A: Tree, R: Tree + Clone, F: Fn(A) -> R> Jit<F, A, R> {
    /// Runs `f` on `args` through the compiled code (tracing and compiling on a new signature).
    ///
    /// # Errors
    /// A trace error of `f`, a backend [`kiln_backend_cpu::CompileError`] (as [`Error::Op`] named
    /// `jit`), or [`Error::Input`] for non-concrete arguments.
    pub fn call(&self, args: &A) -> Result<R> {
        let (compiled, output) = self.lookup(args)?;
        let outs = compiled.run(&concrete(&args.leaves())?)?;
        Ok(output.rebuild(outs.into_iter().map(Tensor::from_array).collect()))
    }

    /// The compiled program for `args`' signature (tracing and compiling it if new).
    ///
    /// # Errors
    /// As [`Jit::call`].
    pub fn compiled(&self, args: &A) -> Result<Arc<Compiled>> {
        Ok(self.lookup(args)?.0)
    }

    fn lookup(&self, args: &A) -> Result<(Arc<Compiled>, R)> {
        let leaves = args.leaves();
        let types: Vec<TensorType> = leaves.iter().map(Tensor::ty).collect();
        let key = format!("{}|{types:?}", args.structure());
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = cache.get(&key) {
            return Ok((e.compiled.clone(), e.output.clone()));
        }
        let traced = kiln_trace::trace(|a: A| (self.f)(a), args)?;
        if !traced.captured.is_empty() {
            return Err(Error::Input {
                message: "jit: the function captures tracers of an enclosing trace".into(),
            });
        }
        let exe = kiln_backend_cpu::compile(&traced.function).map_err(|e| Error::Op {
            op: "jit".into(),
            operands: types.clone(),
            message: e.to_string(),
            at: None,
        })?;
        let entry = Entry { compiled: Arc::new(Compiled { exe }), output: traced.output };
        let out = (entry.compiled.clone(), entry.output.clone());
        cache.insert(key, entry);
        Ok(out)
    }
}
