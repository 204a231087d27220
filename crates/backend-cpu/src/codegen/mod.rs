//! Cranelift code generation: one native function per fused kernel.
//!
//! A kernel is a loop nest over its root's output index space; at each index the root's value is
//! computed by [`kernel`]'s per-primitive `value` function, which recurses into inlined producers
//! with transformed indices (broadcast, transpose, slice, ...) and loads from materialized buffers at
//! the leaves. Shapes and strides are baked in as immediates; the only argument is a table of base
//! pointers (the leaves in order, then the output).
//!
//! Elementwise arithmetic is in [`scalar`]. Kernels whose fused tree passes a static check run
//! their contiguous innermost loop on 128-bit vectors instead ([`vector`], arithmetic in [`vops`]),
//! with transcendentals strip-mined into tiles for the [`crate::vmath`] tile functions.
//!
//! Before either, [`collapse`] merges adjacent output axes across which every access of the kernel
//! is contiguous (vmap's `[batch, 9, 3]` kernels become one row of `27·batch`), so short innermost
//! axes still reach the vector path.

mod check;
mod collapse;
mod elem_calls;
mod kernel;
pub(crate) mod pairwise;
mod scalar;
mod vector;
mod vops;
mod vwalk;

use crate::CompileError;
use cranelift_codegen::ir::{AbiParam, types};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Module, default_libcall_names};
use kiln_ir::{Function, Var};

/// The native signature of every kernel: `fn(table: *const *mut u8, lo: i64, hi: i64)`, computing the
/// rows `lo..hi` of the output's outermost axis (`0..dims[0]` for the whole output; ignored for a
/// rank-0 output). Rows are independent, so disjoint row ranges may run on different threads.
pub(crate) type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

/// The most operands (leaves plus output) one kernel may take; the runtime passes the pointer table
/// on the stack.
pub(crate) const MAX_KERNEL_OPERANDS: usize = 256;

/// Owns the JIT module whose code the kernels point into; frees the code on drop.
pub(crate) struct Code {
    module: Option<JITModule>,
}

// SAFETY: after `finalize_definitions` the module is never used again except to be freed on drop;
// the code it owns is immutable and position-independent of threads.
unsafe impl Send for Code {}
// SAFETY: as above: no `&self` method touches the module.
unsafe impl Sync for Code {}

impl Drop for Code {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the executable that held function pointers into this module is being dropped
            // with it (`Code` is only owned by `Executable`), so no pointer outlives the memory.
            unsafe { m.free_memory() };
        }
    }
}

/// The leaves of the kernel rooted at `f.eqns[root]` (`inline[v]`: the equation computing an inlined
/// `v`), in first-use order — the same buffers [`Jit::kernel`] gives it, without generating code.
pub(crate) fn kernel_leaves(f: &Function, root: usize, inline: &[Option<usize>]) -> Vec<Var> {
    kernel::leaves(f, root, inline)
}

/// The leaves in the pointer table of the kernel with roots `roots` (see [`Jit::kernel`]): each
/// root's leaves in first-use order, the first occurrence of each buffer, roots in order.
pub(crate) fn kernel_table(f: &Function, roots: &[usize], inline: &[Option<usize>]) -> Vec<Var> {
    let mut table: Vec<Var> = Vec::new();
    for &root in roots {
        for v in kernel::leaves(f, root, inline) {
            if !table.contains(&v) {
                table.push(v);
            }
        }
    }
    table
}

/// Numbers the JIT modules of this process, for [`Jit::symbol`].
static MODULES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Compiles kernels into one JIT module.
pub(crate) struct Jit {
    module: JITModule,
    ctx: cranelift_codegen::Context,
    fctx: cranelift_frontend::FunctionBuilderContext,
    pending: Vec<(cranelift_module::FuncId, usize)>,
    /// This module's number in the process (see [`Jit::symbol`]).
    id: usize,
    /// Whether to keep each kernel's Cranelift IR text (for `KILN_DUMP`).
    dump: bool,
    clif: Vec<String>,
}

impl Jit {
    /// A JIT for the host CPU, with the Rust math callbacks registered; with `dump`, [`Jit::finish`]
    /// also returns each kernel's Cranelift IR text.
    pub(crate) fn new_with_dump(dump: bool) -> Result<Jit, CompileError> {
        let err = |e: &dyn std::fmt::Display| CompileError::Codegen(e.to_string());
        let mut flags = settings::builder();
        flags.set("use_colocated_libcalls", "false").map_err(|e| err(&e))?;
        flags.set("is_pic", "false").map_err(|e| err(&e))?;
        flags.set("opt_level", "speed").map_err(|e| err(&e))?;
        let isa = cranelift_native::builder()
            .map_err(|e| err(&e))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| err(&e))?;
        let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
        for (name, ptr) in crate::runtime::math::symbols()
            .into_iter()
            .chain(crate::runtime::math::tile_symbols())
            .chain(elem_calls::symbols())
        {
            builder.symbol(name, ptr);
        }
        let module = JITModule::new(builder);
        let ctx = module.make_context();
        Ok(Jit {
            module,
            ctx,
            fctx: Default::default(),
            pending: Vec::new(),
            id: MODULES.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            dump,
            clif: Vec::new(),
        })
    }

    /// Compiles the kernel rooted at equations `roots` of `f` (program order; several roots make a
    /// multi-output kernel, see `crate::grouping`; `inline[v]`: the equation computing an inlined
    /// variable `v`). Returns a handle to resolve after [`Jit::finish`] and the leaves, in
    /// pointer-table order (the outputs come after them, in the roots' order). `resolve`: the
    /// variable whose buffer a variable reads (the plan's aliases followed; identity without them).
    pub(crate) fn kernel(
        &mut self,
        f: &Function,
        roots: &[usize],
        inline: &[Option<usize>],
        resolve: &dyn Fn(Var) -> Var,
    ) -> Result<(usize, Vec<Var>), CompileError> {
        let ptr = self.module.target_config().pointer_type();
        self.module.clear_context(&mut self.ctx);
        self.ctx.func.signature.params.push(AbiParam::new(ptr));
        self.ctx.func.signature.params.push(AbiParam::new(types::I64));
        self.ctx.func.signature.params.push(AbiParam::new(types::I64));
        // Collapsed axes when every access allows (see `collapse`); the leaves are the same buffers.
        let collapsed: Vec<Option<collapse::Collapsed>> =
            roots.iter().map(|&root| collapse::plan(f, root, inline)).collect();
        // Each member's leaves, as its own variables and as the original ones (table order: the
        // union in first-use order, member by member).
        let mut table = kernel_table(f, roots, inline);
        let own: Vec<Vec<(Var, Var)>> = roots
            .iter()
            .zip(&collapsed)
            .map(|(&root, c)| match c {
                Some(c) => kernel::leaves(&c.func, c.root, &c.inline)
                    .into_iter()
                    .map(|v| (v, c.origin[&v]))
                    .collect(),
                None => kernel::leaves(f, root, inline).into_iter().map(|v| (v, v)).collect(),
            })
            .collect();
        // Collapsing keeps the same buffers; should it ever name another one, it gets a slot too.
        for (_, v) in own.iter().flatten() {
            if !table.contains(v) {
                table.push(*v);
            }
        }
        // The outputs' slots, and a segment kernel's flag (see `runtime::Op::SegmentKernel`).
        let segment = roots.iter().any(|&r| matches!(f.eqns[r].prim, kiln_ir::Prim::SegmentSum { .. }));
        let extra = roots.len() + usize::from(segment);
        if table.len() + extra > MAX_KERNEL_OPERANDS {
            return Err(CompileError::unsupported(
                f.eqns[roots[0]].prim.name(),
                "kernel with over 255 operands",
            ));
        }
        let members: Vec<kernel::Member> = roots
            .iter()
            .zip(&collapsed)
            .zip(&own)
            .enumerate()
            .map(|(k, ((&root, c), own))| {
                let slots = own
                    .iter()
                    .map(|(mine, orig)| (*mine, table.iter().position(|t| t == orig).expect("in the table")))
                    .collect();
                let out_slot = table.len() + k;
                match c {
                    Some(c) => kernel::Member {
                        f: &c.func,
                        root: c.root,
                        inline: &c.inline,
                        row_scale: c.row_scale,
                        slots,
                        out_slot,
                    },
                    None => kernel::Member { f, root, inline, row_scale: 1, slots, out_slot },
                }
            })
            .collect();
        // Leaf slots naming a buffer a member writes: a later member reading an earlier one's
        // output at its own row (`grouping`), possibly through an alias such as a reshape.
        let written: Vec<Var> = roots.iter().map(|&r| resolve(f.eqns[r].outputs[0])).collect();
        let written_slots: Vec<usize> = table
            .iter()
            .enumerate()
            .filter(|(_, v)| written.contains(&resolve(**v)))
            .map(|(k, _)| k)
            .collect();
        kernel::build(&mut self.module, &mut self.ctx.func, &mut self.fctx, &members, &written_slots)?;
        let name = self.symbol(self.pending.len());
        if self.dump {
            let mut notes = String::new();
            for (&root, c) in roots.iter().zip(&collapsed) {
                let note = c.as_ref().map_or(String::new(), |c| collapse::describe(f, root, c));
                notes.push_str(&format!("; root {} (equation {root}){note}\n", f.eqns[root].prim.name()));
            }
            self.clif.push(format!("; {name}: {} root(s)\n{notes}{}", roots.len(), self.ctx.func.display()));
        }
        let sig = self.ctx.func.signature.clone();
        let id = self
            .module
            .declare_function(&name, cranelift_module::Linkage::Local, &sig)
            .map_err(|e| CompileError::Codegen(e.to_string()))?;
        // With `KILN_DUMP`, also keep the machine code Cranelift emitted (after its optimizations).
        self.ctx.set_disasm(self.dump);
        self.module
            .define_function(id, &mut self.ctx)
            .map_err(|e| CompileError::Codegen(format!("{e:?}")))?;
        if let Some(text) = self.ctx.compiled_code().and_then(|c| c.vcode.as_ref())
            && let Some(last) = self.clif.last_mut()
        {
            last.push_str("\n; machine code\n");
            last.push_str(text);
        }
        let handle = self.pending.len();
        self.pending.push((id, handle));
        Ok((handle, table))
    }

    /// The symbol of the kernel with this handle: `kiln<module>_kernel<handle>`, unique in the
    /// process, so that a profile (`perf`, through Cranelift's `/tmp/perf-<pid>.map` when
    /// `PERF_BUILDID_DIR` is set) tells apart the kernels of different executables and scan
    /// bodies; `KILN_DUMP`'s `plan.txt` names it for each kernel step.
    pub(crate) fn symbol(&self, handle: usize) -> String {
        format!("kiln{}_kernel{handle}", self.id)
    }

    /// Links everything; returns the kernels' entry points (by handle), the code's owner, and the
    /// kernels' Cranelift IR texts in compile order (empty unless made by [`Jit::new_with_dump`]).
    pub(crate) fn finish(mut self) -> Result<(Vec<KernelFn>, Code, Vec<String>), CompileError> {
        self.module.finalize_definitions().map_err(|e| CompileError::Codegen(e.to_string()))?;
        let fns = self
            .pending
            .iter()
            .map(|(id, _)| {
                let p = self.module.get_finalized_function(*id);
                // SAFETY: every kernel was defined with the signature `fn(*const *mut u8, i64, i64)` (SysV).
                unsafe { std::mem::transmute::<*const u8, KernelFn>(p) }
            })
            .collect();
        Ok((fns, Code { module: Some(self.module) }, self.clif))
    }
}
