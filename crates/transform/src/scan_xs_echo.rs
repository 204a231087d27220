//! A scan output that only passes the step's slice of an `xs` input through is that `xs` array:
//! its `ys` is dropped from the loop and its readers read the `xs` instead.
//!
//! Reverse mode saves what the backward loop needs as `ys` of the forward loop; when that is a
//! slice of the forward loop's own `xs` (W2's gradient saves `sin(ω·dt·t + φ)` and the
//! actuation `tanh(W·…)`, both precomputed for all steps before the loop), every step copied the
//! slice into a new `[T, …]` array identical to the `xs`. Step `s` writes `ys[s] = xs[s]` in either
//! direction, so the two arrays are equal element for element (NaN payloads included: nothing is
//! computed).
//!
//! ```text
//! ys, c = scan(xs) { x → …; (c', x) }   ⇒   c = scan(xs) { x → …; (c',) };  ys = xs
//! ```

use kiln_ir::{Function, Prim, Var};

/// `f` with every scan output that echoes an `xs` slice replaced by that `xs` (nested scans
/// included), and how many outputs were replaced.
///
/// ```
/// use kiln_ir::{Array, eval, parse};
/// use kiln_transform::reuse_scan_xs_echoes;
/// // A running sum of xs that also returns each step's xs as ys.
/// let f = parse("{ lambda c0:f32[] xs:f32[3] . let
///     c:f32[] ys:f32[3] = scan[length=3 reverse=false num_consts=0 num_carry=1 body={ lambda c:f32[] x:f32[] . let
///         d:f32[] = add c x
///       in (d, x) }] c0 xs
///   in (c, ys) }")?;
/// let (g, echoes) = reuse_scan_xs_echoes(&f);
/// assert_eq!(echoes, 1);
/// assert_eq!(g.outputs[1], g.params[1]); // ys is the xs parameter itself
/// let args = [Array::scalar(0.5f32), Array::from_vec(&[3], vec![1.0f32, 2.0, 4.0])];
/// assert_eq!(eval(&g, &args)?, eval(&f, &args)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn reuse_scan_xs_echoes(f: &Function) -> (Function, usize) {
    let mut count = 0;
    let g = walk(f, &mut count);
    (g, count)
}

fn walk(f: &Function, count: &mut usize) -> Function {
    let mut g = f.clone();
    g.eqns.clear();
    // What each replaced scan output now reads.
    let mut renamed: Vec<Option<Var>> = vec![None; f.vars.len()];
    let rename = |renamed: &[Option<Var>], v: Var| renamed[v.index()].unwrap_or(v);
    for e in &f.eqns {
        let mut e = e.clone();
        for v in e.inputs.iter_mut() {
            *v = rename(&renamed, *v);
        }
        e.prim = e.prim.map_subfunctions(|s| walk(s, count));
        if let Prim::Scan { num_consts, num_carry, body, .. } = &mut e.prim {
            let first_x = *num_consts + *num_carry;
            // ys positions (from the last, so earlier positions hold) whose value is an xs param.
            for k in (0..body.outputs.len() - *num_carry).rev() {
                let y = body.outputs[*num_carry + k];
                let Some(j) = body.params.iter().skip(first_x).position(|&p| p == y) else { continue };
                renamed[e.outputs[*num_carry + k].index()] = Some(e.inputs[first_x + j]);
                body.outputs.remove(*num_carry + k);
                e.outputs.remove(*num_carry + k);
                *count += 1;
            }
        }
        g.eqns.push(e);
    }
    for v in g.outputs.iter_mut() {
        *v = rename(&renamed, *v);
    }
    g
}
