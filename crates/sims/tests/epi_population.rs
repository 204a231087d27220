//! Generated populations: age-group counts from the county table, a contact network with the
//! published 25011 network's degree by age group, determinism, and clear errors.

use kiln_sims::epi::data::{bundled, load_county_age_groups};
use kiln_sims::epi::population::scaled_counts;
use kiln_sims::epi::{DEGREE_BY_AGE_25011, Population, PopulationError};

fn counts_of(pop: &Population) -> [u64; 8] {
    let mut c = [0u64; 8];
    for &a in &pop.ages {
        c[a as usize] += 1;
    }
    c
}

/// The fitted table is what the published files hold (recomputed here from the agents and edges).
#[test]
fn degree_table_is_measured_from_the_published_network() {
    let real = Population::franklin_county().unwrap();
    let measured = real.network.degree_by_age(&real.ages);
    for g in 0..8 {
        let (m, t) = (measured[g], DEGREE_BY_AGE_25011[g]);
        assert!((m.mean - t.mean).abs() < 1e-4, "group {g}: mean {} vs table {}", m.mean, t.mean);
        assert!(
            (m.variance - t.variance).abs() < 1e-3,
            "group {g}: var {} vs table {}",
            m.variance,
            t.variance
        );
    }
}

#[test]
fn generated_franklin_county_has_the_real_counts_and_degree_by_age() {
    let real = Population::franklin_county().unwrap();
    let real_degree = real.network.degree_by_age(&real.ages);
    let pop = Population::county(25011, 7).unwrap();
    // Age-group counts exactly as the county table (and as the real agents file).
    let table = load_county_age_groups(&bundled("gradabm_ma_county_age_groups.csv"), 25011).unwrap();
    assert_eq!(counts_of(&pop), table.counts);
    assert_eq!(counts_of(&pop), counts_of(&real));
    let degree = pop.network.degree_by_age(&pop.ages);
    for g in 0..8 {
        let (gen_, real_) = (degree[g], real_degree[g]);
        let rel = (gen_.mean - real_.mean).abs() / real_.mean;
        println!(
            "group {g}: mean degree {:.3} (real {:.3}, {:.2} %), variance {:.2} (real {:.2})",
            gen_.mean,
            real_.mean,
            rel * 100.0,
            gen_.variance,
            real_.variance
        );
        assert!(rel < 0.03, "group {g}: mean degree {} vs real {}", gen_.mean, real_.mean);
        assert!(
            (gen_.variance - real_.variance).abs() < 0.15 * real_.variance,
            "group {g}: degree variance {} vs real {}",
            gen_.variance,
            real_.variance
        );
    }
    let edges = pop.network.num_edges() as f64;
    assert!((edges / 499_982.0 - 1.0).abs() < 0.02, "{edges} directed edges vs the real 499,982");
    let min_degree = (0..pop.num_agents()).map(|i| pop.network.degree(i)).min().unwrap();
    assert!(min_degree >= 1, "every agent has a contact, as in the real network");
}

#[test]
fn generation_is_deterministic_for_a_seed() {
    let a = Population::county(25011, 3).unwrap();
    let b = Population::county(25011, 3).unwrap();
    let c = Population::county(25011, 4).unwrap();
    assert_eq!(a.ages, b.ages);
    assert_eq!(a.network, b.network);
    assert_ne!(a.network, c.network);
    assert_ne!(a.ages, c.ages);
}

#[test]
fn middlesex_flagship_has_its_table_counts_and_the_25011_degrees() {
    let pop = Population::county(25017, 1).unwrap();
    // 368,389 + 227,397 + 215,948 + 220,860 + 223,333 + 161,180 + 86,436 + 62,399.
    assert_eq!(pop.num_agents(), 1_565_942);
    assert_eq!(counts_of(&pop), [368_389, 227_397, 215_948, 220_860, 223_333, 161_180, 86_436, 62_399]);
    let degree = pop.network.degree_by_age(&pop.ages);
    for g in 0..8 {
        let rel = (degree[g].mean - DEGREE_BY_AGE_25011[g].mean).abs() / DEGREE_BY_AGE_25011[g].mean;
        assert!(
            rel < 0.01,
            "group {g}: mean degree {} vs 25011's {}",
            degree[g].mean,
            DEGREE_BY_AGE_25011[g].mean
        );
    }
    let per_agent = pop.network.num_edges() as f64 / pop.num_agents() as f64;
    assert!((per_agent - 7.05).abs() < 0.15, "{per_agent} directed edges per agent");
}

#[test]
fn scaled_counts_round_by_largest_remainder() {
    // 10 · (1/3, 1/3, 1/3) = 3.33 each: the one left over goes to the first group (ties to the lower).
    assert_eq!(scaled_counts(&[1, 1, 1, 0, 0, 0, 0, 0], 10), [4, 3, 3, 0, 0, 0, 0, 0]);
    // 7 · (0.5, 0.25, 0.25) = 3.5, 1.75, 1.75 → 3, 1, 1 and the two left over to the .75s.
    assert_eq!(scaled_counts(&[2, 1, 1, 0, 0, 0, 0, 0], 7), [3, 2, 2, 0, 0, 0, 0, 0]);
    let pop = Population::county_scaled(25017, 100_000, 1).unwrap();
    assert_eq!(pop.num_agents(), 100_000);
    let c = counts_of(&pop);
    let table = [368_389u64, 227_397, 215_948, 220_860, 223_333, 161_180, 86_436, 62_399];
    for g in 0..8 {
        let exact = table[g] as f64 * 100_000.0 / 1_565_942.0;
        assert!((c[g] as f64 - exact).abs() < 1.0, "group {g}: {} vs {exact}", c[g]);
    }
}

#[test]
fn errors_name_the_county_the_file_or_the_empty_population() {
    let e = Population::county(99_999, 1).unwrap_err().to_string();
    assert!(
        e.contains("gradabm_ma_county_age_groups.csv") && e.contains("county 99999 is not in the file"),
        "{e}"
    );
    assert!(e.contains("25017"), "the message lists the counties present: {e}");
    let e = Population::from_age_counts("county 1", [0; 8], 1).unwrap_err();
    assert!(matches!(e, PopulationError::NoAgents { .. }));
    assert!(e.to_string().contains("county 1: it has no agents"), "{e}");
    let e = Population::county_scaled(25011, 0, 1).unwrap_err().to_string();
    assert!(e.contains("no agents"), "{e}");
    let e = Population::from_age_counts("a big one", [100_000_000, 100_000_000, 1, 0, 0, 0, 0, 0], 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("200000001 agents is more than"), "{e}");
    let e = Population::county_from(std::path::Path::new("/nonexistent/ages.csv"), 25011, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/ages.csv: cannot read the file"), "{e}");
}
