//! Loaders: real values of the bundled files, and errors that name the file, line and value.

mod common;

use kiln_sims::epi::Population;
use kiln_sims::epi::data::{
    bundled, load_agent_ages, load_county_age_groups, load_county_covid_daily, load_edges, load_flu_weekly,
};
use std::path::PathBuf;

/// A scratch file with `contents`, deleted when dropped.
fn scratch(name: &str, contents: &str) -> common::cli::ScratchFile {
    common::cli::scratch_file("epi-data", name, contents)
}

#[test]
fn bundled_files_hold_the_published_values() {
    let pop = Population::franklin_county().unwrap();
    assert_eq!(pop.num_agents(), 70_916);
    // 249,991 undirected pairs, both directions; 179 self-loops count twice as in the simulator.
    assert_eq!(pop.network.num_edges(), 499_982);
    let self_loops = pop.network.src().iter().zip(pop.network.dst()).filter(|(s, d)| s == d).count();
    assert_eq!(self_loops, 2 * 179);
    assert!(pop.network.dst().windows(2).all(|w| w[0] <= w[1]), "edges sorted by destination");
    // First line of the edge file is "0,519": agent 519 has an edge from 0, agent 0 one from 519.
    let into = |i: usize| {
        let r = pop.network.row_ptr();
        pop.network.src()[r[i] as usize..r[i + 1] as usize].to_vec()
    };
    assert!(into(519).contains(&0) && into(0).contains(&519));
    let mut counts = [0usize; 8];
    pop.ages.iter().for_each(|&a| counts[a as usize] += 1);
    assert_eq!(counts, [14468, 8137, 7865, 9450, 12140, 10983, 4588, 3285]);

    let franklin = load_county_age_groups(&bundled("gradabm_ma_county_age_groups.csv"), 25011).unwrap();
    assert_eq!(franklin.num_agents, 70_916);
    let middlesex = load_county_age_groups(&bundled("gradabm_ma_county_age_groups.csv"), 25017).unwrap();
    assert_eq!(middlesex.num_agents, 1_565_933);

    let covid = load_county_covid_daily(&bundled("gradabm_ma_county_covid_daily.csv"), 25017).unwrap();
    assert_eq!(covid.dates.first().map(String::as_str), Some("2020-02-01"));
    let deaths_2020: f64 = covid
        .dates
        .iter()
        .zip(&covid.deaths)
        .filter(|(d, _)| d.starts_with("2020"))
        .filter_map(|(_, x)| *x)
        .sum();
    assert_eq!(deaths_2020, 2729.0, "Middlesex deaths in 2020 (anchor-gradabm.md §4.4)");

    let flu = load_flu_weekly(&bundled("gradabm_flu_state_weekly_ili.csv"), "MA").unwrap();
    assert_eq!(flu.epiweeks[0], 201734);
    assert!(flu.ili.iter().all(|x| x.is_finite() && *x >= 0.0));
}

#[test]
fn missing_file_is_named() {
    let path = PathBuf::from("/nonexistent/agents.csv");
    let err = load_agent_ages(&path).unwrap_err().to_string();
    assert!(err.starts_with("/nonexistent/agents.csv: cannot read the file"), "{err}");
}

#[test]
fn malformed_lines_name_file_line_and_value() {
    let agents = scratch("agents.csv", ",age_group,stage\n0,3,0\n1,9,0\n");
    let err = load_agent_ages(&agents).unwrap_err().to_string();
    assert!(err.ends_with("agents.csv:3: age_group \"9\" is not an age group 0..=7"), "{err}");

    let agents = scratch("agents2.csv", ",age_group,stage\n0,3,0\n1,x,0\n");
    let err = load_agent_ages(&agents).unwrap_err().to_string();
    assert!(err.contains("agents2.csv:3: age_group \"x\" is not a valid"), "{err}");

    let edges = scratch("edges.csv", "0,1\n1,2\n2,7\n");
    let err = load_edges(&edges, 5).unwrap_err().to_string();
    assert!(err.ends_with("edges.csv:3: agent index 7 is out of range for 5 agents"), "{err}");

    let edges = scratch("edges2.csv", "0,1\n1;2\n");
    let err = load_edges(&edges, 5).unwrap_err().to_string();
    assert!(err.contains("edges2.csv:2:"), "{err}");

    let covid = scratch(
        "covid.csv",
        "geo_value,time_value,cases,deaths\n25011,2020-03-01,1,0\n25011,2020-03-02,2,zero\n",
    );
    let err = load_county_covid_daily(&covid, 25011).unwrap_err().to_string();
    assert!(err.ends_with("covid.csv:3: deaths \"zero\" is not a valid f64"), "{err}");
}

#[test]
fn unknown_county_or_region_lists_what_is_there() {
    let err =
        load_county_covid_daily(&bundled("gradabm_ma_county_covid_daily.csv"), 6037).unwrap_err().to_string();
    assert!(err.contains("gradabm_ma_county_covid_daily.csv: county 6037 is not in the file"), "{err}");
    assert!(err.contains("25011"), "{err}");
    let err =
        load_county_age_groups(&bundled("gradabm_ma_county_age_groups.csv"), 25999).unwrap_err().to_string();
    assert!(err.contains("county 25999 is not in the file") && err.contains("25017"), "{err}");
    let err = load_flu_weekly(&bundled("gradabm_flu_state_weekly_ili.csv"), "XX").unwrap_err().to_string();
    assert!(err.contains("region \"XX\" is not in the file") && err.contains("MA"), "{err}");
}

#[test]
fn a_county_listed_twice_is_an_error_not_the_last_row() {
    let header =
        "fips,num_agents,AGE_0_19,AGE_20_29,AGE_30_39,AGE_40_49,AGE_50_59,AGE_60_69,AGE_70_79,AGE_80\n";
    let rows = "25011,80,10,10,10,10,10,10,10,10\n25013,8,1,1,1,1,1,1,1,1\n25011,16,2,2,2,2,2,2,2,2\n";
    let f = scratch("ages-twice.csv", &format!("{header}{rows}"));
    let err = load_county_age_groups(&f, 25011).unwrap_err().to_string();
    assert!(err.ends_with("ages-twice.csv:4: county 25011 is listed again (first on line 2)"), "{err}");
    // Another county's repeat does not concern the one asked for.
    let ok = load_county_age_groups(&f, 25013).unwrap();
    assert_eq!((ok.num_agents, ok.counts), (8, [1; 8]));
}

#[test]
fn flu_region_names_are_compared_without_surrounding_spaces() {
    let f = scratch("flu-spaces.csv", "region,epiweek,ili\n MA ,201740,1.5\nMA,201741,2.5\nRI,201740,9\n");
    let weekly = load_flu_weekly(&f, "MA").unwrap();
    assert_eq!(
        (weekly.region.as_str(), weekly.epiweeks, weekly.ili),
        ("MA", vec![201740, 201741], vec![1.5, 2.5])
    );
    let weekly = load_flu_weekly(&f, " RI").unwrap();
    assert_eq!((weekly.region.as_str(), weekly.ili), ("RI", vec![9.0]));
}
