//! `kiln_trace::random` against JAX 0.10.2 reference values (`tests/data/threefry.json`, every case),
//! bit for bit where JAX's computation is exact integer/bit work, within 4 ulp where it goes through
//! `erf_inv`/`log` (whose f32 approximations may differ from XLA's in the last bits).

use kiln_ir::DType;
use kiln_trace::{Tensor, random, trace};
use serde_json::Value;

fn data() -> Value {
    let text = include_str!("data/threefry.json");
    serde_json::from_str(text).expect("valid JSON")
}

/// Each reference case with its key as a `u32[2]` tensor.
fn cases() -> Vec<(Tensor, Value)> {
    let d = data();
    let cases = d["cases"].as_array().expect("cases").clone();
    assert_eq!(cases.len(), 4, "the data set has four keys");
    cases
        .into_iter()
        .map(|c| {
            let k = u32s(&c["key"]);
            (Tensor::from_vec(&[2], k), c)
        })
        .collect()
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array().expect("array").iter().map(|x| x.as_u64().expect("u32") as u32).collect()
}

/// JSON numbers are the f32 values printed as f64 (exactly), so `as f32` recovers them.
fn f32s(v: &Value) -> Vec<f32> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number") as f32).collect()
}

fn bools(v: &Value) -> Vec<bool> {
    v.as_array().expect("array").iter().map(|x| x.as_bool().expect("bool")).collect()
}

fn key_list(v: &Value) -> Vec<u32> {
    v.as_array().expect("keys").iter().flat_map(u32s).collect()
}

/// Distance in units in the last place: the number of f32 values between `a` and `b` (0 when equal,
/// with -0.0 == 0.0). Maps the bits to a monotonic integer line first.
fn ulp_distance(a: f32, b: f32) -> u64 {
    fn ordered(x: f32) -> i64 {
        let bits = x.to_bits() as i32 as i64;
        if bits < 0 { i64::from(i32::MIN) - bits } else { bits }
    }
    assert!(!a.is_nan() && !b.is_nan(), "NaN: {a} vs {b}");
    (ordered(a) - ordered(b)).unsigned_abs()
}

fn assert_ulps(got: &[f32], want: &[f32], max: u64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let d = ulp_distance(g, w);
        assert!(d <= max, "{what}[{i}]: got {g:e}, want {w:e}, {d} ulp apart (max {max})");
    }
}

/// Gumbel values within 4 ulp plus what one ulp of the inner `-log(u)` moves them.
///
/// `g = -log(v)` with `v = -log(u)`: a 1-ulp difference in `v` changes `g` by `ulp(v) / v`, which is
/// many ulps of `g` where `g` is near 0 (`v` near 1). XLA's f32 `log` is not correctly rounded: for
/// key [1, 2], element 4, `u = 0.34146225`, XLA's `-log(u)` is 1.0745182 (one ulp above the correctly
/// rounded 1.0745181), which puts JAX's `g = -0.071872376` 14 ulp from the correctly rounded
/// `-0.071872264`. A flat 4-ulp bound cannot hold for a correctly rounded `log` there.
fn assert_gumbel_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let v = (-f64::from(w)).exp();
        let ulp = |x: f32| f64::from(x.abs().next_up() - x.abs());
        let propagated = (ulp(v as f32) / v / ulp(w)).ceil() as u64;
        let max = 4 + propagated;
        let d = ulp_distance(g, w);
        assert!(d <= max, "{what}[{i}]: got {g:e}, want {w:e}, {d} ulp apart (max {max})");
    }
}

fn bits_of(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn ulp_distance_helper() {
    assert_eq!(ulp_distance(1.0, 1.0), 0);
    assert_eq!(ulp_distance(0.0, -0.0), 0);
    assert_eq!(ulp_distance(1.0, 1.0 + f32::EPSILON), 1);
    // Across zero: the smallest subnormals on either side are 2 apart (through ±0).
    assert_eq!(ulp_distance(f32::from_bits(1), -f32::from_bits(1)), 2);
    assert_eq!(ulp_distance(f32::MAX, f32::INFINITY), 1);
    assert_eq!(ulp_distance(-2.0, -2.0f32.next_down()), 1);
}

#[test]
fn prngkey_seed_42() {
    let d = data();
    assert_eq!(random::key(42u32).to_vec::<u32>(), u32s(&d["prngkey_seed_42"]));
    assert_eq!(random::key(42u64).to_vec::<u32>(), vec![0, 42]);
}

#[test]
fn prngkey_seed_0() {
    let d = data();
    assert_eq!(random::key(0u32).to_vec::<u32>(), u32s(&d["prngkey_seed_0"]));
}

#[test]
fn prngkey_u64_seed_is_split_into_hi_lo_words() {
    // threefry_seed: [seed >> 32, seed & 0xFFFFFFFF]; 0xDEADBEEF_12345678 is the fourth case's key.
    assert_eq!(random::key(0xDEAD_BEEF_1234_5678u64).to_vec::<u32>(), vec![0xDEAD_BEEF, 0x1234_5678]);
    assert_eq!(random::key(u64::MAX).to_vec::<u32>(), vec![u32::MAX, u32::MAX]);
    assert_eq!(random::key(u32::MAX).to_vec::<u32>(), vec![0, u32::MAX]);
}

#[test]
fn key_from_seed_tensor_matches_key() {
    assert_eq!(random::key_from_seed(&Tensor::scalar(42u32)).to_vec::<u32>(), vec![0, 42]);
    // An i32 seed is reinterpreted as u32: -1 → 0xFFFFFFFF (JAX's convert to uint32 wraps).
    assert_eq!(random::key_from_seed(&Tensor::scalar(-1i32)).to_vec::<u32>(), vec![0, u32::MAX]);
}

#[test]
fn threefry_2x32_count_iota8() {
    for (key, c) in cases() {
        let count = Tensor::from_vec(&[8], (0u32..8).collect());
        let got = random::threefry_2x32(&key, &count).to_vec::<u32>();
        assert_eq!(got, u32s(&c["threefry_2x32_count_iota8"]), "key {:?}", c["key"]);
    }
}

#[test]
fn threefry_2x32_iota8_is_the_block_on_halves() {
    // The raw primitive on x0 = count[0:4], x1 = count[4:8], outputs concatenated.
    for (key, c) in cases() {
        let k = key.to_vec::<u32>();
        let k0 = Tensor::full(&[4], k[0]);
        let k1 = Tensor::full(&[4], k[1]);
        let x0 = Tensor::from_vec(&[4], vec![0u32, 1, 2, 3]);
        let x1 = Tensor::from_vec(&[4], vec![4u32, 5, 6, 7]);
        let (y0, y1) = kiln_trace::lax::threefry2x32(&k0, &k1, &x0, &x1);
        let mut got = y0.to_vec::<u32>();
        got.extend(y1.to_vec::<u32>());
        assert_eq!(got, u32s(&c["threefry_2x32_count_iota8"]));
    }
}

#[test]
fn threefry_2x32_odd_and_rank2_counts() {
    // Values from a pure-Python transcription of JAX's threefry2x32 and threefry_2x32 (checked
    // first against every threefry_2x32/random_bits/split/fold_in entry of threefry.json).
    // Odd size 5: padded to [0,1,2,3,4,0], halves [0,1,2] / [3,4,0], the trailing output dropped.
    let got = random::threefry_2x32(&random::key(42u32), &Tensor::from_vec(&[5], (0u32..5).collect()));
    assert_eq!(got.to_vec::<u32>(), vec![3134548294, 3733159049, 843694964, 894150801, 801545058]);
    assert_eq!(got.shape().dims(), &[5]);
    // Rank 2: raveled, hashed, reshaped back.
    let key = Tensor::from_vec(&[2], vec![1u32, 2]);
    let got = random::threefry_2x32(&key, &Tensor::from_vec(&[2, 3], (10u32..16).collect()));
    assert_eq!(got.shape().dims(), &[2, 3]);
    assert_eq!(
        got.to_vec::<u32>(),
        vec![4177318064, 1964488029, 838955929, 1588193297, 3478798614, 2273177439]
    );
    // Empty count: empty result.
    let got = random::threefry_2x32(&key, &Tensor::from_vec::<u32>(&[0], vec![]));
    assert_eq!(got.to_vec::<u32>(), Vec::<u32>::new());
}

#[test]
fn random_bits_u32_shape_4() {
    for (key, c) in cases() {
        let got = random::random_bits(&key, &[4]);
        assert_eq!(got.dtype(), DType::U32);
        assert_eq!(got.to_vec::<u32>(), u32s(&c["random_bits_u32_shape_4"]), "key {:?}", c["key"]);
    }
}

#[test]
fn random_bits_u32_shape_2x3() {
    for (key, c) in cases() {
        let got = random::random_bits(&key, &[2, 3]);
        assert_eq!(got.shape().dims(), &[2, 3]);
        assert_eq!(got.to_vec::<u32>(), u32s(&c["random_bits_u32_shape_2x3"]), "key {:?}", c["key"]);
    }
}

#[test]
fn random_bits_ranks_0_to_4_follow_the_row_major_counter() {
    // The partitionable layout depends only on the row-major index, so every shape of 6 elements
    // gives the 2x3 values, rank 0 gives element 0, and an empty shape gives nothing.
    for (key, c) in cases() {
        let want = u32s(&c["random_bits_u32_shape_2x3"]);
        assert_eq!(random::random_bits(&key, &[]).to_vec::<u32>(), vec![want[0]]);
        assert_eq!(random::random_bits(&key, &[6]).to_vec::<u32>(), want);
        assert_eq!(random::random_bits(&key, &[2, 1, 3]).to_vec::<u32>(), want);
        assert_eq!(random::random_bits(&key, &[1, 2, 3, 1]).to_vec::<u32>(), want);
        assert_eq!(random::random_bits(&key, &[1]).to_vec::<u32>(), vec![want[0]]);
        let empty = random::random_bits(&key, &[2, 0, 3]);
        assert_eq!(empty.shape().dims(), &[2, 0, 3]);
        assert!(empty.to_vec::<u32>().is_empty());
    }
}

#[test]
fn split_2() {
    for (key, c) in cases() {
        let got = random::split(&key, 2);
        assert_eq!(got.shape().dims(), &[2, 2]);
        assert_eq!(got.to_vec::<u32>(), key_list(&c["split_2"]), "key {:?}", c["key"]);
        let [a, b] = random::split2(&key);
        assert_eq!([a.to_vec::<u32>(), b.to_vec::<u32>()].concat(), key_list(&c["split_2"]));
    }
}

#[test]
fn split_3() {
    for (key, c) in cases() {
        let got = random::split(&key, 3);
        assert_eq!(got.shape().dims(), &[3, 2]);
        assert_eq!(got.to_vec::<u32>(), key_list(&c["split_3"]), "key {:?}", c["key"]);
        // split(key, (3, 1)) lays the same keys out as [3, 1, 2].
        let shaped = random::split_shape(&key, &[3, 1]);
        assert_eq!(shaped.shape().dims(), &[3, 1, 2]);
        assert_eq!(shaped.to_vec::<u32>(), key_list(&c["split_3"]));
    }
    assert_eq!(random::split(&random::key(0u32), 0).shape().dims(), &[0, 2]);
}

#[test]
fn fold_in_7() {
    for (key, c) in cases() {
        assert_eq!(random::fold_in(&key, 7).to_vec::<u32>(), u32s(&c["fold_in_7"]), "key {:?}", c["key"]);
        let traced_data = random::fold_in_tensor(&key, &Tensor::scalar(7u32));
        assert_eq!(traced_data.to_vec::<u32>(), u32s(&c["fold_in_7"]));
        assert_eq!(
            random::fold_in_tensor(&key, &Tensor::scalar(7i32)).to_vec::<u32>(),
            u32s(&c["fold_in_7"])
        );
    }
}

#[test]
fn uniform_f32_shape_5() {
    for (key, c) in cases() {
        let got = random::uniform(&key, &[5], DType::F32, 0.0, 1.0);
        assert_eq!(got.dtype(), DType::F32);
        let want = f32s(&c["uniform_f32_shape_5"]);
        assert_eq!(bits_of(&got.to_vec::<f32>()), bits_of(&want), "key {:?}", c["key"]);
    }
}

#[test]
fn uniform_f32_is_the_mantissa_of_the_random_bits() {
    // uniform = f32::from_bits(bits >> 9 | 0x3F80_0000) - 1, with the reference bits.
    for (key, c) in cases() {
        let want: Vec<f32> = u32s(&c["random_bits_u32_shape_4"])
            .iter()
            .map(|b| f32::from_bits(b >> 9 | 0x3F80_0000) - 1.0)
            .collect();
        let got = random::uniform(&key, &[4], DType::F32, 0.0f32, 1.0f32).to_vec::<f32>();
        assert_eq!(bits_of(&got), bits_of(&want));
        // Scaled to [-2, 6): u * (6 - -2) + -2, then max(-2, ·); exact for these dyadic bounds.
        let scaled = random::uniform(&key, &[4], DType::F32, -2.0, 6.0).to_vec::<f32>();
        let want_scaled: Vec<f32> = want.iter().map(|u| (u * 8.0 + -2.0).max(-2.0)).collect();
        assert_eq!(bits_of(&scaled), bits_of(&want_scaled));
    }
}

#[test]
fn uniform_with_broadcast_bounds() {
    // minval [0, 10] broadcast over shape [3, 2]; maxval 20 (scalar): column 0 in [0, 20), column 1
    // in [10, 20).
    let key = random::key(42u32);
    let lo = Tensor::from_vec(&[2], vec![0.0f32, 10.0]);
    let got = random::uniform(&key, &[3, 2], DType::F32, lo, Tensor::scalar(20.0f32));
    assert_eq!(got.shape().dims(), &[3, 2]);
    let unit = random::uniform(&key, &[3, 2], DType::F32, 0.0, 1.0).to_vec::<f32>();
    for (i, (&g, &u)) in got.to_vec::<f32>().iter().zip(&unit).enumerate() {
        let (lo, span) = if i % 2 == 0 { (0.0f32, 20.0f32) } else { (10.0, 10.0) };
        assert_eq!(g.to_bits(), (u * span + lo).max(lo).to_bits(), "element {i}");
    }
}

#[test]
fn uniform_rank_0_and_empty() {
    let key = random::key(0u32);
    let d = data();
    let want0 = f32s(&d["cases"][0]["uniform_f32_shape_5"])[0];
    let s = random::uniform(&key, &[], DType::F32, 0.0, 1.0);
    assert_eq!(s.shape().rank(), 0);
    assert_eq!(s.item::<f32>().to_bits(), want0.to_bits());
    assert!(random::uniform(&key, &[0, 4], DType::F32, 0.0, 1.0).to_vec::<f32>().is_empty());
}

#[test]
fn uniform_f64_uses_64_bits() {
    // JAX: bits = y0 << 32 | y1 of the block of counter i (not xor'ed), and uniform =
    // (bits >> 12) * 2^-52 = y0 * 2^-32 + (y1 >> 12) * 2^-52. The block of counter (0, i) is row i of
    // split (split_2 in the data).
    for (key, c) in cases() {
        let blocks = key_list(&c["split_2"]);
        let want: Vec<f64> = blocks
            .chunks(2)
            .map(|y| y[0] as f64 * 2f64.powi(-32) + (y[1] >> 12) as f64 * 2f64.powi(-52))
            .collect();
        let got = random::uniform(&key, &[2], DType::F64, 0.0, 1.0);
        assert_eq!(got.dtype(), DType::F64);
        let got = got.to_vec::<f64>();
        assert_eq!(
            got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }
    // The first key by hand: y = [1797259609, 2579123966]; 1797259609 / 2^32 + (2579123966 >> 12) / 2^52
    // = 0.41845711... (2579123966 >> 12 = 629668, as 629668 * 4096 = 2579120128).
    let got = random::uniform(&random::key(0u32), &[1], DType::F64, 0.0, 1.0).item::<f64>();
    assert_eq!(got, 1797259609.0 / 4294967296.0 + 629668.0 / 4503599627370496.0);
    assert!((got - 0.41845711171638644).abs() < 1e-16);
}

#[test]
fn normal_f32_shape_5() {
    for (key, c) in cases() {
        let got = random::normal(&key, &[5], DType::F32);
        assert_eq!(got.dtype(), DType::F32);
        assert_ulps(&got.to_vec::<f32>(), &f32s(&c["normal_f32_shape_5"]), 4, "normal");
    }
}

#[test]
fn gumbel_f32_shape_5() {
    for (key, c) in cases() {
        let got = random::gumbel(&key, &[5], DType::F32).to_vec::<f32>();
        let want = f32s(&c["gumbel_f32_shape_5"]);
        assert_gumbel_close(&got, &want, "gumbel");
    }
}

#[test]
fn bernoulli_p0_3_shape_8() {
    for (key, c) in cases() {
        let got = random::bernoulli(&key, 0.3f32, &[8]);
        assert_eq!(got.dtype(), DType::Bool);
        assert_eq!(got.to_vec::<bool>(), bools(&c["bernoulli_p0.3_shape_8"]), "key {:?}", c["key"]);
    }
}

#[test]
fn bernoulli_edges() {
    let key = random::key(42u32);
    // uniform is in [0, 1): p = 0 is never, p = 1 always true.
    assert!(random::bernoulli(&key, 0.0f32, &[16]).to_vec::<bool>().iter().all(|&b| !b));
    assert!(random::bernoulli(&key, 1.0f32, &[16]).to_vec::<bool>().iter().all(|&b| b));
    // NaN compares false.
    assert!(random::bernoulli(&key, f32::NAN, &[4]).to_vec::<bool>().iter().all(|&b| !b));
    // A per-column p broadcast over [2, 2].
    let p = Tensor::from_vec(&[2], vec![0.0f32, 1.0]);
    assert_eq!(random::bernoulli(&key, p, &[2, 2]).to_vec::<bool>(), vec![false, true, false, true]);
}

#[test]
fn normal_and_gumbel_f64_moments() {
    // No f64 reference values: check the distributions (n = 4000; the standard error of the mean is
    // 1/sqrt(4000) ≈ 0.016 for the normal, π/sqrt(6 * 4000) ≈ 0.02 for Gumbel).
    let key = random::key(7u32);
    let n = 4000.0;
    let x = random::normal(&key, &[4000], DType::F64).to_vec::<f64>();
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    assert!(x.iter().all(|v| v.is_finite()));
    assert!(mean.abs() < 0.08 && (var - 1.0).abs() < 0.1, "mean {mean}, var {var}");
    // Gumbel: mean is the Euler–Mascheroni constant 0.5772..., variance π²/6 ≈ 1.645.
    let g = random::gumbel(&key, &[4000], DType::F64).to_vec::<f64>();
    let mean = g.iter().sum::<f64>() / n;
    let var = g.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    assert!((mean - 0.5772).abs() < 0.1 && (var - 1.645).abs() < 0.2, "mean {mean}, var {var}");
}

#[test]
fn randint_matches_jax_formula() {
    // Expected from a pure-Python transcription of JAX's randint (checked against threefry.json).
    // Key [0,0], [-5, 7): span 12, m = (65536 % 12)^2 % 12 = 4; element 0: hi = 3617712097 (% 12 = 1),
    // lo = 31327077 (% 12 = 9), (1*4 + 9) % 12 = 1 → -5 + 1 = -4.
    let key = random::key(0u32);
    let got = random::randint(&key, &[6], &Tensor::scalar(-5i32), &Tensor::scalar(7i32));
    assert_eq!(got.dtype(), DType::I32);
    assert_eq!(got.to_vec::<i32>(), vec![-4, -5, 3, -4, 6, -2]);
    let got = random::randint(&random::key(42u32), &[6], &Tensor::scalar(-5i32), &Tensor::scalar(7i32));
    assert_eq!(got.to_vec::<i32>(), vec![-5, 1, -2, -4, 0, -2]);
    // span 100000 > 2^16: m = 65536^2 wraps to 0 in u32 (JAX's quirk), so the value is lo % span:
    // 31327077 % 100000 = 27077.
    let got = random::randint(&key, &[4], &Tensor::scalar(0i32), &Tensor::scalar(100000i32));
    assert_eq!(got.to_vec::<i32>(), vec![27077, 27312, 8264, 82365]);
    // maxval <= minval gives minval.
    let got = random::randint(&key, &[2], &Tensor::scalar(3i32), &Tensor::scalar(3i32));
    assert_eq!(got.to_vec::<i32>(), vec![3, 3]);
    let got = random::randint(&key, &[2], &Tensor::scalar(3i32), &Tensor::scalar(-8i32));
    assert_eq!(got.to_vec::<i32>(), vec![3, 3]);
}

#[test]
fn categorical_is_argmax_of_gumbel_plus_logits() {
    // With the reference gumbel noise of each key: key [0,0] has g = [2.92, 3.83, -0.10, 0.28, 0.58],
    // so zero logits pick 1, and logits [0, 0, 4, 0, 0] give [2.92, 3.83, 3.90, 0.28, 0.58] → 2.
    let key = random::key(0u32);
    let zeros = Tensor::zeros(DType::F32, &[5]);
    assert_eq!(random::categorical(&key, &zeros, -1).to_vec::<i32>(), vec![1]);
    let logits = Tensor::from_vec(&[5], vec![0.0f32, 0.0, 4.0, 0.0, 0.0]);
    assert_eq!(random::categorical(&key, &logits, 0).to_vec::<i32>(), vec![2]);
    // A -inf logit is never chosen; a batch of two identical rows gives the same index twice.
    let logits = Tensor::from_vec(&[5], vec![0.0f32, f32::NEG_INFINITY, 0.0, 0.0, 0.0]);
    assert_eq!(random::categorical(&key, &logits, -1).to_vec::<i32>(), vec![0]);
}

#[test]
fn traced_functions_evaluate_to_the_same_bits() {
    let d = data();
    let c = &d["cases"][1]; // key [0, 42]
    let key = random::key(42u32);
    let t = trace(
        |k: Tensor| {
            let [a, _] = random::split2(&k);
            (
                random::random_bits(&k, &[2, 3]),
                random::uniform(&k, &[5], DType::F32, 0.0, 1.0),
                random::normal(&k, &[5], DType::F32),
                random::gumbel(&k, &[5], DType::F32),
                random::bernoulli(&k, 0.3f32, &[8]),
                random::fold_in(&k, 7),
                random::split(&k, 3),
                a,
            )
        },
        &key,
    )
    .expect("traces");
    let (bits, u, n, g, b, f, s, a) = t.eval(&key).expect("evaluates");
    assert_eq!(bits.to_vec::<u32>(), u32s(&c["random_bits_u32_shape_2x3"]));
    assert_eq!(bits_of(&u.to_vec::<f32>()), bits_of(&f32s(&c["uniform_f32_shape_5"])));
    assert_ulps(&n.to_vec::<f32>(), &f32s(&c["normal_f32_shape_5"]), 4, "traced normal");
    assert_gumbel_close(&g.to_vec::<f32>(), &f32s(&c["gumbel_f32_shape_5"]), "traced gumbel");
    assert_eq!(b.to_vec::<bool>(), bools(&c["bernoulli_p0.3_shape_8"]));
    assert_eq!(f.to_vec::<u32>(), u32s(&c["fold_in_7"]));
    assert_eq!(s.to_vec::<u32>(), key_list(&c["split_3"]));
    assert_eq!(a.to_vec::<u32>(), key_list(&c["split_2"])[..2].to_vec());
    // The recorded IR uses the threefry primitive, not constants folded eagerly.
    assert!(t.function.eqns.iter().any(|e| e.prim == kiln_ir::Prim::Threefry2x32));
}

#[test]
fn traced_seed_and_fold_in_data() {
    // key_from_seed and fold_in_tensor on traced scalars.
    let t = trace(
        |(seed, data): (Tensor, Tensor)| random::fold_in_tensor(&random::key_from_seed(&seed), &data),
        &(Tensor::scalar(42u32), Tensor::scalar(7u32)),
    )
    .expect("traces");
    let got = t.eval(&(Tensor::scalar(42u32), Tensor::scalar(7u32))).expect("evaluates");
    assert_eq!(got.to_vec::<u32>(), u32s(&data()["cases"][1]["fold_in_7"]));
}

#[test]
fn bad_key_is_an_error_in_a_trace() {
    let err = trace(|k: Tensor| random::random_bits(&k, &[4]), &Tensor::placeholder(DType::U32, &[3]))
        .expect_err("u32[3] is not a key");
    let msg = err.to_string();
    assert!(msg.contains("random_bits") && msg.contains("u32[2]"), "{msg}");
    let err = trace(|k: Tensor| random::split(&k, 2), &Tensor::placeholder(DType::I32, &[2])).unwrap_err();
    assert!(err.to_string().contains("split"), "{err}");
}

#[test]
fn non_float_dtype_is_an_error_in_a_trace() {
    let key = random::key(0u32);
    let err = trace(|k: Tensor| random::uniform(&k, &[2], DType::I32, 0.0, 1.0), &key).unwrap_err();
    assert!(err.to_string().contains("uniform") && err.to_string().contains("i32"), "{err}");
    let err = trace(|k: Tensor| random::normal(&k, &[2], DType::U32), &key).unwrap_err();
    assert!(err.to_string().contains("normal"), "{err}");
    let err = trace(|k: Tensor| random::gumbel(&k, &[2], DType::Bool), &key).unwrap_err();
    assert!(err.to_string().contains("gumbel"), "{err}");
}

#[test]
fn bounds_that_do_not_broadcast_are_an_error() {
    let key = random::key(0u32);
    let err =
        trace(|k: Tensor| random::uniform(&k, &[3], DType::F32, Tensor::zeros(DType::F32, &[2]), 1.0), &key)
            .unwrap_err();
    assert!(err.to_string().contains("(2,)") && err.to_string().contains("(3,)"), "{err}");
}

#[test]
#[should_panic(expected = "u32[2]")]
fn bad_key_panics_eagerly() {
    random::random_bits(&Tensor::from_vec(&[3], vec![0u32, 1, 2]), &[2]);
}
