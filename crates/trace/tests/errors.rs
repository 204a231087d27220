//! The error policy (DESIGN §4): inside a trace the first bad op is recorded with the op, the user's
//! shapes and the user's file:line, and returned as `Err` from `trace`; eager misuse panics at the
//! caller's line.

use kiln_ir::DType;
use kiln_trace::{Error, Tensor, trace, where_};

fn f32s(shape: &[usize]) -> Tensor {
    Tensor::placeholder(DType::F32, shape)
}

#[test]
fn shape_mismatch_in_trace_names_op_shapes_and_call_site() {
    let line = line!() + 1;
    let r = trace(|(x, y): (Tensor, Tensor)| &x + &y, &(f32s(&[3]), f32s(&[4])));
    let err = r.unwrap_err();
    let Error::Op { op, operands, at, .. } = &err else { panic!("expected an op error, got {err:?}") };
    assert_eq!(op, "add");
    assert_eq!(operands[0].shape.dims(), &[3]);
    assert_eq!(operands[1].shape.dims(), &[4]);
    let at = at.as_ref().expect("a call site");
    assert!(at.file.ends_with("errors.rs"), "{at}");
    assert_eq!(at.line, line);
    let msg = err.to_string();
    assert!(msg.contains("add") && msg.contains("(3,)") && msg.contains("(4,)"), "{msg}");
    assert!(msg.contains(&format!("errors.rs:{line}:")), "{msg}");
}

#[test]
fn broadcast_error_quotes_user_shapes_not_promoted_ones() {
    // JAX #12305: adding (2,4) and (2,) once reported the rank-promoted (1, 2).
    let err = trace(|(x, y): (Tensor, Tensor)| &x + &y, &(f32s(&[2, 4]), f32s(&[2]))).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("(2, 4)") && msg.contains("(2,)"), "{msg}");
    assert!(!msg.contains("(1, 2)"), "{msg}");
}

#[test]
fn broadcast_to_error_quotes_both_shapes() {
    let err = trace(|x: Tensor| x.broadcast_to(&[4, 5]), &f32s(&[3, 4, 5])).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("broadcast_to") && msg.contains("(3, 4, 5)") && msg.contains("(4, 5)"), "{msg}");
}

#[test]
fn first_error_wins() {
    let line = line!() + 3;
    let err = trace(
        |(x, y): (Tensor, Tensor)| {
            let a = &x * &y; // first error: (3,) * (4,)
            let b = &x - &Tensor::placeholder(DType::F32, &[5]).astype(DType::F32);
            &a + &b
        },
        &(f32s(&[3]), f32s(&[4])),
    )
    .unwrap_err();
    let Error::Op { op, at, .. } = &err else { panic!("{err:?}") };
    assert_eq!(op, "mul");
    assert_eq!(at.as_ref().unwrap().line, line);
}

#[test]
fn dtype_mismatch_is_an_error() {
    let err = trace(|(x, y): (Tensor, Tensor)| &x * &y, &(f32s(&[3]), Tensor::placeholder(DType::I32, &[3])))
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("mul") && msg.contains("f32") && msg.contains("i32"), "{msg}");
}

#[test]
fn where_condition_must_be_bool() {
    let err = trace(|x: Tensor| where_(&x, &x, &x), &f32s(&[2])).unwrap_err();
    assert!(err.to_string().contains("where"), "{err}");
}

#[test]
fn eager_misuse_panics_at_the_callers_line() {
    let x = Tensor::from_vec(&[3], vec![1.0f32, 2.0, 3.0]);
    let y = Tensor::from_vec(&[4], vec![1.0f32, 2.0, 3.0, 4.0]);
    let line = line!() + 1;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| &x + &y));
    let payload = r.unwrap_err();
    let msg = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("add") && msg.contains("(3,)") && msg.contains("(4,)"), "{msg}");
    assert!(msg.contains(&format!("errors.rs:{line}:")), "{msg}");
}

#[test]
fn leaked_tracer_is_reported() {
    let mut leaked = None;
    let _ = trace(
        |x: Tensor| {
            leaked = Some(x.clone());
            x
        },
        &f32s(&[2]),
    );
    let leaked = leaked.unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| &leaked + 1.0));
    let payload = r.unwrap_err();
    let msg = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("escaped"), "{msg}");
}

#[test]
fn a_panic_inside_a_trace_leaves_the_trace_stack_clean() {
    let r = std::panic::catch_unwind(|| trace(|_x: Tensor| -> Tensor { panic!("user bug") }, &f32s(&[1])));
    assert!(r.is_err());
    // eager mode works again: no stale trace is left on this thread
    let y = Tensor::scalar(2.0f32) * 3.0;
    assert_eq!(y.item::<f32>(), 6.0);
}

#[test]
fn scalar_literals_on_either_side_type_check() {
    let x = Tensor::from_vec(&[2], vec![1.0f32, 2.0]);
    let a = &x * 2.0;
    let b = 2.0 * &x;
    let c = 1.5 - &x + 0.5f32;
    let d = (2.0 * &x + 1.0) / 4.0;
    assert_eq!(a.to_vec::<f32>(), vec![2.0, 4.0]);
    assert_eq!(b.dtype(), DType::F32);
    assert_eq!(c.to_vec::<f32>(), vec![1.0, 0.0]);
    assert_eq!(d.to_vec::<f32>(), vec![0.75, 1.25]);
}

#[test]
fn every_recorded_equation_points_at_the_users_line() {
    // Regression: closures inside kiln lose `#[track_caller]`, which once made equations of every
    // broadcasting binary op point into kiln's own source.
    use kiln_trace::{methods::All, nn};
    let t = trace(
        |(x, w): (Tensor, Tensor)| {
            let y = (&x * 2.0 + 1.0).roll(1, 0).matmul(&w);
            let z = Tensor::stack(&[y.clone(), y.exp()], 0);
            let s = nn::softmax(&z, -1) + nn::logsumexp(&z, -1).expand_dims(-1);
            (
                s.sum(All) / nn::norm(&x, All),
                x.lt(&x).astype(DType::F32).mean(0),
                x.take(&Tensor::scalar(-1i32), 0),
            )
        },
        &(f32s(&[4, 3]), f32s(&[3, 2])),
    )
    .unwrap();
    for e in &t.function.eqns {
        let at = e.loc.as_ref().expect("every equation has a location");
        assert!(at.file.ends_with("tests/errors.rs"), "{} at {at}", e.prim.name());
    }
}

#[test]
fn scalars_that_an_integer_tensor_cannot_hold_are_errors_not_truncations() {
    // Regression (new-user review): `i32 * 2.5` once gave [6, 14] by truncating the scalar.
    let ints = Tensor::placeholder(DType::I32, &[2]);
    let err = trace(|x: Tensor| &x * 2.5, &ints).unwrap_err();
    assert!(err.to_string().contains("mul") && err.to_string().contains("2.5"), "{err}");
    let err = trace(|x: Tensor| &x * -1.0, &Tensor::placeholder(DType::U32, &[2])).unwrap_err();
    assert!(err.to_string().contains("u32"), "{err}");
    // Integral values (and integer scalars) are fine.
    let x = Tensor::from_vec(&[2], vec![3i32, 7]);
    assert_eq!((&x * 2.0).to_vec::<i32>(), vec![6, 14]);
    assert_eq!((&x * 2i32 + 1u32 as i32).to_vec::<i32>(), vec![7, 15]);
    assert_eq!(Tensor::from_vec(&[2], vec![2.0f32, 3.0]).powf(2.0).to_vec::<f32>(), vec![4.0, 9.0]);
}

#[test]
fn a_float_scalar_dividing_or_divided_by_an_integer_tensor_is_an_error() {
    // Regression (bad-input hunt): `i32[3, -3] / 2.0` gave [1, -1] and `1.0 / i32[1, 2]` gave
    // [1, 0] (truncating lax.div), where the literal and JAX's `/` ask for [1.5, -1.5] and [1, 0.5].
    for (dtype, name) in [(DType::I32, "i32"), (DType::U32, "u32"), (DType::Bool, "bool")] {
        let line = line!() + 1;
        let err = trace(|x: Tensor| &x / 2.0, &Tensor::placeholder(dtype, &[2])).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("div") && msg.contains(name) && msg.contains(&format!("errors.rs:{line}:")),
            "{msg}"
        );
        let err = trace(|x: Tensor| 1.0 / x, &Tensor::placeholder(dtype, &[2])).unwrap_err();
        assert!(err.to_string().contains("astype"), "{err}");
        let err = trace(|x: Tensor| x / 4.0f32, &Tensor::placeholder(dtype, &[2])).unwrap_err();
        assert!(err.to_string().contains("truncates"), "{err}");
    }
    // Integer scalars divide integer tensors as Rust's `/` does (toward zero); floats divide floats.
    let ints = Tensor::from_vec(&[2], vec![7i32, -7]);
    assert_eq!((&ints / 2).to_vec::<i32>(), vec![3, -3]);
    assert_eq!((ints.astype(DType::F32) / 2.0).to_vec::<f32>(), vec![3.5, -3.5]);
    assert_eq!((1.0 / Tensor::from_vec(&[2], vec![2.0f64, -4.0])).to_vec::<f64>(), vec![0.5, -0.25]);
    // `+ - *` with an integral float scalar stay exact on integers.
    assert_eq!((&Tensor::from_vec(&[2], vec![3u32, 7]) + 1.0).to_vec::<u32>(), vec![4, 8]);
}

#[test]
fn a_placeholder_used_as_a_value_is_an_error_at_the_users_line() {
    let line = line!() + 1;
    let err = trace(|x: Tensor| &x + &Tensor::placeholder(DType::F32, &[3]), &f32s(&[3])).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("placeholder") && msg.contains(&format!("errors.rs:{line}:")), "{msg}");
}

#[test]
fn scan_length_errors_point_at_the_users_line() {
    let line = line!() + 3;
    let err = trace(
        |(a, b): (Tensor, Tensor)| {
            kiln_trace::scan(
                |c: Tensor, (x, y): (Tensor, Tensor)| (&c + &(&x + &y), c),
                Tensor::scalar(0.0f32),
                (a, b),
            )
        },
        &(f32s(&[3]), f32s(&[4])),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("leading sizes") && msg.contains(&format!("errors.rs:{line}:")), "{msg}");
}

#[test]
fn sizes_past_isize_are_errors_naming_the_op_and_line() {
    // Regression: element counts were never checked; `broadcast_to([2^63, 2])` panicked inside the
    // interpreter (eager), traced to a type whose size wrapped (a jitted sum of it gave 0), `pad`
    // wrapped its size eagerly, and the constructors panicked in ndarray or in an `expect`.
    let h = 1usize << 63;
    let caught = |f: &dyn Fn() -> Tensor| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let p = r.err().expect("a panic");
        p.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let cases: [(&str, &dyn Fn() -> Tensor); 11] = [
        ("arange", &|| Tensor::arange_step(0.0, 1.0, 1e-300, DType::F32)),
        ("linspace", &|| Tensor::linspace(0.0, 1.0, usize::MAX, DType::F64)),
        ("eye", &|| Tensor::eye(1 << 32, DType::F32)),
        ("segment_sum", &|| {
            Tensor::from_vec(&[1], vec![1f32]).segment_sum(&Tensor::from_vec(&[1], vec![0]), usize::MAX)
        }),
        ("broadcast_in_dim", &|| Tensor::scalar(1f32).broadcast_to(&[h, 2])),
        ("broadcast_in_dim", &|| Tensor::from_vec(&[2], vec![1f32, 2.0]).tile(&[h, 2])),
        ("pad", &|| Tensor::zeros(DType::F32, &[0]).pad(&[(1 << 62, 1 << 62)], 0.0)),
        ("zeros", &|| Tensor::zeros(DType::F32, &[h, 2])),
        ("full", &|| Tensor::full(&[h, 2], 1.0f32)),
        ("iota", &|| kiln_trace::lax::iota(DType::F32, &[h, 2], 0)),
        ("from_vec", &|| Tensor::from_vec(&[h, 2], Vec::<f32>::new())),
    ];
    for (op, f) in cases {
        let msg = caught(f);
        assert!(
            msg.contains(op) && msg.contains("too many elements") && msg.contains("errors.rs"),
            "{op}: {msg}"
        );
    }
    // Traced: the same error, and no function is recorded.
    let err = trace(|x: Tensor| x.broadcast_to(&[h, 2]).sum(kiln_trace::methods::All), &Tensor::scalar(1f32));
    let msg = err.unwrap_err().to_string();
    assert!(msg.contains("broadcast_in_dim") && msg.contains("too many elements"), "{msg}");
}

#[test]
fn addressable_sizes_too_large_to_allocate_are_errors_naming_the_op_and_line() {
    // Regression: a result whose byte size fits `isize` but not memory (`segment_sum(ids, 1 << 40)`,
    // 4 TiB) aborted the process in the allocator ("memory allocation failed"), which no caller can
    // catch. 2^56 f32 elements (256 PiB) exceed any x86-64 address space, so every overcommit
    // policy refuses them; `2^60` f64 elements still fit `isize` (2^63 bytes would not).
    let n = 1usize << 56;
    let caught = |f: &dyn Fn() -> Tensor| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let p = r.err().expect("a panic");
        p.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let one = || Tensor::from_vec(&[1], vec![1f32]);
    let cases: [(&str, &dyn Fn() -> Tensor); 9] = [
        ("segment_sum", &|| one().segment_sum(&Tensor::from_vec(&[1], vec![0]), n)),
        ("broadcast_in_dim", &|| Tensor::scalar(1f32).broadcast_to(&[n, 2])),
        ("pad", &|| one().pad(&[(n, 0)], 0.0)),
        ("iota", &|| kiln_trace::lax::iota(DType::F32, &[n], 0)),
        ("zeros", &|| Tensor::zeros(DType::F32, &[n])),
        ("full", &|| Tensor::full(&[2, n], 1.0f32)),
        ("arange", &|| Tensor::arange(n, DType::F32)),
        ("linspace", &|| Tensor::linspace(0.0, 1.0, n, DType::I32)),
        ("eye", &|| Tensor::eye(1 << 28, DType::F32)),
    ];
    for (op, f) in cases {
        let msg = caught(f);
        assert!(
            msg.contains(op)
                && msg.contains(" PiB, more than this process can allocate")
                && msg.contains("errors.rs"),
            "{op}: {msg}"
        );
    }
    // Traced, nothing is allocated: the program is recorded (its compilation is what refuses it).
    let f = trace(|x: Tensor| x.broadcast_to(&[n]).sum(kiln_trace::methods::All), &Tensor::scalar(1f32));
    assert!(f.is_ok());
    // Sizes under the probe threshold are never refused, and the checked constructors still work.
    assert_eq!(Tensor::linspace(0.0, 1.0, 3, DType::F32).to_vec::<f32>(), vec![0.0, 0.5, 1.0]);
    assert_eq!(Tensor::eye(2, DType::I32).to_vec::<i32>(), vec![1, 0, 0, 1]);
    assert_eq!(Tensor::arange(3, DType::U32).to_vec::<u32>(), vec![0, 1, 2]);
}
