//! The infectiousness curve: the incomplete gamma function against closed forms, and the discretized
//! Gamma's mass and mean.

use kiln_sims::epi::disease::{GAMMA_MEAN_SD, gamma_pmf, regularized_gamma_p};

#[test]
fn regularized_gamma_matches_closed_forms() {
    // Integer shape: P(3, x) = 1 − e^{−x}(1 + x + x²/2); shape 1: 1 − e^{−x}.
    for x in [0.1f64, 0.5, 1.0, 2.5, 4.0, 7.0, 15.0, 40.0] {
        let p3 = 1.0 - (-x).exp() * (1.0 + x + x * x / 2.0);
        assert!((regularized_gamma_p(3.0, x) - p3).abs() < 1e-13, "P(3, {x})");
        assert!((regularized_gamma_p(1.0, x) - (1.0 - (-x).exp())).abs() < 1e-13, "P(1, {x})");
    }
    // Shape 1/2: P(1/2, x) = erf(sqrt(x)); erf(1) = 0.8427007929497149.
    assert!((regularized_gamma_p(0.5, 1.0) - 0.842_700_792_949_714_9).abs() < 1e-13);
    assert_eq!(regularized_gamma_p(6.61, 0.0), 0.0);
}

#[test]
fn covid_infectiousness_curve_has_unit_mass_and_the_published_mean() {
    let (mean, sd) = GAMMA_MEAN_SD;
    let g = gamma_pmf(66, mean, sd);
    assert_eq!(g[0], 0.0);
    let mass: f64 = g.iter().map(|&x| f64::from(x)).sum();
    assert!((mass - 1.0).abs() < 1e-6, "mass {mass}");
    // G[k] is the mass of (k−1, k], whose midpoint is k − 1/2: Σ k G[k] = mean + 1/2 (to discretization).
    let m: f64 = g.iter().enumerate().map(|(k, &x)| k as f64 * f64::from(x)).sum();
    assert!((m - (mean + 0.5)).abs() < 0.01, "mean {m}");
    let peak = (0..g.len()).max_by(|&a, &b| g[a].total_cmp(&g[b])).unwrap();
    assert_eq!(peak, 5, "the mode of Gamma(shape 6.61, scale 0.833) is 4.7 days, in (4, 5]");
}
