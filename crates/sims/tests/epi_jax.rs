//! kiln against JAX on the same small population, parameters and noise: daily curves, the loss
//! `mean(deaths²) + 1e-3 · mean(infections²)` and its gradient, for both update forms. The JAX values
//! come from `tests/jax/epi_cross_check.py` (jax 0.10.2, CPU), stored in
//! `tests/data/epi_jax_cross_check.json` with its inputs.

use kiln::prelude::*;
use kiln_sims::epi::{CovidModel, CovidParams, Network, Population, UpdateForm};
use serde_json::Value;

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn close(name: &str, kiln: &[f32], jax: &[f32], scale: f32) {
    assert_eq!(kiln.len(), jax.len(), "{name}");
    for (k, (a, b)) in kiln.iter().zip(jax).enumerate() {
        let tol = 1e-4 * b.abs().max(scale);
        assert!((a - b).abs() <= tol, "{name}[{k}]: kiln {a} vs JAX {b}");
    }
}

#[test]
fn loss_and_gradient_equal_jax_with_the_same_noise() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/epi_jax_cross_check.json");
    let data: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (n, days) = (data["n"].as_u64().unwrap() as usize, data["days"].as_u64().unwrap() as usize);
    let ages: Vec<u8> = data["ages"].as_array().unwrap().iter().map(|a| a.as_u64().unwrap() as u8).collect();
    let edges: Vec<(u32, u32)> = data["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[0].as_u64().unwrap() as u32, e[1].as_u64().unwrap() as u32))
        .collect();
    let pop = Population { network: Network::from_undirected(n, &edges), ages };
    let weeks = days.div_ceil(7);
    let params = CovidParams {
        r0: Tensor::from_vec(&[weeks], floats(&data["r0"])),
        mortality: Tensor::from_vec(&[weeks], floats(&data["mortality"])),
        initial_pct: Tensor::scalar(data["initial_pct"].as_f64().unwrap() as f32),
    };
    let uniforms = Tensor::from_vec(&[days + 1, n], floats(&data["uniforms"]));
    let loss = |(m, p, u): (CovidModel, CovidParams, Tensor)| {
        let d = m.simulate_with_uniforms(&p, &u);
        let l = &d.deaths.square().mean_all() + &(d.infections.square().mean_all() * 1e-3);
        (l, d)
    };
    for (name, form) in [("reference", UpdateForm::Reference), ("keep_grad", UpdateForm::KeepGrad)] {
        let want = &data[name];
        let model = CovidModel::new(&pop, days, form);
        let args = (model, params.clone(), uniforms.clone());
        let ((l, daily), g) = jit(move |(m, p, u): (CovidModel, CovidParams, Tensor)| {
            let ((l, d), (g,)) =
                value_and_grad_aux(|(p,): (CovidParams,)| loss((m.clone(), p, u.clone())))((p,));
            ((l, d), g)
        })
        .call(&args)
        .unwrap();
        assert_eq!(daily.infections.to_vec::<f32>(), floats(&want["infections"]), "{name}: daily infections");
        close(&format!("{name} deaths"), &daily.deaths.to_vec::<f32>(), &floats(&want["deaths"]), 1e-3);
        close(&format!("{name} loss"), &[l.item::<f32>()], &[want["loss"].as_f64().unwrap() as f32], 0.0);
        let gr = floats(&want["grad_r0"]);
        let scale = gr.iter().fold(0f32, |m, x| m.max(x.abs())) * 1e-3;
        close(&format!("{name} d/dR0"), &g.r0.to_vec::<f32>(), &gr, scale);
        close(
            &format!("{name} d/dmortality"),
            &g.mortality.to_vec::<f32>(),
            &floats(&want["grad_mortality"]),
            1e-3,
        );
        let gi = want["grad_initial_pct"].as_f64().unwrap() as f32;
        close(&format!("{name} d/dinitial"), &[g.initial_pct.item::<f32>()], &[gi], 0.0);
        println!(
            "{name}: loss {}, d/dR0 {:?}, d/dinit {}",
            l.item::<f32>(),
            g.r0.to_vec::<f32>(),
            g.initial_pct.item::<f32>()
        );
    }
}
