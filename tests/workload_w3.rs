//! The W3 epidemic workload (`benches/workloads/w3.rs`): at a small size (N = 2000, 10 days) the
//! compiled loss and straight-through gradient equal the reference interpreter's, and the gradient
//! equals central differences (f64) of the same simulation with its draws frozen; at the benchmark
//! size N = 10⁵ (30 days) the compiled forward and gradient reproduce JAX 0.10.2's checksums stored
//! in `../shared/anchors/jax/results-jax-0.10.2.json`.

#[path = "../benches/workloads/mod.rs"]
#[allow(dead_code, unused_imports)]
mod workloads;

use kiln::ir::{Array, eval};
use kiln::prelude::*;
use workloads::common::{arrays, checksum};
use workloads::w3::{self, Data, Draws};

/// Small case: agents and days (enough for second-generation infections from the ~2 seeds).
const N_SMALL: usize = 2000;
const DAYS_SMALL: usize = 10;

fn scalar_f64(a: &Array) -> f64 {
    match a {
        Array::F32(_) => f64::from(a.to_vec::<f32>().unwrap()[0]),
        Array::F64(_) => a.to_vec::<f64>().unwrap()[0],
        other => panic!("expected a float scalar, got {other:?}"),
    }
}

fn rel_close(got: f64, want: f64, rtol: f64, atol: f64, what: &str) {
    assert!(
        (got - want).abs() <= atol + rtol * want.abs(),
        "{what}: got {got}, want {want} (rtol {rtol}, atol {atol})"
    );
}

/// The compiled program's outputs and the reference interpreter's, for the same traced function.
fn jit_and_interpreter<R: Tree + Clone + 'static>(
    f: impl Fn((Tensor, Tensor, Data)) -> R + Clone + 'static,
    args: &(Tensor, Tensor, Data),
) -> (Vec<f64>, Vec<f64>) {
    let inputs = arrays(&args.leaves());
    let compiled = kiln::jit(f.clone()).compiled(args).unwrap();
    let jit_out = compiled.run(&inputs).unwrap();
    let traced = trace(f, args).unwrap();
    let ref_out = eval(&traced.function, &inputs).unwrap();
    (jit_out.iter().map(scalar_f64).collect(), ref_out.iter().map(scalar_f64).collect())
}

#[test]
fn small_loss_and_gradient_match_the_interpreter() {
    let (r, m) = w3::params();
    let args = (r, m, w3::make_data(N_SMALL, DAYS_SMALL));
    let (jit, reference) =
        jit_and_interpreter(|(r, m, d): (Tensor, Tensor, Data)| w3::loss(&r, &m, &d), &args);
    assert!(reference[0] > 0.0 && reference[0].is_finite(), "loss {reference:?}");
    rel_close(jit[0], reference[0], 1e-5, 0.0, "loss");
    let (jit, reference) =
        jit_and_interpreter(|(r, m, d): (Tensor, Tensor, Data)| w3::grad_rm(&r, &m, &d), &args);
    for (k, name) in ["dL/dR", "dL/dm"].iter().enumerate() {
        assert!(reference[k] != 0.0 && reference[k].is_finite(), "{name} = {}", reference[k]);
        // Sums over agents and days in a different order: f32 rounding, relative to |dL/dR|.
        rel_close(jit[k], reference[k], 1e-4, 1e-5 * reference[0].abs(), name);
    }
}

/// The data with its float arrays in f64 (the f32 inputs upcast exactly, as the anchor's x64 run).
fn to_f64((src, dst, s0, t0, u): Data) -> Data {
    (src, dst, s0.astype(DType::F64), t0.astype(DType::F64), u.astype(DType::F64))
}

#[test]
fn straight_through_gradient_matches_central_differences_f64() {
    let (r0, m0) = (0.06f64, 0.02f64);
    let data = to_f64(w3::make_data(N_SMALL, DAYS_SMALL));
    let args = (Tensor::scalar(r0), Tensor::scalar(m0), data.clone());
    let grads = kiln::jit(|(r, m, d): (Tensor, Tensor, Data)| w3::grad_rm(&r, &m, &d)).call(&args).unwrap();
    let grads = [grads.0, grads.1].map(|g| scalar_f64(&g.to_array().unwrap()));

    // The draws and stage flags of the run at (R, m), frozen: a smooth loss equal to W3's there.
    let record = |(r, m, d): (Tensor, Tensor, Data)| w3::simulate(&r, &m, &d, Draws::Recorded);
    let (value, recorded) = kiln::jit(record).call(&args).unwrap();
    let [hard, soft0, stage] = [0, 1, 2].map(|k| recorded[k].clone());
    let frozen = move |(r, m, d): (Tensor, Tensor, Data)| {
        w3::simulate(&r, &m, &d, Draws::Frozen(hard.clone(), soft0.clone(), stage.clone())).0
    };
    let frozen = kiln::jit(frozen);
    let at = |r: f64, m: f64| {
        let out = frozen.call(&(Tensor::scalar(r), Tensor::scalar(m), data.clone())).unwrap();
        scalar_f64(&out.to_array().unwrap())
    };
    let value = scalar_f64(&value.to_array().unwrap());
    rel_close(at(r0, m0), value, 1e-12, 0.0, "frozen loss at (R, m)");

    for (k, (name, h)) in [("dL/dR", 1e-6 * r0), ("dL/dm", 1e-6 * m0)].into_iter().enumerate() {
        let (plus, minus) =
            if k == 0 { (at(r0 + h, m0), at(r0 - h, m0)) } else { (at(r0, m0 + h), at(r0, m0 - h)) };
        let fd = (plus - minus) / (2.0 * h);
        assert!(fd != 0.0, "{name}: the frozen loss does not depend on the parameter");
        rel_close(grads[k], fd, 1e-5, 1e-9, name);
    }
}

/// `[sum, sum|x|, first]` per output leaf of one W3 record of the stored JAX results: the W3 rows of
/// `shared/anchors/jax/results-jax-0.10.2.json` (JAX 0.10.2, `w3_abm.py`), committed in
/// `tests/data/jax_w3_checksums.json` so a clone anywhere runs this test.
fn jax_checksum(variant: &str, size: &str) -> Vec<[f64; 3]> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/jax_w3_checksums.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let row = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["workload"] == "W3" && r["variant"] == variant && r["size"] == size)
        .unwrap_or_else(|| panic!("no W3 {variant} {size} row in {path}"));
    let leaves = row["checksum"].as_array().unwrap();
    leaves
        .iter()
        .map(|l| {
            let v: Vec<f64> = l.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
            [v[0], v[1], v[2]]
        })
        .collect()
}

/// The compare script's rule: sum|x| and the first element agree at rtol 1e-4.
fn assert_checksums(got: &[[f64; 3]], want: &[[f64; 3]], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: output leaves");
    for (g, w) in got.iter().zip(want) {
        rel_close(g[1], w[1], 1e-4, 0.0, &format!("{what} sum|x|"));
        rel_close(g[2], w[2], 1e-4, 0.0, &format!("{what} first element"));
    }
}

#[test]
fn checksums_at_n_1e5_match_jax() {
    let n = 100_000;
    let size = format!("N={n},E={},days={}", 10 * n, w3::DAYS);
    let (r, m) = w3::params();
    let args = (r, m, w3::make_data(n, w3::DAYS));
    let inputs = arrays(&args.leaves());
    let fwd = kiln::jit(|(r, m, d): (Tensor, Tensor, Data)| w3::loss(&r, &m, &d)).compiled(&args).unwrap();
    assert_checksums(&checksum(&fwd.run(&inputs).unwrap()), &jax_checksum("fwd", &size), "fwd");
    let grad =
        kiln::jit(|(r, m, d): (Tensor, Tensor, Data)| w3::grad_rm(&r, &m, &d)).compiled(&args).unwrap();
    assert_checksums(&checksum(&grad.run(&inputs).unwrap()), &jax_checksum("grad", &size), "grad");
}
