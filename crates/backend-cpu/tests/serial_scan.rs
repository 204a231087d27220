//! Scan bodies made only of kernels on the calling thread run with their kernel tables filled once
//! per loop, each step rewriting only the entries of the carries, xs and ys
//! (`runtime::serial`). Results must be the interpreter's bitwise (the bodies here use exact
//! operations only), on every thread count, for forward and reversed scans of several lengths,
//! with an identity carry and an xs passed through as ys (outputs copied in after the kernels).

mod common;

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::{Array, Function, eval, parse};

fn opts(threads: usize) -> CompileOptions {
    CompileOptions { threads: Some(threads), dump_dir: None, min_task_work: None, multi_output: true }
}

/// The plan listing of `f` compiled on `threads` threads.
fn plan_text(f: &Function, threads: usize) -> String {
    common::plan_text(f, &opts(threads))
}

/// A W2-like spring step over 5 masses and 12 springs: both ends' positions gathered, their
/// difference scaled by the step's xs row, summed into the masses by both end ids (a segment
/// kernel of two outputs), the positions moved by the difference; `k` is carried unchanged, the
/// xs row is passed through as ys, and each mass's coordinate sum is another ys.
fn springs(length: usize, reverse: bool) -> Function {
    let src = format!(
        "{{ lambda a:i32[12] b:i32[12] x0:f32[5,2] k0:f32[3] xs:f32[{length},12] . let
    xf:f32[5,2] kf:f32[3] ys:f32[{length},5] wf:f32[{length},12] = scan[length={length} reverse={reverse} num_consts=2 num_carry=2 body={{ lambda a:i32[12] b:i32[12] x:f32[5,2] k:f32[3] w:f32[12] ; h:f32[] = 0.25 . let
        xa:f32[12,2] = gather[axis=0 batch_dims=0 mode=clip] x a
        xb:f32[12,2] = gather[axis=0 batch_dims=0 mode=clip] x b
        d:f32[12,2] = sub xb xa
        wb:f32[12,2] = broadcast_in_dim[shape=(12, 2) broadcast_dimensions=(0,)] w
        f:f32[12,2] = mul d wb
        sa:f32[5,2] = segment_sum[num_segments=5] f a
        sb:f32[5,2] = segment_sum[num_segments=5] f b
        s:f32[5,2] = sub sa sb
        hb:f32[5,2] = broadcast_in_dim[shape=(5, 2) broadcast_dimensions=()] h
        m:f32[5,2] = mul s hb
        x2:f32[5,2] = add x m
        r:f32[5] = reduce_sum[axes=(1,)] x2
      in (x2, k, r, w) }}] a b x0 k0 xs
  in (xf, kf, ys, wf) }}"
    );
    parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

#[test]
fn serial_scan_bodies_keep_their_tables_and_match_the_interpreter_bitwise() {
    // Runs of equal ids and ids out of range (dropped by segment_sum, clipped by gather).
    let a = Array::from_vec(&[12], vec![0i32, 0, 0, 1, 1, 2, 3, 3, 4, -1, 2, 5]);
    let b = Array::from_vec(&[12], vec![1i32, 2, 4, 2, 3, 3, 4, 0, 0, 1, 7, 4]);
    let x0 = Array::from_vec(&[5, 2], vec![0.1f32, -0.3, 0.7, 0.2, -0.5, 0.9, 0.3, -0.8, 1.1, 0.4]);
    let k0 = Array::from_vec(&[3], vec![-0.0f32, f32::NAN, f32::INFINITY]);
    for length in [1, 2, 7] {
        // Finite weights (a NaN would spread to every mass; the identity carry holds the
        // specials), one of them -0.0.
        let w: Vec<f32> = (0..length * 12)
            .map(|i| if i == 12 * length - 5 { -0.0 } else { ((i * 37 % 23) as f32 - 11.0) / 16.0 })
            .collect();
        let xs = Array::from_vec(&[length, 12], w);
        let args = [a.clone(), b.clone(), x0.clone(), k0.clone(), xs];
        for reverse in [false, true] {
            let f = springs(length, reverse);
            let want = eval(&f, &args).unwrap();
            for threads in [1, 2] {
                let plan = plan_text(&f, threads);
                assert!(plan.contains("kernel tables kept across steps"), "{plan}");
                let got = compile_with(&f, &opts(threads)).unwrap().run(&args).unwrap();
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        g.bitwise_eq(w),
                        "output {k}, length {length}, reverse {reverse}, {threads} threads:\n{g:?}\n{w:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_body_with_a_runtime_step_runs_step_by_step() {
    // A sort in the body is a runtime routine: the body runs through the general step loop.
    let src = "{ lambda x0:f32[8] . let
    xf:f32[8] = scan[length=3 reverse=false num_consts=0 num_carry=1 body={ lambda x:f32[8] . let
        n:f32[8] = neg x
        s:f32[8] = sort[dimension=0 num_keys=1] n
      in (s,) }] x0
  in (xf,) }";
    let f = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let plan = plan_text(&f, 1);
    assert!(plan.contains("runs 3 times") && !plan.contains("kernel tables kept"), "{plan}");
    let x0 = Array::from_vec(&[8], vec![3.0f32, -1.0, 0.5, 2.0, -0.0, 7.0, -4.0, 1.0]);
    let got = compile_with(&f, &opts(1)).unwrap().run(std::slice::from_ref(&x0)).unwrap();
    assert!(got[0].bitwise_eq(&eval(&f, &[x0]).unwrap()[0]));
}
