//! Gradient semantics of the two update forms, and the straight-through gradient checked against
//! finite differences of the relaxed (soft) sample computed independently in plain Rust.

use kiln::prelude::*;
use kiln_sims::epi::disease::{GAMMA_MEAN_SD, INFECTIOUSNESS, SUSCEPTIBILITY, gamma_pmf, mean_contacts};
use kiln_sims::epi::{CovidModel, CovidParams, Population, UpdateForm};

const DAYS: usize = 56;

/// d(Σ deaths)/dθ and d(Σ infections)/dθ through `jit(grad)`, summed over the weeks:
/// ([R0, mortality, initial %] for deaths, the same for infections).
fn grads(model: &CovidModel, seed: u32) -> ([f32; 3], [f32; 3]) {
    let params = CovidParams::constant(DAYS, 2.5, 0.02, 0.5);
    let key = kiln::random::key(seed);
    let total = |pick_deaths: bool| {
        move |(m, p, k): (CovidModel, CovidParams, Tensor)| {
            let d = m.simulate(&p, &k);
            if pick_deaths { d.deaths.sum(All) } else { d.infections.sum(All) }
        }
    };
    let sums = |g: CovidParams| {
        [g.r0.sum(All).item::<f32>(), g.mortality.sum(All).item::<f32>(), g.initial_pct.item::<f32>()]
    };
    let args = (model.clone(), params, key);
    let d = jit(grad_argnums(total(true), &[1])).call(&args).unwrap().1;
    let i = jit(grad_argnums(total(false), &[1])).call(&args).unwrap().1;
    (sums(d), sums(i))
}

#[test]
fn reference_form_cuts_the_gradient_of_deaths_in_r0_and_initial_infections() {
    let pop = Population::synthetic(20_000, 7);
    let model = CovidModel::new(&pop, DAYS, UpdateForm::Reference);
    let (d, i) = grads(&model, 3);
    println!("reference: d deaths = {d:?}, d infections = {i:?}");
    // As measured on the published code (anchor-gradabm.md §3.1): (0, > 0, 0) and R0 > 0 for infections.
    assert_eq!(d[0], 0.0, "d deaths / d R0");
    assert_eq!(d[2], 0.0, "d deaths / d initial %");
    assert!(d[1] > 0.0, "d deaths / d mortality = {}", d[1]);
    assert!(i[0] > 0.0, "d infections / d R0 = {}", i[0]);
    assert_eq!(i[1], 0.0, "infections do not depend on mortality");
}

#[test]
fn keep_grad_form_gives_every_parameter_a_gradient() {
    let pop = Population::synthetic(20_000, 7);
    let model = CovidModel::new(&pop, DAYS, UpdateForm::KeepGrad);
    let (d, i) = grads(&model, 3);
    println!("keep_grad: d deaths = {d:?}, d infections = {i:?}");
    assert!(d.iter().all(|g| g.is_finite() && *g != 0.0), "d deaths = {d:?}");
    assert!(d[1] > 0.0 && d[0] > 0.0 && d[2] > 0.0, "more R0, mortality or seeds give more deaths: {d:?}");
    assert!(i[0] > 0.0, "d infections / d R0 = {}", i[0]);
}

#[test]
fn both_forms_have_identical_forward_values() {
    let pop = Population::synthetic(5_000, 11);
    let params = CovidParams::constant(DAYS, 3.0, 0.01, 1.0);
    let run = |form| {
        let m = CovidModel::new(&pop, DAYS, form);
        let d = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| m.simulate(&p, &k))
            .call(&(m, params.clone(), kiln::random::key(5u32)))
            .unwrap();
        (d.infections.to_vec::<f32>(), d.deaths.to_vec::<f32>())
    };
    let (a, b) = (run(UpdateForm::Reference), run(UpdateForm::KeepGrad));
    assert!(a.0.iter().sum::<f32>() > 100.0, "an epidemic happens: {:?}", a.0);
    assert_eq!(a, b);
}

/// Deaths are linear in each week's mortality with the noise fixed, so a central difference is exact
/// up to rounding: it must equal the AD gradient, week by week.
#[test]
fn mortality_gradient_equals_finite_differences() {
    let pop = Population::synthetic(2_000, 3);
    let days = 21;
    let model = CovidModel::new(&pop, days, UpdateForm::KeepGrad);
    let key = kiln::random::key(9u32);
    let loss = |(m, p, k): (CovidModel, CovidParams, Tensor)| m.simulate(&p, &k).deaths.sum(All);
    let params = CovidParams::constant(days, 4.0, 0.01, 2.0);
    let g = jit(grad_argnums(loss, &[1])).call(&(model.clone(), params.clone(), key.clone())).unwrap().1;
    let f = jit(loss);
    let h = 1e-3f32;
    for w in 0..3 {
        let shifted = |dh: f32| {
            let mut m = params.mortality.to_vec::<f32>();
            m[w] += dh;
            let p = CovidParams { mortality: Tensor::from_vec(&[3], m), ..params.clone() };
            f64::from(f.call(&(model.clone(), p, key.clone())).unwrap().item::<f32>())
        };
        let fd = (shifted(h) - shifted(-h)) / (2.0 * f64::from(h));
        let ad = f64::from(g.mortality.to_vec::<f32>()[w]);
        println!("week {w}: AD {ad}, FD {fd}");
        // Nobody leaves I before day 8 (3 days exposed + 5 infected), so week 0 has no deaths.
        assert_eq!(ad > 0.0, w > 0, "week {w}: AD {ad}");
        assert!((ad - fd).abs() <= 1e-3 * ad, "week {w}: AD {ad} vs FD {fd}");
    }
}

/// Day 0 written out in plain f64 Rust from the same uniforms: the hard draws give the day's
/// infections, and the straight-through gradient in R0 is the derivative of the relaxed count
/// Σ_{susceptible i} sigmoid(logit p_i(R0) + logistic(u_i)), taken here by central differences.
#[test]
fn day_zero_matches_a_hand_model_and_its_r0_gradient_matches_finite_differences() {
    let n = 20_000;
    let pop = Population::synthetic(n, 21);
    let model = CovidModel::new(&pop, 1, UpdateForm::KeepGrad);
    // Reproducible uniforms in (0, 1) from a simple LCG (any fixed noise will do).
    let mut state = 12_345u64;
    let mut next = || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 40) as f32 + 0.5) / (1u64 << 24) as f32
    };
    let u: Vec<f32> = (0..2 * n).map(|_| next()).collect();
    let (r0, init_pct) = (8.0f64, 20.0f64);
    let params = CovidParams::constant(1, r0 as f32, 0.02, init_pct as f32);
    let uniforms = Tensor::from_vec(&[2, n], u.clone());
    let infections =
        |(m, p, u): (CovidModel, CovidParams, Tensor)| m.simulate_with_uniforms(&p, &u).infections.sum(All);
    let args = (model, params, uniforms);
    let kiln_count = jit(infections).call(&args).unwrap().item::<f32>();
    let kiln_grad = jit(grad_argnums(infections, &[1])).call(&args).unwrap().1.r0.item::<f32>();

    // The hand model: initial draws, infectiousness of the exposed (A[E] · G[1]), pressure, day-0 draws.
    let logit = |p: f64, u: f64| (p + 1e-9).ln() - (1.0 - p + 1e-9).ln() + u.ln() - (1.0 - u).ln();
    let exposed: Vec<bool> = (0..n).map(|i| logit(init_pct / 100.0, f64::from(u[i])) > 0.0).collect();
    let g1 = f64::from(gamma_pmf(11, GAMMA_MEAN_SD.0, GAMMA_MEAN_SD.1)[1]);
    let factor: Vec<f64> =
        exposed.iter().map(|&e| if e { f64::from(INFECTIOUSNESS[1]) * g1 } else { 0.0 }).collect();
    let net = &pop.network;
    let pressure: Vec<f64> = (0..n)
        .map(|i| {
            (net.row_ptr()[i]..net.row_ptr()[i + 1]).map(|e| factor[net.src()[e as usize] as usize]).sum()
        })
        .collect();
    let scale = |i: usize| f64::from(SUSCEPTIBILITY[pop.ages[i] as usize] / mean_contacts(pop.ages[i]));
    let day_logits = |r0: f64| -> Vec<Option<f64>> {
        (0..n)
            .map(|i| {
                let p = 1.0 - (-r0 * scale(i) * pressure[i]).exp();
                (!exposed[i]).then(|| logit(p, f64::from(u[n + i])))
            })
            .collect()
    };
    let hard: f64 = day_logits(r0).iter().flatten().filter(|&&l| l > 0.0).count() as f64;
    let soft = |r0: f64| day_logits(r0).iter().flatten().map(|l| 1.0 / (1.0 + (-l).exp())).sum::<f64>();
    let h = 1e-5;
    let fd = (soft(r0 + h) - soft(r0 - h)) / (2.0 * h);
    println!("day 0: kiln {kiln_count} infections, hand {hard}; d/dR0 kiln {kiln_grad}, FD {fd}");
    assert!(hard > 5.0, "the check needs some infections: {hard}");
    assert_eq!(f64::from(kiln_count), hard);
    assert!((f64::from(kiln_grad) - fd).abs() <= 1e-3 * fd.abs(), "d/dR0: kiln {kiln_grad} vs FD {fd}");
}
