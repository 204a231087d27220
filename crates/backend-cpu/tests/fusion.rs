//! The greedy fusion rule, seen through kernel counts and values: costly producers are not
//! recomputed per read when their consumer reads an element several times; cheap elementwise
//! producers read by several kernels are recomputed in each, within an evaluation budget.

use kiln_backend_cpu::{CompileOptions, compile, compile_with};
use kiln_ir::{Array, eval, parse};

/// `kernels` counts the fusion's roots (one kernel each, no multi-output grouping); grouped, the
/// same roots may share kernels, with the same values.
fn check(src: &str, args: &[Array], kernels: usize) {
    let f = parse(src).unwrap();
    let one_each = CompileOptions { multi_output: false, ..CompileOptions::default() };
    let exe = compile_with(&f, &one_each).unwrap();
    assert_eq!(exe.kernel_count(), kernels, "kernel count of\n{f}");
    let want = eval(&f, args).unwrap();
    assert_eq!(exe.run(args).unwrap(), want);
    let grouped =
        compile_with(&f, &CompileOptions { multi_output: true, ..CompileOptions::default() }).unwrap();
    assert!(grouped.kernel_count() <= kernels);
    assert_eq!(grouped.run(args).unwrap(), want);
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

#[test]
fn small_dots_are_kernels_with_producers_fused_and_large_ones_gemm_steps() {
    // K = 4 ≤ 16: the dot is one kernel with both cheap producers fused in (`neg s` is re-read once
    // per output row, which fusion allows for cheap ops).
    let src = "{ lambda w:f32[3,4] s:f32[5,4] . let
        w2:f32[3,4] = add w w
        t:f32[5,4] = neg s
        d:f32[3,5] = dot_general[lhs_contracting=(1,) rhs_contracting=(1,) lhs_batch=() rhs_batch=() preferred_element_type=none] w2 t
      in (d,) }";
    let w = Array::from_vec(&[3, 4], (0..12).map(|i| i as f32 * 0.5 - 2.0).collect::<Vec<_>>());
    let s = Array::from_vec(&[5, 4], (0..20).map(|i| 1.0 / (i as f32 + 1.0)).collect::<Vec<_>>());
    check(src, &[w, s], 1);
    // K = 17: a gemm step; its operands are materialized by their own kernels.
    let src = "{ lambda w:f32[3,17] s:f32[5,17] . let
        w2:f32[3,17] = add w w
        d:f32[3,5] = dot_general[lhs_contracting=(1,) rhs_contracting=(1,) lhs_batch=() rhs_batch=() preferred_element_type=none] w2 s
      in (d,) }";
    let f = parse(src).unwrap();
    assert_eq!(compile(&f).unwrap().kernel_count(), 1, "only the add is a kernel");
}

/// A matrix-vector dot is a kernel up to one pairwise block of contraction (256): its in-order sum
/// is then bitwise the interpreter's, which sums longer contractions blocked-pairwise (as
/// `reduce_sum`), so a longer one is a gemm step (within a reduction tolerance, as gemm always is).
#[test]
fn matrix_vector_kernels_stop_at_one_pairwise_block_of_contraction() {
    let matvec = |k: usize| {
        format!(
            "{{ lambda w:f32[4,{k}] x:f32[{k}] . let
        d:f32[4] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] w x
      in (d,) }}"
        )
    };
    // Order-sensitive values: a 1e8 among ones, with the spacing of f32 at 1e8 being 8.
    let args = |k: usize| {
        let mut w: Vec<f32> = vec![1.0; 4 * k];
        w[0] = 1e8;
        [Array::from_vec(&[4, k], w), Array::from_vec(&[k], vec![1.0f32; k])]
    };
    check(&matvec(256), &args(256), 1);
    let f = parse(&matvec(257)).unwrap();
    let exe = compile(&f).unwrap();
    assert_eq!(exe.kernel_count(), 0, "a gemm step");
    let got = exe.run(&args(257)).unwrap()[0].to_vec::<f32>().unwrap();
    let want = eval(&f, &args(257)).unwrap()[0].to_vec::<f32>().unwrap();
    // Rows 1..3 are exactly 257; row 0 (1e8 and 256 ones) within a reduction tolerance of the
    // interpreter's 1e8 (its blocks: 1e8 + 255 ones rounds to 1e8, plus the last block's 1).
    assert_eq!(want[0], 1e8);
    assert_eq!(&got[1..], &want[1..]);
    assert_eq!(&want[1..], &[257.0; 3]);
    assert!((got[0] - want[0]).abs() <= 16.0, "{} against {}", got[0], want[0]);
}

#[test]
fn a_mask_used_by_two_kernels_is_recomputed_in_each() {
    // relu's mask m = (x > 0) | (x != x) feeds two selects that are outputs (two kernel roots): the
    // mask logic is duplicated into both rather than materialized as a bool kernel (2 kernels, not
    // 3), and x's exp below it — not mask logic — is not duplicated (its own kernel: 3 in all).
    let src = "{ lambda x:f32[4] g:f32[4] ; zero:f32[] = 0.0 . let
        z:f32[4] = broadcast_in_dim[shape=(4,) broadcast_dimensions=()] zero
        a:bool[4] = gt x z
        b:bool[4] = ne x x
        m:bool[4] = or a b
        y:f32[4] = select m x z
        h:f32[4] = select m g z
      in (y, h) }";
    let x = v(&[0.5, -1.0, 0.0, f32::NAN]);
    check(src, &[x.clone(), v(&[1.0, 2.0, 3.0, 4.0])], 2);
    let src_exp = "{ lambda x:f32[4] g:f32[4] ; zero:f32[] = 0.0 . let
        z:f32[4] = broadcast_in_dim[shape=(4,) broadcast_dimensions=()] zero
        e:f32[4] = exp x
        m:bool[4] = gt e g
        y:f32[4] = select m x z
        h:f32[4] = select m g z
      in (y, h) }";
    check(src_exp, &[x, v(&[1.0, 2.0, 3.0, 4.0])], 3);
}

#[test]
fn a_message_gather_reads_one_materialized_array() {
    // m = a * b over 3 agents, gathered over 6 edges (each agent read twice): inlining the product
    // would make every edge read two arrays at random positions, so m is a kernel (2 in all).
    let src = "{ lambda a:f32[3] b:f32[3] src:i32[6] . let
        m:f32[3] = mul a b
        g:f32[6] = gather[axis=0 batch_dims=0 mode=clip] m src
      in (g,) }";
    let src_ids = Array::from_vec(&[6], vec![0i32, 1, 2, 2, 1, 0]);
    check(src, &[v(&[1.0, 2.0, 3.0]), v(&[4.0, 5.0, 6.0]), src_ids], 2);
    // The gathered values themselves: a·b = [4, 10, 18] read at the edge sources.
    let exe = compile(&parse(src).unwrap()).unwrap();
    let out = exe.run(&[
        v(&[1.0, 2.0, 3.0]),
        v(&[4.0, 5.0, 6.0]),
        Array::from_vec(&[6], vec![0i32, 1, 2, 2, 1, 0]),
    ]);
    assert_eq!(out.unwrap()[0], v(&[4.0, 10.0, 18.0, 18.0, 10.0, 4.0]));
}

#[test]
fn a_single_array_producer_and_a_small_gather_stay_inline() {
    // neg reads one array: inlined into the edge gather (1 kernel). A gather of 2 rows from a
    // 3-row table of a·b reads less than the table: the product stays inline too (1 kernel).
    let neg = "{ lambda a:f32[3] src:i32[6] . let
        m:f32[3] = neg a
        g:f32[6] = gather[axis=0 batch_dims=0 mode=clip] m src
      in (g,) }";
    check(neg, &[v(&[1.0, 2.0, 3.0]), Array::from_vec(&[6], vec![0i32, 1, 2, 2, 1, 0])], 1);
    let few = "{ lambda a:f32[3] b:f32[3] i:i32[2] . let
        m:f32[3] = mul a b
        g:f32[2] = gather[axis=0 batch_dims=0 mode=clip] m i
      in (g,) }";
    check(few, &[v(&[1.0, 2.0, 3.0]), v(&[4.0, 5.0, 6.0]), Array::from_vec(&[2], vec![2i32, 0])], 1);
}

#[test]
fn nested_concatenates_of_fused_parts_match_the_interpreter() {
    // A cross product a × b stacked (nested concatenate) with a − b, plus an empty operand: one
    // kernel that branches to the part holding each index; values equal the interpreter's bitwise.
    let src = "{ lambda a:f32[2,3] b:f32[2,3] e:f32[2,0] . let
        a0:f32[2,1] = slice[start=(0, 0) limit=(2, 1) strides=(1, 1)] a
        a1:f32[2,1] = slice[start=(0, 1) limit=(2, 2) strides=(1, 1)] a
        a2:f32[2,1] = slice[start=(0, 2) limit=(2, 3) strides=(1, 1)] a
        b0:f32[2,1] = slice[start=(0, 0) limit=(2, 1) strides=(1, 1)] b
        b1:f32[2,1] = slice[start=(0, 1) limit=(2, 2) strides=(1, 1)] b
        b2:f32[2,1] = slice[start=(0, 2) limit=(2, 3) strides=(1, 1)] b
        p:f32[2,1] = mul a1 b2
        q:f32[2,1] = mul a2 b1
        c0:f32[2,1] = sub p q
        r:f32[2,1] = mul a2 b0
        s:f32[2,1] = mul a0 b2
        c1:f32[2,1] = sub r s
        t:f32[2,1] = mul a0 b1
        u:f32[2,1] = mul a1 b0
        c2:f32[2,1] = sub t u
        c:f32[2,3] = concatenate[dimension=1] c0 e c1 c2
        d:f32[2,3] = sub a b
        o:f32[2,6] = concatenate[dimension=1] c d e
      in (o,) }";
    let a = Array::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, -0.5, 4.0, 0.25]);
    let b = Array::from_vec(&[2, 3], vec![4.0f32, 5.0, 6.0, 2.0, -1.0, 3.0]);
    let e = Array::from_vec(&[2, 0], Vec::<f32>::new());
    let f = parse(src).unwrap();
    let out = compile(&f).unwrap().run(&[a.clone(), b.clone(), e.clone()]).unwrap();
    // Hand-computed: (1,2,3)×(4,5,6) = (−3, 6, −3); (−0.5,4,0.25)×(2,−1,3) = (12.25, 2, −7.5).
    let want = Array::from_vec(
        &[2, 6],
        vec![-3.0f32, 6.0, -3.0, -3.0, -3.0, -3.0, 12.25, 2.0, -7.5, -2.5, 5.0, -2.75],
    );
    assert_eq!(out, vec![want]);
    assert_eq!(out, eval(&f, &[a, b, e]).unwrap());
}

#[test]
fn a_stride_one_slice_read_by_two_kernels_is_recomputed_in_each() {
    // s = x[:, 0:1] is read by two kernel roots (two outputs): recomputed in both, no kernel of its
    // own (2 kernels, not 3).
    let src = "{ lambda x:f32[2,3] y:f32[2,1] . let
        s:f32[2,1] = slice[start=(0, 0) limit=(2, 1) strides=(1, 1)] x
        a:f32[2,1] = mul s y
        b:f32[2,1] = add s y
      in (a, b) }";
    let x = Array::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    check(src, &[x, Array::from_vec(&[2, 1], vec![0.5f32, -2.0])], 2);
}

#[test]
fn a_reshape_of_a_materialized_value_shares_its_buffer() {
    // r = reshape(e) changes the last dimension, so it is not recomputed by its two readers, and e
    // is materialized (an output): r needs no step of its own (2 kernels: e and the neg/mul root).
    let src = "{ lambda x:f32[2,3] . let
        e:f32[2,3] = exp x
        r:f32[6] = reshape[new_sizes=(6,)] e
        m:f32[6] = mul r r
        n:f32[6] = neg m
      in (e, n) }";
    let x = Array::from_vec(&[2, 3], vec![0.5f32, -1.0, 0.0, 1.5, 2.0, -0.25]);
    check(src, &[x], 2);
}

#[test]
fn a_cheap_product_read_by_two_kernels_is_recomputed_in_each() {
    // p = a * b feeds two outputs (two kernel roots) and is read twice by one of them: recomputed
    // in both, no kernel of its own (2 kernels, not 3). Values equal the interpreter's bitwise,
    // including NaN, ±inf and -0.0 (recomputing the same ops gives the same bits).
    let src = "{ lambda a:f32[5] b:f32[5] c:f32[5] . let
        p:f32[5] = mul a b
        s:f32[5] = add p c
        q:f32[5] = mul p p
        t:f32[5] = max q c
      in (s, t) }";
    let a = v(&[1.5, -0.0, f32::INFINITY, f32::NAN, 3.0]);
    let b = v(&[2.0, 4.0, 0.0, 1.0, -0.5]);
    let c = v(&[0.25, -0.0, 1.0, 2.0, -7.0]);
    check(src, &[a.clone(), b.clone(), c.clone()], 2);
    // Hand-computed first elements: p = 3, s = 3.25, t = max(9, 0.25) = 9.
    let out = compile(&parse(src).unwrap()).unwrap().run(&[a, b, c]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap()[0], 3.25);
    assert_eq!(out[1].to_vec::<f32>().unwrap()[0], 9.0);
}

#[test]
fn a_compare_select_and_convert_read_by_two_kernels_are_recomputed() {
    // d = min(x, y) is evaluated 4 times per element (twice through `add w w`, once in the mask,
    // once in the select): within the budget, recomputed in both roots with its convert, compare and
    // select (2 kernels, not 4), bitwise equal to the interpreter.
    let src = "{ lambda x:f32[4] y:f32[4] . let
        d:f32[4] = min x y
        w:f64[4] = convert_element_type[dtype=f64] d
        m:bool[4] = lt d y
        s:f32[4] = select m x d
        o1:f64[4] = add w w
        o2:f32[4] = neg s
      in (o1, o2) }";
    check(src, &[v(&[1.0, f32::NAN, -0.0, 5.0]), v(&[2.0, 0.5, 0.0, f32::NEG_INFINITY])], 2);
}

#[test]
fn a_chain_of_twice_read_cheap_values_materializes_every_third() {
    // x[k] = x[k-1] + x[k-1] * c: each x read by two equations. Recomputing all of them would
    // evaluate x[0] 2³⁰ times per element; with the budget of 4 evaluations, x[k-1] (2) and
    // x[k-2] (4) are recomputed below each root and x[k-3] (8) is materialized: roots x30, x27,
    // ..., x3 — 10 kernels (31 before recomputation), values equal to the interpreter's. x0 =
    // neg(a) reads only a parameter, so it is recomputed up to 16 times (`LEAF_FED_LIMIT`): no
    // kernel of its own.
    let n = 30;
    let mut src = String::from("{ lambda a:f32[3] c:f32[3] . let\n x0:f32[3] = neg a\n");
    for k in 1..=n {
        src += &format!(" y{k}:f32[3] = mul x{p} c\n x{k}:f32[3] = add x{p} y{k}\n", p = k - 1);
    }
    src += &format!(" in (x{n},) }}");
    let c = v(&[0.5, -0.25, 0.125]);
    check(&src, &[v(&[1.0, -2.0, 3.5]), c], 10);
}

#[test]
fn a_scaled_parameter_read_at_five_offsets_is_recomputed_in_the_stencil() {
    // The reverse-mode step of W1's periodic diffusion: m = ct * c is read through four pads of
    // slices (the transposed rolls) and a negation. A pad evaluates its operand only inside its
    // own columns, and m reads one array and a broadcast scalar, so it is recomputed at each of
    // the five reads (one kernel, not two). Bitwise equal to the interpreter; with special values
    // too, but for NaN payloads (`-m` flips a NaN's sign, and which NaN an add returns is not
    // specified).
    let n = 64;
    let src = format!(
        "{{ lambda ct:f32[{n}] c:f32[] ; z:f32[] = 0.0 . let
        k:f32[{n}] = broadcast_in_dim[shape=({n},) broadcast_dimensions=()] c
        m:f32[{n}] = mul ct k
        o:f32[{a}] = slice[start=(0,) limit=({a},) strides=(1,)] m
        p:f32[1] = slice[start=({a},) limit=({n},) strides=(1,)] m
        x:f32[1] = slice[start=(0,) limit=(1,) strides=(1,)] m
        y:f32[{a}] = slice[start=(1,) limit=({n},) strides=(1,)] m
        q:f32[{n}] = pad[low=(0,) high=({a},) interior=(0,)] p z
        s:f32[{n}] = pad[low=(1,) high=(0,) interior=(0,)] o z
        w:f32[{n}] = pad[low=(0,) high=(1,) interior=(0,)] y z
        b:f32[{n}] = pad[low=({a},) high=(0,) interior=(0,)] x z
        u:f32[{n}] = neg m
        r1:f32[{n}] = add ct q
        r2:f32[{n}] = add r1 s
        r3:f32[{n}] = add r2 u
        r4:f32[{n}] = add r3 w
        r5:f32[{n}] = add r4 b
      in (r5,) }}",
        a = n - 1
    );
    let ramp: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let half = Array::scalar(0.5f32);
    check(&src, &[v(&ramp), half.clone()], 1);
    let mut special = ramp.clone();
    special[..4].copy_from_slice(&[f32::NAN, f32::INFINITY, -0.0, f32::NEG_INFINITY]);
    special[40] = -0.0;
    let args = [v(&special), Array::scalar(-0.0f32)];
    let f = parse(&src).unwrap();
    let got = compile(&f).unwrap().run(&args).unwrap()[0].to_vec::<f32>().unwrap();
    let want = eval(&f, &args).unwrap()[0].to_vec::<f32>().unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan(), "element {i}: {g} vs {w}");
    }
    // r[i] = ct[i] + m[i-1] - m[i] + m[i+1] (indices mod n), m = ct / 2: r[0] = 31.5 + 0.5 = 32,
    // r[5] = 5 + 2 - 2.5 + 3 = 7.5.
    let out = compile(&parse(&src).unwrap()).unwrap().run(&[v(&ramp), half]).unwrap();
    let r = out[0].to_vec::<f32>().unwrap();
    assert_eq!((r[0], r[5]), (32.0, 7.5));
}

#[test]
fn cheap_products_under_a_wide_broadcast_read_twice_are_materialized() {
    // p = a * b is read by two kernels through [3] → [3,8] broadcasts: 16 evaluations per element,
    // over the budget, so p is a kernel (3 in all).
    let src = "{ lambda a:f32[3] b:f32[3] y:f32[3,8] . let
        p:f32[3] = mul a b
        q:f32[3,8] = broadcast_in_dim[shape=(3, 8) broadcast_dimensions=(0,)] p
        s:f32[3,8] = add q y
        t:f32[3,8] = mul q y
      in (s, t) }";
    let y = Array::from_vec(&[3, 8], (0..24).map(|i| i as f32 - 11.5).collect::<Vec<_>>());
    check(src, &[v(&[1.0, 2.0, 3.0]), v(&[4.0, 5.0, 6.0]), y], 3);
}

#[test]
fn costly_producers_read_by_two_kernels_are_still_materialized() {
    // e = exp(x) and r = x / y are read by two roots each: computed once in their own kernels
    // (4 in all), not recomputed like cheap ops.
    let src = "{ lambda x:f32[3] y:f32[3] . let
        e:f32[3] = exp x
        r:f32[3] = div x y
        s:f32[3] = add e r
        t:f32[3] = sub e r
      in (s, t) }";
    check(src, &[v(&[0.5, -1.0, 0.0]), v(&[2.0, 3.0, -0.0])], 4);
}

#[test]
fn a_cheap_op_over_costly_single_use_producers_is_not_recomputed() {
    // u = sqrt(x) + exp(y) is read by two roots. Recomputing u would leave its sqrt and exp (read
    // only by u, not recomputable) as two kernels of their own: u stays one kernel with both
    // inlined (3 in all, not 4).
    let src = "{ lambda x:f32[3] y:f32[3] . let
        a:f32[3] = sqrt x
        b:f32[3] = exp y
        u:f32[3] = add a b
        s:f32[3] = mul u x
        t:f32[3] = sub u y
      in (s, t) }";
    check(src, &[v(&[4.0, -1.0, 0.0]), v(&[0.5, 3.0, -0.0])], 3);
}

#[test]
fn small_trailing_axes_unroll_and_pick_concatenate_operands_statically() {
    // W4's state update: computed columns stacked into `[R, 4]` (a nested concatenate). The vector
    // path runs each 1-wide piece as a short segment at constant indices, so each element's
    // operand is known when the code is built: the kernel's only branch is its row loop. `t`
    // stacks 3 columns, too short for a vector: the scalar loop nest unrolls its 3-wide axis, and
    // `r`'s 16-element reductions in each of its 3 elements (48 copies, within the cap of 64).
    // `u` has 2 × 3 = 6 elements per row (collapsed to `[37, 6]`, one short vector segment) of
    // 16-element reductions: 96 copies, over the cap, so its reductions loop again. Values equal the interpreter's bitwise, rows split over 1–4 threads.
    let src = "{ lambda x:f32[37,4] y:f32[37,16,3] m:f32[37,16,2,3] . let
        x0:f32[37,1] = slice[start=(0, 0) limit=(37, 1) strides=(1, 1)] x
        x1:f32[37,1] = slice[start=(0, 1) limit=(37, 2) strides=(1, 1)] x
        x2:f32[37,1] = slice[start=(0, 2) limit=(37, 3) strides=(1, 1)] x
        x3:f32[37,1] = slice[start=(0, 3) limit=(37, 4) strides=(1, 1)] x
        a:f32[37,1] = mul x1 x2
        b:f32[37,1] = sub x0 a
        c:f32[37,1] = add x3 x1
        d:f32[37,2] = concatenate[dimension=1] c x0
        s:f32[37,4] = concatenate[dimension=1] b x2 d
        t:f32[37,3] = concatenate[dimension=1] x3 b c
        r:f32[37,3] = reduce_sum[axes=(1,)] y
        u:f32[37,2,3] = reduce_sum[axes=(1,)] m
      in (s, t, r, u) }";
    let f = parse(src).unwrap();
    let fill = |dims: &[usize], seed: u32| {
        let n: usize = dims.iter().product();
        let v = (0..n as u32).map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 64.0 - 7.0);
        Array::from_vec(dims, v.collect())
    };
    let args = [fill(&[37, 4], 1), fill(&[37, 16, 3], 2), fill(&[37, 16, 2, 3], 3)];
    let want = eval(&f, &args).unwrap();
    // Row 0 of `s` and `t` by hand from x[0] = (x0, x1, x2, x3).
    let x = args[0].to_vec::<f32>().unwrap();
    let (b0, c0) = (x[0] - x[1] * x[2], x[3] + x[1]);
    assert_eq!(&want[0].to_vec::<f32>().unwrap()[..4], &[b0, x[2], c0, x[0]]);
    assert_eq!(&want[1].to_vec::<f32>().unwrap()[..3], &[x[3], b0, c0]);
    // Deleted when `dump` drops, also when an assertion fails.
    let dump = tempfile::tempdir().unwrap();
    let dir = dump.path().to_path_buf();
    for threads in 1..=4 {
        let opts = CompileOptions {
            threads: Some(threads),
            min_task_work: Some(0),
            dump_dir: (threads == 1).then(|| dir.clone()),
            multi_output: false,
        };
        let got = compile_with(&f, &opts).unwrap().run(&args).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(g.bitwise_eq(w), "threads {threads}:\n{g:?}\n{w:?}");
        }
    }
    // Branches per kernel, by its root's equation (the dump names it).
    let clifs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|p| p.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "clif"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let branches = |root: &str| {
        let c = clifs.iter().find(|c| c.contains(root)).unwrap_or_else(|| panic!("no kernel with {root}"));
        c.matches("brif").count()
    };
    assert_eq!(branches("root concatenate (equation 8)"), 1, "s: the row loop only");
    assert_eq!(branches("root concatenate (equation 9)"), 1, "t: the row loop only");
    assert_eq!(branches("root reduce_sum (equation 10)"), 1, "r: the row loop only");
    assert!(branches("root reduce_sum (equation 11)") > 1, "u: its reductions loop");
}

#[test]
fn a_column_read_as_a_vector_by_two_kernels_is_recomputed_in_each() {
    // W4's state columns: `x[:, 2:3]` reshaped `[64, 1] → [64]` and read by two kernels. The
    // reshape only drops a unit axis, so each kernel reads the column itself: 2 kernels, not 3.
    // Reshapes adding a trailing unit axis are not recomputed: `[64] → [64, 1]` consumers would
    // lose the vector path.
    let src = "{ lambda x:f32[64,4] y:f32[64] . let
        c:f32[64,1] = slice[start=(0, 2) limit=(64, 3) strides=(1, 1)] x
        v:f32[64] = reshape[new_sizes=(64,)] c
        a:f32[64] = mul v v
        b:f32[64] = add v y
      in (a, b) }";
    let x = Array::from_vec(&[64, 4], (0..256).map(|i| i as f32 * 0.25 - 9.0).collect());
    let y = Array::from_vec(&[64], (0..64).map(|i| 3.0 - i as f32).collect());
    check(src, &[x.clone(), y.clone()], 2);
    // Hand check of row 5: x[5, 2] = (5·4 + 2)·0.25 − 9 = −3.5.
    let out = compile(&parse(src).unwrap()).unwrap().run(&[x, y]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap()[5], 12.25);
    assert_eq!(out[1].to_vec::<f32>().unwrap()[5], -5.5);
}

#[test]
fn a_broadcast_division_under_a_product_read_twice_is_materialized_before_the_broadcast() {
    // m = broadcast(a / b) * y is read by two roots. Recomputing m in both leaves the division
    // (single use, too costly to recompute) a kernel of its own: one root for another, but the
    // division's [3] result is half the size of m's [3,2], so it is the one materialized (W2's
    // backward spring forces). Bytes per call, f32: kernel d reads a, b and writes d (36); s and t
    // each read d and y and write 6 floats (60 each) — 156, where materializing m moved 216
    // (m: 12 + 12 + 24 read, 24 written; s, t: 24 + 24 read, 24 written).
    let src = "{ lambda a:f32[3] b:f32[3] y:f32[3,2] . let
        d:f32[3] = div a b
        q:f32[3,2] = broadcast_in_dim[shape=(3, 2) broadcast_dimensions=(0,)] d
        m:f32[3,2] = mul q y
        s:f32[3,2] = add m y
        t:f32[3,2] = mul m y
      in (s, t) }";
    let y = Array::from_vec(&[3, 2], vec![1.5f32, -2.0, 0.0, -0.0, 3.0, 0.25]);
    let args = [v(&[1.0, -3.0, 0.5]), v(&[4.0, 2.0, -0.25]), y];
    check(src, &args, 3);
    let one_each = CompileOptions { multi_output: false, ..CompileOptions::default() };
    let exe = compile_with(&parse(src).unwrap(), &one_each).unwrap();
    assert_eq!(exe.cost_report().bytes_moved, 156);
}

#[test]
fn a_cheap_product_of_six_arrays_read_by_two_kernels_is_materialized() {
    // t = a·b·c·d·e·g is read by two roots. Recomputed in both, each would read the six arrays
    // again (16 floats of traffic per element in all: 7 read and 1 written per root) where
    // materializing t costs 13 (t: 6 read, 1 written; each root: t and y read, 1 written). So t is
    // a kernel (3 in all), as on W3's backward step once the simplifier had merged its copies.
    let src = "{ lambda a:f32[4] b:f32[4] c:f32[4] d:f32[4] e:f32[4] g:f32[4] y:f32[4] . let
        p:f32[4] = mul a b
        q:f32[4] = mul p c
        r:f32[4] = mul q d
        s:f32[4] = mul r e
        t:f32[4] = mul s g
        u:f32[4] = add t y
        w:f32[4] = mul t y
      in (u, w) }";
    let args: Vec<Array> =
        (0..7).map(|k| v(&[1.5 + k as f32, -0.5, 2.0 - k as f32 * 0.25, 0.125 * k as f32])).collect();
    check(src, &args, 3);
    let one_each = CompileOptions { multi_output: false, ..CompileOptions::default() };
    let exe = compile_with(&parse(src).unwrap(), &one_each).unwrap();
    assert_eq!(exe.cost_report().bytes_moved, 13 * 16);
}

#[test]
fn a_scaled_array_read_by_ten_kernels_is_recomputed_in_each() {
    // m = x·c reads one array and a broadcast scalar: each of its ten readers loads x instead of m,
    // the same bytes, and saves m's kernel and its write (10 kernels, not 11).
    let outs: Vec<String> = (0..10).map(|k| format!("o{k}")).collect();
    let body: String = (0..10).map(|k| format!("        o{k}:f32[4] = add m y{k}\n")).collect();
    let ys: String = (0..10).map(|k| format!(" y{k}:f32[4]")).collect();
    let src = format!(
        "{{ lambda x:f32[4] c:f32[]{ys} . let
        k:f32[4] = broadcast_in_dim[shape=(4,) broadcast_dimensions=()] c
        m:f32[4] = mul x k
{body}      in ({}) }}",
        outs.join(", ")
    );
    let mut args = vec![v(&[1.0, -2.0, 0.5, 3.0]), Array::scalar(0.75f32)];
    args.extend((0..10).map(|k| v(&[k as f32, -0.25, 1.5, -(k as f32)])));
    check(&src, &args, 10);
}
