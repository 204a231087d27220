//! The `jit` API: what the cache key holds (signature, static argument, captured constants, flags),
//! `jit_static`, `retrace_every_call`, and the errors for wrong inputs (naming jit, what was expected
//! and given, and the caller's line).

use kiln::ir::Array;
use kiln::prelude::*;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

fn v32(data: &[f32]) -> Tensor {
    Tensor::from_vec(&[data.len()], data.to_vec())
}

/// A closure over a concrete array (the same closure type for any `w`).
fn scale_by(w: Vec<f32>) -> impl Fn(Tensor) -> Tensor {
    let w = v32(&w);
    move |x: Tensor| &x * &w
}

#[test]
fn the_signature_selects_the_program() {
    let f = jit(|xs: Vec<Tensor>| xs.iter().fold(Tensor::scalar(0.0f32), |acc, x| acc + x.sum(All)));
    let one = f.compiled(&vec![v32(&[1.0, 2.0])]).unwrap();
    assert!(Arc::ptr_eq(&one, &f.compiled(&vec![v32(&[5.0, 6.0])]).unwrap()), "same signature");
    // Another tree structure (two leaves), dtype or shape: another program.
    let two = f.compiled(&vec![v32(&[1.0]), v32(&[2.0])]).unwrap();
    let shape = f.compiled(&vec![v32(&[1.0, 2.0, 3.0])]).unwrap();
    assert!(!Arc::ptr_eq(&one, &two) && !Arc::ptr_eq(&one, &shape));
    assert_eq!(f.call(&vec![v32(&[1.0]), v32(&[2.0, 3.0])]).unwrap().item::<f32>(), 6.0);
    let g = jit(|x: Tensor| x.sum(All));
    let f64s = g.call(&Tensor::from_vec(&[2], vec![1.5f64, 2.0])).unwrap();
    assert_eq!((f64s.dtype(), f64s.item::<f64>()), (DType::F64, 3.5));
}

#[test]
fn captured_constants_are_part_of_the_program_key() {
    let x = v32(&[1.0, 2.0, 3.0]);
    // Same closure type, different captured values: different results, different programs.
    let (a, b) = (jit(scale_by(vec![2.0, 2.0, 2.0])), jit(scale_by(vec![3.0, 3.0, 3.0])));
    assert_eq!(a.call(&x).unwrap().to_vec::<f32>(), vec![2.0, 4.0, 6.0]);
    assert_eq!(b.call(&x).unwrap().to_vec::<f32>(), vec![3.0, 6.0, 9.0]);
    assert!(!Arc::ptr_eq(&a.compiled(&x).unwrap(), &b.compiled(&x).unwrap()));
    // Equal values: the same IR, so the process-wide cache shares one program (no recompilation).
    let c = jit(scale_by(vec![2.0, 2.0, 2.0]));
    assert!(Arc::ptr_eq(&a.compiled(&x).unwrap(), &c.compiled(&x).unwrap()));
    // A large constant (printed out of line in the IR text) differing in one element of 1000.
    let big = |last: f32| {
        let mut w = vec![1.0f32; 1000];
        w[999] = last;
        jit(scale_by(w))
    };
    // Both stay alive, so the first program is still in the process-wide cache when the second is traced.
    let ones = v32(&[1.0; 1000]);
    let (one, four) = (big(1.0), big(-4.0));
    assert_eq!(one.call(&ones).unwrap().to_vec::<f32>()[999], 1.0);
    assert_eq!(four.call(&ones).unwrap().to_vec::<f32>()[999], -4.0);
    // -0.0 and 0.0 are different constants (bitwise): 1/(x·w) is -inf or +inf.
    let recip = |w: f32| jit(move |x: Tensor| 1.0 / (&x * w));
    let (pos, neg) = (recip(0.0), recip(-0.0));
    assert_eq!(pos.call(&v32(&[1.0])).unwrap().to_vec::<f32>(), vec![f32::INFINITY]);
    assert_eq!(neg.call(&v32(&[1.0])).unwrap().to_vec::<f32>(), vec![f32::NEG_INFINITY]);
}

#[test]
fn retrace_every_call_sees_interior_mutable_state() {
    let w = RefCell::new(v32(&[2.0, 2.0]));
    let traces = Cell::new(0);
    let f = jit(|x: Tensor| {
        traces.set(traces.get() + 1);
        &x * &*w.borrow()
    })
    .retrace_every_call();
    let x = v32(&[1.0, 5.0]);
    assert_eq!(f.call(&x).unwrap().to_vec::<f32>(), vec![2.0, 10.0]);
    let first = f.compiled(&x).unwrap();
    *w.borrow_mut() = v32(&[-1.0, 0.5]);
    assert_eq!(f.call(&x).unwrap().to_vec::<f32>(), vec![-1.0, 2.5]);
    assert!(!Arc::ptr_eq(&first, &f.compiled(&x).unwrap()), "new constant, new program");
    *w.borrow_mut() = v32(&[2.0, 2.0]);
    assert!(Arc::ptr_eq(&first, &f.compiled(&x).unwrap()), "the first IR again: its program is reused");
    assert_eq!(traces.get(), 5, "traced on every call");
}

#[test]
fn each_static_value_is_traced_once() {
    #[derive(Clone, PartialEq, Eq, Hash)]
    enum Activation {
        Relu,
        Square,
    }
    let traces = Cell::new(0);
    let layer = jit_static(|act: &Activation, (x, b): (Tensor, Tensor)| {
        traces.set(traces.get() + 1);
        let y = &x + &b;
        match act {
            Activation::Relu => y.maximum(&Tensor::scalar(0.0f32)),
            Activation::Square => &y * &y,
        }
    });
    let args = (v32(&[-3.0, 1.0]), v32(&[1.0, 1.0]));
    assert_eq!(layer.call(&Activation::Relu, &args).unwrap().to_vec::<f32>(), vec![0.0, 2.0]);
    assert_eq!(layer.call(&Activation::Square, &args).unwrap().to_vec::<f32>(), vec![4.0, 4.0]);
    assert_eq!(layer.call(&Activation::Relu, &args).unwrap().to_vec::<f32>(), vec![0.0, 2.0]);
    let other = (v32(&[5.0, -7.0]), v32(&[0.0, 0.0]));
    assert_eq!(layer.call(&Activation::Square, &other).unwrap().to_vec::<f32>(), vec![25.0, 49.0]);
    assert_eq!(traces.get(), 2, "one trace per static value");
    // A static argument inside grad is staged like any jitted call.
    let g = grad(|x: Tensor| layer.call(&Activation::Square, &(x, v32(&[1.0, 1.0]))).unwrap().sum(All));
    assert_eq!(g(v32(&[1.0, -2.0])).to_vec::<f32>(), vec![4.0, -2.0]); // 2(x+1)
}

#[test]
fn flags_are_part_of_the_key() {
    let x = v32(&[1.0, 2.0]);
    let plain = jit(|x: Tensor| x.exp());
    let threaded = jit(|x: Tensor| x.exp()).threads(2);
    let fast = jit(|x: Tensor| x.exp()).fast_math(true);
    let (p, t, q) = (plain.compiled(&x).unwrap(), threaded.compiled(&x).unwrap(), fast.compiled(&x).unwrap());
    assert!(!Arc::ptr_eq(&p, &t) && !Arc::ptr_eq(&p, &q) && !Arc::ptr_eq(&t, &q));
    assert_eq!(threaded.call(&x).unwrap().to_vec::<f32>(), plain.call(&x).unwrap().to_vec::<f32>());
}

#[test]
fn the_checkpoint_policy_is_part_of_the_key() {
    // d/dx_i Π x = Π x / x_i, through a 16-step scan: equal under every policy, different programs.
    let prod = |x: Tensor| scan(|c: Tensor, x: Tensor| (&c * &x, ()), Tensor::scalar(1.0f64), x).0;
    let xs = Tensor::from_vec(&[16], (1..=16).map(|i| 1.0 + i as f64 / 16.0).collect());
    let total: f64 = xs.to_vec::<f64>().iter().product();
    let want: Vec<f64> = xs.to_vec::<f64>().iter().map(|x| total / x).collect();
    let g = jit(grad(prod));
    let auto = g.compiled(&xs).unwrap();
    let all = with_checkpoint(Checkpoint::StoreAll, || g.compiled(&xs).unwrap());
    assert!(!Arc::ptr_eq(&auto, &all), "the thread's policy changes the trace");
    let pinned = jit(grad(prod)).checkpoint_policy(Checkpoint::StoreAll);
    assert!(Arc::ptr_eq(&all, &pinned.compiled(&xs).unwrap()));
    for got in [g.call(&xs).unwrap(), pinned.call(&xs).unwrap()] {
        for (a, b) in got.to_vec::<f64>().iter().zip(&want) {
            assert!((a - b).abs() <= 1e-12 * b.abs(), "{a} vs {b}");
        }
    }
}

/// The error's op, message and line (it must point at this file).
fn parts(e: &Error) -> (String, String, u32) {
    let Error::Op { op, message, at: Some(at), .. } = e else {
        panic!("not an op error with a location: {e}")
    };
    assert!(at.file.ends_with("jit_api.rs"), "{e}");
    (op.clone(), message.clone(), at.line)
}

#[test]
fn wrong_arrays_for_a_compiled_program_name_jit_expected_got_and_the_line() {
    let f = jit(|(a, b): (Tensor, Tensor)| &a * &b);
    let c = f.compiled(&(v32(&[1.0, 2.0]), Tensor::scalar(2.0f32))).unwrap();
    let good = [Array::from_vec(&[2], vec![1.0f32, 2.0]), Array::scalar(3.0f32)];
    assert_eq!(c.run(&good).unwrap()[0].to_vec::<f32>().unwrap(), vec![3.0, 6.0]);

    let (line, e) = (line!(), c.run(&good[..1]).unwrap_err());
    let (op, msg, at) = parts(&e);
    assert_eq!((op.as_str(), at), ("jit", line));
    assert_eq!(msg, "expected 2 argument arrays [f32[2], f32[]], got 1 [f32[2]]");

    let (line, e) =
        (line!(), c.run(&[Array::from_vec(&[2], vec![1.0f64, 2.0]), Array::scalar(3.0f32)]).unwrap_err());
    let (_, msg, at) = parts(&e);
    assert_eq!(at, line);
    assert!(msg.starts_with("argument leaf 0 has dtype f64, expected f32"), "{msg}");

    let (line, e) =
        (line!(), c.run(&[Array::from_vec(&[3], vec![1.0f32; 3]), Array::scalar(3.0f32)]).unwrap_err());
    let (_, msg, at) = parts(&e);
    assert_eq!(at, line);
    assert!(msg.starts_with("argument leaf 0 has shape"), "{msg}");
    assert!(msg.contains("expected leaves [f32[2], f32[]], got [f32[3], f32[]]"), "{msg}");
}

#[test]
fn wrong_structure_for_a_specialized_function() {
    let f = jit(|xs: Vec<Tensor>| xs.iter().fold(Tensor::scalar(0.0f32), |acc, x| acc + x.sum(All)));
    let s = f.specialize(&vec![v32(&[1.0, 2.0])]).unwrap();
    assert_eq!(s.call(&vec![v32(&[3.0, 4.0])]).unwrap().item::<f32>(), 7.0);
    let (line, e) = (line!(), s.call(&vec![v32(&[1.0, 2.0]), v32(&[3.0, 4.0])]).unwrap_err());
    let (op, msg, at) = parts(&e);
    assert_eq!((op.as_str(), at), ("jit", line));
    assert_eq!(
        msg,
        "expected arguments of tree structure [T] with leaves [f32[2]], got structure [T, T] with leaves [f32[2], f32[2]]"
    );
    let (line, e) = (line!(), s.call(&vec![Tensor::from_vec(&[2], vec![1i32, 2])]).unwrap_err());
    let (_, msg, at) = parts(&e);
    assert_eq!(at, line);
    assert!(msg.starts_with("argument leaf 0 has dtype i32, expected f32"), "{msg}");
}

#[test]
fn placeholders_bad_donations_and_trace_errors_are_errs() {
    let f = jit(|x: Tensor| x.exp());
    let (line, e) = (line!(), f.call(&Tensor::placeholder(DType::F32, &[2])).unwrap_err());
    let (op, msg, at) = parts(&e);
    assert_eq!((op.as_str(), at), ("jit", line));
    assert!(msg.starts_with("argument leaf 0 is a placeholder of type f32[2]"), "{msg}");

    let d = jit(|(a, b): (Tensor, Tensor)| &a + &b).donate(&[2]);
    let (line, e) = (line!(), d.call_donated((v32(&[1.0]), v32(&[2.0]))).unwrap_err());
    let (op, msg, at) = parts(&e);
    assert_eq!((op.as_str(), at), ("jit", line));
    assert_eq!(msg, "donate argnum 2 is out of range for 2 arguments");

    // A shape error in f: the op and f's line, as a trace error.
    let bad_line = line!() + 1;
    let bad = jit(|x: Tensor| &x + &v32(&[1.0, 2.0, 3.0]));
    let (op, msg, at) = parts(&bad.call(&v32(&[1.0, 2.0])).unwrap_err());
    assert_eq!((op.as_str(), at), ("add", bad_line));
    assert!(msg.contains("(2,) and (3,)"), "{msg}");
}

#[test]
fn compiled_programs_are_send_and_sync() {
    fn check<T: Send + Sync>(_: &T) {}
    let c = jit(|x: Tensor| x.exp()).compiled(&v32(&[1.0])).unwrap();
    check(&c);
    let out =
        std::thread::spawn(move || c.run(&[Array::from_vec(&[1], vec![0.0f32])]).unwrap()).join().unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![1.0]);
}

#[test]
fn programs_too_large_to_allocate_are_errs_at_the_call() {
    // Regression: the arena of a program whose intermediate was addressable but not allocatable
    // (`segment_sum(ids, 1 << 40)`, 4 TiB) aborted the process at the first call. Now compiling it
    // is an error naming the size and the call's line; so is a result of that size. 2^56 f32
    // elements (256 PiB) exceed any x86-64 address space, whatever the overcommit policy.
    let n = 1usize << 56;
    let ids = Tensor::from_vec(&[2], vec![0i32, 1]);
    let f = jit(|(d, ids): (Tensor, Tensor)| d.segment_sum(&ids, n).sum(All));
    let (line, e) = (line!(), f.call(&(v32(&[1.0, 2.0]), ids.clone())).unwrap_err());
    let (op, msg, at) = parts(&e);
    assert_eq!((op.as_str(), at), ("jit", line));
    assert!(
        msg.contains("needs 256.0 PiB for its intermediates, more than this process can allocate"),
        "{msg}"
    );

    let g = jit(|x: Tensor| x.broadcast_to(&[2, n]));
    let (line, e) = (line!(), g.call(&Tensor::scalar(1.0f32)).unwrap_err());
    let (_, msg, at) = parts(&e);
    assert_eq!(at, line);
    assert!(msg.contains("output 0: f32[2,72057594037927936] needs 512.0 PiB, more than"), "{msg}");

    // The same programs at a size that fits run, with the right values.
    let f = jit(|(d, ids): (Tensor, Tensor)| d.segment_sum(&ids, 3).sum(All));
    assert_eq!(f.call(&(v32(&[1.0, 2.0]), ids)).unwrap().item::<f32>(), 3.0);
    let g = jit(|x: Tensor| x.broadcast_to(&[2, 2]));
    assert_eq!(g.call(&Tensor::scalar(1.5f32)).unwrap().to_vec::<f32>(), vec![1.5; 4]);
}
