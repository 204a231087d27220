//! `split_scan_carry_columns`: a scan carry with a short last axis, read by columns and rebuilt by a
//! `concatenate` of width-1 pieces, is carried as one array per column, with the same bits as
//! before (NaN as NaN; ±inf and -0.0 values; products with the carry on either side, expanded into
//! elementwise sums; the whole carry read too; several carries, nested and reversed scans, i32);
//! where it must not apply (a wide or short carry, a new value that is not a concatenate of
//! columns, no single-column read) the program is left as it was.

use kiln_ir::{Array, DType, Function, Prim, eval, parse, verify};
use kiln_transform::split_scan_carry_columns;
// Bitwise equality with every NaN equal to every NaN: IEEE leaves NaN payloads and signs open
// (`inf · 0` gives x86's negative default NaN; which NaN a sum of two keeps is up to the compiler).
mod simplify_common;
use simplify_common::same_bits;

fn parsed(src: &str) -> Function {
    let f = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify(&f).unwrap();
    f
}

/// Deterministic f32 values in [-2, 2) with a NaN, infinities and signed zeros mixed in.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match (i + seed as usize) % 13 {
                3 => -0.0,
                5 => 0.0,
                7 if i > 20 => f32::INFINITY,
                9 if i > 30 => f32::NAN,
                _ => ((x >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0,
            }
        })
        .collect()
}

fn args_for(f: &Function) -> Vec<Array> {
    f.param_types()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let v = values(t.shape.size(), i as u64 + 1);
            match t.dtype {
                DType::F32 => Array::from_vec(t.shape.dims(), v),
                // Indices from -60 to 59: in and out of range of 40 rows (NaN gives 0, ±inf saturate).
                DType::I32 => Array::from_vec(t.shape.dims(), v.iter().map(|x| (x * 30.0) as i32).collect()),
                DType::Bool => Array::from_vec(t.shape.dims(), v.iter().map(|x| *x > 0.0).collect()),
                other => panic!("no test values for {other:?}"),
            }
        })
        .collect()
}

/// Rewrites `src`, checks the number of carries split and that the result is bitwise equal on
/// `args` (generated ones when `None`).
fn check_on(src: &str, want: usize, args: Option<Vec<Array>>) -> Function {
    let f = parsed(src);
    let (g, split) = split_scan_carry_columns(&f);
    assert_eq!(split, want, "carries split:\n{g}");
    verify(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
    let args = args.unwrap_or_else(|| args_for(&f));
    let (a, b) = (eval(&f, &args).unwrap(), eval(&g, &args).unwrap());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!(same_bits(x, y), "{f}\n{g}\nbefore {x:?}\nafter  {y:?}");
    }
    if want == 0 {
        assert_eq!(f, g, "nothing to rewrite, yet the program changed");
    }
    g
}

fn check(src: &str, want: usize) -> Function {
    check_on(src, want, None)
}

/// The first scan of `g`: its number of carries and its body.
fn scan(g: &Function) -> (usize, &Function) {
    g.eqns
        .iter()
        .find_map(|e| match &e.prim {
            Prim::Scan { num_carry, body, .. } => Some((*num_carry, &**body)),
            _ => None,
        })
        .expect("a scan")
}

/// W4's shape (`vmap` of a cart-pole step): `s: [8, 4]` read by columns and by three products (the
/// carry as rhs of `w·s`, as lhs contracting the other operand's first axis, and as lhs
/// contracting its last) and by a sum of squares over its last axis, returned whole as a ys, and
/// rebuilt from four columns.
const STATE_STEP: &str = "{ lambda w:f32[4] m:f32[4,3] n:f32[2,4] s:f32[8,4] xs:f32[5,0] . let
    d:f32[8,4] e:f32[5,8] f:f32[5,8,3] g:f32[5,8,2] h:f32[5,8,4] k:f32[5,8] = scan[length=5 reverse=false num_consts=3 num_carry=1 body={ lambda w:f32[4] m:f32[4,3] n:f32[2,4] s:f32[8,4] x:f32[0] . let
        a0:f32[8,1] = slice[start=(0, 0) limit=(8, 1) strides=(1, 1)] s
        a:f32[8] = reshape[new_sizes=(8,)] a0
        b0:f32[8,1] = slice[start=(0, 1) limit=(8, 2) strides=(1, 1)] s
        b:f32[8] = reshape[new_sizes=(8,)] b0
        c0:f32[8,1] = slice[start=(0, 3) limit=(8, 4) strides=(1, 1)] s
        c:f32[8] = reshape[new_sizes=(8,)] c0
        u:f32[8] = dot_general[lhs_contracting=(0,) rhs_contracting=(1,) lhs_batch=() rhs_batch=() preferred_element_type=none] w s
        v:f32[8,3] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] s m
        q:f32[8,2] = dot_general[lhs_contracting=(1,) rhs_contracting=(1,) lhs_batch=() rhs_batch=() preferred_element_type=none] s n
        a1:f32[8] = add a u
        b1:f32[8] = mul b a
        c1:f32[8] = sub c u
        d1:f32[8] = div b c
        sg:f32[8,4] = stop_gradient s
        sq:f32[8,4] = mul sg s
        n2:f32[8] = reduce_sum[axes=(1,)] sq
        p0:f32[8,1] = reshape[new_sizes=(8, 1)] a1
        p1:f32[8,1] = reshape[new_sizes=(8, 1)] b1
        p2:f32[8,1] = reshape[new_sizes=(8, 1)] c1
        p3:f32[8,1] = reshape[new_sizes=(8, 1)] d1
        s2:f32[8,4] = concatenate[dimension=1] p0 p1 p2 p3
      in (s2, u, v, q, s, n2) }] w m n s xs
  in (d, e, f, g, h, k) }";

#[test]
fn a_state_read_by_columns_and_products_is_carried_as_columns() {
    let g = check(STATE_STEP, 1);
    let (num_carry, body) = scan(&g);
    assert_eq!(num_carry, 4, "{g}");
    // Every product with the carry became elementwise, every column read its own carry.
    assert!(
        !body.eqns.iter().any(|e| matches!(e.prim, Prim::DotGeneral { .. } | Prim::Slice { .. })
            && e.inputs.iter().any(|v| body.var_type(*v).shape.dims() == [8, 4])),
        "{body}"
    );
    // The whole carry is still the ys `h`: rebuilt once at the head of the body.
    let rebuilt = body.eqns.iter().filter(|e| matches!(e.prim, Prim::Concatenate { .. })).count();
    assert_eq!(rebuilt, 1, "only the head's rebuild (the old new value is dead):\n{body}");
    // Nothing else is computed whole: the sum of squares (through `stop_gradient`) runs by columns.
    let whole = body.eqns.iter().filter(|e| body.var_type(e.outputs[0]).shape.dims() == [8, 4]).count();
    assert_eq!(whole, 1, "{body}");
}

/// A product of columns that are all `-0.0`: the sum starts from `+0.0` as `dot_general` does,
/// so the result is `+0.0` before and after (a sum of the products alone would give `-0.0`).
#[test]
fn a_product_of_negative_zeros_keeps_its_positive_zero() {
    let f = parsed(STATE_STEP);
    let mut args = args_for(&f);
    args[0] = Array::from_vec(&[4], vec![-0.0f32, -0.0, -0.0, -0.0]);
    args[3] = Array::from_vec(&[8, 4], vec![1.0f32; 32]);
    let g = check_on(STATE_STEP, 1, Some(args.clone()));
    let u = eval(&g, &args).unwrap()[1].to_vec::<f32>().unwrap();
    assert!(u[..8].iter().all(|x| x.to_bits() == 0), "{u:?}");
}

/// Two carries split (`[8, 2]` and `[16, 3]`, around one that is not), in a reversed scan whose
/// body holds a nested scan with a splittable carry of its own; an i32 carry with a product.
#[test]
fn several_carries_nested_and_reversed_scans_and_integers() {
    let g = check(
        "{ lambda a:f32[8,2] z:f32[8] c:f32[16,3] xs:f32[3,2,0] . let
    a9:f32[8,2] z9:f32[8] c9:f32[16,3] = scan[length=3 reverse=true num_consts=0 num_carry=3 body={ lambda a:f32[8,2] z:f32[8] c:f32[16,3] x:f32[2,0] . let
        a0:f32[8,1] = slice[start=(0, 0) limit=(8, 1) strides=(1, 1)] a
        a1:f32[8,1] = slice[start=(0, 1) limit=(8, 2) strides=(1, 1)] a
        s:f32[8,1] = add a0 a1
        a2:f32[8,2] = concatenate[dimension=1] a1 s
        zr:f32[8] = reshape[new_sizes=(8,)] a0
        z2:f32[8] = mul z zr
        c2:f32[16,3] = scan[length=2 reverse=false num_consts=0 num_carry=1 body={ lambda k:f32[16,3] y:f32[0] . let
            k0:f32[16,1] = slice[start=(0, 2) limit=(16, 3) strides=(1, 1)] k
            k1:f32[16,1] = slice[start=(0, 0) limit=(16, 1) strides=(1, 1)] k
            k2:f32[16,1] = neg k0
            k3:f32[16,3] = concatenate[dimension=1] k0 k1 k2
          in (k3) }] c x
        c0:f32[16,1] = slice[start=(0, 1) limit=(16, 2) strides=(1, 1)] c2
        c1:f32[16,1] = tanh c0
        cc:f32[16,3] = concatenate[dimension=1] c0 c1 c0
      in (a2, z2, cc) }] a z c xs
  in (a9, z9, c9) }",
        3,
    );
    let (num_carry, _) = scan(&g);
    assert_eq!(num_carry, 2 + 1 + 3, "{g}");
    check(
        "{ lambda w:i32[2] s:i32[8,2] xs:f32[4,0] . let
    d:i32[8,2] = scan[length=4 reverse=false num_consts=1 num_carry=1 body={ lambda w:i32[2] s:i32[8,2] x:f32[0] . let
        u:i32[8] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] s w
        a0:i32[8,1] = slice[start=(0, 1) limit=(8, 2) strides=(1, 1)] s
        u1:i32[8,1] = reshape[new_sizes=(8, 1)] u
        s2:i32[8,2] = concatenate[dimension=1] u1 a0
      in (s2) }] w s xs
  in (d) }",
        1,
    );
}

/// Left alone: a last axis of 5 (past the columns split), 4 rows (too few to vectorize), a new
/// value that is not columnar (a reversal along the last axis, a concatenate of width-2 pieces),
/// a carry never read by columns (only a maximum over its last axis, and whole).
#[test]
fn left_alone() {
    let step = |ty: &str, slice: &str, new: &str| {
        format!(
            "{{ lambda s:{ty} xs:f32[3,0] . let
    d:{ty} = scan[length=3 reverse=false num_consts=0 num_carry=1 body={{ lambda s:{ty} x:f32[0] . let
        {slice}
        {new}
      in (s2) }}] s xs
  in (d) }}"
        )
    };
    let col = |rows: usize, k: usize| {
        format!("a:f32[{rows},1] = slice[start=(0, {k}) limit=({rows}, {}) strides=(1, 1)] s", k + 1)
    };
    let cat = |rows: usize, k: usize| {
        format!("s2:f32[{rows},{k}] = concatenate[dimension=1] {}", vec!["a"; k].join(" "))
    };
    check(&step("f32[8,5]", &col(8, 4), &cat(8, 5)), 0);
    check(&step("f32[4,4]", &col(4, 0), &cat(4, 4)), 0);
    check(&step("f32[8,4]", &col(8, 0), "s2:f32[8,4] = rev[dimensions=(1,)] s"), 0);
    check(
        &step(
            "f32[8,4]",
            "a:f32[8,2] = slice[start=(0, 0) limit=(8, 2) strides=(1, 1)] s",
            "s2:f32[8,4] = concatenate[dimension=1] a a",
        ),
        0,
    );
    check(&step("f32[8,2]", "a:f32[8] = reduce_max[axes=(1,)] s", "s2:f32[8,2] = tanh s"), 0);
}

/// W2's shape: positions `x` and velocities `v`, `[40, 2]`, both columnar (`x' = x + dt·v'` needs
/// `v'`); springs gather their ends (`gather` along axis 0), take `|d|` through a sum over the last
/// axis, and scatter forces back with `segment_sum`; a broadcast along the rows and a `select` with
/// a scalar predicate. Both carries split, and the whole `[120, 2]`/`[40, 2]` intermediates leave the
/// body; the same values as before.
#[test]
fn a_particle_system_is_computed_column_by_column() {
    let src = "{ lambda a:i32[120] b:i32[120] p:bool[] x:f32[40,2] v:f32[40,2] xs:f32[6,0] . let
    x9:f32[40,2] v9:f32[40,2] = scan[length=6 reverse=false num_consts=3 num_carry=2 body={ lambda a:i32[120] b:i32[120] p:bool[] x:f32[40,2] v:f32[40,2] t:f32[0] ; one:f32[] = 1.0 . let
        xa:f32[120,2] = gather[axis=0 batch_dims=0 mode=clip] x a
        xb:f32[120,2] = gather[axis=0 batch_dims=0 mode=clip] x b
        d:f32[120,2] = sub xb xa
        dd:f32[120,2] = mul d d
        l2:f32[120] = reduce_sum[axes=(1,)] dd
        l0:f32[120] = sqrt l2
        o:f32[120] = broadcast_in_dim[shape=(120,) broadcast_dimensions=()] one
        l:f32[120] = add l0 o
        lb:f32[120,2] = broadcast_in_dim[shape=(120, 2) broadcast_dimensions=(0,)] l
        f:f32[120,2] = div d lb
        fa:f32[40,2] = segment_sum[num_segments=40] f a
        fb:f32[40,2] = segment_sum[num_segments=40] f b
        df:f32[40,2] = sub fa fb
        vy0:f32[40,1] = slice[start=(0, 1) limit=(40, 2) strides=(1, 1)] v
        vy:f32[40] = reshape[new_sizes=(40,)] vy0
        g0:f32[40] = neg vy
        g1:f32[40,1] = reshape[new_sizes=(40, 1)] g0
        t0:f32[] = reduce_sum[axes=(0,)] t
        z:f32[40,1] = broadcast_in_dim[shape=(40, 1) broadcast_dimensions=()] t0
        gr:f32[40,2] = concatenate[dimension=1] z g1
        v1:f32[40,2] = add v df
        v2:f32[40,2] = add v1 gr
        v3:f32[40,2] = select p v2 v
        x1:f32[40,2] = add x v3
      in (x1, v3) }] a b p x v xs
  in (x9, v9) }";
    // The generated predicate is false (`-0.0 > 0`): the springs' columns are checked with it true,
    // and with finite positions and velocities too (a NaN or inf spreads to every mass in 6 steps).
    let mut args = args_for(&parsed(src));
    assert_eq!(args[2].to_vec::<bool>(), Some(vec![false]));
    check_on(src, 2, Some(args.clone()));
    args[2] = Array::scalar(true);
    check_on(src, 2, Some(args.clone()));
    for a in &mut args[3..5] {
        let v: Vec<f32> =
            a.to_vec::<f32>().unwrap().iter().map(|x| if x.is_finite() { *x } else { 1.5 }).collect();
        *a = Array::from_vec(&[40, 2], v);
    }
    let g = check_on(src, 2, Some(args.clone()));
    let x = eval(&g, &args).unwrap()[0].to_vec::<f32>().unwrap();
    assert!(x.iter().all(|v| v.is_finite()), "the finite case stays finite: {x:?}");
    let (num_carry, body) = scan(&g);
    assert_eq!(num_carry, 4, "{g}");
    let wide = |dims: &[usize]| {
        body.eqns.iter().any(|e| e.outputs.iter().any(|v| body.var_type(*v).shape.dims() == dims))
    };
    assert!(!wide(&[120, 2]) && !wide(&[40, 2]), "whole intermediates left:\n{body}");
}
