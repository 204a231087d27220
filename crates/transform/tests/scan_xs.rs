//! A scan body's carry-independent work computed for all steps before the loop: what moves (work
//! on constants and `xs` only, W2's actuation shape), what stays (work on carries, cheap layout ops
//! only the loop reads, control flow), the loop-invariant equations both sides read, the `xs` the
//! body no longer reads, refusal, nesting; values bitwise equal to the original program with NaN,
//! ±inf and -0.0 inputs.

use kiln_ir::{Array, DType, Function, Prim, TensorType, eval, parse, verify};
use kiln_transform::batching::batch_function;
use kiln_transform::{XsWorkReport, precompute_scan_xs_work};
use std::cell::RefCell;

fn precompute(src: &str) -> (Function, Function, XsWorkReport) {
    let f = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify(&f).unwrap();
    let (g, report) = precompute_scan_xs_work(&f, &|_, _, _| true);
    verify(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
    (f, g, report)
}

fn scan_of(f: &Function) -> &kiln_ir::Eqn {
    f.eqns.iter().find(|e| matches!(e.prim, Prim::Scan { .. })).expect("a scan")
}

fn body(f: &Function) -> &Function {
    scan_of(f).prim.subfunctions()[0]
}

fn names(f: &Function) -> Vec<&'static str> {
    f.eqns.iter().map(|e| e.prim.name()).collect()
}

/// Bit for bit, except that a NaN may be any NaN: a product of two NaN factors yields one of
/// them (IEEE 754 §6.2.3 leaves which open), and a batched `dot_general` may swap its operands.
fn same_bits(f: &Function, g: &Function, args: &[Array]) {
    let (a, b) = (eval(f, args).unwrap(), eval(g, args).unwrap());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.shape(), y.shape());
        let (xv, yv) = (x.to_vec::<f32>().unwrap(), y.to_vec::<f32>().unwrap());
        for (p, q) in xv.iter().zip(&yv) {
            assert!(p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()), "{x:?} vs {y:?}\n{f}\n{g}");
        }
    }
}

fn ramp(shape: &[usize], scale: f32, specials: &[f32]) -> Array {
    let n: usize = shape.iter().product();
    let mut v: Vec<f32> = (0..n).map(|i| (i as f32 - n as f32 / 2.0) * scale).collect();
    for (slot, s) in v.iter_mut().zip(specials) {
        *slot = *s;
    }
    Array::from_vec(shape, v)
}

/// W2's step in miniature: a carry driven by `tanh(W · sin(k·t + φ))`, `t` the scanned step time.
const ACTUATED: &str = "{ lambda w:f32[3,2] phi:f32[2] c:f32[3] ts:f32[5] . let
    d:f32[3] e:f32[5,3] = scan[length=5 reverse=REV num_consts=2 num_carry=1 body={ lambda w:f32[3,2] phi:f32[2] c:f32[3] t:f32[] . let
        k:f32[] = mul t t
        kb:f32[2] = broadcast_in_dim[shape=(2,) broadcast_dimensions=()] k
        a:f32[2] = add kb phi
        s:f32[2] = sin a
        p:f32[3] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] w s
        th:f32[3] = tanh p
        m:f32[3] = mul c th
        n:f32[3] = add m c
      in (n, th) }] w phi c ts
  in (d, e) }";

fn actuated_args() -> [Array; 4] {
    [
        ramp(&[3, 2], 0.3, &[f32::NAN, -0.0]),
        ramp(&[2], 0.7, &[f32::INFINITY]),
        ramp(&[3], 1.1, &[-0.0, f32::NEG_INFINITY]),
        ramp(&[5], 0.4, &[-0.0, 0.0, f32::NAN]),
    ]
}

#[test]
fn actuation_runs_for_all_steps_before_the_loop_bitwise() {
    for rev in ["false", "true"] {
        let (f, g, report) = precompute(&ACTUATED.replace("REV", rev));
        // mul, broadcast, add, sin, dot_general and tanh move; the carry's mul and add stay and
        // read tanh's result as the new xs (the old xs `t` is no longer read, so no longer scanned).
        assert_eq!((report.moved, report.scans, report.refused), (6, 1, 0), "{g}");
        assert_eq!(names(body(&g)), vec!["mul", "add"], "{g}");
        let scan = scan_of(&g);
        assert_eq!(scan.inputs.len(), 4, "w, phi, c and the precomputed tanh: {g}");
        let pre = g.var_type(scan.inputs[3]);
        assert_eq!(pre, &TensorType::new(DType::F32, [5, 3]));
        // The product's batch dimension leads: no transpose of the [5, 3] result.
        assert!(!names(&g).contains(&"transpose"), "{g}");
        same_bits(&f, &g, &actuated_args());
    }
}

#[test]
fn accept_sees_both_bodies_and_the_precomputed_bytes_and_refusal_keeps_the_program() {
    let f = parse(&ACTUATED.replace("REV", "false")).unwrap();
    let seen = RefCell::new(Vec::new());
    let (g, report) = precompute_scan_xs_work(&f, &|before, after, bytes| {
        seen.borrow_mut().push((before.eqns.len(), after.eqns.len(), bytes));
        false
    });
    // 8 equations before, 2 after; tanh's [3] f32 per step over 5 steps is 60 bytes.
    assert_eq!(*seen.borrow(), vec![(8, 2, 60)]);
    assert_eq!(report, XsWorkReport { moved: 0, scans: 0, refused: 1 });
    assert_eq!(g, f);
}

#[test]
fn an_xs_the_loop_still_reads_stays_scanned_and_a_cheap_broadcast_stays_inside() {
    // exp(x) moves; the broadcast of it only the loop reads stays (fused, it costs nothing; moved,
    // it would be a [4, 2, 3] array); x itself is still read by the carry's add.
    let src = "{ lambda c:f32[2,3] xs:f32[4,3] . let
        d:f32[2,3] = scan[length=4 reverse=false num_consts=0 num_carry=1 body={ lambda c:f32[2,3] x:f32[3] . let
            e:f32[3] = exp x
            b:f32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(1,)] e
            xb:f32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(1,)] x
            m:f32[2,3] = mul c b
            s:f32[2,3] = add m xb
          in (s,) }] c xs
      in (d,) }";
    let (f, g, report) = precompute(src);
    assert_eq!(report.moved, 1, "{g}");
    assert_eq!(names(body(&g)), vec!["broadcast_in_dim", "broadcast_in_dim", "mul", "add"], "{g}");
    let scan = scan_of(&g);
    assert_eq!(scan.inputs.len(), 3, "c, xs and exp(xs): {g}");
    let args =
        [ramp(&[2, 3], 0.5, &[f32::NAN]), ramp(&[4, 3], 0.9, &[f32::INFINITY, -0.0, f32::NEG_INFINITY])];
    same_bits(&f, &g, &args);
}

#[test]
fn a_loop_invariant_both_sides_read_is_computed_on_both() {
    // `e = exp(k)` (loop-invariant, left in the body) feeds the moved `mul x e` and the carry's add.
    let src = "{ lambda k:f32[3] c:f32[3] xs:f32[4,3] . let
        d:f32[3] = scan[length=4 reverse=false num_consts=1 num_carry=1 body={ lambda k:f32[3] c:f32[3] x:f32[3] . let
            e:f32[3] = exp k
            m:f32[3] = mul x e
            l:f32[3] = log m
            s:f32[3] = add c l
            t:f32[3] = add s e
          in (t,) }] k c xs
      in (d,) }";
    let (f, g, report) = precompute(src);
    assert_eq!(report.moved, 3, "exp (a copy), mul and log: {g}");
    assert_eq!(names(body(&g)), vec!["exp", "add", "add"], "{g}");
    let args =
        [ramp(&[3], 0.5, &[-0.0]), ramp(&[3], 1.5, &[f32::NAN]), ramp(&[4, 3], 0.3, &[-0.0, f32::INFINITY])];
    same_bits(&f, &g, &args);
}

#[test]
fn work_on_carries_cheap_work_and_empty_loops_stay() {
    // tanh reads the carry; the slice of x is a layout op: nothing worth moving.
    let src = "{ lambda c:f32[2] xs:f32[4,3] . let
        d:f32[2] = scan[length=4 reverse=false num_consts=0 num_carry=1 body={ lambda c:f32[2] x:f32[3] . let
            t:f32[2] = tanh c
            y:f32[2] = slice[start=(0,) limit=(2,) strides=(1,)] x
            s:f32[2] = add t y
          in (s,) }] c xs
      in (d,) }";
    let (f, g, report) = precompute(src);
    assert_eq!(report, XsWorkReport::default());
    assert_eq!(f, g);
    // A scan of length 0 runs no step: its work is not precomputed either.
    let src = "{ lambda c:f32[2] xs:f32[0,2] . let
        d:f32[2] = scan[length=0 reverse=false num_consts=0 num_carry=1 body={ lambda c:f32[2] x:f32[2] . let
            e:f32[2] = exp x
            s:f32[2] = add c e
          in (s,) }] c xs
      in (d,) }";
    let (f, g, report) = precompute(src);
    assert_eq!(report, XsWorkReport::default());
    assert_eq!(f, g);
}

#[test]
fn an_inner_loops_work_on_the_outer_xs_moves_out_of_both() {
    // The inner scan's exp reads only its constant, the outer loop's x: precomputed for the inner
    // loop's steps in the outer body, and then for all outer steps before the outer loop.
    let src = "{ lambda c:f32[2] xs:f32[3,2] . let
        d:f32[2] = scan[length=3 reverse=false num_consts=0 num_carry=1 body={ lambda c:f32[2] x:f32[2] . let
            i:f32[2] = scan[length=2 reverse=false num_consts=1 num_carry=1 body={ lambda x:f32[2] c:f32[2] . let
                e:f32[2] = exp x
                s:f32[2] = add c e
              in (s,) }] x c
            n:f32[2] = neg i
          in (n,) }] c xs
      in (d,) }";
    let f = parse(src).unwrap();
    // The inner loop's move alone (the exp is loop-invariant there, not xs work: LICM's business).
    let (g, report) = precompute_scan_xs_work(&f, &|_, _, _| true);
    assert_eq!(report, XsWorkReport::default(), "{g}");
    // With xs of its own, the inner scan's work moves out of it, then out of the outer loop.
    let src = "{ lambda c:f32[2] xs:f32[3,2,2] . let
        d:f32[2] = scan[length=3 reverse=false num_consts=0 num_carry=1 body={ lambda c:f32[2] x:f32[2,2] . let
            i:f32[2] = scan[length=2 reverse=true num_consts=0 num_carry=1 body={ lambda c:f32[2] y:f32[2] . let
                e:f32[2] = exp y
                s:f32[2] = add c e
              in (s,) }] c x
            n:f32[2] = neg i
          in (n,) }] c xs
      in (d,) }";
    let (f, g, report) = precompute(src);
    assert_eq!(report.scans, 2, "{g}");
    assert_eq!(names(&g), vec!["exp", "scan"], "{g}");
    let args = [ramp(&[2], 0.5, &[-0.0]), ramp(&[3, 2, 2], 0.7, &[f32::NAN, f32::INFINITY, -0.0])];
    same_bits(&f, &g, &args);
}

#[test]
fn vmap_of_a_matrix_times_a_batched_vector_puts_the_batch_first() {
    // W · x for x batched over 4: one product [4, 3] with the operands swapped, no transpose.
    let src = "{ lambda w:f32[3,2] x:f32[2] . let
        p:f32[3] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] w x
      in (p,) }";
    let f = parse(src).unwrap();
    let (g, out_batched) = batch_function(&f, &[false, true], 4, &[true]);
    verify(&g).unwrap();
    assert_eq!(out_batched, vec![true]);
    assert_eq!(names(&g), vec!["dot_general"], "{g}");
    let w = ramp(&[3, 2], 0.5, &[f32::NAN, -0.0]);
    let xs = ramp(&[4, 2], 0.75, &[-0.0, f32::INFINITY]);
    let batched = &eval(&g, &[w.clone(), xs.clone()]).unwrap()[0];
    assert_eq!(batched.shape().dims(), &[4, 3]);
    // Row b is the unbatched product of row b, bit for bit (NaN payloads aside, see `same_bits`).
    let (bv, xv) = (batched.to_vec::<f32>().unwrap(), xs.to_vec::<f32>().unwrap());
    for b in 0..4 {
        let row = Array::from_vec(&[2], xv[2 * b..2 * b + 2].to_vec());
        let one = eval(&f, &[w.clone(), row]).unwrap()[0].to_vec::<f32>().unwrap();
        for j in 0..3 {
            let (p, q) = (one[j], bv[3 * b + j]);
            assert!(p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()), "b {b} j {j}: {p} vs {q}");
        }
    }
}

#[test]
fn accept_sees_the_largest_intermediate_not_only_the_results() {
    // The loop reads back one scalar per step, but the moved outer product is [100, 100] per step:
    // 10 steps of it are 400 kB, which `accept` is told (not the 40 bytes of the results).
    let src = "{ lambda c:f32[] xs:f32[10,100] . let
        d:f32[] = scan[length=10 reverse=false num_consts=0 num_carry=1 body={ lambda c:f32[] x:f32[100] . let
            o:f32[100,100] = dot_general[lhs_contracting=() rhs_contracting=() lhs_batch=() rhs_batch=() preferred_element_type=none] x x
            r:f32[] = reduce_sum[axes=(0,1)] o
            n:f32[] = add c r
          in (n,) }] c xs
      in (d,) }";
    let f = parse(src).unwrap();
    verify(&f).unwrap();
    let seen = RefCell::new(Vec::new());
    let (_, report) = precompute_scan_xs_work(&f, &|_, _, bytes| {
        seen.borrow_mut().push(bytes);
        bytes <= 1 << 18
    });
    assert_eq!(*seen.borrow(), vec![400_000]);
    assert_eq!(report.refused, 1);
}
