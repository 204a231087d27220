//! `reuse_scan_xs_echoes`: scan outputs that pass an xs slice through become that xs, in either
//! direction, nested scans included; outputs that compute anything, or pass a carry or a loop
//! constant through, stay. Results are compared bit for bit through the interpreter.

use kiln_ir::{Array, Function, Prim, eval, parse, verify};
use kiln_transform::reuse_scan_xs_echoes;

fn scan_outputs(f: &Function) -> usize {
    f.eqns.iter().find(|e| matches!(e.prim, Prim::Scan { .. })).map_or(0, |e| e.outputs.len())
}

/// Both programs give the same bits on `args`, and the rewritten one verifies.
fn same(f: &Function, g: &Function, args: &[Array]) {
    verify(g).unwrap_or_else(|e| panic!("{e:?}\n{g}"));
    let (a, b) = (eval(f, args).unwrap(), eval(g, args).unwrap());
    assert_eq!(a.len(), b.len());
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(x.bitwise_eq(y), "output {k}:\n{x:?}\n{y:?}\n{g}");
    }
}

/// A scan over two xs that returns (besides its carry) the second xs twice, the first xs scaled,
/// and the first xs; `reverse` either way; the body's nested scan also echoes its own xs.
fn echoing(reverse: bool) -> Function {
    let src = format!(
        "{{ lambda k:f32[] c0:f32[2] xs:f32[4,2] zs:f32[4,3] . let
    c:f32[2] z1:f32[4,3] s:f32[4,2] x1:f32[4,2] z2:f32[4,3] = scan[length=4 reverse={reverse} num_consts=1 num_carry=1 body={{ lambda k:f32[] c:f32[2] x:f32[2] z:f32[3] . let
        kb:f32[2] = broadcast_in_dim[shape=(2,) broadcast_dimensions=()] k
        d:f32[2] = mul x kb
        e:f32[2] = add c d
        w:f32[] q:f32[2] = scan[length=2 reverse=false num_consts=0 num_carry=1 body={{ lambda a:f32[] b:f32[] . let
            u:f32[] = add a b
          in (u, b) }}] k x
        wb:f32[2] = broadcast_in_dim[shape=(2,) broadcast_dimensions=()] w
        e2:f32[2] = add e wb
        e3:f32[2] = add e2 q
      in (e3, z, d, x, z) }}] k c0 xs zs
    in (c, z1, s, x1, z2, xs) }}"
    );
    parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

#[test]
fn echoed_xs_are_read_in_place_in_both_directions() {
    let xs: Vec<f32> = vec![1.0, -0.0, f32::NAN, 2.5, f32::INFINITY, -3.0, 0.5, f32::NEG_INFINITY];
    let zs: Vec<f32> = (0..12).map(|i| i as f32 * -0.75).collect();
    let args = [
        Array::scalar(1.5f32),
        Array::from_vec(&[2], vec![0.25f32, -0.0]),
        Array::from_vec(&[4, 2], xs),
        Array::from_vec(&[4, 3], zs),
    ];
    for reverse in [false, true] {
        let f = echoing(reverse);
        let (g, n) = reuse_scan_xs_echoes(&f);
        // z twice and x at the top level; the nested scan's echo of its xs slice of x.
        assert_eq!(n, 4, "{g}");
        assert_eq!(scan_outputs(&g), 2, "the carry and the scaled xs stay:\n{g}");
        assert_eq!((g.outputs[1], g.outputs[3], g.outputs[4]), (g.params[3], g.params[2], g.params[3]));
        same(&f, &g, &args);
    }
}

#[test]
fn outputs_that_compute_or_pass_a_carry_or_constant_stay() {
    let src = "{ lambda k:f32[] c0:f32[3] xs:f32[5,3] . let
    c:f32[3] a:f32[5,3] b:f32[5] n:f32[5,3] = scan[length=5 reverse=false num_consts=1 num_carry=1 body={ lambda k:f32[] c:f32[3] x:f32[3] . let
        m:f32[3] = neg x
        d:f32[3] = add c m
      in (d, c, k, m) }] k c0 xs
    in (c, a, b, n) }";
    let f = parse(src).unwrap();
    let (g, n) = reuse_scan_xs_echoes(&f);
    assert_eq!(n, 0);
    assert_eq!(g, f);
    // A length-0 scan: the echoed ys and the xs are both empty.
    let src = "{ lambda c0:f32[] xs:f32[0,2] . let
    c:f32[] y:f32[0,2] = scan[length=0 reverse=true num_consts=0 num_carry=1 body={ lambda c:f32[] x:f32[2] . let
      in (c, x) }] c0 xs
    in (c, y) }";
    let f = parse(src).unwrap();
    let (g, n) = reuse_scan_xs_echoes(&f);
    assert_eq!(n, 1);
    same(&f, &g, &[Array::scalar(2.0f32), Array::from_vec(&[0, 2], Vec::<f32>::new())]);
}
