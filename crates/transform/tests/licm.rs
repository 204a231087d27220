//! Loop-invariant code motion out of `scan` bodies: what moves (costly work on the loop's
//! constants, in nested loops out of both), what stays (cheap layout ops the body reads, work on
//! carries, control flow), and values bitwise equal to the original program.

use kiln_ir::{Array, Function, Prim, eval, parse, verify};
use kiln_transform::{HoistReport, hoist_scan_invariants};

fn hoist(src: &str) -> (Function, Function, HoistReport) {
    let f = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify(&f).unwrap();
    let (g, report) = hoist_scan_invariants(&f, &|_, _| true);
    verify(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
    (f, g, report)
}

fn body(f: &Function) -> &Function {
    let scan = f.eqns.iter().find(|e| matches!(e.prim, Prim::Scan { .. })).expect("a scan");
    scan.prim.subfunctions()[0]
}

fn names(f: &Function) -> Vec<&'static str> {
    f.eqns.iter().map(|e| e.prim.name()).collect()
}

fn same_bits(f: &Function, g: &Function, args: &[Array]) {
    let (a, b) = (eval(f, args).unwrap(), eval(g, args).unwrap());
    for (x, y) in a.iter().zip(&b) {
        assert!(x.bitwise_eq(y), "{x:?} vs {y:?}\n{f}\n{g}");
    }
}

const STEP: &str = "{ lambda k:f32[4] c:f32[4] xs:f32[5,4] . let
    d:f32[4] e:f32[5,4] = scan[length=5 reverse=false num_consts=1 num_carry=1 body={ lambda k:f32[4] c:f32[4] x:f32[4] . let
        t:f32[4] = tanh k
        b:f32[2,4] = broadcast_in_dim[shape=(2,4) broadcast_dimensions=(1,)] t
        r:f32[4] = reduce_sum[axes=(0,)] b
        m:f32[4] = mul c r
        s:f32[4] = add m x
        u:f32[4] = exp k
        dead:f32[4] = log k
      in (s, u) }] k c xs
  in (d, e) }";

#[test]
fn costly_invariant_work_moves_out_and_values_stay_bitwise() {
    let (f, g, report) = hoist(STEP);
    // tanh, the broadcast and reduce that only feed hoisted work, and exp (a ys output) move out;
    // the dead log is dropped; mul and add of the carry stay.
    assert_eq!((report.hoisted, report.scans, report.refused), (4, 1, 0));
    assert_eq!(names(body(&g)), vec!["mul", "add"]);
    assert_eq!(names(&g), vec!["tanh", "broadcast_in_dim", "reduce_sum", "exp", "scan"]);
    let args = [
        Array::from_vec(&[4], vec![0.5f32, f32::NAN, -0.0, 3.0]),
        Array::from_vec(&[4], vec![1.0f32, 2.0, f32::INFINITY, -1.0]),
        Array::from_vec(&[5, 4], (0..20).map(|i| i as f32 * 0.25 - 2.0).collect::<Vec<_>>()),
    ];
    same_bits(&f, &g, &args);
}

#[test]
fn a_cheap_broadcast_the_body_reads_stays_inside() {
    // The broadcast of the constant feeds the carry's product: fused, it costs nothing; hoisted, it
    // would be a [3,4] array read every step. Only the exp moves.
    let src = "{ lambda k:f32[4] c:f32[3,4] . let
        d:f32[3,4] = scan[length=4 reverse=false num_consts=1 num_carry=1 body={ lambda k:f32[4] c:f32[3,4] . let
            e:f32[4] = exp k
            b:f32[3,4] = broadcast_in_dim[shape=(3,4) broadcast_dimensions=(1,)] e
            m:f32[3,4] = mul c b
          in (m,) }] k c
      in (d,) }";
    let (f, g, report) = hoist(src);
    assert_eq!(report.hoisted, 1);
    assert_eq!(names(body(&g)), vec!["broadcast_in_dim", "mul"]);
    let args = [
        Array::from_vec(&[4], vec![0.1f32, -0.2, 0.3, 0.0]),
        Array::from_vec(&[3, 4], (0..12).map(|i| i as f32).collect::<Vec<_>>()),
    ];
    same_bits(&f, &g, &args);
}

#[test]
fn nested_invariants_leave_both_loops_and_refusal_keeps_the_program() {
    // exp(k) is invariant in the inner loop and in the outer one: it ends up before both.
    let src = "{ lambda k:f32[2] c:f32[2] . let
        d:f32[2] = scan[length=3 reverse=false num_consts=1 num_carry=1 body={ lambda k:f32[2] c:f32[2] . let
            i:f32[2] = scan[length=2 reverse=false num_consts=1 num_carry=1 body={ lambda k:f32[2] c:f32[2] . let
                e:f32[2] = exp k
                s:f32[2] = add c e
              in (s,) }] k c
            n:f32[2] = neg i
          in (n,) }] k c
      in (d,) }";
    let (f, g, report) = hoist(src);
    assert_eq!(names(&g), vec!["exp", "scan"], "{g}");
    assert_eq!(report.scans, 2);
    let args = [Array::from_vec(&[2], vec![0.5f32, -1.0]), Array::from_vec(&[2], vec![1.0f32, 2.0])];
    same_bits(&f, &g, &args);
    // Refused everywhere: the same program (the inner loop refused, the outer one then has no
    // invariant work: control flow stays).
    let (same, refused) = hoist_scan_invariants(&f, &|_, _| false);
    assert_eq!(same, f);
    assert_eq!((refused.hoisted, refused.refused), (0, 1));
}

#[test]
fn work_on_carries_and_xs_stays() {
    let src = "{ lambda c:f32[3] xs:f32[4,3] . let
        d:f32[3] e:f32[4,3] = scan[length=4 reverse=true num_consts=0 num_carry=1 body={ lambda c:f32[3] x:f32[3] . let
            t:f32[3] = tanh x
            s:f32[3] = add c t
          in (s, t) }] c xs
      in (d, e) }";
    let (f, g, report) = hoist(src);
    assert_eq!(report, HoistReport::default());
    assert_eq!(f, g);
}
