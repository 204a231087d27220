//! The GradABM influenza (SIRS) model on hand-computed tiny cases and against a plain-Rust
//! re-statement of the published `SIRSProgression`.

use kiln::prelude::*;
use kiln_sims::epi::disease::{flu, gamma_pmf, mean_contacts};
use kiln_sims::epi::{FluModel, FluParams, Network, Population, UpdateForm};

const HI: f32 = 0.999_999; // logistic(u) ≈ +13.8: infected whenever p > 1e-6
const LO: f32 = 1e-6; // logistic(u) ≈ −13.8: never infected unless p > 1 − 1e-6

#[test]
fn flu_susceptibility_is_25_times_the_softmax_of_the_published_logits() {
    let s = flu::susceptibility();
    // Hand: exp(l − 13.2) summed over [13.2, 7.9, 7.4×3, 12.0×2, 3.9×2] = 1 + e^-5.3 + 3e^-5.8 + 2e^-1.2 + 2e^-9.3.
    let z = 1.0 + (-5.3f64).exp() + 3.0 * (-5.8f64).exp() + 2.0 * (-1.2f64).exp() + 2.0 * (-9.3f64).exp();
    let want = [
        25.0 / z,
        25.0 * (-5.3f64).exp() / z,
        25.0 * (-5.8f64).exp() / z,
        0.0,
        0.0,
        25.0 * (-1.2f64).exp() / z,
    ];
    for (g, w) in want.iter().enumerate().filter(|(_, w)| **w > 0.0) {
        assert!((f64::from(s[g]) - w).abs() < 1e-5 * w, "group {g}: {} vs {w}", s[g]);
    }
    assert_eq!(s[2], s[4]);
    assert_eq!(s[5], s[6]);
}

/// Two agents, one edge. Agent 0 starts infected; agent 1 is infected on day 2; agent 0 recovers on
/// day 4, is susceptible after day 5 (the 2000-day immunity never applies, as in the reference) and
/// is reinfected by agent 1 on day 6 — though its noise would infect it on days 4 and 5 too.
#[test]
fn two_agents_follow_the_published_sirs_timeline() {
    let days = 12;
    let pop = Population { ages: vec![0, 0], network: Network::from_undirected(2, &[(0, 1)]) };
    let mut u = vec![LO; 2 * (days + 1)];
    u[0] = HI; // day-0 draw: agent 0 infected
    u[2 * (2 + 1) + 1] = HI; // agent 1 on day 2
    for d in [4, 5, 6] {
        u[2 * (d + 1)] = HI; // agent 0 on days 4, 5, 6: only day 6 finds it susceptible
    }
    let uniforms = Tensor::from_vec(&[days + 1, 2], u);
    let params = FluParams::constant(days, 2.6, 50.0);

    // The draws on days 2 and 6 need p > 1e-6: λ = R0 · S[0]/Ī[0] · A[I] · G[t − t_inf].
    let pmf = gamma_pmf(days + 10, flu::GAMMA_MEAN_SD.0, flu::GAMMA_MEAN_SD.1);
    let scale = f64::from(flu::susceptibility()[0] / mean_contacts(0));
    for k in [3, 4] {
        let p = 1.0 - (-2.6 * scale * 0.72 * f64::from(pmf[k])).exp();
        assert!(p > 1e-5, "G[{k}] gives p = {p}");
    }

    let never = (days + 1) as f32;
    let (i, r, s) = (flu::stage::I, flu::stage::R, flu::stage::S);
    let want_stage =
        [[i, s], [i, s], [i, i], [i, i], [r, i], [s, i], [i, i], [i, r], [i, s], [i, s], [i, s], [r, s]];
    let want_infected =
        [[1, 0], [1, 0], [1, 1], [1, 1], [0, 1], [0, 1], [1, 1], [1, 0], [1, 0], [1, 0], [1, 0], [0, 0]];
    let want_next = |d: usize| {
        let a0 = if d < 6 { 3.5 } else { 6.0 + 4.5 };
        let a1 = if d < 2 { never } else { 2.0 + 4.5 };
        [a0, a1]
    };
    let want_inf: Vec<f32> = (0..days).map(|d| if d == 2 || d == 6 { 1.0 } else { 0.0 }).collect();

    for form in [UpdateForm::Reference, UpdateForm::KeepGrad] {
        let model = FluModel::new(&pop, days, form);
        let (daily, states) =
            jit(|(m, p, u): (FluModel, FluParams, Tensor)| m.trajectory_with_uniforms(&p, &u))
                .call(&(model, params.clone(), uniforms.clone()))
                .unwrap();
        let stage = states.stage.to_vec::<f32>();
        let infected = states.infected.to_vec::<bool>();
        let next = states.t_next.to_vec::<f32>();
        for d in 0..days {
            assert_eq!(&stage[2 * d..2 * d + 2], &want_stage[d], "{form:?} stages after day {d}");
            let inf: Vec<u8> = infected[2 * d..2 * d + 2].iter().map(|&b| u8::from(b)).collect();
            assert_eq!(inf, want_infected[d], "{form:?} infected after day {d}");
            assert_eq!(&next[2 * d..2 * d + 2], &want_next(d), "{form:?} next times after day {d}");
        }
        assert_eq!(daily.infections.to_vec::<f32>(), want_inf, "{form:?}");
        let ili: Vec<f32> = want_inf.iter().map(|x| 100.0 * x / 2.0).collect();
        assert_eq!(daily.ili.to_vec::<f32>(), ili, "{form:?}");
        // Weekly ILI: days 0–6 hold both infections; days 7–11 are a partial week, dropped.
        assert_eq!(daily.weekly_ili().to_vec::<f32>(), vec![100.0]);
    }
}

/// The published SIRS in plain f64 Rust (`abm_model.py`'s `SIRSProgression` + `step()`), fed the
/// same uniforms: the hard draws give every day's infections; the straight-through gradient of the
/// total in R0 is the derivative of the relaxed draws with the trajectory held, by central
/// differences.
struct HandFlu {
    infections: Vec<f64>,
    /// Agents infected more than once (each was recovered, then susceptible again).
    reinfected: usize,
    /// Σ over days and susceptible agents of sigmoid(logit p(R0 + h) + logistic(u)) − the same at R0 − h.
    soft_slope: f64,
}

fn hand_flu(pop: &Population, days: usize, r0: f64, init_pct: f64, u: &[f32]) -> HandFlu {
    let n = pop.num_agents();
    let pmf = gamma_pmf(days + 10, flu::GAMMA_MEAN_SD.0, flu::GAMMA_MEAN_SD.1);
    let sus = flu::susceptibility();
    let scale: Vec<f64> = pop.ages.iter().map(|&a| f64::from(sus[a as usize] / mean_contacts(a))).collect();
    let logit = |p: f64, u: f32| {
        let u = f64::from(u);
        (p + 1e-9).ln() - (1.0 - p + 1e-9).ln() + u.ln() - (1.0 - u).ln()
    };
    let never = (days + 1) as f64;
    let mut stage: Vec<u8> = (0..n).map(|i| u8::from(logit(init_pct / 100.0, u[i]) > 0.0)).collect();
    let mut infected: Vec<bool> = stage.iter().map(|&s| s == 1).collect();
    let mut t_inf: Vec<f64> = infected.iter().map(|&b| if b { -1.0 } else { never }).collect();
    let mut t_next: Vec<f64> = infected.iter().map(|&b| if b { 3.5 } else { never }).collect();
    let (mut infections, mut soft_slope, h) = (Vec::new(), 0.0, 1e-4);
    let mut times_infected: Vec<usize> = infected.iter().map(|&b| usize::from(b)).collect();
    let net = &pop.network;
    for d in 0..days {
        let t = d as f64;
        let ud = &u[(d + 1) * n..(d + 2) * n];
        let factor: Vec<f64> = (0..n)
            .map(|j| {
                if !infected[j] {
                    return 0.0;
                }
                let since = (t - t_inf[j]).clamp(0.0, (days + 9) as f64) as usize;
                f64::from(flu::INFECTIOUSNESS[stage[j] as usize]) * f64::from(pmf[since])
            })
            .collect();
        let mut count = 0.0;
        let mut newly = vec![false; n];
        for i in 0..n {
            let pressure: f64 = (net.row_ptr()[i]..net.row_ptr()[i + 1])
                .map(|e| factor[net.src()[e as usize] as usize])
                .sum();
            if stage[i] != 0 {
                continue;
            }
            let l = |r: f64| logit(1.0 - (-r * scale[i] * pressure).exp(), ud[i]);
            let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
            soft_slope += (sig(l(r0 + h)) - sig(l(r0 - h))) / (2.0 * h);
            if l(r0) > 0.0 {
                newly[i] = true;
                times_infected[i] += 1;
                count += 1.0;
            }
        }
        infections.push(count);
        for i in 0..n {
            let due = t_next[i] <= t;
            let leaving = stage[i] == 1 && due;
            let progressed = match stage[i] {
                1 if due => 2,
                2 if due => 0,
                s => s,
            };
            if stage[i] == 1 && t_next[i] == t {
                t_next[i] = t + 2000.0;
            } else if stage[i] == 2 && t_next[i] == t {
                t_next[i] = never;
            }
            if newly[i] {
                t_next[i] = t + 1.0 + 3.5;
                t_inf[i] = t;
                stage[i] = 1;
                infected[i] = true;
            } else {
                stage[i] = progressed;
            }
            if leaving {
                infected[i] = false;
            }
        }
    }
    let reinfected = times_infected.iter().filter(|&&k| k > 1).count();
    HandFlu { infections, reinfected, soft_slope }
}

#[test]
fn a_county_outbreak_matches_the_plain_rust_published_model_with_its_r0_gradient() {
    let (n, days) = (3_000, 28);
    let pop = Population::county_scaled(25011, n as u64, 5).unwrap();
    let mut state = 99u64;
    let mut next = || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 40) as f32 + 0.5) / (1u64 << 24) as f32
    };
    let u: Vec<f32> = (0..(days + 1) * n).map(|_| next()).collect();
    let (r0, init) = (2.6, 5.0);
    let hand = hand_flu(&pop, days, r0, init, &u);
    let total: f64 = hand.infections.iter().sum();
    println!(
        "hand: {total} infections, {} reinfected, d/dR0 {}; daily {:?}",
        hand.reinfected, hand.soft_slope, hand.infections
    );
    assert!(total > 100.0, "the check needs an outbreak: {total}");
    // Some agents must be infected twice for the check to cover R → S (one day of immunity).
    assert!(hand.reinfected > 10, "reinfections: {}", hand.reinfected);
    let uniforms = Tensor::from_vec(&[days + 1, n], u);
    let params = FluParams::constant(days, r0 as f32, init as f32);
    let total_ili = |(m, p, u): (FluModel, FluParams, Tensor)| m.simulate_with_uniforms(&p, &u).ili.sum(All);
    for form in [UpdateForm::Reference, UpdateForm::KeepGrad] {
        let model = FluModel::new(&pop, days, form);
        let args = (model.clone(), params.clone(), uniforms.clone());
        let daily = jit(|(m, p, u): (FluModel, FluParams, Tensor)| m.simulate_with_uniforms(&p, &u))
            .call(&args)
            .unwrap();
        let kiln_inf: Vec<f64> = daily.infections.to_vec::<f32>().iter().map(|&x| f64::from(x)).collect();
        assert_eq!(kiln_inf, hand.infections, "{form:?}: daily infections");
        let (_, g, _) = jit(grad_argnums(total_ili, &[1])).call(&args).unwrap();
        let (dr0, dinit) = (g.r0.sum(All).item::<f32>(), g.initial_pct.item::<f32>());
        let want = hand.soft_slope * 100.0 / n as f64;
        println!("{form:?}: d(ΣILI)/dR0 kiln {dr0}, hand {want}; d/dinit {dinit}");
        assert!((f64::from(dr0) - want).abs() <= 1e-3 * want.abs(), "{form:?}: {dr0} vs {want}");
        assert_eq!(dinit, 0.0, "{form:?}: ILI has no path to the initial % (detached masks)");
    }
}

#[test]
fn wrong_parameter_shapes_are_reported_at_the_call() {
    let pop = Population::synthetic(50, 1);
    let model = FluModel::new(&pop, 14, UpdateForm::Reference);
    let bad = FluParams::constant(21, 1.3, 1.0); // 3 weeks of R0 for a 2-week model
    let err = jit(|(m, p, k): (FluModel, FluParams, Tensor)| m.simulate(&p, &k))
        .call(&(model, bad, kiln::random::key(0u32)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("flu parameters for 14 days must be r0 f32[2]"), "{err}");
}
