//! The published GradABM COVID-19 model's constants (SEIRM), with their source.
//!
//! Source: AdityaLab/GradABM @ 03b01892 (MIT), `abm_model.py` (the `SEIRMProgression` class, `lam`,
//! `InfectionNetwork`) and `Data/Initialization/RandomNetworkParameters.csv`, as described in
//! `shared/research/anchor-gradabm.md` §1.3–1.4. Influenza (SIRS) constants are in [`flu`].

/// Stage values of the SEIRM model. Stages are carried as `f32` so they can carry a tangent.
pub mod stage {
    /// Susceptible.
    pub const S: f32 = 0.0;
    /// Exposed (already infectious in GradABM).
    pub const E: f32 = 1.0;
    /// Infected.
    pub const I: f32 = 2.0;
    /// Recovered.
    pub const R: f32 = 3.0;
    /// Mortality: never entered; deaths are an expected value (see [`crate::epi::model`]).
    pub const M: f32 = 4.0;
}

/// Susceptibility by age group (0–19, …, 80+); the reference has a 9th, unused entry (1.52).
pub const SUSCEPTIBILITY: [f32; 8] = [0.35, 0.69, 1.03, 1.03, 1.03, 1.03, 1.27, 1.52];

/// Infectiousness by stage S, E, I, R, M.
pub const INFECTIOUSNESS: [f32; 5] = [0.0, 0.33, 0.72, 0.0, 0.0];

/// Days from exposure to infected (E → I); the reference hard-codes it in `step()`.
pub const DAYS_EXPOSED: f32 = 3.0;

/// Days from infected to recovered (I → R).
pub const DAYS_INFECTED: f32 = 5.0;

/// The infectiousness-by-time Gamma: mean and standard deviation in days (the reference calls them
/// "scale" and "rate"), i.e. shape 6.61 and scale 0.833.
pub const GAMMA_MEAN_SD: (f64, f64) = (5.5, 2.14);

/// Mean random-network contacts `Ī` of an age group, the transmission normaliser: child (groups
/// 0–1) 2, adult (2–6) 4, elderly (7) 3 — the classes come from the reference's YAML indices
/// `CHILD_Upper_Index = 1`, `ADULT_Upper_Index = 6`.
pub fn mean_contacts(age_group: u8) -> f32 {
    match age_group {
        0 | 1 => 2.0,
        2..=6 => 4.0,
        _ => 3.0,
    }
}

/// The regularized lower incomplete gamma function `P(a, x)` (the Gamma(a, 1) CDF at `x`), by its
/// series for `x < a + 1` and its continued fraction otherwise (Numerical Recipes §6.2); about 1e-15
/// relative. `a > 0`; `P(a, x) = 0` for `x <= 0`.
pub fn regularized_gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let log_prefactor = a * x.ln() - x - libm::lgamma(a);
    if x < a + 1.0 {
        let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..1000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-17 {
                break;
            }
        }
        sum * log_prefactor.exp()
    } else {
        // Lentz's method for the continued fraction of Q(a, x).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..1000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            d = if d.abs() < tiny { tiny } else { d };
            c = b + an / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        1.0 - log_prefactor.exp() * h
    }
}

/// The discretized Gamma infectiousness curve `G[k] = CDF(k) − CDF(k − 1)`, `k = 0..len`, for the
/// Gamma with the given mean and standard deviation (days), as the reference builds it with
/// `scipy.stats.gamma`; `G[0] = 0`. `len` is `days + 10` in the reference.
pub fn gamma_pmf(len: usize, mean: f64, sd: f64) -> Vec<f32> {
    let scale = sd * sd / mean;
    let shape = mean / scale;
    let cdf = |k: f64| regularized_gamma_p(shape, k / scale);
    (0..len).map(|k| (cdf(k as f64) - cdf(k as f64 - 1.0)) as f32).collect()
}

/// The published GradABM influenza model's constants (SIRS), from the same source
/// (`abm_model.py`: `SIRSProgression`, the `Flu` branch of `GradABM.__init__`, and `step()`).
pub mod flu {
    /// Stage values of the SIRS model (`f32`, so they can carry a tangent).
    pub mod stage {
        /// Susceptible.
        pub const S: f32 = 0.0;
        /// Infected (infectious from the day after infection).
        pub const I: f32 = 1.0;
        /// Recovered.
        pub const R: f32 = 2.0;
    }

    /// The reference's susceptibility logits by age group ("from CDC Table 1"); the 9th entry is
    /// unused.
    pub const SUSCEPTIBILITY_LOGITS: [f64; 9] = [13.2, 7.9, 7.4, 7.4, 7.4, 12.0, 12.0, 3.9, 3.9];

    /// Susceptibility by age group: `25 · softmax(SUSCEPTIBILITY_LOGITS)` over all 9 entries, first 8
    /// kept (about 19.0, 0.095, 0.058, 0.058, 0.058, 5.73, 5.73, 0.0010).
    pub fn susceptibility() -> [f32; 8] {
        let max = SUSCEPTIBILITY_LOGITS.iter().copied().fold(f64::MIN, f64::max);
        let total: f64 = SUSCEPTIBILITY_LOGITS.iter().map(|l| (l - max).exp()).sum();
        std::array::from_fn(|g| (25.0 * (SUSCEPTIBILITY_LOGITS[g] - max).exp() / total) as f32)
    }

    /// Infectiousness by stage S, I, R.
    pub const INFECTIOUSNESS: [f32; 3] = [0.0, 0.72, 0.0];

    /// Days from infected to recovered, `infected_to_recovered_time` in `step()`. An agent infected on
    /// day `t` is due on day `t + 1 + 3.5`, i.e. recovers on day `t + 5`.
    pub const DAYS_INFECTED: f32 = 3.5;

    /// Days from recovered to susceptible, `recovered_to_susceptible_time`. The reference only applies
    /// it where `next_stage_time == t`, which a half-day time never equals; so it never takes effect
    /// and a recovered agent is susceptible again the day after recovering (see
    /// [`crate::epi::flu`]).
    pub const DAYS_RECOVERED: f32 = 2000.0;

    /// The infectiousness-by-time Gamma: mean and sd in days (the reference's "scale" and "rate").
    pub const GAMMA_MEAN_SD: (f64, f64) = (7.5, 2.14);
}
