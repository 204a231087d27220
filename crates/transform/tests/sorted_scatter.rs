//! `sort_scan_scatters`: a scatter-add with loop-invariant indices in a scan body becomes a segment
//! sum over indices sorted once (then hoisted by LICM), with the same bits as the scatter for
//! duplicate, negative and too-large indices and NaN, ±inf, -0.0 and order-sensitive values; and
//! where it must not apply (indices that change per step, a non-zero operand, a one-step scan), the
//! program is left as it was; updates that are a per-step edge array get a segment sum without the
//! sort.

use kiln_ir::{Array, Function, Prim, eval, parse, verify};
use kiln_transform::{hoist_scan_invariants, sort_scan_scatters};
use proptest::prelude::*;

/// W3's backward message pass as a scan of 3 steps over `N = 5` agents and `E = 8` edges:
/// `c' = c + scatter_add(zeros, src, select(dst in range, take(c · x, dst), 0))`, with `src`, `dst`
/// loop constants; `{mode}` is the scatter's (`clip` or `fill`), `{zero}` the operand's scalar.
fn message_scan(mode: &str, zero: &str, length: usize) -> String {
    format!(
        "{{ lambda src:i32[8] dst:i32[8] c:f32[5] xs:f32[{length},5] . let
    d:f32[5] = scan[length={length} reverse=false num_consts=2 num_carry=1 body={{ lambda src:i32[8] dst:i32[8] c:f32[5] x:f32[5] ; n:i32[] = 5, lo:i32[] = 0, z:f32[] = {zero} . let
        y:f32[5] = mul c x
        g:f32[8] = gather[axis=0 batch_dims=0 mode=clip] y dst
        nb:i32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] n
        lob:i32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] lo
        below:bool[8] = lt dst nb
        above:bool[8] = ge dst lob
        m:bool[8] = and below above
        ze:f32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] z
        u:f32[8] = select m g ze
        zn:f32[5] = broadcast_in_dim[shape=(5,) broadcast_dimensions=()] z
        s:f32[5] = scatter_add[axis=0 batch_dims=0 mode={mode}] zn src u
        c2:f32[5] = add c s
      in (c2) }}] src dst c xs
  in (d) }}"
    )
}

fn parsed(src: &str) -> Function {
    let f = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify(&f).unwrap();
    f
}

fn body(f: &Function) -> &Function {
    let scan = f.eqns.iter().find(|e| matches!(e.prim, Prim::Scan { .. })).expect("a scan");
    scan.prim.subfunctions()[0]
}

fn names(f: &Function) -> Vec<&'static str> {
    f.eqns.iter().map(|e| e.prim.name()).collect()
}

/// The rewritten and then hoisted program, checked to verify.
fn rewrite(f: &Function) -> (Function, usize, Function) {
    let (g, n) = sort_scan_scatters(f);
    verify(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
    let (h, _) = hoist_scan_invariants(&g, &|_, _| true);
    verify(&h).unwrap_or_else(|e| panic!("{e}\n{h}"));
    (g, n, h)
}

fn assert_same_bits(f: &Function, g: &Function, args: &[Array]) {
    let (a, b) = (eval(f, args).unwrap(), eval(g, args).unwrap());
    for (x, y) in a.iter().zip(&b) {
        assert!(x.bitwise_eq(y), "{x:?} vs {y:?}\n{f}\n{g}");
    }
}

/// `src`, `dst`, `c0`, `xs` for [`message_scan`] of `length` steps.
fn args(src: Vec<i32>, dst: Vec<i32>, c0: Vec<f32>, length: usize, x: f32) -> [Array; 4] {
    [
        Array::from_vec(&[8], src),
        Array::from_vec(&[8], dst),
        Array::from_vec(&[5], c0),
        Array::from_vec(&[length, 5], vec![x; length * 5]),
    ]
}

#[test]
fn an_invariant_scatter_becomes_a_segment_sum_whose_sort_leaves_the_loop() {
    for mode in ["fill", "clip"] {
        let f = parsed(&message_scan(mode, "0.0", 3));
        let (g, n, h) = rewrite(&f);
        assert_eq!(n, 1, "{mode}");
        let inner = names(body(&g));
        assert!(
            inner.contains(&"segment_sum") && inner.contains(&"sort") && !inner.contains(&"scatter_add"),
            "{g}"
        );
        // After LICM the sort and the permuted edge arrays are computed once, before the loop.
        assert!(names(&h).contains(&"sort") && !names(body(&h)).contains(&"sort"), "{h}");
        // The destination mask became out-of-range ids of the rows it zeroes, also before the
        // loop: the body is the product, the gather and the segment sum (and the carry's add).
        assert_eq!(names(body(&h)), ["mul", "gather", "segment_sum", "add"], "{h}");
        // Row 3 receives y[1] = 3 three times, then y[0] = 1e8, then y[2] = -1e8 (edges 0, 1, 3, 4,
        // 6), and the f32 sum depends on their order (f32 spacing 8 at 1e8): in edge order
        // ((3 + 3 + 3) + 1e8) - 1e8 = 8, while edges reversed give 9. Edge 2 (src -1) and 5 (src 7)
        // are dropped under `fill` and clamped to rows 0 and 4 under `clip`; edge 7 (dst 9) is
        // masked to 0.
        let (src, dst) = (vec![3, 3, -1, 3, 3, 7, 3, 0], vec![1, 1, 3, 1, 0, 4, 2, 9]);
        let c0 = vec![1e8, 3.0, -1e8, 1.0, 2.0];
        let a = args(src.clone(), dst.clone(), c0.clone(), 3, 1.0);
        let rev = |v: &[i32]| v.iter().rev().copied().collect::<Vec<_>>();
        let reversed = args(rev(&src), rev(&dst), c0, 3, 1.0);
        let (ord, back) = (eval(&f, &a).unwrap(), eval(&f, &reversed).unwrap());
        assert!(!ord[0].bitwise_eq(&back[0]), "the edge order shows in the bits: {ord:?}");
        assert_same_bits(&f, &g, &a);
        assert_same_bits(&f, &h, &a);
        // A one-step scan is left alone: the sort could not pay for itself.
        assert_eq!(sort_scan_scatters(&parsed(&message_scan(mode, "0.0", 1))).1, 0);
    }
}

#[test]
fn special_values_and_negative_zero_keep_their_bits() {
    let f = parsed(&message_scan("fill", "0.0", 4));
    let (_, n, h) = rewrite(&f);
    assert_eq!(n, 1);
    let c0 = vec![f32::NAN, -0.0, f32::INFINITY, f32::NEG_INFINITY, 1e-45];
    for x in [1.0, -1.0, 0.0, -0.0, f32::MAX] {
        let a = args(vec![1, 1, 4, 2, 2, 0, 3, 4], vec![2, 1, 1, 3, 4, 0, 0, 1], c0.clone(), 4, x);
        assert_same_bits(&f, &h, &a);
    }
}

#[test]
fn what_the_rewrite_must_leave_alone() {
    // A -0.0 or non-zero operand: `segment_sum` starts from +0.0.
    for zero in ["-0.0", "1.0"] {
        assert_eq!(sort_scan_scatters(&parsed(&message_scan("fill", zero, 3))).1, 0, "operand {zero}");
    }
    // Indices that change per step (the carry, incremented each step).
    let variant = "{ lambda c:i32[8] xs:f32[3,8] . let
    d:i32[8] e:f32[3,5] = scan[length=3 reverse=false num_consts=0 num_carry=1 body={ lambda c:i32[8] x:f32[8] ; z:f32[] = 0.0, one:i32[] = 1 . let
        zn:f32[5] = broadcast_in_dim[shape=(5,) broadcast_dimensions=()] z
        s:f32[5] = scatter_add[axis=0 batch_dims=0 mode=fill] zn c x
        ob:i32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] one
        c2:i32[8] = add c ob
      in (c2, s) }] c xs
  in (d, e) }";
    assert_eq!(sort_scan_scatters(&parsed(variant)).1, 0);
}

/// A mask that changes per step (`take(y, dst) > 0`) stays a `select` of the updates inside the
/// loop; a `-0.0` in place of the masked rows' `+0.0` keeps it too (only all-zero bits are
/// recognised). Both still become sorted segment sums with the scatter's bits.
#[test]
fn per_step_or_negative_zero_masks_stay_selects() {
    let per_step = "{ lambda src:i32[8] dst:i32[8] c:f32[5] xs:f32[3,5] . let
    d:f32[5] = scan[length=3 reverse=false num_consts=2 num_carry=1 body={ lambda src:i32[8] dst:i32[8] c:f32[5] x:f32[5] ; z:f32[] = 0.0 . let
        y:f32[5] = mul c x
        g:f32[8] = gather[axis=0 batch_dims=0 mode=clip] y dst
        ze:f32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] z
        m:bool[8] = gt g ze
        u:f32[8] = select m g ze
        zn:f32[5] = broadcast_in_dim[shape=(5,) broadcast_dimensions=()] z
        s:f32[5] = scatter_add[axis=0 batch_dims=0 mode=fill] zn src u
        c2:f32[5] = add c s
      in (c2) }] src dst c xs
  in (d) }";
    let negative_zero = message_scan("fill", "0.0", 3).replace(
        "ze:f32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] z",
        "zb:f32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] z\n        ze:f32[8] = neg zb",
    );
    for src in [per_step.to_string(), negative_zero] {
        let f = parsed(&src);
        let (_, n, h) = rewrite(&f);
        assert_eq!(n, 1);
        assert!(names(body(&h)).contains(&"select"), "{h}");
        let c0 = vec![1e8, -3.0, -1e8, 1.0, f32::NAN];
        let a = args(vec![3, 3, -1, 3, 3, 7, 3, 0], vec![1, 1, 3, 1, 0, 4, 2, 9], c0, 3, 1.0);
        assert_same_bits(&f, &h, &a);
    }
}

/// Invariant indices, but updates that are a per-step edge array (W2's spring forces): permuting
/// them would be a gather at every step, so the scatter becomes a segment sum over the indices as
/// they are (clamped first under `clip`, a loop-invariant clamp that LICM hoists), with no sort,
/// and the same bits for duplicate, negative and too-large indices and special values.
#[test]
fn per_step_updates_become_an_unsorted_segment_sum() {
    for mode in ["fill", "clip"] {
        let per_step = format!(
            "{{ lambda i:i32[8] c:f32[5] xs:f32[3,8] . let
    d:f32[5] = scan[length=3 reverse=false num_consts=1 num_carry=1 body={{ lambda i:i32[8] c:f32[5] x:f32[8] ; z:f32[] = 0.0 . let
        zn:f32[5] = broadcast_in_dim[shape=(5,) broadcast_dimensions=()] z
        s:f32[5] = scatter_add[axis=0 batch_dims=0 mode={mode}] zn i x
        c2:f32[5] = add c s
      in (c2) }}] i c xs
  in (d) }}"
        );
        let f = parsed(&per_step);
        let (g, n, h) = rewrite(&f);
        assert_eq!(n, 1, "{mode}");
        assert_eq!(names(body(&g)).iter().filter(|&&p| p == "segment_sum").count(), 1, "{g}");
        assert!(!names(body(&h)).iter().any(|&p| p == "sort" || p == "clamp" || p == "scatter_add"), "{h}");
        let xs: Vec<f32> = [1.5, f32::NAN, -0.0, 1e30, -1e30, f32::INFINITY, 0.25, -2.0]
            .iter()
            .cycle()
            .take(24)
            .copied()
            .collect();
        let args = [
            Array::from_vec(&[8], vec![4i32, -1, 2, 4, 7, 0, 2, 4]),
            Array::from_vec(&[5], vec![-0.0f32, 1.0, 2.0, -0.0, 3.0]),
            Array::from_vec(&[3, 8], xs),
        ];
        assert_same_bits(&f, &g, &args);
        assert_same_bits(&f, &h, &args);
    }
}

/// u32 indices under `clip` (clamped before the sort), rows of two elements (`[E, 2]` updates
/// gathered from a `[N, 2]` carry), and a scan nested in another whose indices are the outer
/// loop's constants: each rewritten, the sort hoisted out of both loops, the same bits.
#[test]
fn u32_indices_wide_rows_and_nested_scans() {
    let wide = "{ lambda src:u32[6] dst:u32[6] c:f32[4,2] xs:f32[3] . let
    d:f32[4,2] = scan[length=3 reverse=false num_consts=2 num_carry=1 body={ lambda src:u32[6] dst:u32[6] c:f32[4,2] x:f32[] ; z:f32[] = 0.0 . let
        g:f32[6,2] = gather[axis=0 batch_dims=0 mode=clip] c dst
        xb:f32[6,2] = broadcast_in_dim[shape=(6,2) broadcast_dimensions=()] x
        u:f32[6,2] = mul g xb
        zn:f32[4,2] = broadcast_in_dim[shape=(4,2) broadcast_dimensions=()] z
        s:f32[4,2] = scatter_add[axis=0 batch_dims=0 mode=clip] zn src u
        c2:f32[4,2] = add c s
      in (c2) }] src dst c xs
  in (d) }";
    let f = parsed(wide);
    let (g, n, h) = rewrite(&f);
    assert_eq!(n, 1);
    assert!(names(body(&g)).contains(&"clamp") && !names(body(&h)).contains(&"sort"), "{h}");
    let a = [
        Array::from_vec(&[6], vec![3u32, 9, 0, 3, u32::MAX, 1]),
        Array::from_vec(&[6], vec![0u32, 1, 2, 3, 1, 7]),
        Array::from_vec(&[4, 2], vec![1e8f32, 3.0, 3.0, -1e8, f32::NAN, -0.0, 0.5, f32::INFINITY]),
        Array::from_vec(&[3], vec![1.0f32, -2.0, 0.25]),
    ];
    assert_same_bits(&f, &h, &a);
    // The message scan inside a 2-step outer scan that passes `src`, `dst` through as constants.
    let inner = message_scan("fill", "0.0", 3);
    let inner_body =
        inner.trim_start_matches("{ lambda src:i32[8] dst:i32[8] c:f32[5] xs:f32[3,5] . let").trim_end();
    let inner_body = inner_body.trim_end_matches("in (d) }").trim();
    let nested = format!(
        "{{ lambda src:i32[8] dst:i32[8] c:f32[5] xss:f32[2,3,5] . let
    e:f32[5] = scan[length=2 reverse=false num_consts=2 num_carry=1 body={{ lambda src:i32[8] dst:i32[8] c:f32[5] xs:f32[3,5] . let
        {inner_body}
      in (d) }}] src dst c xss
  in (e) }}"
    );
    let f = parsed(&nested);
    let (_, n, h) = rewrite(&f);
    assert_eq!(n, 1);
    assert!(names(&h).contains(&"sort"), "sorted before both loops: {h}");
    let xss: Vec<f32> = (0..30).map(|i| i as f32 * 0.5 - 7.0).collect();
    let a = [
        Array::from_vec(&[8], vec![3, 3, -1, 3, 3, 7, 3, 0]),
        Array::from_vec(&[8], vec![1, 1, 3, 1, 0, 4, 2, 9]),
        Array::from_vec(&[5], vec![1e8f32, 3.0, -1e8, 1.0, 2.0]),
        Array::from_vec(&[2, 3, 5], xss),
    ];
    assert_same_bits(&f, &h, &a);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    /// Random edge lists (indices in `-2..7` around `N = 5`, so both out-of-range sides) and values
    /// drawn from a set with NaN, ±inf, ±0.0 and magnitudes whose sums depend on order.
    #[test]
    fn random_edge_lists_sum_bitwise_as_the_scatter(
        fill in any::<bool>(),
        src in prop::collection::vec(-2i32..7, 8),
        dst in prop::collection::vec(-2i32..7, 8),
        c0 in prop::collection::vec(prop::sample::select(vec![
            0.0f32, -0.0, 1.0, -3.5, 1e8, -1e8, 3e-39, f32::NAN, f32::INFINITY, f32::NEG_INFINITY,
        ]), 5),
        x in prop::sample::select(vec![1.0f32, -0.5, 1e-3, 7.0]),
    ) {
        let f = parsed(&message_scan(if fill { "fill" } else { "clip" }, "0.0", 3));
        let (_, n, h) = rewrite(&f);
        prop_assert_eq!(n, 1);
        assert_same_bits(&f, &h, &args(src, dst, c0, 3, x));
    }
}
