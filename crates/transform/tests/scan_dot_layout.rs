//! `transpose_scan_dot_constants`: a loop constant that a scan body's `dot_general` reads with
//! strided lanes is transposed before the loop, with the same bits as before (lhs and rhs operands,
//! batch dimensions, two contracting dimensions, nested scans, NaN, ±inf and -0.0 values); where it
//! must not apply (lanes already contiguous, a loop-variant operand, a one-step scan) the program
//! is left as it was.

use kiln_ir::{Array, Function, Prim, eval, parse, verify};
use kiln_transform::transpose_scan_dot_constants;

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
            match (i + seed as usize) % 11 {
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
        .map(|(i, t)| Array::from_vec(t.shape.dims(), values(t.shape.size(), i as u64 + 1)))
        .collect()
}

/// Rewrites `src`, checks the number of transposes added and that the result is bitwise equal.
fn check(src: &str, want: usize) -> Function {
    let f = parsed(src);
    let (g, added) = transpose_scan_dot_constants(&f);
    assert_eq!(added, want, "transposes added:\n{g}");
    verify(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
    let args = args_for(&f);
    let (a, b) = (eval(&f, &args).unwrap(), eval(&g, &args).unwrap());
    for (x, y) in a.iter().zip(&b) {
        assert!(x.bitwise_eq(y), "{f}\n{g}\nbefore {x:?}\nafter  {y:?}");
    }
    if want == 0 {
        assert_eq!(f, g, "nothing to rewrite, yet the program changed");
    }
    g
}

/// The scan's body in `g` (its first scan).
fn body(g: &Function) -> &Function {
    g.eqns
        .iter()
        .find_map(|e| match &e.prim {
            Prim::Scan { body, .. } => Some(&**body),
            _ => None,
        })
        .expect("a scan")
}

/// `c' = tanh(W·c)` with `W` (lhs) a loop constant, and `y = c·V` with `V` (rhs, contracted along
/// its last axis) another: both are transposed, and the products read them by rows.
#[test]
fn lhs_and_rhs_constants_are_transposed() {
    let g = check(
        "{ lambda w:f32[6,6] v:f32[5,6] c:f32[6] xs:f32[4,0] . let
    d:f32[6] e:f32[4,5] = scan[length=4 reverse=false num_consts=2 num_carry=1 body={ lambda w:f32[6,6] v:f32[5,6] c:f32[6] x:f32[0] . let
        p:f32[6] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] w c
        c2:f32[6] = tanh p
        y:f32[5] = dot_general[lhs_contracting=(0,) rhs_contracting=(1,) lhs_batch=() rhs_batch=() preferred_element_type=none] c v
      in (c2, y) }] w v c xs
  in (d, e) }",
        2,
    );
    let b = body(&g);
    for e in &b.eqns {
        if let Prim::DotGeneral { lhs_contracting, rhs_contracting, .. } = &e.prim {
            // Both products now contract the constants' first axis.
            assert!(lhs_contracting == &[0] && rhs_contracting == &[0], "{b}");
        }
    }
    let transposes = g.eqns.iter().filter(|e| matches!(e.prim, Prim::Transpose { .. })).count();
    assert_eq!(transposes, 2, "{g}");
}

/// A batched product (vmap's `W[r]·s[r]`: batch axis 0, lanes along W's axis 1) and a product
/// contracting two axes; the same constant read by two products is transposed once.
#[test]
fn batch_and_two_contracting_axes() {
    check(
        "{ lambda w:f32[3,7,4] u:f32[2,5,3] s:f32[3,4] xs:f32[3,0] . let
    d:f32[3,4] e:f32[3,3,7] f:f32[3,3,5] = scan[length=3 reverse=false num_consts=2 num_carry=1 body={ lambda w:f32[3,7,4] u:f32[2,5,3] s:f32[3,4] x:f32[0] . let
        p:f32[3,7] = dot_general[lhs_contracting=(2,) rhs_contracting=(1,) lhs_batch=(0,) rhs_batch=(0,) preferred_element_type=none] w s
        q:f32[3,7] = dot_general[lhs_contracting=(2,) rhs_contracting=(1,) lhs_batch=(0,) rhs_batch=(0,) preferred_element_type=none] w s
        r:f32[3,7] = add p q
        m:f32[2,3] = slice[start=(0, 0) limit=(2, 3) strides=(1, 1)] s
        t:f32[5] = dot_general[lhs_contracting=(0, 1) rhs_contracting=(0, 2) lhs_batch=() rhs_batch=() preferred_element_type=none] m u
        tb:f32[3,5] = broadcast_in_dim[shape=(3, 5) broadcast_dimensions=(1,)] t
        s2:f32[3,4] = tanh s
      in (s2, r, tb) }] w u s xs
  in (d, e, f) }",
        2,
    );
}

/// A rank-3 constant whose lane axis is its first (`perm = [1, 2, 0]`, not its own inverse)
/// contracted along its other two axes, and one whose later axes have size 1 (left alone: the
/// lanes are already contiguous).
#[test]
fn rank_three_constant_and_unit_trailing_axes() {
    let g = check(
        "{ lambda w:f32[4,3,5] c:f32[3,5] xs:f32[3,0] . let
    d:f32[3,5] e:f32[3,4] = scan[length=3 reverse=false num_consts=1 num_carry=1 body={ lambda w:f32[4,3,5] c:f32[3,5] x:f32[0] . let
        p:f32[4] = dot_general[lhs_contracting=(1, 2) rhs_contracting=(0, 1) lhs_batch=() rhs_batch=() preferred_element_type=none] w c
        c2:f32[3,5] = tanh c
      in (c2, p) }] w c xs
  in (d, e) }",
        1,
    );
    let perm = g.eqns.iter().find_map(|e| match &e.prim {
        Prim::Transpose { permutation } => Some(permutation.clone()),
        _ => None,
    });
    assert_eq!(perm, Some(vec![1, 2, 0]), "{g}");
    for e in &body(&g).eqns {
        if let Prim::DotGeneral { lhs_contracting, .. } = &e.prim {
            assert_eq!(lhs_contracting, &[0, 1], "{g}");
        }
    }
    check(
        "{ lambda w:f32[4,1] c:f32[1] xs:f32[3,0] . let
    d:f32[1] e:f32[3,4] = scan[length=3 reverse=false num_consts=1 num_carry=1 body={ lambda w:f32[4,1] c:f32[1] x:f32[0] . let
        p:f32[4] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] w c
        c2:f32[1] = tanh c
      in (c2, p) }] w c xs
  in (d, e) }",
        0,
    );
}

/// An inner scan's constant that is the outer scan's constant: the transpose lands in the outer
/// body (where LICM can hoist it) and the values stay the same.
#[test]
fn nested_scans() {
    check(
        "{ lambda w:f32[5,3] c:f32[3] xs:f32[2,3,0] . let
    d:f32[3] = scan[length=2 reverse=false num_consts=1 num_carry=1 body={ lambda w:f32[5,3] c:f32[3] ys:f32[3,0] . let
        c3:f32[3] = scan[length=3 reverse=false num_consts=1 num_carry=1 body={ lambda w:f32[5,3] c:f32[3] y:f32[0] . let
            p:f32[5] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] w c
            h:f32[3] = slice[start=(1,) limit=(4,) strides=(1,)] p
            c2:f32[3] = add c h
          in (c2) }] w c ys
      in (c3) }] w c xs
  in (d) }",
        1,
    );
}

/// Left alone: lanes already along the constant's last axis (`c·W` contracting W's axis 0), an
/// operand computed in the loop, and a one-step scan.
#[test]
fn left_alone() {
    let contiguous = "{ lambda w:f32[4,6] c:f32[4] xs:f32[3,0] . let
    d:f32[4] e:f32[3,6] = scan[length=3 reverse=false num_consts=1 num_carry=1 body={ lambda w:f32[4,6] c:f32[4] x:f32[0] . let
        y:f32[6] = dot_general[lhs_contracting=(0,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] c w
        c2:f32[4] = tanh c
      in (c2, y) }] w c xs
  in (d, e) }";
    check(contiguous, 0);
    let variant = "{ lambda w:f32[4,4] c:f32[4] xs:f32[3,0] . let
    d:f32[4] = scan[length=3 reverse=false num_consts=1 num_carry=1 body={ lambda w:f32[4,4] c:f32[4] x:f32[0] . let
        m:f32[4,4] = broadcast_in_dim[shape=(4, 4) broadcast_dimensions=(1,)] c
        w2:f32[4,4] = mul w m
        p:f32[4] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] w2 c
        c2:f32[4] = tanh p
      in (c2) }] w c xs
  in (d) }";
    check(variant, 0);
    let one_step = "{ lambda w:f32[4,4] c:f32[4] xs:f32[1,0] . let
    d:f32[4] = scan[length=1 reverse=false num_consts=1 num_carry=1 body={ lambda w:f32[4,4] c:f32[4] x:f32[0] . let
        p:f32[4] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] w c
      in (p) }] w c xs
  in (d) }";
    check(one_step, 0);
}
