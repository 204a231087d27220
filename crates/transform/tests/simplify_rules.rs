//! One test per rewrite rule: a tiny program before/after, evaluated bitwise equal on special values
//! (NaN, ±inf, -0.0, out-of-range indices), with the rule named in the report; side-condition rules
//! are also tested where the condition fails (not rewritten).

mod simplify_common;

use kiln_ir::{Function, parse, verify};
use kiln_transform::{CostModel, SimplifyOptions, SimplifyReport, simplify};
use simplify_common::{assert_same_values, special, untimed};

fn run(src: &str, fast_math: bool) -> (Function, Function, SimplifyReport) {
    let f = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify(&f).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let (g, report) = simplify(&f, &SimplifyOptions { fast_math, ..untimed() });
    verify(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
    (f, g, report)
}

/// The rule fires, the program gets no longer, and values are bitwise equal.
fn fires(rule: &str, src: &str) -> Function {
    let (f, g, report) = run(src, false);
    assert!(report.fired(rule) > 0, "{rule} did not fire:\n{report}\n{f}\n{g}");
    assert!(g.eqns.len() <= f.eqns.len(), "{rule}: program grew\n{f}\n{g}");
    assert_same_values(&f, &g);
    g
}

/// The rule does not fire (its side condition fails, or it needs fast math), and values are equal.
fn does_not_fire(rule: &str, src: &str, fast_math: bool) {
    let (f, g, report) = run(src, fast_math);
    assert_eq!(report.fired(rule), 0, "{rule} fired:\n{report}\n{f}\n{g}");
    assert_same_values(&f, &g);
}

fn splat_prog(value: &str, op: &str, const_first: bool) -> String {
    let (l, r) = if const_first { ("c", "a") } else { ("a", "c") };
    format!(
        "{{ lambda a:f32[16] ; b:f32[] = {value} . let
            c:f32[16] = broadcast_in_dim[shape=(16,) broadcast_dimensions=()] b
            d:f32[16] = {op} {l} {r}
          in (d) }}"
    )
}

#[test]
fn mul_one() {
    let g = fires("mul_one", &splat_prog("1.0", "mul", true));
    assert!(g.eqns.is_empty());
    fires("mul_one", &splat_prog("1.0", "mul", false));
}

#[test]
fn div_one() {
    assert!(fires("div_one", &splat_prog("1.0", "div", false)).eqns.is_empty());
}

#[test]
fn add_neg_zero_and_not_positive_zero() {
    assert!(fires("add_neg_zero", &splat_prog("-0.0", "add", false)).eqns.is_empty());
    fires("add_neg_zero", &splat_prog("-0.0", "add", true));
    // x + 0.0 turns -0.0 into +0.0: kept.
    does_not_fire("add_neg_zero", &splat_prog("0.0", "add", false), false);
}

#[test]
fn sub_zero_and_not_negative_zero() {
    assert!(fires("sub_zero", &splat_prog("0.0", "sub", false)).eqns.is_empty());
    // x - (-0.0) = x + 0.0: kept.
    does_not_fire("sub_zero", &splat_prog("-0.0", "sub", false), false);
}

#[test]
fn mul_neg_one() {
    let g = fires("mul_neg_one", &splat_prog("-1.0", "mul", false));
    assert_eq!(g.eqns.len(), 1);
    assert_eq!(g.eqns[0].prim.name(), "neg");
}

#[test]
fn neg_neg() {
    let g = fires("neg_neg", "{ lambda a:f32[16] . let b:f32[16] = neg a  c:f32[16] = neg b in (c) }");
    assert!(g.eqns.is_empty());
}

#[test]
fn sub_neg() {
    let g = fires(
        "sub_neg",
        "{ lambda a:f32[16] b:f32[16] . let c:f32[16] = neg b  d:f32[16] = sub a c in (d) }",
    );
    assert_eq!(g.eqns.len(), 1);
    assert_eq!(g.eqns[0].prim.name(), "add");
}

#[test]
fn add_neg() {
    for body in ["d:f32[16] = add a c", "d:f32[16] = add c a"] {
        let g = fires(
            "add_neg",
            &format!("{{ lambda a:f32[16] b:f32[16] . let c:f32[16] = neg b  {body} in (d) }}"),
        );
        assert_eq!(g.eqns.len(), 1);
        assert_eq!(g.eqns[0].prim.name(), "sub");
    }
}

#[test]
fn div_pow2_and_not_other_divisors() {
    let g = fires("div_pow2", &splat_prog("0.25", "div", false));
    assert!(g.eqns.iter().any(|e| e.prim.name() == "mul") && g.eqns.iter().all(|e| e.prim.name() != "div"));
    fires("div_pow2", &splat_prog("-8.0", "div", false));
    does_not_fire("div_pow2", &splat_prog("3.0", "div", false), false);
    // 2^-149 is subnormal: its reciprocal overflows.
    does_not_fire("div_pow2", &splat_prog("1e-45", "div", false), false);
}

#[test]
fn max_min_self() {
    let g =
        fires("max_min_self", "{ lambda a:f32[16] . let b:f32[16] = max a a  c:f32[16] = min b b in (c) }");
    assert!(g.eqns.is_empty());
}

#[test]
fn select_same() {
    let g = fires("select_same", "{ lambda p:bool[16] a:f32[16] . let b:f32[16] = select p a a in (b) }");
    assert!(g.eqns.is_empty());
}

#[test]
fn select_const() {
    for (v, kept) in [("true", "a"), ("false", "b")] {
        let src = format!(
            "{{ lambda a:f32[16] b:f32[16] ; t:bool[] = {v} . let
                p:bool[16] = broadcast_in_dim[shape=(16,) broadcast_dimensions=()] t
                c:f32[16] = select p a b
              in (c) }}"
        );
        let g = fires("select_const", &src);
        let want = if kept == "a" { g.params[0] } else { g.params[1] };
        assert_eq!(g.outputs, vec![want]);
    }
}

/// A region reading a large constant is priced with that constant on both sides (as written and
/// as extracted): `x*1` after a weighted sum with 1000 constant weights is dropped. Until
/// 2026-12-01 the region as written did not count the constants it reads while the extraction
/// did, so every rewrite of such a region looked 4 KB costlier and was refused (W2's outer
/// program and scan body).
#[test]
fn a_region_reading_a_large_constant_keeps_its_rewrites() {
    let values: Vec<String> = (0..1000).map(|i| format!("{}.5", i % 7)).collect();
    let src = format!(
        "{{ lambda a:f32[1000] ; c:f32[1000] = [{}], one:f32[] = 1.0 . let
            d:f32[1000] = mul a c
            s:f32[] = reduce_sum[axes=(0,)] d
            u:f32[] = mul s one
          in (u) }}",
        values.join(", ")
    );
    let g = fires("mul_one", &src);
    let names: Vec<&str> = g.eqns.iter().map(|e| e.prim.name()).collect();
    assert_eq!(names, ["mul", "reduce_sum"], "{g}");
}

/// An equation with several results is one node on both sides of the comparison: its results'
/// projections cost nothing in the extraction, so a rewrite that only removes an equation (an
/// identity broadcast: no bytes, no flops) next to a two-result `sort` is kept.
#[test]
fn a_region_with_a_multi_result_equation_keeps_a_rewrite_that_only_drops_an_equation() {
    let g = fires(
        "broadcast_identity",
        "{ lambda a:f32[8] b:f32[8] . let
            c:f32[8] d:f32[8] = sort[dimension=0 num_keys=1] a b
            e:f32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=(0,)] c
          in (e, d) }",
    );
    let names: Vec<&str> = g.eqns.iter().map(|e| e.prim.name()).collect();
    assert_eq!(names, ["sort"], "{g}");
}

/// A predicate the analysis decides from integer ranges: JAX's negative-index wrap
/// `select(i < 0, i + n, i)` of constant indices that are all in range is `i`; with a negative
/// index (or indices of unknown range, a parameter) it stays.
#[test]
fn select_const_on_a_comparison_decided_by_ranges() {
    let wrap = |ids: &str, cmp: &str, arms: &str| {
        format!(
            "{{ lambda x:f32[40,2] q:i32[6] ; e:i32[6] = {ids}, z:i32[] = 0, n:i32[] = 40 . let
                zb:i32[6] = broadcast_in_dim[shape=(6,) broadcast_dimensions=()] z
                p:bool[6] = {cmp} e zb
                nb:i32[6] = broadcast_in_dim[shape=(6,) broadcast_dimensions=()] n
                w:i32[6] = add e nb
                u:i32[6] = select p {arms}
                g:f32[6,2] = gather[axis=0 batch_dims=0 mode=clip] x u
              in (g) }}"
        )
    };
    for (cmp, arms) in [("lt", "w e"), ("ge", "e w")] {
        let g = fires("select_const", &wrap("[0, 5, 39, 7, 1, 0]", cmp, arms));
        let names: Vec<&str> = g.eqns.iter().map(|e| e.prim.name()).collect();
        assert_eq!(names, ["gather"], "{g}");
    }
    does_not_fire("select_const", &wrap("[0, 5, -3, 7, 1, 0]", "lt", "w e"), false);
    let unknown =
        wrap("[0, 5, 39, 7, 1, 0]", "lt", "w e").replace("p:bool[6] = lt e zb", "p:bool[6] = lt q zb");
    does_not_fire("select_const", &unknown, false);
}

/// A mask decided everywhere by integer ranges is a broadcast constant: `0 <= e && e < 40` on
/// ids in range is all true, `e < 0 || e >= 40` all false and its `not` all true (the masks of a
/// segment sum's transpose); with ids out of range (or unknown) nothing is decided.
#[test]
fn decided_by_range_and_not_undecided() {
    let masks = |ids: &str| {
        format!(
            "{{ lambda q:i32[6] ; e:i32[6] = {ids}, z:i32[] = 0, n:i32[] = 40 . let
                zb:i32[6] = broadcast_in_dim[shape=(6,) broadcast_dimensions=()] z
                nb:i32[6] = broadcast_in_dim[shape=(6,) broadcast_dimensions=()] n
                p:bool[6] = ge e zb
                r:bool[6] = lt e nb
                inside:bool[6] = and p r
                below:bool[6] = lt e zb
                above:bool[6] = ge e nb
                outside:bool[6] = or below above
                ok:bool[6] = not outside
              in (inside, outside, ok) }}"
        )
    };
    let g = fires("decided_by_range", &masks("[0, 5, 39, 7, 1, 0]"));
    assert!(g.eqns.iter().all(|e| e.prim.name() == "broadcast_in_dim"), "{g}");
    let want = [true, false, true].map(|b| kiln_ir::Array::from_vec(&[6], vec![b; 6]));
    let got = kiln_ir::eval(&g, &[kiln_ir::Array::from_vec(&[6], vec![0i32; 6])]).unwrap();
    assert!(got.iter().zip(&want).all(|(g, w)| g.bitwise_eq(w)), "{got:?}");
    does_not_fire("decided_by_range", &masks("[0, 5, 40, 7, -1, 0]"), false);
    let unknown = masks("[0, 5, 39, 7, 1, 0]").replace(" e zb", " q zb").replace(" e nb", " q nb");
    does_not_fire("decided_by_range", &unknown, false);
}

/// `-clamp(m, p, m)` with `m = i32::MIN` wraps to `i32::MIN`, whichever rules fire: the range
/// analysis claimed `2³¹` for it (found by review; its unit test is in `analysis.rs`), which
/// `decided_by_range` could write as a saturated `i32::MAX` where folding did not get there first.
#[test]
fn decided_by_range_respects_i32_negation_wrapping() {
    let (f, g, _) = run(
        // 100 elements: more than constant folding creates, so only the range decides.
        "{ lambda p:i32[100] ; m:i32[] = -2147483648 . let
            mb:i32[100] = broadcast_in_dim[shape=(100,) broadcast_dimensions=()] m
            c:i32[100] = clamp mb p mb
            y:i32[100] = neg c
          in (y) }",
        false,
    );
    let args =
        [kiln_ir::Array::from_vec(&[100], (0..100).map(|i| (i - 50) * 40_000_000).collect::<Vec<i32>>())];
    let got = kiln_ir::eval(&g, &args).unwrap();
    assert_eq!(got[0].to_vec::<i32>().unwrap(), vec![i32::MIN; 100], "{g}");
    assert_same_values(&f, &g);
}

/// Regression (soundness audit): float `abs` kept its operand's integer range, so `|i - 90|` of
/// `i` in [0, 99] was "in [-90, 9]" and `|i - 90| <= 9` was decided true everywhere (a jitted
/// window mask let every element through). Its range is [0, 90]: `<= 9` stays undecided and
/// `>= 0` is decided; values are compared bitwise.
#[test]
fn abs_of_a_range_crossing_zero_is_mirrored_not_kept() {
    let mask = |cmp: &str, bound: &str| {
        format!(
            "{{ lambda x:f32[100] ; c:f32[] = 90.0, t:f32[] = {bound} . let
                i:f32[100] = iota[dtype=f32 shape=(100,) dimension=0]
                cb:f32[100] = broadcast_in_dim[shape=(100,) broadcast_dimensions=()] c
                d:f32[100] = sub i cb
                a:f32[100] = abs d
                tb:f32[100] = broadcast_in_dim[shape=(100,) broadcast_dimensions=()] t
                m:bool[100] = {cmp} a tb
                z:f32[100] = sub x x
                y:f32[100] = select m x z
              in (y) }}"
        )
    };
    does_not_fire("decided_by_range", &mask("le", "9.0"), false);
    does_not_fire("decided_by_range", &mask("gt", "89.0"), false);
    fires("decided_by_range", &mask("ge", "0.0"));
    fires("decided_by_range", &mask("le", "90.0"));
    // Wholly negative ranges mirror: |i - 200| of i in [0, 99] is in [101, 200].
    let far = mask("gt", "100.0").replace("= 90.0", "= 200.0");
    fires("decided_by_range", &far);
}

/// Regression (found reading the analysis after the audit): an f32 iota longer than 2^24 + 1 was
/// "in [0, n - 1]", but its last index 16777219 rounds to 16777220 in f32, so `iota - 2^24` was
/// "in [-2^24, 3]" and `iota - 2^24 < 4` was decided true everywhere while the last element is 4.
/// (Checked on the report alone: evaluating 2^24 elements twice took 40 s in the test profile.)
#[test]
fn a_float_iota_past_two_to_the_24_has_no_exact_range() {
    let (_, g, report) = run(
        "{ lambda a:f32[1] ; c:f32[] = 16777216.0, t:f32[] = 4.0 . let
            i:f32[16777220] = iota[dtype=f32 shape=(16777220,) dimension=0]
            cb:f32[16777220] = broadcast_in_dim[shape=(16777220,) broadcast_dimensions=()] c
            d:f32[16777220] = sub i cb
            tb:f32[16777220] = broadcast_in_dim[shape=(16777220,) broadcast_dimensions=()] t
            m:bool[16777220] = lt d tb
          in (m) }",
        false,
    );
    assert_eq!(report.fired("decided_by_range"), 0, "{report}\n{g}");
    assert!(g.eqns.iter().any(|e| e.prim.name() == "lt"), "{g}");
}

/// Regression (soundness audit): the range of a product of clamped u32 values (up to 4e9 each)
/// overflowed i64 in the analysis, a panic in debug builds; it is now simply unknown.
#[test]
fn ranges_past_i64_are_unknown_not_an_overflow() {
    let (f, g, _) = run(
        "{ lambda p:u32[100] ; lo:u32[] = 0, hi:u32[] = 4000000000 . let
            lb:u32[100] = broadcast_in_dim[shape=(100,) broadcast_dimensions=()] lo
            hb:u32[100] = broadcast_in_dim[shape=(100,) broadcast_dimensions=()] hi
            x:u32[100] = clamp lb p hb
            y:u32[100] = mul x hb
            z:u32[100] = add y hb
          in (z) }",
        false,
    );
    assert_same_values(&f, &g);
}

/// `clamp(0, e, 39)` of constant ids in `[0, 39]` is `e`; one id out of range (or a lower bound
/// above some id) keeps the clamp.
#[test]
fn clamp_in_range_and_not_out_of_range() {
    let prog = |ids: &str, lo: i32| {
        format!(
            "{{ lambda x:f32[40,2] ; e:i32[6] = {ids}, lo:i32[] = {lo}, hi:i32[] = 39 . let
                c:i32[6] = clamp lo e hi
                g:f32[6,2] = gather[axis=0 batch_dims=0 mode=clip] x c
              in (g) }}"
        )
    };
    let g = fires("clamp_in_range", &prog("[0, 5, 39, 7, 1, 0]", 0));
    assert!(g.eqns.iter().all(|e| e.prim.name() != "clamp"), "{g}");
    does_not_fire("clamp_in_range", &prog("[0, 5, 40, 7, 1, 0]", 0), false);
    does_not_fire("clamp_in_range", &prog("[0, 5, 39, 7, 1, 0]", 1), false);
}

/// A loop constant the enclosing program decides (the in-range mask of constant spring ends, as
/// in W2's backward step) sinks into the scan body as a broadcast constant before the body is
/// simplified, and the body's `select` on it folds: the enclosing function is simplified first.
#[test]
fn a_decided_loop_constant_sinks_and_folds_the_bodys_select() {
    let (f, g, report) = run(
        "{ lambda x:f32[6] ; e:i32[6] = [0, 5, 39, 7, 1, 0], z:i32[] = 0, n:i32[] = 40 . let
            zb:i32[6] = broadcast_in_dim[shape=(6,) broadcast_dimensions=()] z
            nb:i32[6] = broadcast_in_dim[shape=(6,) broadcast_dimensions=()] n
            p:bool[6] = ge e zb
            r:bool[6] = lt e nb
            m:bool[6] = and p r
            y:f32[6] ys:f32[3,6] = scan[length=3 reverse=false num_consts=1 num_carry=1 body={ lambda mm:bool[6] c:f32[6] ; h:f32[] = 0.0 . let
                hb:f32[6] = broadcast_in_dim[shape=(6,) broadcast_dimensions=()] h
                s:f32[6] = select mm c hb
                t:f32[6] = sin s
              in (t, s) }] m x
          in (y, ys) }",
        false,
    );
    let scan = g.eqns.iter().find(|e| e.prim.name() == "scan").expect("scan");
    let body = &scan.prim.subfunctions()[0];
    assert!(body.eqns.iter().all(|e| e.prim.name() != "select"), "{g}");
    assert_eq!(scan.inputs.len(), 1, "the mask is no longer an operand: {g}");
    assert!(
        report.regions.iter().any(|r| r.name.contains("body") && r.fired.contains_key("select_const")),
        "{report}"
    );
    assert_same_values(&f, &g);
}

/// Ranges the analysis must not claim (found by review): a conversion to u32 of negative values
/// (huge unsigned ones) or to bool (`x != 0`, not `x`), an integer clamp whose lower bound exceeds
/// its upper one (the result is the upper), and a clipped gather from an empty axis (the fill
/// value). Each feeds a comparison and a select, which must stay or pick the right arm.
#[test]
fn select_const_is_not_misled_by_conversions_clamps_and_empty_gathers() {
    let u32_of_negative =
        "{ lambda x:i32[10] a:f32[10] b:f32[10] ; lo:i32[] = -4, hi:i32[] = -1, z:u32[] = 0 . let
        c:i32[10] = clamp lo x hi
        u:u32[10] = convert_element_type[dtype=u32] c
        zb:u32[10] = broadcast_in_dim[shape=(10,) broadcast_dimensions=()] z
        p:bool[10] = lt u zb
        s:f32[10] = select p a b
      in (s) }";
    does_not_fire("select_const", u32_of_negative, false);
    // clamp(2, x, 5) is never 0: as bool it is all true, and `select(h == true, a, b)` is `a`.
    let g = fires(
        "select_const",
        "{ lambda x:i32[10] a:f32[10] b:f32[10] ; lo:i32[] = 2, hi:i32[] = 5, t:bool[] = true . let
            c:i32[10] = clamp lo x hi
            h:bool[10] = convert_element_type[dtype=bool] c
            tb:bool[10] = broadcast_in_dim[shape=(10,) broadcast_dimensions=()] t
            p:bool[10] = eq h tb
            s:f32[10] = select p a b
          in (s) }",
    );
    assert_eq!(g.outputs, vec![g.params[1]], "{g}");
    let crossed_clamp =
        "{ lambda x:i32[2] a:f32[2] b:f32[2] ; lo:i32[2] = [5, 5], hi:i32[2] = [2, 10], v:i32[] = 5 . let
        c:i32[2] = clamp lo x hi
        vb:i32[2] = broadcast_in_dim[shape=(2,) broadcast_dimensions=()] v
        p:bool[2] = lt c vb
        s:f32[2] = select p a b
      in (s) }";
    does_not_fire("select_const", crossed_clamp, false);
    let empty_gather = "{ lambda x:i32[0] i:i32[4] a:f32[4] b:f32[4] ; lo:i32[] = 5, z:i32[] = 0 . let
        c:i32[0] = clamp lo x lo
        g:i32[4] = gather[axis=0 batch_dims=0 mode=clip] c i
        zb:i32[4] = broadcast_in_dim[shape=(4,) broadcast_dimensions=()] z
        p:bool[4] = lt g zb
        s:f32[4] = select p a b
      in (s) }";
    does_not_fire("select_const", empty_gather, false);
}

#[test]
fn transpose_of_dot() {
    // xᵀ·g then ᵀ (a weight gradient), and a batched product with two free axes on one side.
    let g = fires(
        "transpose_of_dot",
        "{ lambda x:f32[6,5] g:f32[6,3] . let
            d:f32[5,3] = dot_general[lhs_contracting=(0,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] x g
            t:f32[3,5] = transpose[permutation=(1, 0)] d
          in (t) }",
    );
    assert_eq!(g.eqns.iter().map(|e| e.prim.name()).collect::<Vec<_>>(), ["dot_general"], "{g}");
    fires(
        "transpose_of_dot",
        "{ lambda a:f32[2,4,3,5] b:f32[2,5,6] . let
            d:f32[2,4,3,6] = dot_general[lhs_contracting=(3,) rhs_contracting=(1,) lhs_batch=(0,) rhs_batch=(0,) preferred_element_type=none] a b
            t:f32[2,6,4,3] = transpose[permutation=(0, 3, 1, 2)] d
          in (t) }",
    );
    // A transpose inside the lhs-free block is not a swap of the operands.
    does_not_fire(
        "transpose_of_dot",
        "{ lambda a:f32[4,3,5] b:f32[5,6] . let
            d:f32[4,3,6] = dot_general[lhs_contracting=(2,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] a b
            t:f32[3,4,6] = transpose[permutation=(1, 0, 2)] d
          in (t) }",
        false,
    );
}

#[test]
fn select_of_select() {
    // Both arms, and a different inner predicate (not rewritten).
    for (body, kept) in [
        ("c:f32[16] = select p a b  d:f32[16] = select p c b", 1),
        ("c:f32[16] = select p a b  d:f32[16] = select p a c", 1),
    ] {
        let src = format!("{{ lambda p:bool[16] a:f32[16] b:f32[16] . let {body} in (d) }}");
        let g = fires("select_of_select", &src);
        assert_eq!(g.eqns.len(), kept, "{g}");
    }
    does_not_fire(
        "select_of_select",
        "{ lambda p:bool[16] q:bool[16] a:f32[16] b:f32[16] . let c:f32[16] = select q a b  d:f32[16] = select p c b in (d) }",
        false,
    );
}

#[test]
fn and_or_self() {
    let g = fires(
        "and_or_self",
        "{ lambda p:bool[16] x:i32[16] . let q:bool[16] = and p p  r:bool[16] = or q q  y:i32[16] = and x x in (r, y) }",
    );
    assert!(g.eqns.is_empty(), "{g}");
}

#[test]
fn abs_non_negative_and_not_unproved() {
    let g = fires(
        "abs_non_negative",
        "{ lambda a:f32[16] . let i:f32[16] = iota[dtype=f32 shape=(16,) dimension=0]  b:f32[16] = abs i  c:f32[16] = add a b in (c) }",
    );
    assert!(g.eqns.iter().all(|e| e.prim.name() != "abs"));
    // abs(-0.0) = +0.0 and abs(NaN) is NaN with the sign cleared: an arbitrary input is not proved.
    does_not_fire(
        "abs_non_negative",
        "{ lambda a:f32[16] . let b:f32[16] = abs a  c:f32[16] = abs b in (c) }",
        false,
    );
}

#[test]
fn is_finite_of_finite_and_not_unproved() {
    fires(
        "is_finite_of_finite",
        "{ lambda a:i32[16] . let b:f32[16] = convert_element_type[dtype=f32] a  c:bool[16] = is_finite b in (c) }",
    );
    does_not_fire("is_finite_of_finite", "{ lambda a:f32[16] . let c:bool[16] = is_finite a in (c) }", false);
}

#[test]
fn convert_same() {
    let g = fires(
        "convert_same",
        "{ lambda a:f32[16] . let b:f32[16] = convert_element_type[dtype=f32] a in (b) }",
    );
    assert!(g.eqns.is_empty());
}

#[test]
fn reshape_reshape_and_identity() {
    let g = fires(
        "reshape_reshape",
        "{ lambda a:f32[2,3] . let b:f32[3,2] = reshape[new_sizes=(3,2)] a  c:f32[6] = reshape[new_sizes=(6,)] b in (c) }",
    );
    assert_eq!(g.eqns.len(), 1);
    let g = fires(
        "reshape_identity",
        "{ lambda a:f32[2,3] . let b:f32[2,3] = reshape[new_sizes=(2,3)] a in (b) }",
    );
    assert!(g.eqns.is_empty());
}

#[test]
fn transpose_transpose_and_identity() {
    let g = fires(
        "transpose_transpose",
        "{ lambda a:f32[2,3,4] . let b:f32[3,4,2] = transpose[permutation=(1,2,0)] a  c:f32[2,3,4] = transpose[permutation=(2,0,1)] b in (c) }",
    );
    assert!(g.eqns.is_empty());
    let g = fires(
        "transpose_transpose",
        "{ lambda a:f32[2,3,4] . let b:f32[3,4,2] = transpose[permutation=(1,2,0)] a  c:f32[4,3,2] = transpose[permutation=(1,0,2)] b in (c) }",
    );
    assert_eq!(g.eqns.len(), 1);
    let g = fires(
        "transpose_identity",
        "{ lambda a:f32[2,3] . let b:f32[2,3] = transpose[permutation=(0,1)] a in (b) }",
    );
    assert!(g.eqns.is_empty());
}

#[test]
fn broadcast_identity_and_broadcast_broadcast() {
    let g = fires(
        "broadcast_identity",
        "{ lambda a:f32[2,3] . let b:f32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(0,1)] a in (b) }",
    );
    assert!(g.eqns.is_empty());
    let g = fires(
        "broadcast_broadcast",
        "{ lambda a:f32[3] . let
            b:f32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(1,)] a
            c:f32[4,2,3] = broadcast_in_dim[shape=(4,2,3) broadcast_dimensions=(1,2)] b
          in (c) }",
    );
    assert_eq!(g.eqns.len(), 1);
}

#[test]
fn reduce_max_min_of_broadcast() {
    for op in ["reduce_max", "reduce_min"] {
        let g = fires(
            "reduce_max_min_of_broadcast",
            &format!(
                "{{ lambda a:f32[1,3] . let
                    b:f32[2,4,3] = broadcast_in_dim[shape=(2,4,3) broadcast_dimensions=(0,2)] a
                    c:f32[3] = {op}[axes=(0,1)] b
                  in (c) }}"
            ),
        );
        assert!(g.eqns.iter().all(|e| !e.prim.name().starts_with("reduce")), "{g}");
    }
    // Reducing a real axis of the operand is not a reduction of copies.
    does_not_fire(
        "reduce_max_min_of_broadcast",
        "{ lambda a:f32[3] . let b:f32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(1,)] a  c:f32[] = reduce_max[axes=(0,1)] b in (c) }",
        false,
    );
}

#[test]
fn reduce_sum_of_broadcast_only_where_exact() {
    let g = fires(
        "reduce_sum_of_broadcast",
        "{ lambda a:i32[3] . let b:i32[5,3] = broadcast_in_dim[shape=(5,3) broadcast_dimensions=(1,)] a  c:i32[3] = reduce_sum[axes=(0,)] b in (c) }",
    );
    assert!(g.eqns.iter().all(|e| e.prim.name() != "reduce_sum"));
    // Floats proved integral and small: exact.
    fires(
        "reduce_sum_of_broadcast",
        "{ lambda p:bool[3] . let
            a:f32[3] = convert_element_type[dtype=f32] p
            b:f32[5,3] = broadcast_in_dim[shape=(5,3) broadcast_dimensions=(1,)] a
            c:f32[3] = reduce_sum[axes=(0,)] b
          in (c) }",
    );
    // Arbitrary floats: a sum of copies is not n*x (rounding, and -0.0 + +0.0 start), kept.
    does_not_fire(
        "reduce_sum_of_broadcast",
        "{ lambda a:f32[3] . let b:f32[5,3] = broadcast_in_dim[shape=(5,3) broadcast_dimensions=(1,)] a  c:f32[3] = reduce_sum[axes=(0,)] b in (c) }",
        false,
    );
}

#[test]
fn slice_of_broadcast() {
    let g = fires(
        "slice_of_broadcast",
        "{ lambda a:f32[5] . let
            b:f32[4,5] = broadcast_in_dim[shape=(4,5) broadcast_dimensions=(1,)] a
            c:f32[2,2] = slice[start=(1,1) limit=(3,5) strides=(1,2)] b
          in (c) }",
    );
    let bcast = g.eqns.iter().find(|e| e.prim.name() == "broadcast_in_dim").expect("a broadcast remains");
    assert_eq!(g.var_type(bcast.inputs[0]).shape.dims(), &[2]);
}

#[test]
fn scatter_add_of_zeros() {
    // The transpose of `take(x, i)`: a scatter-add into zeros becomes a segment sum (ids out of
    // range, negative ones included, dropped by both; the same adds in the same order).
    let src = |zero: &str, mode: &str| {
        format!(
            "{{ lambda u:f32[6,2] i:i32[6] ; z:f32[] = {zero} . let
            b:f32[4,2] = broadcast_in_dim[shape=(4,2) broadcast_dimensions=()] z
            s:f32[4,2] = scatter_add[axis=0 batch_dims=0 mode={mode}] b i u
          in (s) }}"
        )
    };
    let g = fires("scatter_add_of_zeros", &src("0.0", "fill"));
    assert_eq!(g.eqns.len(), 1, "{g}");
    assert_eq!(g.eqns[0].prim.name(), "segment_sum");
    // Into -0.0 (a row without updates stays -0.0, and -0.0 + -0.0 is -0.0: not a segment sum's
    // +0.0), or clamping out-of-range indices: kept.
    does_not_fire("scatter_add_of_zeros", &src("-0.0", "fill"), false);
    does_not_fire("scatter_add_of_zeros", &src("0.0", "clip"), false);
}

#[test]
fn dot_without_contraction() {
    // An outer product, a batched one and an i32 one: a product per element plus the sum's +0.0
    // start (a -0.0 product gives +0.0, as the interpreter's dot does; the special values include
    // -0.0, ±inf and NaN). Extracted under the fused-elementwise costs, the dot is gone.
    let dot = |lhs: &str, rhs: &str, out: &str, batch: &str| {
        format!(
            "{{ lambda a:{lhs} b:{rhs} . let
            c:{out} = dot_general[lhs_contracting=() rhs_contracting=() lhs_batch={batch} rhs_batch={batch} preferred_element_type=none] a b
          in (c) }}"
        )
    };
    let fused = SimplifyOptions { cost_model: CostModel::Fused, ..untimed() };
    for (src, float) in [
        (dot("f32[3]", "f32[4]", "f32[3,4]", "()"), true),
        (dot("f64[2,3]", "f64[2,5]", "f64[2,3,5]", "(0,)"), true),
        (dot("i32[4]", "i32[2]", "i32[4,2]", "()"), false),
    ] {
        // Under the default costs a float dot stays (one materialized result against two); an int
        // one becomes the product (`x + 0` folds away, and the product costs fewer flops).
        let (f, g, report) = run(&src, false);
        assert!(report.fired("dot_without_contraction") > 0, "{report}");
        assert_eq!(g.eqns.iter().any(|e| e.prim.name() == "dot_general"), float, "{g}");
        assert_same_values(&f, &g);
        let (g, report) = simplify(&f, &fused);
        assert!(report.fired("dot_without_contraction") > 0);
        assert!(g.eqns.iter().all(|e| e.prim.name() != "dot_general"), "{g}");
        assert_same_values(&f, &g);
    }
    // A contraction sums several products (not one), and a batch axis not leading is left alone.
    does_not_fire(
        "dot_without_contraction",
        "{ lambda a:f32[3,2] b:f32[2,4] . let
            c:f32[3,4] = dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] a b
          in (c) }",
        false,
    );
    does_not_fire(
        "dot_without_contraction",
        "{ lambda a:f32[3,2] b:f32[2,4] . let
            c:f32[2,3,4] = dot_general[lhs_contracting=() rhs_contracting=() lhs_batch=(1,) rhs_batch=(0,) preferred_element_type=none] a b
          in (c) }",
        false,
    );
}

#[test]
fn reshape_of_broadcast() {
    // Unit axes inserted: the broadcast moves out past the reshape, which disappears.
    let g = fires(
        "reshape_of_broadcast",
        "{ lambda a:f32[5] . let
            b:f32[4,5] = broadcast_in_dim[shape=(4,5) broadcast_dimensions=(1,)] a
            c:f32[4,1,5] = reshape[new_sizes=(4,1,5)] b
          in (c) }",
    );
    assert!(g.eqns.iter().all(|e| e.prim.name() != "reshape"), "{g}");
    // Repeated axes merged, a size-1 operand axis dropped (a reshape of the small operand).
    let g = fires(
        "reshape_of_broadcast",
        "{ lambda a:f32[1,3] . let
            b:f32[4,5,3] = broadcast_in_dim[shape=(4,5,3) broadcast_dimensions=(1,2)] a
            c:f32[20,3] = reshape[new_sizes=(20,3)] b
          in (c) }",
    );
    let r = g.eqns.iter().find(|e| e.prim.name() == "reshape");
    assert!(r.is_none_or(|r| g.var_type(r.outputs[0]).shape.dims() == [3]), "{g}");
    // A real axis split or merged with a repeated one is not a broadcast of `a`'s reshape.
    does_not_fire(
        "reshape_of_broadcast",
        "{ lambda a:f32[6] . let
            b:f32[2,6] = broadcast_in_dim[shape=(2,6) broadcast_dimensions=(1,)] a
            c:f32[2,2,3] = reshape[new_sizes=(2,2,3)] b
          in (c) }",
        false,
    );
    does_not_fire(
        "reshape_of_broadcast",
        "{ lambda a:f32[6] . let
            b:f32[2,6] = broadcast_in_dim[shape=(2,6) broadcast_dimensions=(1,)] a
            c:f32[12] = reshape[new_sizes=(12,)] b
          in (c) }",
        false,
    );
}

#[test]
fn transpose_of_broadcast() {
    // Only repeated axes move: no transpose left.
    let g = fires(
        "transpose_of_broadcast",
        "{ lambda a:f32[5] . let
            b:f32[4,5] = broadcast_in_dim[shape=(4,5) broadcast_dimensions=(1,)] a
            c:f32[5,4] = transpose[permutation=(1,0)] b
          in (c) }",
    );
    assert!(g.eqns.iter().all(|e| e.prim.name() != "transpose"), "{g}");
    // The operand's own axes swap: the transpose moves onto the small operand.
    let g = fires(
        "transpose_of_broadcast",
        "{ lambda a:f32[2,3] . let
            b:f32[2,4,3] = broadcast_in_dim[shape=(2,4,3) broadcast_dimensions=(0,2)] a
            c:f32[3,2,4] = transpose[permutation=(2,0,1)] b
          in (c) }",
    );
    let t = g.eqns.iter().find(|e| e.prim.name() == "transpose").expect("a small transpose");
    assert_eq!(g.var_type(t.outputs[0]).shape.dims(), &[3, 2]);
}

#[test]
fn slice_slice() {
    // Strided in both: elements 1+2·(1+k·2)... of `a`, composed into one slice.
    let g = fires(
        "slice_slice",
        "{ lambda a:f32[20,3] . let
            b:f32[9,3] = slice[start=(1,0) limit=(19,3) strides=(2,1)] a
            c:f32[3,2] = slice[start=(1,1) limit=(8,3) strides=(3,1)] b
          in (c) }",
    );
    assert_eq!(g.eqns.len(), 1, "{g}");
    // An empty outer slice at the inner one's end (the composed start would pass `a`'s end).
    fires(
        "slice_slice",
        "{ lambda a:f32[10] . let
            b:f32[4] = slice[start=(0,) limit=(10,) strides=(3,)] a
            c:f32[0] = slice[start=(4,) limit=(4,) strides=(1,)] b
          in (c) }",
    );
}

#[test]
fn gather_of_iota_clip_and_fill() {
    // Clip: out-of-range indices (-1, 7, 100, i32::MIN...) are clamped, as the gather would.
    // (The extractor may keep the gather: clamp + convert materialize more bytes than it.)
    fires(
        "gather_of_iota",
        "{ lambda i:i32[6] . let n:f32[5] = iota[dtype=f32 shape=(5,) dimension=0]  c:f32[6] = gather[axis=0 batch_dims=0 mode=clip] n i in (c) }",
    );
    // Gathering along another axis of a 2-d iota gives an iota.
    fires(
        "gather_of_iota",
        "{ lambda i:i32[6] . let n:i32[3,5] = iota[dtype=i32 shape=(3,5) dimension=0]  c:i32[3,6] = gather[axis=1 batch_dims=0 mode=clip] n i in (c) }",
    );
    // Fill mode with indices proved in range (an argmax) is rewritten...
    fires(
        "gather_of_iota",
        "{ lambda x:f32[4,5] . let
            i:i32[4] = argmax[axis=1 index_dtype=i32] x
            n:i32[5] = iota[dtype=i32 shape=(5,) dimension=0]
            c:i32[4] = gather[axis=0 batch_dims=0 mode=fill] n i
          in (c) }",
    );
    // ...but not with arbitrary indices (the fill value would appear).
    does_not_fire(
        "gather_of_iota",
        "{ lambda i:i32[6] . let n:f32[5] = iota[dtype=f32 shape=(5,) dimension=0]  c:f32[6] = gather[axis=0 batch_dims=0 mode=fill] n i in (c) }",
        false,
    );
}

#[test]
fn constant_fold() {
    let g = fires(
        "constant_fold",
        "{ lambda a:f32[4] ; b:f32[] = 2.0, c:f32[] = 3.0 . let
            d:f32[] = mul b c
            e:f32[] = exp d
            f:f32[4] = broadcast_in_dim[shape=(4,) broadcast_dimensions=()] e
            g:f32[4] = add a f
          in (g) }",
    );
    assert!(g.eqns.iter().all(|e| e.prim.name() != "mul" && e.prim.name() != "exp"));
    // The folded scalar stays a scalar broadcast: a folded f32[4] constant would be read from
    // memory where the broadcast is a register (the cost model prices broadcasts at 0 bytes).
    assert!(g.consts.iter().all(|c| c.value.ty().rank() == 0), "{g}");
    assert!(g.eqns.iter().any(|e| e.prim.name() == "broadcast_in_dim"), "{g}");
}

#[test]
fn fast_math_keeps_broadcast_scalars_unfolded() {
    // x*0 + x under fast math: x*0 → 0 must not become an f32[4] constant array (the backend then
    // estimated the "simplified" program at more bytes than the input and kept the input).
    let (_, g, report) = run(
        "{ lambda a:f32[4] ; b:f32[] = 0.0 . let
            c:f32[4] = broadcast_in_dim[shape=(4,) broadcast_dimensions=()] b
            d:f32[4] = mul a c
            e:f32[4] = add d a
          in (e) }",
        true,
    );
    assert!(report.fired("mul_zero") > 0, "{report}");
    assert!(g.eqns.iter().all(|e| e.prim.name() != "mul"), "{g}");
    assert!(g.consts.iter().all(|c| c.value.ty().rank() == 0), "{g}");
}

#[test]
fn elementwise_of_broadcasts() {
    let g = fires(
        "elementwise_of_broadcasts",
        "{ lambda a:f32[3] b:f32[3] . let
            c:f32[4,3] = broadcast_in_dim[shape=(4,3) broadcast_dimensions=(1,)] a
            d:f32[4,3] = broadcast_in_dim[shape=(4,3) broadcast_dimensions=(1,)] b
            e:f32[4,3] = add c d
            f:f32[4,3] = exp e
          in (f) }",
    );
    // The arithmetic runs on [3]; one broadcast at the end.
    assert_eq!(g.eqns.iter().filter(|e| e.prim.name() == "broadcast_in_dim").count(), 1);
    assert!(
        g.eqns.iter().filter(|e| e.prim.name() != "broadcast_in_dim").all(|e| g
            .var_type(e.outputs[0])
            .shape
            .dims()
            == [3])
    );
}

#[test]
fn elementwise_of_transposes() {
    let (f, g, report) = run(
        "{ lambda a:f32[2,3] b:f32[2,3] . let
            c:f32[3,2] = transpose[permutation=(1,0)] a
            d:f32[3,2] = transpose[permutation=(1,0)] b
            e:f32[3,2] = mul c d
          in (e) }",
        false,
    );
    assert!(report.fired("elementwise_of_transposes") > 0, "{report}");
    assert_eq!(g.eqns.iter().filter(|e| e.prim.name() == "transpose").count(), 1, "{g}");
    assert_same_values(&f, &g);
}

#[test]
fn int_rules_mul_zero_sub_self_reassociate() {
    let g = fires(
        "mul_zero",
        "{ lambda a:i32[8] ; z:i32[] = 0 . let b:i32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] z  c:i32[8] = mul a b in (c) }",
    );
    assert!(g.eqns.iter().all(|e| e.prim.name() != "mul"));
    fires("sub_self", "{ lambda a:i32[8] . let b:i32[8] = sub a a in (b) }");
    let g = fires(
        "reassociate_consts",
        "{ lambda a:i32[8] ; x:i32[] = 2, y:i32[] = 2147483647 . let
            b:i32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] x
            c:i32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] y
            d:i32[8] = add a b
            e:i32[8] = add d c
          in (e) }",
    );
    assert_eq!(g.eqns.iter().filter(|e| e.prim.name() == "add").count(), 1);
}

#[test]
fn float_mul_zero_stays_nan_without_fast_math() {
    let src = splat_prog("0.0", "mul", false);
    does_not_fire("mul_zero", &src, false);
    let (f, g, _) = run(&src, false);
    let x = special(&f.param_types()[0], 0); // starts NaN, inf, -inf, ...
    let out = kiln_ir::eval(&g, &[x]).unwrap()[0].to_f64_vec();
    assert!(out[0].is_nan() && out[1].is_nan() && out[2].is_nan(), "{out:?}");
    does_not_fire("sub_self", "{ lambda a:f32[8] . let b:f32[8] = sub a a in (b) }", false);
}

#[test]
fn fast_math_rules_fire_only_with_fast_math() {
    let cases = [
        ("mul_zero", splat_prog("0.0", "mul", false)),
        ("sub_self", "{ lambda a:f32[8] . let b:f32[8] = sub a a in (b) }".to_string()),
        (
            "reassociate_consts",
            "{ lambda a:f32[8] ; x:f32[] = 0.1, y:f32[] = 0.2 . let
                b:f32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] x
                c:f32[8] = broadcast_in_dim[shape=(8,) broadcast_dimensions=()] y
                d:f32[8] = add a b
                e:f32[8] = add d c
              in (e) }"
                .to_string(),
        ),
        (
            "log_exp",
            "{ lambda a:f32[8] . let i:f32[8] = iota[dtype=f32 shape=(8,) dimension=0]  b:f32[8] = exp i  c:f32[8] = log b  d:f32[8] = add a c in (d) }"
                .to_string(),
        ),
        (
            "exp_log",
            "{ lambda a:f32[8] . let i:f32[8] = iota[dtype=f32 shape=(8,) dimension=0]  b:f32[8] = log i  c:f32[8] = exp b  d:f32[8] = add a c in (d) }"
                .to_string(),
        ),
    ];
    for (rule, src) in &cases {
        does_not_fire(rule, src, false);
        let (f, g, report) = run(src, true);
        assert!(report.fired(rule) > 0, "{rule}:\n{report}");
        // Fast math keeps results close on ordinary inputs.
        let n = f.param_types()[0].shape.size();
        let x = kiln_ir::Array::from_vec(
            &[n],
            (0..n).map(|i| [0.5f32, -1.0, 2.0, 3.0, -4.0, 0.25, 1.5, 8.0][i % 8]).collect(),
        );
        let want = kiln_ir::eval(&f, std::slice::from_ref(&x)).unwrap()[0].to_f64_vec();
        let got = kiln_ir::eval(&g, &[x]).unwrap()[0].to_f64_vec();
        for (w, o) in want.iter().zip(&got) {
            assert!((w - o).abs() <= 1e-5 * w.abs().max(1.0), "{rule}: {want:?} vs {got:?}");
        }
    }
}

#[test]
fn fast_math_exp_log_pairs_stay_guarded() {
    // log(exp a): a may be large (exp overflows) — not rewritten even with fast math.
    does_not_fire("log_exp", "{ lambda a:f32[8] . let b:f32[8] = exp a  c:f32[8] = log b in (c) }", true);
    // exp(log a): a may be negative (log gives NaN) — not rewritten.
    does_not_fire("exp_log", "{ lambda a:f32[8] . let b:f32[8] = log a  c:f32[8] = exp b in (c) }", true);
}

#[test]
fn cse_merges_equal_equations_and_report_has_bounds() {
    let (f, g, report) =
        run("{ lambda a:f32[8] . let b:f32[8] = exp a  c:f32[8] = exp a  d:f32[8] = add b c in (d) }", false);
    assert_eq!(g.eqns.len(), 2, "{g}");
    assert_same_values(&f, &g);
    let r = &report.regions[0];
    assert!(r.accepted && r.cost_after < r.cost_before && r.iterations >= 1 && r.nodes > 0, "{report}");
}

#[test]
fn subfunctions_are_simplified_as_their_own_regions() {
    let (f, g, report) = run(
        "{ lambda a:f32[4] . let
            b:f32[4] c:f32[3,4] = scan[length=3 reverse=false num_consts=0 num_carry=1 body={ lambda x:f32[4] . let
                y:f32[4] = neg x
                z:f32[4] = neg y
                w:f32[4] = sin z
              in (w, z) }] a
          in (b, c) }",
        false,
    );
    // The enclosing function first (its loop constants may sink into the body), then the body.
    assert!(report.regions.len() == 2 && report.regions[1].name.contains("body"), "{report}");
    assert_eq!(report.fired("neg_neg"), 1);
    let body = &g.eqns[0].prim.subfunctions()[0];
    assert_eq!(body.eqns.len(), 1, "{g}");
    assert_same_values(&f, &g);
}

#[test]
fn long_bodies_are_cut_into_regions() {
    let mut src = String::from("{ lambda a:f32[4] . let\n");
    let mut prev = "a".to_string();
    for i in 0..50 {
        src += &format!("v{i}:f32[4] = neg {prev}\n");
        prev = format!("v{i}");
    }
    src += &format!("in ({prev}) }}");
    let f = parse(&src).unwrap();
    let (g, report) = simplify(&f, &SimplifyOptions { region_eqns: 8, ..untimed() });
    assert_eq!(report.regions.len(), 7, "{report}");
    verify(&g).unwrap();
    assert_same_values(&f, &g);
    assert!(g.eqns.len() <= 8, "{g}");
}
