//! Scan carries with a short last axis are carried as their columns: one carry per column, and the
//! body's work on them done column by column.
//!
//! `vmap` of a step over a state vector gives the loop a carry `s: [B, K]` (W4's cart-pole,
//! `K = 4`); a particle system keeps positions and velocities as `[N, 2]` (W2's masses). The CPU
//! backend vectorizes along a result's innermost axis, here `K` lanes: rows of 2–4 elements run
//! scalar or half-empty, a column read `s[:, k]` loads its lanes one by one `K` floats apart, and
//! a rebuild from columns (`concatenate` of width-1 pieces) stores them one by one. Carried as `K`
//! arrays `[B]`, each column is read and written contiguously, and every kernel of the body still
//! runs on the loop's rows (so the backend can still split them over threads).
//!
//! The body is rewritten column by column where its values allow it: a value is *columnar* when
//! it is a split carry, or an elementwise op (or `stop_gradient`) of columnar values (rank-0
//! operands kept), a broadcast that does not reach the last axis, a `concatenate` of width-1
//! columns along it, a `gather` of a columnar operand along an earlier axis, or a `segment_sum`
//! of columnar data. Its
//! column `k` is the same op on the operands' columns `k`. A carry is split when its new value
//! is columnar; then the single-column reads of columnar values take the column, their sums over
//! the last axis become `((0 + x_0) + x_1) + …` and their products contracting it
//! `((0 + x_0·b_0) + x_1·b_1) + …` (the interpreter's left fold from zero for so short a run, so
//! bitwise the same), and every other read takes the whole value, still computed as before
//! (the carry itself rebuilt from its columns at the head of the body).
//!
//! ```text
//! scan(s0) { s: [B, K] → …slice(s, column k)… ; concatenate[dim 1](p_0, …, p_{K-1}) }
//!   → scan(s0[:, 0], …, s0[:, K-1]) { s_0 … s_{K-1}: [B] →
//!        s = concatenate(reshape(s_k, [B, 1]))   (only for whole reads)
//!        …reshape(s_k)…                          (each single-column read)
//!        ; reshape(p_0, [B]), …, reshape(p_{K-1}, [B]) }
//!     s = concatenate[dim 1](reshape(s_k, [B, 1]))   (after the loop)
//! ```
//!
//! Only data movement and the order of independent ops change, so every value is bit for bit the
//! same (NaN payloads aside, which IEEE leaves open). A carry qualifies when its rank is at least
//! 2, its last axis has `2..=MAX_COLUMNS` elements and its other axes at least `MIN_ROWS`
//! together, its new value is columnar, and the body reads some columnar value by columns (a
//! column read, a sum or a product over the last axis). XLA's layout assignment makes the
//! analogous choice for loop-carried tuples.

use kiln_ir::{BinaryOp, DType, Eqn, Function, Prim, ReduceOp, Shape, SrcLoc, TensorType, Var};
use smallvec::{SmallVec, smallvec};
use std::collections::HashMap;

/// The longest last axis split into columns (one 4-lane vector): rows of twice that vectorize
/// along their own axis, and 5–7 are left alone (no workload has them).
const MAX_COLUMNS: usize = 4;
/// The fewest elements per column worth splitting for (two 4-lane vectors).
const MIN_ROWS: usize = 8;

/// `f` with each qualifying scan carry (module doc) carried as its columns, nested scans included,
/// and how many carries were split.
///
/// ```
/// use kiln_ir::{Array, DType, Function, Prim, TensorType, eval};
/// use kiln_transform::split_scan_carry_columns;
/// // 3 steps of `s' = [s[:, 1], s[:, 0] + s[:, 1]]` on `s: f32[8, 2]` (a batch of Fibonacci pairs).
/// let ty = |dims: &[usize]| TensorType::new(DType::F32, dims);
/// let column = |k: usize| Prim::Slice { start: vec![0, k], limit: vec![8, k + 1], strides: vec![1, 1] };
/// let mut body = Function::new();
/// let s = body.add_param(ty(&[8, 2]));
/// body.add_param(ty(&[0])); // the per-step slice of `xs` (empty)
/// let a = body.push(column(0), &[s], None)?[0];
/// let b = body.push(column(1), &[s], None)?[0];
/// let sum = body.push(Prim::Binary(kiln_ir::BinaryOp::Add), &[a, b], None)?[0];
/// body.outputs = body.push(Prim::Concatenate { dimension: 1 }, &[b, sum], None)?.to_vec();
/// let mut f = Function::new();
/// let ps = [f.add_param(ty(&[8, 2])), f.add_param(ty(&[3, 0]))];
/// let scan = Prim::Scan { length: 3, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(body) };
/// f.outputs = f.push(scan, &ps, None)?.to_vec();
/// let (g, split) = split_scan_carry_columns(&f);
/// assert_eq!(split, 1);
/// let Prim::Scan { num_carry, .. } = &g.eqns.iter().find(|e| e.prim.name() == "scan").unwrap().prim
/// else { unreachable!() };
/// assert_eq!(*num_carry, 2); // one carry per column
/// let pairs: Vec<f32> = (0..8).flat_map(|i| [i as f32, 1.0]).collect();
/// let args = [Array::from_vec(&[8, 2], pairs), Array::from_vec(&[3, 0], Vec::<f32>::new())];
/// let out = eval(&g, &args)?;
/// assert_eq!(out[0].to_vec::<f32>().unwrap()[..2], [2.0, 3.0]); // (0, 1) → (1, 1) → (1, 2) → (2, 3)
/// assert!(out[0].bitwise_eq(&eval(&f, &args)?[0]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn split_scan_carry_columns(f: &Function) -> (Function, usize) {
    let mut count = 0;
    let g = walk(f, &mut count);
    (g, count)
}

/// [`split_scan_carry_columns`] on `f`: sub-functions first, then each scan's own carries, whose
/// columns are sliced in `f` before the scan and whose final values are rebuilt after it.
fn walk(f: &Function, count: &mut usize) -> Function {
    let mut g = f.clone();
    g.eqns.clear();
    for e in &f.eqns {
        let mut e = e.clone();
        e.prim = e.prim.map_subfunctions(|s| walk(s, count));
        let Prim::Scan { length, reverse, num_consts, num_carry, body } = e.prim.clone() else {
            g.eqns.push(e);
            continue;
        };
        let Some(split) = carries_to_split(&body, num_consts, num_carry) else {
            g.eqns.push(e);
            continue;
        };
        *count += split.len();
        let new_carries = num_carry
            + split
                .iter()
                .map(|&j| columns_of(body.var_type(body.params[num_consts + j])) - 1)
                .sum::<usize>();
        let body = split_body(&body, num_consts, &split);
        let loc = e.loc.clone();
        // Outer side, last carry first so earlier positions hold: columns in, rebuilt value out.
        let mut after = Vec::new();
        for &j in split.iter().rev() {
            let p = num_consts + j;
            let ty = g.var_type(e.inputs[p]).clone();
            let k = columns_of(&ty);
            let init = e.inputs[p];
            let inits: Vec<Var> = (0..k)
                .map(|c| {
                    let col =
                        g.push(column_slice(&ty, c), &[init], loc.clone()).expect("a column of the carry");
                    g.push(reshape(row_dims(&ty)), &col, loc.clone()).expect("a column without its unit axis")
                        [0]
                })
                .collect();
            e.inputs.remove(p);
            e.inputs.insert_many(p, inits);
            let finals: Vec<Var> = (0..k).map(|_| g.new_var(column_type(&ty))).collect();
            let final_value = e.outputs[j];
            e.outputs.remove(j);
            e.outputs.insert_many(j, finals.iter().copied());
            after.push(rebuild(&mut g, &finals, &ty, final_value, loc.clone()));
        }
        e.prim = Prim::Scan { length, reverse, num_consts, num_carry: new_carries, body: Box::new(body) };
        g.eqns.push(e);
        g.eqns.extend(after.into_iter().flatten());
    }
    g
}

/// Columns of a carry-shaped type: its last axis.
fn columns_of(ty: &TensorType) -> usize {
    *ty.shape.dims().last().expect("rank ≥ 2")
}

/// The dimensions of one column: all but the last.
fn row_dims(ty: &TensorType) -> &[usize] {
    let d = ty.shape.dims();
    &d[..d.len() - 1]
}

fn column_type(ty: &TensorType) -> TensorType {
    TensorType::new(ty.dtype, row_dims(ty))
}

fn reshape(to: &[usize]) -> Prim {
    Prim::Reshape { new_sizes: Shape::new(to) }
}

/// `slice` of column `c` (width 1) of a value of type `ty`.
fn column_slice(ty: &TensorType, c: usize) -> Prim {
    let dims = ty.shape.dims();
    let last = dims.len() - 1;
    let mut start = vec![0; dims.len()];
    start[last] = c;
    let mut limit = dims.to_vec();
    limit[last] = c + 1;
    Prim::Slice { start, limit, strides: vec![1; dims.len()] }
}

/// Equations defining `value` (of type `ty`) as the `concatenate` of `columns` along its last axis.
fn rebuild(g: &mut Function, columns: &[Var], ty: &TensorType, value: Var, loc: Option<SrcLoc>) -> Vec<Eqn> {
    let mut wide = ty.shape.dims().to_vec();
    *wide.last_mut().expect("rank ≥ 2") = 1;
    let mut eqns = Vec::with_capacity(columns.len() + 1);
    let mut units: SmallVec<[Var; 4]> = SmallVec::new();
    for &c in columns {
        let v = g.new_var(TensorType::new(ty.dtype, wide.as_slice()));
        eqns.push(Eqn {
            prim: reshape(&wide),
            inputs: smallvec![c],
            outputs: smallvec![v],
            loc: loc.clone(),
        });
        units.push(v);
    }
    let last = wide.len() - 1;
    eqns.push(Eqn {
        prim: Prim::Concatenate { dimension: last },
        inputs: units,
        outputs: smallvec![value],
        loc,
    });
    eqns
}

/// Whether a value of type `ty` can be split into columns at all (module doc: the shape test).
fn carry_shaped(ty: &TensorType) -> bool {
    let dims = ty.shape.dims();
    dims.len() >= 2
        && (2..=MAX_COLUMNS).contains(&columns_of(ty))
        && row_dims(ty).iter().product::<usize>() >= MIN_ROWS
}

/// Which values of `body` are columnar (module doc) when the carry parameters `split` are.
fn columnar(body: &Function, split: &[Var]) -> Vec<bool> {
    let mut col = vec![false; body.vars.len()];
    for &p in split {
        col[p.index()] = true;
    }
    for e in &body.eqns {
        if e.outputs.len() == 1 && column_rule(body, e, &col) {
            col[e.outputs[0].index()] = true;
        }
    }
    col
}

/// Whether `e`'s single output is columnar given which values are (`col`): the cases of
/// [`Splitter::emit_columns`], which must agree with this.
fn column_rule(body: &Function, e: &Eqn, col: &[bool]) -> bool {
    let out = body.var_type(e.outputs[0]);
    if out.rank() < 2 || !(2..=MAX_COLUMNS).contains(&columns_of(out)) {
        return false;
    }
    let last = out.rank() - 1;
    let is = |v: &Var| col[v.index()];
    match &e.prim {
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::StopGradient => {
            e.inputs
                .iter()
                .all(|v| body.var_type(*v).rank() == 0 || (is(v) && body.var_type(*v).shape == out.shape))
                && e.inputs.iter().any(is)
        }
        Prim::BroadcastInDim { broadcast_dimensions, .. } => !broadcast_dimensions.contains(&last),
        Prim::Concatenate { dimension } => {
            *dimension == last && e.inputs.iter().all(|v| body.var_type(*v).shape.dims()[last] == 1)
        }
        Prim::Gather { axis, .. } => is(&e.inputs[0]) && *axis < body.var_type(e.inputs[0]).rank() - 1,
        Prim::SegmentSum { .. } => is(&e.inputs[0]),
        // Layout changes, reductions, products and control flow: whole values only.
        Prim::Iota { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Pad { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::DotGeneral { .. }
        | Prim::Scatter { .. }
        | Prim::Threefry2x32
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => false,
    }
}

/// The carries of a scan body (`nc` constants, `num_carry` carries) to split, in order: the
/// largest set of carry-shaped ones whose new values are columnar when they all are split, if the
/// body then reads some columnar value by columns.
fn carries_to_split(body: &Function, nc: usize, num_carry: usize) -> Option<Vec<usize>> {
    let mut split: Vec<usize> =
        (0..num_carry).filter(|&j| carry_shaped(body.var_type(body.params[nc + j]))).collect();
    loop {
        let params: Vec<Var> = split.iter().map(|&j| body.params[nc + j]).collect();
        let col = columnar(body, &params);
        let before = split.len();
        // A parameter carried on unchanged (a loop constant, another carry) is not recomputed.
        split.retain(|&j| {
            let new = body.outputs[j];
            col[new.index()] && !body.params.contains(&new)
        });
        if split.is_empty() {
            return None;
        }
        if split.len() == before {
            let reads = body.eqns.iter().any(|e| column_consumer(body, e, &col).is_some());
            return reads.then_some(split);
        }
    }
}

/// How `e` reads a columnar operand by columns: a single-column `slice` (the column), a sum over
/// the last axis, or a `dot_general` contracting it (the operand's side).
enum ColumnRead {
    Column(usize),
    Sum,
    Product(usize),
}

fn column_consumer(body: &Function, e: &Eqn, col: &[bool]) -> Option<ColumnRead> {
    let x = *e.inputs.first()?;
    match &e.prim {
        Prim::Slice { start, limit, strides } if col[x.index()] => {
            let dims = body.var_type(x).shape.dims();
            let last = dims.len() - 1;
            let whole = (0..last).all(|d| start[d] == 0 && limit[d] == dims[d] && strides[d] == 1);
            (whole && limit[last] == start[last] + 1).then_some(ColumnRead::Column(start[last]))
        }
        Prim::Reduce { op: ReduceOp::Sum, axes } if col[x.index()] => {
            let ty = body.var_type(x);
            (axes.as_slice() == [ty.rank() - 1] && ty.dtype != DType::Bool).then_some(ColumnRead::Sum)
        }
        Prim::DotGeneral {
            lhs_contracting,
            rhs_contracting,
            lhs_batch,
            rhs_batch,
            preferred_element_type,
        } => {
            let side = (0..2).find(|&s| col[e.inputs[s].index()])?;
            let ty = body.var_type(e.inputs[side]);
            let contracting = if side == 0 { lhs_contracting } else { rhs_contracting };
            let plain = lhs_batch.is_empty()
                && rhs_batch.is_empty()
                && contracting.as_slice() == [ty.rank() - 1]
                && e.inputs[0] != e.inputs[1]
                && preferred_element_type.is_none_or(|t| t == ty.dtype)
                && ty.dtype != DType::Bool;
            plain.then_some(ColumnRead::Product(side))
        }
        _ => None,
    }
}

/// Emits a scan body's equations with carries `split` (indices among the carries) carried as their
/// columns.
struct Splitter<'a> {
    old: &'a Function,
    new: Function,
    col: Vec<bool>,
    /// The columns of each columnar value emitted so far.
    columns: HashMap<Var, Vec<Var>>,
}

/// `body` (with `nc` constants) with the carries `split` carried as their columns (module doc).
fn split_body(body: &Function, nc: usize, split: &[usize]) -> Function {
    let params: Vec<Var> = split.iter().map(|&j| body.params[nc + j]).collect();
    let col = columnar(body, &params);
    let mut new = body.clone();
    new.eqns.clear();
    let mut s = Splitter { old: body, new, col, columns: HashMap::new() };
    // Parameters: one per column, in place of each split carry, which is rebuilt at the head.
    for &j in split.iter().rev() {
        let p = body.params[nc + j];
        let ty = body.var_type(p).clone();
        let cols: Vec<Var> = (0..columns_of(&ty)).map(|_| s.new.new_var(column_type(&ty))).collect();
        s.new.params.splice(nc + j..=nc + j, cols.iter().copied());
        let head = rebuild(&mut s.new, &cols, &ty, p, None);
        s.new.eqns.extend(head);
        s.columns.insert(p, cols);
    }
    for e in &body.eqns {
        match column_consumer(body, e, &s.col) {
            Some(read) => s.emit_read(e, read),
            None => s.new.eqns.push(e.clone()),
        }
        if e.outputs.len() == 1 && s.col[e.outputs[0].index()] {
            s.emit_columns(e);
        }
    }
    // New values: the columns of each split carry's new value, in its place among the outputs.
    for &j in split.iter().rev() {
        let cols = s.columns[&body.outputs[j]].clone();
        s.new.outputs.splice(j..=j, cols);
    }
    crate::dce(&s.new)
}

impl Splitter<'_> {
    fn push(&mut self, prim: Prim, inputs: &[Var], loc: &Option<SrcLoc>) -> Var {
        self.new.push(prim, inputs, loc.clone()).expect("a column has its operands' column types")[0]
    }

    /// Emits the columns of `e`'s columnar output (the cases of [`column_rule`]).
    fn emit_columns(&mut self, e: &Eqn) {
        let out = self.old.var_type(e.outputs[0]).clone();
        let (k, rows) = (columns_of(&out), row_dims(&out).to_vec());
        let loc = &e.loc;
        let cols: Vec<Var> = match &e.prim {
            Prim::BroadcastInDim { broadcast_dimensions, .. } => {
                let b = Prim::BroadcastInDim {
                    shape: Shape::new(&rows),
                    broadcast_dimensions: broadcast_dimensions.clone(),
                };
                let v = self.push(b, &[e.inputs[0]], loc);
                vec![v; k]
            }
            Prim::Concatenate { .. } => {
                let pieces = e.inputs.clone();
                pieces.iter().map(|&p| self.push(reshape(&rows), &[p], loc)).collect()
            }
            Prim::Gather { .. } | Prim::SegmentSum { .. } => (0..k)
                .map(|c| {
                    let x = self.columns[&e.inputs[0]][c];
                    self.push(e.prim.clone(), &[x, e.inputs[1]], loc)
                })
                .collect(),
            _ => (0..k)
                .map(|c| {
                    let ins: Vec<Var> = e
                        .inputs
                        .iter()
                        .map(|v| if self.old.var_type(*v).rank() == 0 { *v } else { self.columns[v][c] })
                        .collect();
                    self.push(e.prim.clone(), &ins, loc)
                })
                .collect(),
        };
        self.columns.insert(e.outputs[0], cols);
    }

    /// Emits `e`, a read of a columnar operand by columns, as the same value from the columns.
    fn emit_read(&mut self, e: &Eqn, read: ColumnRead) {
        let out_ty = self.old.var_type(e.outputs[0]).clone();
        let loc = &e.loc;
        let value = match read {
            ColumnRead::Column(c) => {
                let x = self.columns[&e.inputs[0]][c];
                self.push(reshape(out_ty.shape.dims()), &[x], loc)
            }
            ColumnRead::Sum => {
                let cols = self.columns[&e.inputs[0]].clone();
                let mut acc = self.zeros(&out_ty, loc);
                for x in cols {
                    acc = self.push(Prim::Binary(BinaryOp::Add), &[acc, x], loc);
                }
                acc
            }
            ColumnRead::Product(side) => self.product(e, side, &out_ty),
        };
        // The last equation emitted defines the read's own output variable.
        let last = self.new.eqns.last_mut().expect("the read's last equation");
        assert_eq!(last.outputs[0], value, "the read's value is its last equation's output");
        last.outputs[0] = e.outputs[0];
    }

    /// `0` of `ty` (a broadcast scalar constant).
    fn zeros(&mut self, ty: &TensorType, loc: &Option<SrcLoc>) -> Var {
        let zero = self.new.add_const(kiln_ir::Array::zeros(&TensorType::scalar(ty.dtype)));
        let b = Prim::BroadcastInDim { shape: ty.shape.clone(), broadcast_dimensions: vec![] };
        self.push(b, &[zero], loc)
    }

    /// A `dot_general` contracting the last axis of its columnar operand `side` with one axis `m`
    /// of the other operand, as `((0 + x_0·b_0) + x_1·b_1) + …` with `b_k` the other operand's
    /// slice `k` along `m` (each product `lhs · rhs`, as `dot_general` multiplies).
    fn product(&mut self, e: &Eqn, side: usize, out_ty: &TensorType) -> Var {
        let Prim::DotGeneral { lhs_contracting, rhs_contracting, .. } = &e.prim else {
            unreachable!("a product read is a dot_general")
        };
        let loc = &e.loc;
        let other = e.inputs[1 - side];
        let m = if side == 0 { rhs_contracting[0] } else { lhs_contracting[0] };
        let other_dims = self.old.var_type(other).shape.dims().to_vec();
        let cols = self.columns[&e.inputs[side]].clone();
        let rows = self.old.var_type(e.inputs[side]).rank() - 1;
        // Result axes: lhs free, then rhs free; the columnar operand's free axes are its rows.
        let n = out_ty.rank();
        let (col_at, other_at): (Vec<usize>, Vec<usize>) = if side == 0 {
            ((0..rows).collect(), (rows..n).collect())
        } else {
            ((n - rows..n).collect(), (0..n - rows).collect())
        };
        let bcast = |at: &[usize]| Prim::BroadcastInDim {
            shape: out_ty.shape.clone(),
            broadcast_dimensions: at.to_vec(),
        };
        let without_m: Vec<usize> =
            other_dims.iter().enumerate().filter(|&(d, _)| d != m).map(|(_, &n)| n).collect();
        let mut acc = self.zeros(out_ty, loc);
        for (k, x) in cols.into_iter().enumerate() {
            let (mut start, mut limit) = (vec![0; other_dims.len()], other_dims.clone());
            (start[m], limit[m]) = (k, k + 1);
            let strides = vec![1; other_dims.len()];
            let b = self.push(Prim::Slice { start, limit, strides }, &[other], loc);
            let b = self.push(reshape(&without_m), &[b], loc);
            let b = self.push(bcast(&other_at), &[b], loc);
            let x = self.push(bcast(&col_at), &[x], loc);
            let (l, r) = if side == 0 { (x, b) } else { (b, x) };
            let p = self.push(Prim::Binary(BinaryOp::Mul), &[l, r], loc);
            acc = self.push(Prim::Binary(BinaryOp::Add), &[acc, p], loc);
        }
        acc
    }
}
