//! Forward faithfulness on the real Franklin County, MA population (70,916 agents, the published
//! network) against the 16-seed mean curves of the published model
//! (`tests/data/sim_gradabm_25011_golden_curves.csv`, from the PyTorch re-statement that matched the
//! reference code exactly on 4 of 4 seeds).

use kiln::prelude::*;
use kiln_sims::epi::{CovidModel, CovidParams, Population, UpdateForm};

const DAYS: usize = 56;
const SEEDS: usize = 16;

/// (infections mean, deaths mean) per day from the golden file.
fn golden() -> (Vec<f64>, Vec<f64>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sim_gradabm_25011_golden_curves.csv");
    let mut r = csv::Reader::from_path(path).unwrap();
    let (mut inf, mut dead) = (Vec::new(), Vec::new());
    for rec in r.records() {
        let rec = rec.unwrap();
        inf.push(rec[1].parse().unwrap());
        dead.push(rec[3].parse().unwrap());
    }
    (inf, dead)
}

fn relative_l1(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>() / b.iter().map(|y| y.abs()).sum::<f64>()
}

/// Mean over the seeds (rows) of a `[SEEDS, DAYS]` result.
fn seed_mean(t: &Tensor) -> Vec<f64> {
    let v = t.to_vec::<f32>();
    (0..DAYS).map(|d| (0..SEEDS).map(|s| f64::from(v[s * DAYS + d])).sum::<f64>() / SEEDS as f64).collect()
}

#[test]
fn franklin_county_16_seeds_match_the_published_model() {
    let pop = Population::franklin_county().unwrap();
    assert_eq!(pop.num_agents(), 70_916);
    assert_eq!(pop.network.num_edges(), 499_982);
    let model = CovidModel::new(&pop, DAYS, UpdateForm::Reference);
    let params = CovidParams::constant(DAYS, 2.5, 0.02, 0.5);
    let keys = kiln::random::split(&kiln::random::key(20_261_129u32), SEEDS);
    let ensemble = jit(|(m, p, ks): (CovidModel, CovidParams, Tensor)| {
        vmap(move |k: Tensor| m.simulate(&p, &k), 0, 0)(ks)
    });
    let daily = ensemble.call(&(model, params, keys)).unwrap();
    assert_eq!(daily.infections.shape().dims(), &[SEEDS, DAYS]);
    let (inf, dead) = (seed_mean(&daily.infections), seed_mean(&daily.deaths));
    let (g_inf, g_dead) = golden();
    let (l1_inf, l1_dead) = (relative_l1(&inf, &g_inf), relative_l1(&dead, &g_dead));
    let (tot_inf, tot_dead) = (inf.iter().sum::<f64>(), dead.iter().sum::<f64>());
    println!("relative L1: infections {l1_inf:.4}, deaths {l1_dead:.4}; totals {tot_inf:.1}, {tot_dead:.2}");
    assert!(l1_inf < 0.03, "infections curve relative L1 {l1_inf}");
    assert!(l1_dead < 0.03, "deaths curve relative L1 {l1_dead}");
    // Golden totals 54,755 and 1,069; one seed's sd is about 216 and 7.4, a 16-seed mean's 54 and 1.9.
    assert!((tot_inf - 54_755.0).abs() < 250.0, "total infections {tot_inf}");
    assert!((tot_dead - 1_069.0).abs() < 10.0, "total deaths {tot_dead}");
}
