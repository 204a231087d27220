//! Tests of the verifier: one per invariant (exact location, message substring), several errors at
//! once, nested locations, and valid functions (with control flow) that pass.
//!
//! Most are functions built field by field in Rust, since they must break invariants that no builder
//! or parser lets through. The invariants the text form can express (redefinition, use before
//! definition, typing, sub-functions) are also written as `tests/verify/*.kir` files, each expecting
//! the errors listed in its comments, in order, one per line:
//!
//! ```text
//! # error: eqn 0 (add): input 1: v2 is used before its definition by eqn 1 (neg)
//! ```
//!
//! The location (up to the first `": "`) must match exactly and the rest must be a substring of the
//! message; a file without `# error:` lines must verify. Out-of-range ids, never-defined names and
//! mistyped constants cannot be written in the text form (the parser rejects them), so invariants 1,
//! 4 and 5 are tested in Rust only.

use kiln_ir::{
    Array, BinaryOp, CompareOp, DType, Eqn, Function, Prim, SrcLoc, TensorType, UnaryOp, Var, VerifyError,
    verify,
};
use smallvec::SmallVec;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn ty(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims)
}

fn f32s(dims: &[usize]) -> TensorType {
    ty(DType::F32, dims)
}

fn vars(ids: &[u32]) -> Vec<Var> {
    ids.iter().map(|&i| Var(i)).collect()
}

/// An equation built by hand (no shape rule runs), so it may be ill-formed.
fn eqn(prim: Prim, inputs: &[u32], outputs: &[u32]) -> Eqn {
    Eqn {
        prim,
        inputs: SmallVec::from_vec(vars(inputs)),
        outputs: SmallVec::from_vec(vars(outputs)),
        loc: None,
    }
}

/// A function built field by field, so it may break any invariant.
fn func(types: Vec<TensorType>, params: &[u32], eqns: Vec<Eqn>, outputs: &[u32]) -> Function {
    Function { vars: types, params: vars(params), consts: vec![], eqns, outputs: vars(outputs) }
}

fn neg() -> Prim {
    Prim::Unary(UnaryOp::Neg)
}

fn bin(op: BinaryOp) -> Prim {
    Prim::Binary(op)
}

/// Asserts that verifying `f` gives exactly `expected` errors, in order: each an exact location and
/// a substring of the message.
#[track_caller]
fn check(f: &Function, expected: &[(&str, &str)]) {
    let errors: Vec<VerifyError> = match verify(f) {
        Ok(()) => vec![],
        Err(e) => e.0,
    };
    let shown = errors.iter().map(|e| format!("  {e}\n")).collect::<String>();
    assert_eq!(errors.len(), expected.len(), "got errors:\n{shown}");
    for (e, (loc, msg)) in errors.iter().zip(expected) {
        assert_eq!(e.location, *loc, "got errors:\n{shown}");
        assert!(e.message.contains(msg), "{:?} does not contain {msg:?}; got errors:\n{shown}", e.message);
    }
}

// ---------------------------------------------------------------------------------------------------
// Invariant 1: ids in range.

#[test]
fn inv1_out_of_range_ids_are_reported_everywhere() {
    // One variable; every other id named is out of range. The eqn's input type is unknown, so it is
    // not type-checked (and nothing panics).
    let mut f = func(vec![f32s(&[3])], &[0, 5], vec![eqn(neg(), &[7], &[8])], &[9]);
    f.consts.push(kiln_ir::ConstDef { var: Var(6), value: Arc::new(Array::scalar(1.0f32)) });
    check(
        &f,
        &[
            ("param 1", "v5 is out of range (the function has 1 variables)"),
            ("const 0", "v6 is out of range"),
            ("eqn 0 (neg)", "input 0: v7 is out of range"),
            ("eqn 0 (neg)", "output 0: v8 is out of range"),
            ("output 0", "v9 is out of range"),
        ],
    );
}

#[test]
fn inv1_empty_var_table() {
    // No variables at all, yet ids are named: u32::MAX must not overflow anything.
    let f = func(vec![], &[u32::MAX], vec![], &[0]);
    check(
        &f,
        &[
            ("param 0", "v4294967295 is out of range (the function has 0 variables)"),
            ("output 0", "v0 is out of range"),
        ],
    );
}

#[test]
fn inv1_out_of_range_output_of_typed_eqn() {
    // Inputs are fine so the eqn is type-checked; its out-of-range output has no declared type to
    // compare, which is reported once (by the definition check), not as a type mismatch.
    let f = func(vec![f32s(&[2])], &[0], vec![eqn(neg(), &[0], &[3])], &[0]);
    check(&f, &[("eqn 0 (neg)", "output 0: v3 is out of range (the function has 1 variables)")]);
}

// ---------------------------------------------------------------------------------------------------
// Invariant 2: one definition per variable.

#[test]
fn inv2_redefinitions_name_the_first_definition() {
    let t = f32s(&[3]);
    let mut f =
        func(vec![t.clone(), t.clone()], &[0, 0], vec![eqn(neg(), &[0], &[1]), eqn(neg(), &[0], &[1])], &[1]);
    f.consts.push(kiln_ir::ConstDef {
        var: Var(0),
        value: Arc::new(Array::from_vec(&[3], vec![1.0f32, 2.0, 3.0])),
    });
    check(
        &f,
        &[
            ("param 1", "v0 is already defined by param 0"),
            ("const 0", "v0 is already defined by param 0"),
            ("eqn 1 (neg)", "output 0: v1 is already defined by eqn 0 (neg)"),
        ],
    );
}

#[test]
fn inv2_eqn_defining_the_same_var_twice() {
    // threefry2x32 has two outputs; both named v4.
    let u = ty(DType::U32, &[2]);
    let f =
        func(vec![u.clone(); 5], &[0, 1, 2, 3], vec![eqn(Prim::Threefry2x32, &[0, 1, 2, 3], &[4, 4])], &[4]);
    check(&f, &[("eqn 0 (threefry2x32)", "output 1: v4 is already defined by eqn 0 (threefry2x32)")]);
}

// ---------------------------------------------------------------------------------------------------
// Invariant 3: definition before use.

#[test]
fn inv3_use_before_def_and_never_defined() {
    let t = f32s(&[2]);
    let f = func(
        vec![t.clone(); 6],
        &[0],
        vec![
            eqn(bin(BinaryOp::Add), &[0, 2], &[1]), // v2 is defined only by eqn 1
            eqn(neg(), &[0], &[2]),
            eqn(bin(BinaryOp::Mul), &[3, 0], &[4]), // v3 is defined by nothing
            eqn(neg(), &[5], &[5]),                 // uses its own output
        ],
        &[1, 2, 4, 5],
    );
    check(
        &f,
        &[
            ("eqn 0 (add)", "input 1: v2 is used before its definition by eqn 1 (neg)"),
            ("eqn 2 (mul)", "input 0: v3 is never defined"),
            ("eqn 3 (neg)", "input 0: v5 is used before its definition by eqn 3 (neg)"),
        ],
    );
}

#[test]
fn inv3_params_and_consts_are_defined_before_every_eqn() {
    // Declaration order inside `vars` does not matter: v2 (a const) has a higher id than v1 (an eqn
    // output) and is still usable by eqn 0.
    let t = f32s(&[]);
    let mut f = func(vec![t.clone(); 3], &[0], vec![eqn(bin(BinaryOp::Add), &[0, 2], &[1])], &[1]);
    f.consts.push(kiln_ir::ConstDef { var: Var(2), value: Arc::new(Array::scalar(-0.0f32)) });
    check(&f, &[]);
}

// ---------------------------------------------------------------------------------------------------
// Invariant 4: outputs defined.

#[test]
fn inv4_undefined_output() {
    // Outputs may repeat and may be parameters; v1 is declared but defined by nothing.
    let t = ty(DType::Bool, &[]);
    let f = func(vec![t.clone(), t.clone()], &[0], vec![], &[0, 1, 0]);
    check(&f, &[("output 1", "v1 is never defined")]);
}

// ---------------------------------------------------------------------------------------------------
// Invariant 5: constant types.

#[test]
fn inv5_const_value_type_must_match_its_var() {
    let mut f = func(
        vec![f32s(&[3]), ty(DType::I32, &[]), f32s(&[0, 3]), ty(DType::U32, &[1, 2, 1, 2])],
        &[],
        vec![],
        &[0, 1, 2, 3],
    );
    let consts: [(u32, Array); 4] = [
        (0, Array::from_vec(&[3], vec![f32::NAN, f32::INFINITY, -0.0])), // matches
        (1, Array::scalar(1.0f32)),                                      // dtype differs
        (2, Array::from_vec::<f32>(&[3, 0], vec![])),                    // empty, dims swapped
        (3, Array::from_vec(&[1, 2, 1, 2], vec![1u32, 2, 3, 4])),        // rank 4, matches
    ];
    for (v, a) in consts {
        f.consts.push(kiln_ir::ConstDef { var: Var(v), value: Arc::new(a) });
    }
    check(
        &f,
        &[
            ("const 1", "value has type f32[] but v1 is declared i32[]"),
            ("const 2", "value has type f32[3,0] but v2 is declared f32[0,3]"),
        ],
    );
}

// ---------------------------------------------------------------------------------------------------
// Invariant 6: well-typed equations.

#[test]
fn inv6_shape_rule_rejects_operands() {
    let f = func(
        vec![f32s(&[3]), f32s(&[4]), f32s(&[3])],
        &[0, 1],
        vec![eqn(bin(BinaryOp::Add), &[0, 1], &[2])],
        &[2],
    );
    check(&f, &[("eqn 0 (add)", "ill-typed: add: ")]);
    let message = verify(&f).unwrap_err().0[0].message.clone();
    assert!(message.ends_with("(operands: f32[3], f32[4])"), "{message}");
}

#[test]
fn inv6_wrong_arity_is_a_type_error() {
    // neg of two operands: the rule's error, not a panic.
    let t = f32s(&[]);
    let f = func(vec![t.clone(); 3], &[0, 1], vec![eqn(neg(), &[0, 1], &[2])], &[2]);
    check(&f, &[("eqn 0 (neg)", "ill-typed: neg")]);
}

#[test]
fn inv6_declared_output_type_differs_from_rule() {
    let f = func(
        vec![f32s(&[2, 2]), f32s(&[4]), f32s(&[2, 2])],
        &[0],
        vec![eqn(neg(), &[0], &[1]), eqn(Prim::Compare(CompareOp::Lt), &[0, 0], &[2])],
        &[1, 2],
    );
    check(
        &f,
        &[
            ("eqn 0 (neg)", "output 0: v1 is declared f32[4] but neg gives f32[2,2]"),
            ("eqn 1 (lt)", "output 0: v2 is declared f32[2,2] but lt gives bool[2,2]"),
        ],
    );
}

#[test]
fn inv6_declared_output_count_differs_from_rule() {
    let u = ty(DType::U32, &[]);
    let f = func(
        vec![f32s(&[3]), f32s(&[3]), f32s(&[3]), u.clone(), u.clone(), u.clone(), u.clone(), u.clone()],
        &[0, 3, 4, 5, 6],
        vec![eqn(neg(), &[0], &[1, 2]), eqn(Prim::Threefry2x32, &[3, 4, 5, 6], &[7])],
        &[1, 7],
    );
    check(
        &f,
        &[
            ("eqn 0 (neg)", "declares 2 outputs [f32[3], f32[3]] but neg gives 1 outputs [f32[3]]"),
            (
                "eqn 1 (threefry2x32)",
                "declares 1 outputs [u32[]] but threefry2x32 gives 2 outputs [u32[], u32[]]",
            ),
        ],
    );
}

// ---------------------------------------------------------------------------------------------------
// Invariant 7: sub-functions, with nested locations.

/// `body(carry: f32[3], x: f32[]) -> (carry * x, x)`, with the multiplication ill-typed on purpose
/// when `broken` (carry * carry_of_wrong_shape).
fn scan_body(broken: bool) -> Function {
    // v0 carry f32[3], v1 x f32[], v2 x broadcast to f32[3], v3 product.
    let mut b = func(vec![f32s(&[3]), f32s(&[]), f32s(&[3]), f32s(&[3])], &[0, 1], vec![], &[3, 1]);
    b.eqns.push(eqn(Prim::BroadcastInDim { shape: [3].into(), broadcast_dimensions: vec![] }, &[1], &[2]));
    b.eqns.push(eqn(bin(BinaryOp::Mul), if broken { &[0, 1] } else { &[0, 2] }, &[3]));
    b
}

/// `x: f32[3], xs: f32[5]` → `neg x`, then a scan of `scan_body` over xs with carry `neg x`.
fn with_scan(body: Function) -> Function {
    // v0 x, v1 xs, v2 neg x, v3 final carry, v4 ys.
    let scan = Prim::Scan { length: 5, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(body) };
    func(
        vec![f32s(&[3]), f32s(&[5]), f32s(&[3]), f32s(&[3]), f32s(&[5])],
        &[0, 1],
        vec![eqn(neg(), &[0], &[2]), eqn(scan, &[2, 1], &[3, 4])],
        &[3, 4],
    )
}

#[test]
fn inv7_scan_body_error_is_nested() {
    // Only the body's error: the scan itself is not type-checked while its body is broken.
    check(&with_scan(scan_body(true)), &[("eqn 1 (scan) > body > eqn 1 (mul)", "ill-typed: mul")]);
    check(&with_scan(scan_body(false)), &[]);
}

#[test]
fn inv7_broken_subfunction_never_panics_the_owner() {
    // The body names an output id past its var table: the scan's shape rule would index it, so the
    // scan is not type-checked; only the nested error is reported.
    let mut body = scan_body(false);
    body.outputs[0] = Var(40);
    check(
        &with_scan(body),
        &[("eqn 1 (scan) > body > output 0", "v40 is out of range (the function has 4 variables)")],
    );
}

#[test]
fn inv7_deep_nesting_and_roles() {
    // cond(index, s) with branch 0 = identity and branch 1 = while_loop whose `cond` returns an
    // undefined variable and whose `body` redefines its parameter.
    let s = ty(DType::I32, &[]);
    let bool_s = ty(DType::Bool, &[]);
    let wcond = func(vec![s.clone(), bool_s], &[0], vec![], &[1]);
    let wbody = func(vec![s.clone(), s.clone()], &[0], vec![eqn(neg(), &[0], &[0])], &[0]);
    let wl = Prim::WhileLoop {
        cond: Box::new(wcond),
        body: Box::new(wbody),
        cond_consts: 0,
        body_consts: 0,
        max_iters: Some(3),
    };
    let branch0 = func(vec![s.clone()], &[0], vec![], &[0]);
    let branch1 = func(vec![s.clone(), s.clone()], &[0], vec![eqn(wl, &[0], &[1])], &[1]);
    let mut outer = func(
        vec![s.clone(); 3],
        &[0, 1],
        vec![eqn(Prim::Cond { branches: vec![branch0, branch1] }, &[0, 1], &[2])],
        &[2],
    );
    outer.eqns[0].loc = Some(SrcLoc { file: Arc::from("src/sim.rs"), line: 7, column: 9 });
    check(
        &outer,
        &[
            (
                "eqn 0 (cond) at src/sim.rs:7:9 > branch 1 > eqn 0 (while_loop) > cond > output 0",
                "v1 is never defined",
            ),
            (
                "eqn 0 (cond) at src/sim.rs:7:9 > branch 1 > eqn 0 (while_loop) > body > eqn 0 (neg)",
                "output 0: v0 is already defined by param 0",
            ),
        ],
    );
}

#[test]
fn inv7_every_role_name() {
    // One broken sub-function per role: an output naming var 9 of a one-variable function.
    let bad = || Box::new(func(vec![f32s(&[])], &[0], vec![], &[9]));
    let ok = || Box::new(func(vec![f32s(&[])], &[0], vec![], &[0]));
    let f = func(
        vec![f32s(&[]); 5],
        &[0],
        vec![
            eqn(Prim::CustomJvpCall { fun: ok(), jvp: bad() }, &[0], &[1]),
            eqn(Prim::CustomVjpCall { fun: ok(), fwd: ok(), bwd: bad() }, &[0], &[2]),
            eqn(Prim::Call { body: bad() }, &[0], &[3]),
            eqn(Prim::Checkpoint { body: bad() }, &[0], &[4]),
        ],
        &[4],
    );
    let msg = "v9 is out of range";
    check(
        &f,
        &[
            ("eqn 0 (custom_jvp_call) > jvp > output 0", msg),
            ("eqn 1 (custom_vjp_call) > bwd > output 0", msg),
            ("eqn 2 (call) > body > output 0", msg),
            ("eqn 3 (checkpoint) > body > output 0", msg),
        ],
    );
}

// ---------------------------------------------------------------------------------------------------
// Several errors at once; locations with source positions; Display.

#[test]
fn three_distinct_errors_are_all_reported() {
    // eqn 0 uses v3 before eqn 1 defines it; eqn 1 declares f32[] for a f32[2] result; output 1 (v5)
    // is never defined.
    let f = func(
        vec![f32s(&[2]), f32s(&[2]), f32s(&[]), f32s(&[2]), f32s(&[2]), f32s(&[2])],
        &[0],
        vec![eqn(bin(BinaryOp::Sub), &[0, 3], &[1]), eqn(neg(), &[0], &[2]), eqn(neg(), &[0], &[3])],
        &[1, 5],
    );
    check(
        &f,
        &[
            ("eqn 0 (sub)", "input 1: v3 is used before its definition by eqn 2 (neg)"),
            ("eqn 1 (neg)", "output 0: v2 is declared f32[] but neg gives f32[2]"),
            ("output 1", "v5 is never defined"),
        ],
    );
}

#[test]
fn source_location_is_part_of_the_location() {
    let t = f32s(&[1, 2, 3]);
    let mut f = func(vec![t.clone(); 3], &[0], vec![eqn(neg(), &[0], &[1]), eqn(neg(), &[2], &[1])], &[1]);
    f.eqns[0].loc = Some(SrcLoc { file: Arc::from("src/model.rs"), line: 12, column: 5 });
    f.eqns[1].loc = Some(SrcLoc { file: Arc::from("src/model.rs"), line: 13, column: 1 });
    check(
        &f,
        &[
            ("eqn 1 (neg) at src/model.rs:13:1", "input 0: v2 is never defined"),
            (
                "eqn 1 (neg) at src/model.rs:13:1",
                "output 0: v1 is already defined by eqn 0 (neg) at src/model.rs:12:5",
            ),
        ],
    );
}

#[test]
fn display_lists_each_error_then_the_count() {
    let f = func(vec![f32s(&[])], &[], vec![], &[0, 1]);
    let e = verify(&f).unwrap_err();
    assert_eq!(
        e.to_string(),
        "output 0: v0 is never defined\n\
         output 1: v1 is out of range (the function has 1 variables)\n\
         2 verifier errors detected"
    );
}

// ---------------------------------------------------------------------------------------------------
// Valid functions pass.

#[test]
fn empty_function_passes() {
    check(&Function::new(), &[]);
}

#[test]
fn valid_ranks_zero_to_four_pass() {
    let mut f = Function::new();
    let mut outs = vec![];
    for dims in [&[][..], &[0], &[2, 3], &[1, 0, 2], &[2, 1, 2, 1]] {
        let x = f.add_param(f32s(dims));
        let c = f.add_const(Array::zeros(&f32s(dims)));
        let y = f.push(bin(BinaryOp::Max), &[x, c], None).unwrap()[0];
        outs.push(f.push(Prim::Unary(UnaryOp::IsFinite), &[y], None).unwrap()[0]);
    }
    f.outputs = outs;
    check(&f, &[]);
}

#[test]
fn valid_control_flow_passes() {
    let i32s = ty(DType::I32, &[]);

    // scan: cumulative product of xs: f32[4] with carry f32[] (body(carry, x) -> (carry*x, carry*x)).
    let mut body = Function::new();
    let c = body.add_param(f32s(&[]));
    let x = body.add_param(f32s(&[]));
    let p = body.push(bin(BinaryOp::Mul), &[c, x], None).unwrap()[0];
    body.outputs = vec![p, p];

    // while_loop: count up to a bound (cond_consts = [bound], state = [i]).
    let mut wcond = Function::new();
    let bound = wcond.add_param(i32s.clone());
    let i = wcond.add_param(i32s.clone());
    let lt = wcond.push(Prim::Compare(CompareOp::Lt), &[i, bound], None).unwrap()[0];
    wcond.outputs = vec![lt];
    let mut wbody = Function::new();
    let i = wbody.add_param(i32s.clone());
    let one = wbody.add_const(Array::scalar(1i32));
    let next = wbody.push(bin(BinaryOp::Add), &[i, one], None).unwrap()[0];
    wbody.outputs = vec![next];

    // cond: two branches f32[] -> f32[].
    let branch = |op: UnaryOp| {
        let mut b = Function::new();
        let a = b.add_param(f32s(&[]));
        let r = b.push(Prim::Unary(op), &[a], None).unwrap()[0];
        b.outputs = vec![r];
        b
    };

    let mut f = Function::new();
    let init = f.add_param(f32s(&[]));
    let xs = f.add_param(f32s(&[4]));
    let n = f.add_param(i32s.clone());
    let scan = Prim::Scan { length: 4, reverse: true, num_consts: 0, num_carry: 1, body: Box::new(body) };
    let so = f.push(scan, &[init, xs], None).unwrap();
    assert_eq!(so.len(), 2);
    let zero = f.add_const(Array::scalar(0i32));
    let wl = Prim::WhileLoop {
        cond: Box::new(wcond),
        body: Box::new(wbody),
        cond_consts: 1,
        body_consts: 0,
        max_iters: None,
    };
    let count = f.push(wl, &[n, zero], None).unwrap()[0];
    let sel = Prim::Cond { branches: vec![branch(UnaryOp::Sin), branch(UnaryOp::Cos)] };
    let r = f.push(sel, &[count, so[0]], None).unwrap()[0];
    let called = f.push(Prim::Call { body: Box::new(branch(UnaryOp::Exp)) }, &[r], None).unwrap()[0];
    let remat =
        f.push(Prim::Checkpoint { body: Box::new(branch(UnaryOp::Tanh)) }, &[called], None).unwrap()[0];
    f.outputs = vec![remat, so[1], count];
    check(&f, &[]);
}

// ---------------------------------------------------------------------------------------------------
// The `.kir` files.

fn kir_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verify");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "kir"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "verifier .kir files missing in {}", dir.display());
    files
}

/// The `# error: LOCATION: MESSAGE` expectations of a file, as (location, message substring).
fn expected_errors(src: &str) -> Vec<(String, String)> {
    src.lines()
        .filter_map(|l| l.trim().strip_prefix("# error:"))
        .map(|e| {
            let (loc, msg) = e.trim().split_once(": ").expect("`# error: LOCATION: MESSAGE`");
            (loc.to_string(), msg.trim_end().to_string())
        })
        .collect()
}

#[test]
fn kir_files_report_the_expected_errors() {
    let mut failures = Vec::new();
    for path in kir_files() {
        let src = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let f = match kiln_ir::parse(&src) {
            Ok(f) => f,
            Err(e) => {
                failures.push(format!("{name}: parse error {e}"));
                continue;
            }
        };
        let expected = expected_errors(&src);
        let got = verify(&f).err().map_or_else(Vec::new, |e| e.0);
        let matches = got.len() == expected.len()
            && got.iter().zip(&expected).all(|(g, (loc, msg))| g.location == *loc && g.message.contains(msg));
        if !matches {
            let got: String = got.iter().map(|e| format!("    {e}\n")).collect();
            let want: String = expected.iter().map(|(l, m)| format!("    {l}: ...{m}...\n")).collect();
            failures.push(format!("{name}: expected\n{want}  got\n{got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------------------------
// Never panics.

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    fn arb_prim() -> impl Strategy<Value = Prim> {
        prop_oneof![
            Just(neg()),
            Just(bin(BinaryOp::Add)),
            Just(Prim::Compare(CompareOp::Eq)),
            Just(Prim::Threefry2x32),
            Just(Prim::Reduce { op: kiln_ir::ReduceOp::Sum, axes: vec![0] }),
        ]
    }

    fn arb_eqn() -> impl Strategy<Value = Eqn> {
        (arb_prim(), prop::collection::vec(0u32..8, 0..5), prop::collection::vec(0u32..8, 0..3))
            .prop_map(|(p, i, o)| eqn(p, &i, &o))
    }

    fn arb_function() -> impl Strategy<Value = Function> {
        let types =
            prop::sample::select(vec![f32s(&[]), f32s(&[2]), ty(DType::U32, &[2]), ty(DType::Bool, &[0, 2])]);
        (
            prop::collection::vec(types, 0..6),
            prop::collection::vec(0u32..8, 0..3),
            prop::collection::vec(arb_eqn(), 0..5),
            prop::collection::vec(0u32..8, 0..3),
        )
            .prop_map(|(t, p, e, o)| func(t, &p, e, &o))
    }

    proptest! {
        #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_6c6e),
        ..ProptestConfig::default()
    })]

        /// Any arbitrary function, directly or as a scan body, verifies without panicking, and an
        /// `Ok` means every named id is in range.
        #[test]
        fn verify_never_panics(f in arb_function(), nest in any::<bool>()) {
            let ok = verify(&f).is_ok();
            if ok {
                let n = f.vars.len();
                let ids = f.params.iter().chain(&f.outputs).chain(f.eqns.iter().flat_map(|e| e.inputs.iter().chain(&e.outputs)));
                for v in ids {
                    prop_assert!(v.index() < n);
                }
            }
            if nest {
                let outer = func(vec![f32s(&[2])], &[0], vec![eqn(Prim::Scan { length: 2, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(f) }, &[0], &[0])], &[0]);
                let _ = verify(&outer);
            }
        }
    }
}

#[test]
fn a_parameter_too_large_to_exist_is_reported() {
    // Equation results are refused by their shape rules; a parameter of `[2^63, 2]` f32 has none,
    // and the backend's size arithmetic would wrap on it. `[2^61]` f32 (2^63 bytes) does not fit
    // isize either; `[2^60]` f32 does (it is refused later, by the allocator, not here).
    let f = func(vec![f32s(&[1 << 63, 2]), f32s(&[1 << 61]), f32s(&[1 << 60])], &[0, 1, 2], vec![], &[2]);
    check(&f, &[("param 0", "too many elements"), ("param 1", "too many elements")]);
}
