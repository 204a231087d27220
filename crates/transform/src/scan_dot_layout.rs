//! Loop constants read by a `dot_general` inside a `scan` are transposed once, before the loop, so
//! that the product's lanes are contiguous in memory.
//!
//! The CPU backend vectorizes a small product along its result's innermost axis. When that axis is
//! a free axis of an operand other than the operand's last one (`W·s` with `W: [S, K]`: the lanes
//! run down `W`'s rows), each vector is loaded lane by lane, `K` times per vector of results, at
//! every step of the loop (W2's controller `W·sin(ωt + φ)`, 1000 steps). When that operand is a
//! loop constant, the rewrite passes the scan `transpose(W)` instead, with the free axis moved
//! last, and renumbers the product's dimensions:
//!
//! ```text
//! scan(W, ..) { dot_general[contract (1),(0)](W, s) }
//!   → Wt = transpose[1, 0](W); scan(W, Wt, ..) { dot_general[contract (0),(0)](Wt, s) }
//! ```
//!
//! Every result element multiplies the same pairs and sums them in the same order (the contracting
//! axes are paired and ordered as before; moving the last free axis keeps the free axes' order, so
//! the result's layout is unchanged), so the values are bit for bit the same. The transpose runs
//! once per call, where the loop reads `W` once per step; scans of fewer than 2 steps, and
//! operands whose axes after `a` all have size 1 (lanes already contiguous), are left alone. A
//! product large enough for the backend's gemm step would not need the new layout (gemm takes any
//! strides); there the copy costs at most one step's reading of `W`.

use kiln_ir::{Eqn, Function, Prim, SrcLoc, Var};
use std::collections::HashMap;

/// `f` with each loop-constant operand of a scan body's `dot_general` whose lanes would be strided
/// transposed before the loop (nested scans included; see the module doc), and how many transposes
/// were added.
///
/// ```
/// use kiln_ir::{Array, DType, Function, Prim, TensorType, eval};
/// use kiln_transform::transpose_scan_dot_constants;
/// // A scan over 3 steps of `c' = W·c` with `W: f32[2, 2]` a loop constant.
/// let ty = |dims: &[usize]| TensorType::new(DType::F32, dims);
/// let mut body = Function::new();
/// let (w, c) = (body.add_param(ty(&[2, 2])), body.add_param(ty(&[2])));
/// body.add_param(ty(&[0])); // the per-step slice of `xs` (empty)
/// let dot = Prim::DotGeneral {
///     lhs_contracting: vec![1],
///     rhs_contracting: vec![0],
///     lhs_batch: vec![],
///     rhs_batch: vec![],
///     preferred_element_type: None,
/// };
/// body.outputs = body.push(dot, &[w, c], None)?.to_vec();
/// let mut f = Function::new();
/// let ps = [f.add_param(ty(&[2, 2])), f.add_param(ty(&[2])), f.add_param(ty(&[3, 0]))];
/// let scan = Prim::Scan { length: 3, reverse: false, num_consts: 1, num_carry: 1, body: Box::new(body) };
/// f.outputs = f.push(scan, &ps, None)?.to_vec();
/// let (g, added) = transpose_scan_dot_constants(&f);
/// assert_eq!(added, 1); // `W` is transposed before the loop, the product reads it by rows
/// let args = [
///     Array::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]),
///     Array::from_vec(&[2], vec![1.0f32, 0.0]),
///     Array::from_vec(&[3, 0], Vec::<f32>::new()),
/// ];
/// let out = eval(&g, &args)?;
/// assert_eq!(out[0].to_vec::<f32>(), Some(vec![37.0, 81.0])); // W³·(1, 0)
/// assert!(out[0].bitwise_eq(&eval(&f, &args)?[0]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn transpose_scan_dot_constants(f: &Function) -> (Function, usize) {
    let mut count = 0;
    let g = walk(f, &mut count);
    (g, count)
}

/// [`transpose_scan_dot_constants`] on `f`: sub-functions first, then each scan's own body, whose
/// transposes are emitted into `f` just before the scan.
fn walk(f: &Function, count: &mut usize) -> Function {
    let mut g = f.clone();
    g.eqns.clear();
    for e in &f.eqns {
        let mut e = e.clone();
        let prim = e.prim.clone();
        e.prim = match &prim {
            Prim::Scan { length, reverse, num_consts, num_carry, body } => {
                let inner = walk(body, count);
                let (body, num_consts) = if *length >= 2 {
                    rewrite_scan(&mut g, &mut e, inner, *num_consts, count)
                } else {
                    (inner, *num_consts)
                };
                Prim::Scan {
                    length: *length,
                    reverse: *reverse,
                    num_consts,
                    num_carry: *num_carry,
                    body: Box::new(body),
                }
            }
            p => p.map_subfunctions(|s| walk(s, count)),
        };
        g.eqns.push(e);
    }
    g
}

/// Rewrites the qualifying products of `body` (a scan with `nc` loop constants, called by `scan`
/// in `g`): pushes each transpose into `g`, adds it to `scan`'s inputs and the body's constants.
/// Returns the body and its new number of constants.
fn rewrite_scan(
    g: &mut Function,
    scan: &mut Eqn,
    mut body: Function,
    nc: usize,
    count: &mut usize,
) -> (Function, usize) {
    let mut added: HashMap<(usize, Vec<usize>), Var> = HashMap::new();
    let mut new_consts: Vec<(Var, Var)> = Vec::new(); // (outer transposed var, body param)
    for i in 0..body.eqns.len() {
        let Some((side, perm)) = strided_constant_operand(&body, &body.eqns[i], nc) else { continue };
        let operand = body.eqns[i].inputs[side];
        let k = body.params.iter().position(|p| *p == operand).expect("a loop constant");
        let param = match added.get(&(k, perm.clone())) {
            Some(p) => *p,
            None => {
                let loc: Option<SrcLoc> = scan.loc.clone();
                let Ok(t) = g.push(Prim::Transpose { permutation: perm.clone() }, &[scan.inputs[k]], loc)
                else {
                    continue;
                };
                let p = body.new_var(g.var_type(t[0]).clone());
                new_consts.push((t[0], p));
                added.insert((k, perm.clone()), p);
                *count += 1;
                p
            }
        };
        let e = &mut body.eqns[i];
        e.prim = renumbered(&e.prim, side, &perm);
        e.inputs[side] = param;
    }
    // The transposed constants go after the existing ones.
    for (j, (outer, param)) in new_consts.iter().enumerate() {
        body.params.insert(nc + j, *param);
        scan.inputs.insert(nc + j, *outer);
    }
    let n = new_consts.len();
    (body, nc + n)
}

/// For a `dot_general` whose result's innermost axis is a free axis `a` of a loop-constant operand
/// (a body parameter among the first `nc`) other than that operand's last axis: which operand
/// (0 = lhs, 1 = rhs) and the permutation moving `a` last.
fn strided_constant_operand(body: &Function, e: &Eqn, nc: usize) -> Option<(usize, Vec<usize>)> {
    let Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, .. } = &e.prim else {
        return None;
    };
    let free = |side: usize, batch: &[usize], contract: &[usize]| -> Vec<usize> {
        let rank = body.var_type(e.inputs[side]).rank();
        (0..rank).filter(|d| !batch.contains(d) && !contract.contains(d)).collect()
    };
    let (rhs_free, lhs_free) = (free(1, rhs_batch, rhs_contracting), free(0, lhs_batch, lhs_contracting));
    // The result is batch ++ lhs free ++ rhs free: its last axis is rhs's last free axis, or lhs's.
    let (side, a) = match (rhs_free.last(), lhs_free.last()) {
        (Some(&a), _) => (1, a),
        (None, Some(&a)) => (0, a),
        (None, None) => return None,
    };
    let x = e.inputs[side];
    let dims = body.var_type(x).shape.dims();
    // Lanes along `a` are already contiguous when every later axis has size 1.
    if dims[a + 1..].iter().all(|&n| n == 1) || !body.params[..nc].contains(&x) {
        return None;
    }
    let rank = dims.len();
    let perm = (0..rank).filter(|&d| d != a).chain([a]).collect();
    Some((side, perm))
}

/// `dot_general` with operand `side` replaced by its transpose by `perm`: that side's contracting
/// and batch dimensions renumbered (operand dimension `perm[i]` is now dimension `i`).
fn renumbered(prim: &Prim, side: usize, perm: &[usize]) -> Prim {
    let Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, preferred_element_type } =
        prim
    else {
        unreachable!("only dot_general operands are transposed")
    };
    let at = |dims: &[usize]| -> Vec<usize> {
        dims.iter().map(|d| perm.iter().position(|p| p == d).expect("a permutation")).collect()
    };
    let (mut lc, mut rc, mut lb, mut rb) =
        (lhs_contracting.clone(), rhs_contracting.clone(), lhs_batch.clone(), rhs_batch.clone());
    if side == 0 {
        (lc, lb) = (at(&lc), at(&lb));
    } else {
        (rc, rb) = (at(&rc), at(&rb));
    }
    Prim::DotGeneral {
        lhs_contracting: lc,
        rhs_contracting: rc,
        lhs_batch: lb,
        rhs_batch: rb,
        preferred_element_type: *preferred_element_type,
    }
}
