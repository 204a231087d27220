//! Scans whose rows read their neighbours' at a fixed distance (a stencil: `roll`, shifted slices,
//! pads) run as row ranges with halos that meet every few steps (`Control::plan_split`,
//! `runtime::halo`). Results must be bitwise those of one thread, and the interpreter's; a body
//! that reads its carry at no fixed distance must not be split this way.

mod common;

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::{Array, Function, eval, parse};

/// `min_task_work: Some(0)`: every scan the analysis accepts is split over the threads.
fn opts(threads: usize) -> CompileOptions {
    CompileOptions { threads: Some(threads), dump_dir: None, min_task_work: Some(0), multi_output: true }
}

fn f32s(dims: &[usize], seed: u32) -> Array {
    let n: usize = dims.iter().product();
    let v =
        (0..n as u32).map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0).collect();
    Array::from_vec(dims, v)
}

/// The plan listing of `f` compiled on `threads` threads.
fn plan_text(f: &Function, threads: usize) -> String {
    common::plan_text(f, &opts(threads))
}

/// Runs `src` on 1–4 threads: every result bitwise the one-thread one and the interpreter's
/// (plain arithmetic: no transcendental whose last bit may differ). Returns the 2-thread plan.
fn check(src: &str, args: &[Array]) -> String {
    let f: Function = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let want = compile_with(&f, &opts(1)).unwrap().run(args).unwrap();
    for (w, r) in want.iter().zip(eval(&f, args).unwrap()) {
        assert!(w.bitwise_eq(&r), "one thread differs from the interpreter:\n{w:?}\n{r:?}\n{f}");
    }
    for threads in 2..=4 {
        let got = compile_with(&f, &opts(threads)).unwrap().run(args).unwrap();
        for (w, g) in want.iter().zip(&got) {
            assert!(w.bitwise_eq(g), "{threads} threads differ from one:\n{w:?}\n{g:?}\n{f}");
        }
    }
    assert!(!plan_text(&f, 1).contains("halos"), "one thread never splits");
    plan_text(&f, 2)
}

/// IR lines defining `l` = `roll(x, 1)` and `r` = `roll(x, -1)` for `x: f32[n]`, as `jnp.roll`
/// traces them (two slices and a concatenate each).
fn rolls(x: &str, n: usize) -> String {
    let m = n - 1;
    format!(
        "        a:f32[1] = slice[start=({m},) limit=({n},) strides=(1,)] {x}
        b:f32[{m}] = slice[start=(0,) limit=({m},) strides=(1,)] {x}
        l:f32[{n}] = concatenate[dimension=0] a b
        d:f32[{m}] = slice[start=(1,) limit=({n},) strides=(1,)] {x}
        e:f32[1] = slice[start=(0,) limit=(1,) strides=(1,)] {x}
        r:f32[{n}] = concatenate[dimension=0] d e
"
    )
}

/// W1's step on `n` points, `length` steps: `u + c·((roll(u, 1) − 2u) + roll(u, −1))`, the rolls
/// written as `jnp.roll` traces them (two slices and a concatenate).
fn heat(n: usize, length: usize) -> String {
    let rolls = rolls("u", n);
    format!(
        "{{ lambda c:f32[] u0:f32[{n}] . let
    fin:f32[{n}] = scan[length={length} reverse=false num_consts=1 num_carry=1 body={{ lambda c:f32[] u:f32[{n}] ; two:f32[] = 2.0 . let
{rolls}        tb:f32[{n}] = broadcast_in_dim[shape=({n},) broadcast_dimensions=()] two
        t:f32[{n}] = mul tb u
        s:f32[{n}] = sub l t
        q:f32[{n}] = add s r
        cb:f32[{n}] = broadcast_in_dim[shape=({n},) broadcast_dimensions=()] c
        k:f32[{n}] = mul cb q
        v:f32[{n}] = add u k
      in (v,) }}] c u0
  in (fin,) }}"
    )
}

#[test]
fn a_periodic_stencil_runs_as_ranges_with_halos_bitwise_as_on_one_thread() {
    // 37 steps: blocks of the length's remainder too; 600 rows: ranges of 150 to 300 rows.
    for (n, length) in [(600, 37), (1000, 2), (1000, 3)] {
        let plan = check(&heat(n, length), &[Array::scalar(0.05f32), f32s(&[n], 3)]);
        assert!(plan.contains("as 2 row ranges with halos of 1 rows per step"), "{plan}");
    }
}

#[test]
fn a_stencil_too_small_to_split_runs_on_one_thread() {
    // 30 rows: a range of 15 rows has no block whose halo stays within a sixteenth of it.
    let plan = check(&heat(30, 10), &[Array::scalar(0.05f32), f32s(&[30], 3)]);
    assert!(!plan.contains("halos"), "{plan}");
}

#[test]
fn where_each_thread_s_range_is_too_small_for_a_block_fewer_ranges_run() {
    // 40 rows on 4 threads: ranges of 10 or 13 rows have no block (a sixteenth of them is under
    // one row), two ranges of 20 rows have blocks of one step.
    let src = heat(40, 10);
    check(&src, &[Array::scalar(0.05f32), f32s(&[40], 3)]);
    let plan = plan_text(&parse(&src).unwrap(), 4);
    assert!(plan.contains("as 2 row ranges with halos of 1 rows per step that meet every 1 steps"), "{plan}");
}

#[test]
fn two_carries_of_other_row_widths_a_reach_of_two_and_a_zero_padded_edge() {
    // u: f32[N] read at rows r and r + 1 (its rows 1.. padded with a zero at the end: not
    // periodic); w: f32[N, 3] read at rows r and r - 2 (a roll by two along axis 0).
    let n = 700;
    let (m, p) = (n - 1, n - 2);
    let src = format!(
        "{{ lambda u0:f32[{n}] w0:f32[{n},3] . let
    u9:f32[{n}] w9:f32[{n},3] = scan[length=23 reverse=false num_consts=0 num_carry=2 body={{ lambda u:f32[{n}] w:f32[{n},3] ; z:f32[] = 0.0, half:f32[] = 0.5 . let
        a:f32[{m}] = slice[start=(1,) limit=({n},) strides=(1,)] u
        un:f32[{n}] = pad[low=(0,) high=(1,) interior=(0,)] a z
        h:f32[{n}] = add u un
        hb:f32[{n}] = broadcast_in_dim[shape=({n},) broadcast_dimensions=()] half
        u2:f32[{n}] = mul hb h
        w1:f32[2,3] = slice[start=({p}, 0) limit=({n}, 3) strides=(1, 1)] w
        w2:f32[{p},3] = slice[start=(0, 0) limit=({p}, 3) strides=(1, 1)] w
        wr:f32[{n},3] = concatenate[dimension=0] w1 w2
        ub:f32[{n},3] = broadcast_in_dim[shape=({n}, 3) broadcast_dimensions=(0,)] u
        s:f32[{n},3] = sub wr ub
        hb3:f32[{n},3] = broadcast_in_dim[shape=({n}, 3) broadcast_dimensions=()] half
        w3:f32[{n},3] = mul hb3 s
      in (u2, w3) }}] u0 w0
  in (u9, w9) }}"
    );
    let plan = check(&src, &[f32s(&[n], 1), f32s(&[n, 3], 2)]);
    assert!(plan.contains("with halos of 2 rows per step"), "{plan}");
}

#[test]
fn a_body_step_read_shifted_by_a_later_one_is_computed_on_a_wider_range() {
    // The body's first kernel computes `ex = exp(−u²)` (materialized: three readers), the second
    // reads it at rows r - 1, r and r + 1: the first kernel must compute one row more on each
    // side than the carries' range, and a step reads 1 row of the carry beyond its own.
    let n = 800;
    let rolls = rolls("ex", n);
    let src = format!(
        "{{ lambda u0:f32[{n}] . let
    fin:f32[{n}] = scan[length=31 reverse=false num_consts=0 num_carry=1 body={{ lambda u:f32[{n}] ; k:f32[] = 0.1 . let
        sq:f32[{n}] = mul u u
        ns:f32[{n}] = neg sq
        ex:f32[{n}] = exp ns
{rolls}        s:f32[{n}] = add l r
        t:f32[{n}] = sub s ex
        kb:f32[{n}] = broadcast_in_dim[shape=({n},) broadcast_dimensions=()] k
        g:f32[{n}] = mul kb t
        v:f32[{n}] = sub u g
      in (v,) }}] u0
  in (fin,) }}"
    );
    let f: Function = parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let args = [f32s(&[n], 5)];
    // `exp` is the JIT's own: compare threads bitwise, the interpreter closely.
    let want = compile_with(&f, &opts(1)).unwrap().run(&args).unwrap();
    let exact = eval(&f, &args).unwrap();
    for (a, b) in want[0].to_vec::<f32>().unwrap().iter().zip(exact[0].to_vec::<f32>().unwrap()) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs interpreter {b}");
    }
    for threads in 2..=4 {
        let got = compile_with(&f, &opts(threads)).unwrap().run(&args).unwrap();
        assert!(want[0].bitwise_eq(&got[0]), "{threads} threads differ from one");
    }
    let dir = tempfile::tempdir().unwrap();
    compile_with(&f, &CompileOptions { dump_dir: Some(dir.path().to_path_buf()), ..opts(2) }).unwrap();
    let folder = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    let body = std::fs::read_to_string(folder.join("step0-scan-body").join("plan.txt")).unwrap();
    assert!(body.contains("2 kernels"), "the test needs e materialized:\n{body}");
    let plan = std::fs::read_to_string(folder.join("plan.txt")).unwrap();
    assert!(plan.contains("with halos of 1 rows per step"), "{plan}");
}

#[test]
fn a_body_reading_its_carry_reversed_or_reduced_gets_no_halos() {
    // `rev` along axis 0: row r reads row N - 1 - r, no fixed distance.
    let reversed = heat(600, 9).replace(
        "v:f32[600] = add u k",
        "ur:f32[600] = rev[dimensions=(0,)] u\n        v:f32[600] = add ur k",
    );
    let plan = check(&reversed, &[Array::scalar(0.05f32), f32s(&[600], 3)]);
    assert!(!plan.contains("halos"), "{plan}");
    // A sum over the rows fed back into every row.
    let reduced = heat(600, 9).replace(
        "v:f32[600] = add u k",
        "sm:f32[] = reduce_sum[axes=(0,)] u\n        sb:f32[600] = broadcast_in_dim[shape=(600,) broadcast_dimensions=()] sm\n        w:f32[600] = mul sb cb\n        v:f32[600] = add w k",
    );
    let f: Function = parse(&reduced).unwrap_or_else(|e| panic!("{e}\n{reduced}"));
    assert!(!plan_text(&f, 2).contains("halos"));
}
