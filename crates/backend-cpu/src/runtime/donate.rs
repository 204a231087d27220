//! Buffer donation (JAX's `donate_argnums`): arguments handed over by value whose buffers may become
//! outputs of the same type, so those outputs need no allocation.
//!
//! Which donated buffer becomes which output is decided per call from the plan's output locations:
//! 1. an output that *is* a donated parameter (`f(x) = x`) takes that parameter's buffer: nothing is
//!    copied or allocated;
//! 2. any other output takes, in output order, the first unused donated buffer of exactly its type
//!    that no output reads (`Loc::Param`) at the end of the call.
//!
//! Soundness: output `k` is written either by the step that computes it (`Loc::Out(k)`, step `w`)
//! or, for outputs that are parameters, constants or repeats, by `run_raw`'s final copy loop after
//! every step. Rule 1's copy is onto itself (`ptr::copy` allows it). Rule 2 never picks a buffer that
//! a final copy reads. A donated buffer taken by an output written at step `w` that is still read by
//! a step from `w` on (the usual case: `u ↦ step(u)` reads `u` in the step writing the result) is
//! not written by that step: the output is computed in its spill slot of the arena (reserved by the
//! plan for user-called functions) and copied into the donated buffer after the last step. So no
//! step or copy reads a clobbered buffer. A donated argument that is not row-major is read through a
//! row-major copy and its buffer is not reused.

use super::fresh::Fresh;
use super::{Aligned, ArgumentError, Executable, Loc, contiguous_copy, data_ptr, data_ptr_mut};
use kiln_ir::{Array, TensorType};

/// One argument of [`Executable::run_args`]: read in place, or handed over so that its buffer may be
/// reused for an output of the same type (dtype and shape).
#[derive(Debug)]
pub enum Arg<'a> {
    /// Read in place (a row-major copy is made first if it is not row-major); never written.
    Borrowed(&'a Array),
    /// Owned by the call: its buffer may become an output, else it is dropped after the call.
    Donated(Array),
}

impl Arg<'_> {
    fn array(&self) -> &Array {
        match self {
            Arg::Borrowed(a) => a,
            Arg::Donated(a) => a,
        }
    }
}

impl Executable {
    /// [`Executable::run`] taking the arguments by value: where `donate[i]` is true, argument `i`'s
    /// buffer may be reused for an output of the same type (no allocation for that output). Entries of
    /// `donate` past `args.len()` are ignored; missing ones are `false`.
    ///
    /// Results are the same as [`Executable::run`]'s, whatever is donated.
    ///
    /// # Errors
    /// [`ArgumentError`] when the count or types of `args` differ from the parameters'.
    ///
    /// ```
    /// use kiln_ir::{Array, DType, Function, Prim, TensorType, UnaryOp};
    /// // f(x) = exp(x) on f32[3]: the output has the parameter's type, so it can take x's buffer.
    /// let mut f = Function::new();
    /// let x = f.add_param(TensorType::new(DType::F32, [3]));
    /// let y = f.push(Prim::Unary(UnaryOp::Exp), &[x], None).unwrap()[0];
    /// f.outputs = vec![y];
    /// let exe = kiln_backend_cpu::compile(&f).unwrap();
    /// let arg = Array::from_vec(&[3], vec![0.0f32, 1.0, 2.0]);
    /// let before = arg.as_array::<f32>().unwrap().as_ptr();
    /// let out = exe.run_donating(vec![arg], &[true]).unwrap();
    /// assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![1.0, 1.0f32.exp(), 2.0f32.exp()]);
    /// assert_eq!(out[0].as_array::<f32>().unwrap().as_ptr(), before); // x's buffer, reused
    /// ```
    pub fn run_donating(&self, args: Vec<Array>, donate: &[bool]) -> Result<Vec<Array>, ArgumentError> {
        let mut kept: Vec<Option<Array>> = args.into_iter().map(Some).collect();
        let given: Vec<Option<Array>> = kept
            .iter_mut()
            .enumerate()
            .map(|(i, slot)| if donate.get(i) == Some(&true) { slot.take() } else { None })
            .collect();
        let args: Vec<Arg<'_>> = kept
            .iter()
            .zip(given)
            .map(|(k, g)| match (k, g) {
                (_, Some(a)) => Arg::Donated(a),
                (Some(a), None) => Arg::Borrowed(a),
                (None, None) => unreachable!("every argument is either kept or donated"),
            })
            .collect();
        self.run_args(args)
    }

    /// Runs the compiled code on a mix of borrowed and donated arguments (see [`Arg`]); the general
    /// form of [`Executable::run`] (all borrowed) and [`Executable::run_donating`].
    ///
    /// # Errors
    /// [`ArgumentError`] when the count or types of `args` differ from the parameters'.
    pub fn run_args(&self, args: Vec<Arg<'_>>) -> Result<Vec<Array>, ArgumentError> {
        // Compared without collecting: steady-state calls allocate as little as possible.
        let matches = args.len() == self.param_types.len()
            && args
                .iter()
                .zip(&self.param_types)
                .all(|(a, t)| a.array().dtype() == t.dtype && a.array().shape() == t.shape);
        if !matches {
            let got: Vec<TensorType> = args.iter().map(|a| a.array().ty()).collect();
            return Err(ArgumentError { expected: self.param_types.clone(), got });
        }
        let copies: Vec<Option<Array>> = args.iter().map(|a| contiguous_copy(a.array())).collect();
        let donor = if args.iter().any(|a| matches!(a, Arg::Donated(_))) {
            self.assign_donors(|i| matches!(args[i], Arg::Donated(_)) && copies[i].is_none())
        } else {
            Vec::new()
        };
        let ins: Vec<*const u8> = args
            .iter()
            .zip(&copies)
            .map(|(a, c)| data_ptr(c.as_ref().unwrap_or(a.array())).cast_const())
            .collect();
        // Moving an `Array` moves its header, not its heap buffer: `ins` stay valid.
        let mut args: Vec<Option<Arg<'_>>> = args.into_iter().map(Some).collect();
        let mut outs: Vec<Result<Array, Fresh>> = self
            .output_types
            .iter()
            .enumerate()
            .map(|(k, ty)| match donor.get(k).copied().flatten().and_then(|i| args[i].take()) {
                Some(Arg::Donated(a)) => Ok(a),
                Some(Arg::Borrowed(_)) | None => Err(Fresh::new(ty)),
            })
            .collect();
        let mut out_ptrs: Vec<*mut u8> =
            outs.iter_mut().map(|o| o.as_mut().map_or_else(Fresh::ptr, data_ptr_mut)).collect();
        let arena = self.pool.lock().map(|mut p| p.pop()).unwrap_or(None);
        let arena = arena.unwrap_or_else(|| Aligned::zeroed(self.arena_bytes));
        // Outputs whose donated buffer is read too late are computed in their spill slot.
        let spilled = |k: usize| {
            self.spill[k].is_some()
                && donor.get(k).copied().flatten().is_some_and(|i| self.read_after_write(i, k))
        };
        for (k, p) in out_ptrs.iter_mut().enumerate() {
            if let (true, Some(off)) = (spilled(k), self.spill[k]) {
                // SAFETY: the plan placed the spill slot inside the arena.
                *p = unsafe { arena.ptr().add(off) };
            }
        }
        // SAFETY: `ins` point to row-major data of the parameter types (checked above), `out_ptrs` to
        // row-major buffers of the output types: fresh arrays, spill slots, or donated buffers that no
        // step or output copy reads after `run_raw` writes them (module docs). The arena has
        // `arena_bytes` bytes and is used by this call only.
        let call = RawCall { ins: &ins, outs: &out_ptrs, arena: arena.ptr() };
        if self.parallel {
            // The whole call on a pool thread (see `Threads::run_in_pool`), the caller waiting.
            self.threads.run_in_pool(|| unsafe { call.run(self) });
        } else {
            unsafe { call.run(self) };
        }
        for (k, out) in outs.iter_mut().enumerate() {
            if let (true, Ok(out)) = (spilled(k), out) {
                let bytes = self.output_types[k].shape.size() * self.output_types[k].dtype.size_bytes();
                // SAFETY: the spill slot holds output `k`, `out` has its type; they do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(out_ptrs[k].cast_const(), data_ptr_mut(out), bytes) };
            }
        }
        if let Ok(mut p) = self.pool.lock() {
            p.push(arena);
        }
        let arrays = outs.into_iter().zip(&self.output_types).map(|(o, ty)| match o {
            Ok(donated) => donated,
            // SAFETY: `run_raw` wrote every element of every output (see `fresh.rs`).
            Err(fresh) => unsafe { fresh.finish(ty) },
        });
        Ok(arrays.collect())
    }

    /// For each output, the donated argument whose buffer it takes, if any (rules in the module docs).
    /// `reusable(i)`: argument `i` is donated and row-major. Allocates only the result.
    fn assign_donors(&self, reusable: impl Fn(usize) -> bool) -> Vec<Option<usize>> {
        let n = self.param_types.len();
        let mut donor: Vec<Option<usize>> = vec![None; self.outputs.len()];
        // 1. Outputs that are a donated parameter keep its buffer.
        for (k, loc) in self.outputs.iter().enumerate() {
            if let Loc::Param(i) = *loc
                && reusable(i)
                && !donor.contains(&Some(i))
            {
                donor[k] = Some(i);
            }
        }
        // 2. Other outputs take a donated buffer of their type that nothing reads once it is written.
        let read_at_end = |i: usize| self.outputs.iter().any(|l| matches!(l, Loc::Param(j) if *j == i));

        for k in 0..self.outputs.len() {
            if donor[k].is_some() {
                continue;
            }
            let fits = |i: &usize| {
                reusable(*i)
                    && !donor.contains(&Some(*i))
                    && !read_at_end(*i)
                    && (self.spill[k].is_some() || !self.read_after_write(*i, k))
                    && self.param_types[*i] == self.output_types[k]
            };
            donor[k] = (0..n).find(fits);
        }
        donor
    }

    /// Whether a step reads parameter `i` at or after the step that writes output `k` in place. A
    /// step of a pipelined range (`runtime::pipeline`) counts as running from the range's first
    /// step: its other steps run first, and its chain alongside the scan.
    fn read_after_write(&self, i: usize, k: usize) -> bool {
        let reads = |s: &super::Step| s.inputs.iter().any(|l| matches!(l, Loc::Param(j) if *j == i));
        let writes = |s: &super::Step| s.outputs.iter().any(|l| matches!(l, Loc::Out(j) if *j == k));
        match self.steps.iter().position(writes) {
            Some(w) => {
                let start =
                    self.pipelines.iter().find(|p| p.first <= w && w <= p.scan).map_or(w, |p| p.first);
                self.steps[start..].iter().any(reads)
            }
            None => false,
        }
    }
}

/// A call's buffer addresses, sent to the pool thread that runs it ([`Executable::run_args`]).
struct RawCall<'a> {
    ins: &'a [*const u8],
    outs: &'a [*mut u8],
    arena: *mut u8,
}

// SAFETY: the addresses are of buffers owned by the calling thread, which blocks until the pool
// thread running the call is done with them.
unsafe impl Sync for RawCall<'_> {}

impl RawCall<'_> {
    /// # Safety
    /// As [`Executable::run_raw`].
    unsafe fn run(&self, exe: &Executable) {
        unsafe { exe.run_raw(self.ins, self.outs, self.arena) }
    }
}
