//! A scan carry with a short last axis, rebuilt at every step from its columns, is carried as those
//! columns instead: one carry per column.
//!
//! `vmap` of a step over a state vector gives the loop a carry `s: [B, K]` (W4's cart-pole,
//! `K = 4`), which the body reads column by column (`s[:, k]`) and rebuilds with a `concatenate`
//! along its last axis. The CPU backend vectorizes along a result's innermost axis: here `K` lanes
//! split into width-1 pieces, so the rebuild runs scalar, and every column read loads its lanes one
//! by one, `K` floats apart. Carried as `K` arrays `[B]`, the body reads and writes each column
//! contiguously, and every kernel of the body still runs on the same `B` rows (so the backend can
//! still split the loop's rows over threads):
//!
//! ```text
//! scan(s0) { c: [B, K] → …slice(c, column k)… ; concatenate[dim 1](p_0, …, p_{K-1}) }
//!   → scan(s0[:, 0], …, s0[:, K-1]) { c_0 … c_{K-1}: [B] →
//!        c = concatenate(reshape(c_k, [B, 1]))   (only for reads other than single columns)
//!        …reshape(c_k)…                          (each single-column slice)
//!        ; reshape(p_0, [B]), …, reshape(p_{K-1}, [B]) }
//!     s = concatenate[dim 1](reshape(c_k, [B, 1]))   (after the loop)
//! ```
//!
//! Only data movement changes, so every value is bit for bit the same. A carry qualifies when its
//! rank is at least 2, its last axis has `2..=MAX_COLUMNS` elements and its other axes at least
//! `MIN_ROWS` together (shorter rows would leave nothing to vectorize), the body's new value for it
//! is a `concatenate` along that axis of width-1 pieces, and the body reads at least one single
//! column of it. XLA's layout assignment makes the analogous choice for loop-carried tuples.

use kiln_ir::{Eqn, Function, Prim, Shape, SrcLoc, Var};
use smallvec::smallvec;

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
/// column slices are emitted into `f` before the scan and whose rebuilt carries after it.
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
        let (mut body, mut num_carry) = (*body, num_carry);
        let mut after: Vec<Vec<Eqn>> = Vec::new();
        // Carries are visited last to first, so splitting one leaves the earlier ones' positions.
        for j in (0..num_carry).rev() {
            let Some(columns) = split_columns(&body, num_consts + j, j) else { continue };
            after.push(split_carry(&mut g, &mut e, &mut body, num_consts, j, &columns));
            num_carry += columns.len() - 1;
            *count += 1;
        }
        e.prim = Prim::Scan {
            length,
            reverse,
            num_consts,
            num_carry,
            // The rebuilt carry at a body's head is dropped where nothing reads it whole.
            body: Box::new(if after.is_empty() { body } else { crate::dce(&body) }),
        };
        g.eqns.push(e);
        // The rebuilt carries, in the order they were split (each defines its own outer variable).
        g.eqns.extend(after.into_iter().flatten());
    }
    g
}

/// For carry `j` of a scan body (parameter `p`): the width-1 pieces of the `concatenate` along the
/// last axis that gives its new value, when the carry qualifies (module doc).
fn split_columns(body: &Function, p: usize, j: usize) -> Option<Vec<Var>> {
    let carry = body.params[p];
    let dims = body.var_type(carry).shape.dims();
    let (&k, rows) = dims.split_last()?;
    if rows.is_empty() || !(2..=MAX_COLUMNS).contains(&k) || rows.iter().product::<usize>() < MIN_ROWS {
        return None;
    }
    let new_value = body.outputs[j];
    let producer = body.eqns.iter().find(|e| e.outputs.contains(&new_value))?;
    let last = dims.len() - 1;
    if !matches!(producer.prim, Prim::Concatenate { dimension } if dimension == last) {
        return None;
    }
    let pieces: Vec<Var> = producer.inputs.to_vec();
    if pieces.len() != k || pieces.iter().any(|v| body.var_type(*v).shape.dims()[last] != 1) {
        return None;
    }
    let reads_a_column = body.eqns.iter().any(|e| column_read(body, e, carry).is_some());
    reads_a_column.then_some(pieces)
}

/// The column `k` when `e` is `slice(carry)` of exactly column `k`: every other axis whole, stride 1.
fn column_read(body: &Function, e: &Eqn, carry: Var) -> Option<usize> {
    let Prim::Slice { start, limit, strides } = &e.prim else { return None };
    if e.inputs[0] != carry {
        return None;
    }
    let dims = body.var_type(carry).shape.dims();
    let last = dims.len() - 1;
    let whole = (0..last).all(|d| start[d] == 0 && limit[d] == dims[d] && strides[d] == 1);
    (whole && limit[last] == start[last] + 1).then_some(start[last])
}

/// Splits carry `j` of `scan` (in `g`, whose body is `body` with `nc` constants) into `columns`:
/// the scan's initial value becomes its columns (pushed into `g` before the scan), the body's
/// parameter and new value become one per column, and the scan's final value is rebuilt from its
/// columns by the returned equations (to follow the scan in `g`).
fn split_carry(
    g: &mut Function,
    scan: &mut Eqn,
    body: &mut Function,
    nc: usize,
    j: usize,
    columns: &[Var],
) -> Vec<Eqn> {
    let p = nc + j;
    let carry = body.params[p];
    let ty = body.var_type(carry).clone();
    let dims = ty.shape.dims().to_vec();
    let (rows, last) = (&dims[..dims.len() - 1], dims.len() - 1);
    let column_ty = kiln_ir::TensorType::new(ty.dtype, rows);
    let loc: Option<SrcLoc> = scan.loc.clone();
    let reshape = |to: &[usize]| Prim::Reshape { new_sizes: Shape::new(to) };
    let mut wide = dims.clone();
    wide[last] = 1;

    // Before the scan: the initial value's columns.
    let init = scan.inputs[p];
    let inits: Vec<Var> = (0..columns.len())
        .map(|k| {
            let mut start = vec![0; dims.len()];
            start[last] = k;
            let mut limit = dims.clone();
            limit[last] = k + 1;
            let slice = Prim::Slice { start, limit, strides: vec![1; dims.len()] };
            let c = g.push(slice, &[init], loc.clone()).expect("a column of the carry");
            g.push(reshape(rows), &c, loc.clone()).expect("a column without its unit axis")[0]
        })
        .collect();
    scan.inputs.remove(p);
    for (k, v) in inits.iter().enumerate() {
        scan.inputs.insert(p + k, *v);
    }

    // The body: a parameter per column. Single-column reads take their column; any other read
    // takes the carry rebuilt at the head of the body (dropped by `dce` where nothing reads it).
    let params: Vec<Var> = (0..columns.len()).map(|_| body.new_var(column_ty.clone())).collect();
    body.params.remove(p);
    for (k, v) in params.iter().enumerate() {
        body.params.insert(p + k, *v);
    }
    let mut head = Vec::with_capacity(columns.len() + 1);
    let mut unit_columns = Vec::with_capacity(columns.len());
    for &c in &params {
        let v = body.new_var(kiln_ir::TensorType::new(ty.dtype, wide.as_slice()));
        head.push(Eqn { prim: reshape(&wide), inputs: smallvec![c], outputs: smallvec![v], loc: None });
        unit_columns.push(v);
    }
    head.push(Eqn {
        prim: Prim::Concatenate { dimension: last },
        inputs: unit_columns.into(),
        outputs: smallvec![carry],
        loc: None,
    });
    let reads: Vec<(usize, usize)> =
        body.eqns.iter().enumerate().filter_map(|(i, e)| Some((i, column_read(body, e, carry)?))).collect();
    for (i, k) in reads {
        let e = &mut body.eqns[i];
        e.prim = reshape(&wide);
        e.inputs = smallvec![params[k]];
    }
    expand_column_products(body, carry, &params);
    body.eqns.splice(0..0, head);
    // The new values: one column each, appended at the end.
    let new_values: Vec<Var> = columns
        .iter()
        .map(|&piece| {
            let v = body.new_var(column_ty.clone());
            body.eqns.push(Eqn {
                prim: reshape(rows),
                inputs: smallvec![piece],
                outputs: smallvec![v],
                loc: None,
            });
            v
        })
        .collect();
    body.outputs.remove(j);
    for (k, v) in new_values.iter().enumerate() {
        body.outputs.insert(j + k, *v);
    }

    // After the scan: the final value rebuilt from the final columns, into the scan's old output.
    let final_value = scan.outputs[j];
    let finals: Vec<Var> = (0..columns.len()).map(|_| g.new_var(column_ty.clone())).collect();
    scan.outputs.remove(j);
    for (k, v) in finals.iter().enumerate() {
        scan.outputs.insert(j + k, *v);
    }
    let mut rebuild = Vec::with_capacity(columns.len() + 1);
    let mut unit_finals = Vec::with_capacity(columns.len());
    for &c in &finals {
        let v = g.new_var(kiln_ir::TensorType::new(ty.dtype, wide.as_slice()));
        rebuild.push(Eqn {
            prim: reshape(&wide),
            inputs: smallvec![c],
            outputs: smallvec![v],
            loc: loc.clone(),
        });
        unit_finals.push(v);
    }
    rebuild.push(Eqn {
        prim: Prim::Concatenate { dimension: last },
        inputs: unit_finals.into(),
        outputs: smallvec![final_value],
        loc,
    });
    rebuild
}

/// Replaces each `dot_general` of `body` that contracts exactly the last axis of `carry` (no batch
/// axes, no change of dtype) by the sum of its columns' products with the other operand's matching
/// slices, `((0 + c_0·b_0) + c_1·b_1) + …`: the interpreter's and the backend's order for a
/// contraction this short (a left fold from zero, each product `lhs · rhs`), so bitwise the same,
/// and elementwise over the columns, so the backend vectorizes it along the rows where the product
/// read each row's columns lane by lane (the rebuilt carry inside a product is read scalar).
fn expand_column_products(body: &mut Function, carry: Var, columns: &[Var]) {
    let eqns = std::mem::take(&mut body.eqns);
    for e in eqns {
        let Some(side) = column_product(body, &e, carry) else {
            body.eqns.push(e);
            continue;
        };
        let Prim::DotGeneral { lhs_contracting, rhs_contracting, .. } = &e.prim else { unreachable!() };
        let other = e.inputs[1 - side];
        let m = if side == 0 { rhs_contracting[0] } else { lhs_contracting[0] };
        let out_ty = body.var_type(e.outputs[0]).clone();
        let other_dims = body.var_type(other).shape.dims().to_vec();
        let rows = columns.first().map_or(0, |c| body.var_type(*c).rank());
        // Result axes: lhs free, then rhs free; the carry's free axes are its rows.
        let (carry_at, other_at): (Vec<usize>, Vec<usize>) = if side == 0 {
            ((0..rows).collect(), (rows..out_ty.rank()).collect())
        } else {
            ((other_dims.len() - 1..out_ty.rank()).collect(), (0..other_dims.len() - 1).collect())
        };
        let loc = e.loc.clone();
        let bcast = |at: &[usize]| Prim::BroadcastInDim {
            shape: out_ty.shape.clone(),
            broadcast_dimensions: at.to_vec(),
        };
        let push = |body: &mut Function, p: Prim, ins: &[Var]| {
            body.push(p, ins, loc.clone()).expect("a term of the expanded product")[0]
        };
        let zero = body.add_const(kiln_ir::Array::zeros(&kiln_ir::TensorType::scalar(out_ty.dtype)));
        let mut acc = push(body, bcast(&[]), &[zero]);
        for (k, &c) in columns.iter().enumerate() {
            let (mut start, mut limit) = (vec![0; other_dims.len()], other_dims.clone());
            (start[m], limit[m]) = (k, k + 1);
            let strides = vec![1; other_dims.len()];
            let b = push(body, Prim::Slice { start, limit, strides }, &[other]);
            let without_m: Vec<usize> =
                other_dims.iter().enumerate().filter(|&(d, _)| d != m).map(|(_, &n)| n).collect();
            let b = push(body, Prim::Reshape { new_sizes: Shape::new(&without_m) }, &[b]);
            let b = push(body, bcast(&other_at), &[b]);
            let c = push(body, bcast(&carry_at), &[c]);
            let (l, r) = if side == 0 { (c, b) } else { (b, c) };
            let product = push(body, Prim::Binary(kiln_ir::BinaryOp::Mul), &[l, r]);
            acc = push(body, Prim::Binary(kiln_ir::BinaryOp::Add), &[acc, product]);
        }
        let last = body.eqns.last_mut().expect("the expansion's last sum");
        last.outputs[0] = e.outputs[0];
    }
}

/// Which operand of `e` (0 = lhs, 1 = rhs) is `carry`, when `e` is a `dot_general` contracting
/// exactly the carry's last axis with one axis of the other operand, with no batch axes, in the
/// operands' (numeric) dtype.
fn column_product(body: &Function, e: &Eqn, carry: Var) -> Option<usize> {
    let Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, preferred_element_type } =
        &e.prim
    else {
        return None;
    };
    let side = e.inputs.iter().position(|v| *v == carry)?;
    let dtype = body.var_type(carry).dtype;
    let last = body.var_type(carry).rank() - 1;
    let contracting = if side == 0 { lhs_contracting } else { rhs_contracting };
    let plain = lhs_batch.is_empty()
        && rhs_batch.is_empty()
        && contracting.as_slice() == [last]
        && e.inputs[0] != e.inputs[1]
        && preferred_element_type.is_none_or(|t| t == dtype)
        && dtype != kiln_ir::DType::Bool;
    plain.then_some(side)
}
