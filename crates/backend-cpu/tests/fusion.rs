//! The greedy fusion rule, seen through kernel counts and values: costly producers are not
//! recomputed per read when their consumer reads an element several times.

use kiln_backend_cpu::compile;
use kiln_ir::{Array, eval, parse};

fn check(src: &str, args: &[Array], kernels: usize) {
    let f = parse(src).unwrap();
    let exe = compile(&f).unwrap();
    assert_eq!(exe.kernel_count(), kernels, "kernel count of\n{f}");
    let want = eval(&f, args).unwrap();
    assert_eq!(exe.run(args).unwrap(), want);
}

fn v(x: &[f32]) -> Array {
    Array::from_vec(&[x.len()], x.to_vec())
}

#[test]
fn tanh_under_a_growing_broadcast_is_computed_once() {
    // t = tanh(x) is read twice per element by the [3,2] broadcast: it gets its own kernel (2 in all).
    let src = "{ lambda x:f32[3] y:f32[3,2] . let
        t:f32[3] = tanh x
        b:f32[3,2] = broadcast_in_dim[shape=(3, 2) broadcast_dimensions=(0,)] t
        z:f32[3,2] = mul b y
      in (z,) }";
    let y = Array::from_vec(&[3, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    check(src, &[v(&[0.5, -1.0, 0.0]), y], 2);
}

#[test]
fn cheap_producers_under_a_broadcast_stay_inline() {
    // t = x * x is cheap: recomputed per read, one kernel.
    let src = "{ lambda x:f32[3] y:f32[3,2] . let
        t:f32[3] = mul x x
        b:f32[3,2] = broadcast_in_dim[shape=(3, 2) broadcast_dimensions=(0,)] t
        z:f32[3,2] = mul b y
      in (z,) }";
    let y = Array::from_vec(&[3, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    check(src, &[v(&[0.5, -1.0, 0.0]), y], 1);
}

#[test]
fn exp_feeding_elementwise_ops_stays_inline() {
    // One read per element: exp fuses into the add (one kernel).
    let src = "{ lambda x:f32[3] y:f32[3] . let
        e:f32[3] = exp x
        z:f32[3] = add e y
      in (z,) }";
    check(src, &[v(&[0.5, -1.0, 0.0]), v(&[1.0, 2.0, 3.0])], 1);
}

#[test]
fn a_costly_producer_below_a_cheap_repeated_one_is_materialized() {
    // s = exp(x) → m = s * 2 (cheap, inlined) → concatenated with itself twice: every operand of a
    // concatenate is evaluated at every output index, so exp becomes a root (2 kernels).
    let src = "{ lambda x:f32[3] ; two:f32[] = 2.0 . let
        s:f32[3] = exp x
        tw:f32[3] = broadcast_in_dim[shape=(3,) broadcast_dimensions=()] two
        m:f32[3] = mul s tw
        n:f32[3] = neg x
        c:f32[6] = concatenate[dimension=0] m n
      in (c,) }";
    check(src, &[v(&[0.5, -1.0, 0.0])], 2);
}
