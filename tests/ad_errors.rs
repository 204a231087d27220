//! Misuse of the autodiff API comes back as `Err` from the enclosing trace (naming the transform,
//! the offending dtype/shape and the user's line), never as a panic deep inside kiln.

use kiln::prelude::*;

fn f32s(shape: &[usize]) -> Tensor {
    Tensor::placeholder(DType::F32, shape)
}

#[test]
fn grad_of_a_non_scalar_output_is_an_error_naming_the_shape() {
    let line = line!() + 1;
    let err = trace(|x: Tensor| grad(|y: Tensor| &y * 2.0)(x), &f32s(&[3])).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("grad") && msg.contains("float scalar") && msg.contains("f32[3]"), "{msg}");
    assert!(msg.contains(&format!("ad_errors.rs:{line}:")), "{msg}");
}

#[test]
fn grad_of_an_integer_output_is_an_error() {
    let err = trace(|x: Tensor| grad(|y: Tensor| y.sum(All).astype(DType::I32))(x), &f32s(&[3])).unwrap_err();
    assert!(err.to_string().contains("i32[]"), "{err}");
}

#[test]
fn grad_with_respect_to_an_integer_argument_names_it() {
    let err = trace(
        |(x, n): (Tensor, Tensor)| {
            grad(|(x, n): (Tensor, Tensor)| (&x * &n.astype(DType::F32)).sum(All))((x, n))
        },
        &(f32s(&[2]), Tensor::placeholder(DType::I32, &[2])),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("leaf 1") && msg.contains("i32") && msg.contains("float"), "{msg}");
    // Excluding it with argnums works: d/dx sum(x * n) = n.
    let g = grad_argnums(|(x, n): (Tensor, Tensor)| (&x * &n.astype(DType::F64)).sum(All), &[0])((
        Tensor::from_vec(&[2], vec![1.0f64, 2.0]),
        Tensor::from_vec(&[2], vec![3i32, -4]),
    ));
    assert_eq!(g.0.to_vec::<f64>(), vec![3.0, -4.0]);
    assert_eq!(g.1.to_vec::<i32>(), vec![0, 0]);
}

#[test]
fn a_shape_error_inside_a_differentiated_function_is_an_err_at_the_users_line() {
    let line = line!() + 2;
    let err = trace(
        |x: Tensor| vmap(grad(|y: Tensor| (&y + &Tensor::zeros(DType::F32, &[5])).sum(All)), 0, 0)(x),
        &f32s(&[4, 3]),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("add") && msg.contains("(3,)") && msg.contains("(5,)"), "{msg}");
    assert!(msg.contains(&format!("ad_errors.rs:{line}:")), "{msg}");
}

/// Regression: the equations `custom_vjp`, `custom_jvp` and `checkpoint` bind were attributed to
/// kiln's `src/custom.rs`, so forward-mode differentiation of a `custom_vjp` function reported "at
/// src/custom.rs:40:17" and the IR printed that location.
#[test]
fn custom_rule_equations_carry_the_users_line() {
    let x = Tensor::from_vec(&[2], vec![0.0f32, 1.0]);
    let line = line!() + 1;
    let f = custom_vjp(|x: Tensor| x.sin(), |x: Tensor| (x.sin(), x.cos()), |c: Tensor, g: Tensor| c * g);
    let err = trace(|x: Tensor| jvp(&f, x.clone(), x).1, &x).unwrap_err().to_string();
    assert!(err.contains("custom_vjp_call") && err.contains(&format!("ad_errors.rs:{line}:")), "{err}");
    let (ck_line, jvp_line) = (line!() + 1, line!() + 2);
    let ck = checkpoint(|x: Tensor| x.sin());
    let cj = custom_jvp(|x: Tensor| x.sin(), |x: Tensor, t: Tensor| (x.sin(), x.cos() * t));
    let ir = trace(|x: Tensor| ck(cj(x)), &x).unwrap().function.to_string();
    // The bound equations' own locations (the bodies' equations sit on the same lines).
    for line in [ck_line, jvp_line] {
        assert!(ir.contains(&format!("ad_errors.rs\":{line}:")), "{ir}");
    }
    assert!(!ir.contains("custom.rs"), "{ir}");
}

#[test]
#[should_panic(expected = "float scalar")]
fn eager_grad_of_a_non_scalar_output_panics() {
    let _ = grad(|y: Tensor| &y * 2.0)(Tensor::from_vec(&[2], vec![1.0f32, 2.0]));
}

#[test]
fn jacobians_of_an_integer_input_are_errors_naming_it() {
    // Regression: `jacfwd` of an i32 input returned i32 zeros; JAX refuses it, as `grad` does here.
    let i32s = Tensor::placeholder(DType::I32, &[3]);
    let line = line!() + 1;
    let err = trace(|x: Tensor| jacfwd(|y: Tensor| &y * 2)(x), &i32s).unwrap_err().to_string();
    assert!(err.contains("jacfwd") && err.contains("i32[3]") && err.contains("float"), "{err}");
    assert!(err.contains(&format!("ad_errors.rs:{line}:")), "{err}");
    let err = trace(|x: Tensor| jacrev(|y: Tensor| &y * 2)(x), &i32s).unwrap_err().to_string();
    assert!(err.contains("jacrev") && err.contains("i32[3]"), "{err}");
    // Code after the failed Jacobian sees its shape, out ++ in (it saw `x`'s: [3], not [2, 3]).
    let shapes = std::cell::RefCell::new(Vec::new());
    let _ = trace(
        |x: Tensor| {
            let f = |y: Tensor| y.slice_axis(0, Some(0), Some(2), 1) * 2;
            let (a, b) = (jacfwd(f)(x.clone()), jacrev(f)(x));
            shapes.borrow_mut().extend([a.ty().to_string(), b.ty().to_string()]);
            a + b
        },
        &i32s,
    );
    assert_eq!(*shapes.borrow(), ["f32[2,3]", "f32[2,3]"]);
    // A non-float output too (JAX's jacrev refuses it; its cotangents would be integer zeros).
    let err =
        trace(|x: Tensor| jacrev(|y: Tensor| y.astype(DType::I32))(x), &f32s(&[3])).unwrap_err().to_string();
    assert!(err.contains("jacrev") && err.contains("float output") && err.contains("i32[3]"), "{err}");
    // Eagerly, a panic with the same message; floats are unaffected: d(2y)/dy = 2I.
    let eager =
        std::panic::catch_unwind(|| jacfwd(|y: Tensor| &y * 2)(Tensor::from_vec(&[2], vec![1i32, 2])));
    let msg = eager.err().and_then(|p| p.downcast_ref::<String>().cloned()).unwrap_or_default();
    assert!(msg.contains("jacfwd") && msg.contains("float"), "{msg}");
    let j = jacfwd(|y: Tensor| &y * 2.0)(Tensor::from_vec(&[2], vec![1.0f32, 2.0]));
    assert_eq!(j.to_vec::<f32>(), vec![2.0, 0.0, 0.0, 2.0]);
}

#[test]
fn transforms_numbering_more_positions_than_i32_holds_are_errors() {
    // Regression: the gradients of `sort` (jvp and vjp) and (once) `cummax`, and vmap of a
    // `dynamic_update_slice` with batched starts, number positions with an i32 `iota`; on an axis
    // longer than 2^31 its values wrapped and the gradient went to the wrong elements. The `iota`
    // is now refused, reported as the transform's error at the user's line (traced on placeholders:
    // nothing of that size is allocated). The vmap case then panicked in `Batched::elem_type`: the
    // failed op's stand-in result was an `f32[]`; replays now stop at the first error.
    let long = (1usize << 31) + 100;
    let needles = ["iota", "cannot number the 2147483748 positions", "ad_errors.rs"];
    let check = |err: kiln::Error| {
        let msg = err.to_string();
        assert!(needles.iter().all(|n| msg.contains(n)), "{msg}");
    };
    let loss = |y: Tensor| y.sort(0).slice_axis(0, Some(0), Some(1), 1).sum(All);
    check(trace(|x: Tensor| grad(loss)(x), &f32s(&[long])).unwrap_err());
    check(trace(|x: Tensor| jvp(loss, x.clone(), x).1, &f32s(&[long])).unwrap_err());
    // `cummax`'s gradient now numbers nothing (segmented running sums), so it traces at that length.
    assert!(trace(|x: Tensor| grad(|y: Tensor| y.cummax(0, false).sum(All))(x), &f32s(&[long])).is_ok());
    let dus = |(x, s): (Tensor, Tensor)| {
        kiln::lax::dynamic_update_slice(&x, &Tensor::zeros(DType::F32, &[1]), &[s])
    };
    let starts = Tensor::placeholder(DType::I32, &[2]);
    check(
        trace(|(x, s): (Tensor, Tensor)| vmap(dus, 0, 0)((x, s)), &(f32s(&[2, long]), starts)).unwrap_err(),
    );
    // Inside control flow the failing rule runs in a sub-function's trace (`trace_function`), which
    // panicked with "a transform produced invalid IR"; the error now reaches the user's trace.
    let in_scan = |y: Tensor| {
        let (c, ()) = scan_with(
            |c: Tensor, (): ()| (c.sort(0), ()),
            y,
            (),
            ScanOptions { length: Some(2), reverse: false },
        );
        c.slice_axis(0, Some(0), Some(1), 1).sum(All)
    };
    check(trace(|x: Tensor| grad(in_scan)(x), &f32s(&[long])).unwrap_err());
    check(trace(|x: Tensor| jvp(in_scan, x.clone(), x).1, &f32s(&[long])).unwrap_err());
    let in_cond = |(x, s): (Tensor, Tensor)| {
        let p = x.sum(All).gt(&Tensor::scalar(0.0f32));
        cond(&p, |(x, s): (Tensor, Tensor)| dus((x, s)), |(x, _): (Tensor, Tensor)| x, (x, s))
    };
    let starts = Tensor::placeholder(DType::I32, &[2]);
    check(
        trace(|(x, s): (Tensor, Tensor)| vmap(in_cond, 0, 0)((x, s)), &(f32s(&[2, long]), starts))
            .unwrap_err(),
    );
    // The same programs on a short axis give the right values: d/dx min(x) is 1 at the minimum.
    let x = Tensor::from_vec(&[3], vec![2.0f32, -1.0, 5.0]);
    assert_eq!(grad(loss)(x.clone()).to_vec::<f32>(), vec![0.0, 1.0, 0.0]);
    assert_eq!(grad(in_scan)(x.clone()).to_vec::<f32>(), vec![0.0, 1.0, 0.0]);
    // cummax([2, -1, 5]) = [2, 2, 5]: x0 feeds two outputs, x2 one.
    assert_eq!(grad(|y: Tensor| y.cummax(0, false).sum(All))(x).to_vec::<f32>(), vec![2.0, 0.0, 1.0]);
}
