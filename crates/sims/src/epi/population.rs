//! Agents and their contact network: the static part of a simulation.

use super::data::{self, DataError};
use super::network::{DEGREE_BY_AGE_25011, Network, SplitMix64};
use std::path::Path;

/// The most agents a generated population may have: the directed edges (about 7 per agent) must fit
/// kiln's `i32` indices.
pub const MAX_GENERATED_AGENTS: u64 = 200_000_000;

/// Why a population could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum PopulationError {
    /// The age-group file could not be read or does not hold the county.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The age-group counts add up to zero agents.
    #[error("cannot generate a population of {what}: it has no agents (age-group counts {counts:?})")]
    NoAgents {
        /// What was asked for, e.g. `county 25017`.
        what: String,
        /// The age-group counts given.
        counts: [u64; 8],
    },
    /// More agents than [`MAX_GENERATED_AGENTS`].
    #[error("cannot generate a population of {what}: {agents} agents is more than the {max} supported")]
    TooManyAgents {
        /// What was asked for.
        what: String,
        /// The agents asked for (the counts' exact sum, which may exceed `u64`).
        agents: u128,
        /// [`MAX_GENERATED_AGENTS`].
        max: u64,
    },
    /// The ages and the network do not describe the same agents.
    #[error(
        "the population has {ages} ages but its network has {network} agents; they must be the same agents"
    )]
    AgentsMismatch {
        /// Entries of `ages`.
        ages: usize,
        /// The network's agents.
        network: usize,
    },
    /// An agent's age group is not one of 0..=7.
    #[error("agent {agent} has age group {age}, not an age group 0..=7")]
    BadAge {
        /// The agent's index.
        agent: usize,
        /// Its age group.
        age: u8,
    },
    /// The population has no agents (ILI, a percentage of the agents, would be NaN).
    #[error("the population has no agents")]
    Empty,
}

/// A population: each agent's age group (0..=7: 0–19, 20–29, …, 80+) and the contact network.
#[derive(Clone, Debug)]
pub struct Population {
    /// Age group per agent, `num_agents` entries.
    pub ages: Vec<u8>,
    /// The contact network over the same agents.
    pub network: Network,
}

/// Franklin County, MA's age-group shares (the 25011 agents file), used for synthetic populations.
const AGE_COUNTS_25011: [f64; 8] = [14468.0, 8137.0, 7865.0, 9450.0, 12140.0, 10983.0, 4588.0, 3285.0];

impl Population {
    /// Loads a GradABM agents file and its undirected network file (reverse edges added, self-loops
    /// kept, as the published simulator does).
    ///
    /// # Errors
    /// [`DataError`] naming the file, line and value (see [`data::load_agent_ages`],
    /// [`data::load_edges`]).
    pub fn load(agents: &Path, edges: &Path) -> Result<Population, DataError> {
        let ages = data::load_agent_ages(agents)?;
        let edges = data::load_edges(edges, ages.len())?;
        let network = Network::from_undirected(ages.len(), &edges);
        Ok(Population { ages, network })
    }

    /// The bundled Franklin County, MA (FIPS 25011) population: 70,916 agents, 499,982 directed
    /// edges (the only network GradABM published).
    ///
    /// # Errors
    /// [`DataError`] if the bundled files are missing or damaged.
    pub fn franklin_county() -> Result<Population, DataError> {
        Population::load(
            &data::bundled("gradabm_25011_agents.csv"),
            &data::bundled("gradabm_25011_random_network_edges.csv"),
        )
    }

    /// A synthetic population of `num_agents` with 25011's age distribution and a uniform random
    /// network of 3.525 undirected edges per agent (as 25011), reproducible from `seed`.
    pub fn synthetic(num_agents: usize, seed: u64) -> Population {
        let mut rng = SplitMix64(seed ^ 0xA5A5_5A5A_0F0F_F0F0);
        let total: f64 = AGE_COUNTS_25011.iter().sum();
        let ages = (0..num_agents)
            .map(|_| {
                let mut x = rng.unit() * total;
                let mut g = 0;
                while g < 7 && x >= AGE_COUNTS_25011[g] {
                    x -= AGE_COUNTS_25011[g];
                    g += 1;
                }
                g as u8
            })
            .collect();
        let network = Network::uniform_random(num_agents, 249_991.0 / 70_916.0, seed);
        Population { ages, network }
    }

    /// A generated population with exactly `counts[g]` agents in age group `g` (0–19, 20–29, …,
    /// 80+), in a seeded random order, and a contact network with the published 25011 network's mean
    /// and variance of the degree per age group ([`Network::contact_counts`] with
    /// [`DEGREE_BY_AGE_25011`]). The same `counts` and `seed` give the same population. `what` names
    /// it in errors.
    ///
    /// # Errors
    /// [`PopulationError::NoAgents`] if the counts sum to zero, [`PopulationError::TooManyAgents`]
    /// above [`MAX_GENERATED_AGENTS`] (also for counts whose sum exceeds `u64`).
    pub fn from_age_counts(what: &str, counts: [u64; 8], seed: u64) -> Result<Population, PopulationError> {
        // Summed in u128: huge counts must not wrap past the limit below.
        let total: u128 = counts.iter().map(|&c| u128::from(c)).sum();
        if total == 0 {
            return Err(PopulationError::NoAgents { what: what.to_string(), counts });
        }
        if total > u128::from(MAX_GENERATED_AGENTS) {
            let (what, max) = (what.to_string(), MAX_GENERATED_AGENTS);
            return Err(PopulationError::TooManyAgents { what, agents: total, max });
        }
        let mut ages: Vec<u8> =
            counts.iter().enumerate().flat_map(|(g, &c)| std::iter::repeat_n(g as u8, c as usize)).collect();
        // Fisher–Yates, so that age groups are spread over the index range as in the real files.
        let mut rng = SplitMix64(seed ^ 0x5EED_A6E5_0000_0001);
        for i in (1..ages.len()).rev() {
            ages.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let network = Network::contact_counts(&ages, &DEGREE_BY_AGE_25011, seed);
        Ok(Population { ages, network })
    }

    /// A generated population of county `fips` from the bundled `gradabm_ma_county_age_groups.csv`
    /// (see [`Population::from_age_counts`]). The agents are the sum of the age-group counts, which
    /// for 25017 and 25025 differs slightly from the file's `num_agents` column (Middlesex, 25017:
    /// 1,565,942 agents vs 1,565,933).
    ///
    /// # Errors
    /// [`PopulationError::Data`] naming the file and listing its counties if `fips` is not in it;
    /// [`PopulationError::NoAgents`] for a county with zero counts,
    /// [`PopulationError::TooManyAgents`] for counts summing above [`MAX_GENERATED_AGENTS`].
    pub fn county(fips: u32, seed: u64) -> Result<Population, PopulationError> {
        Population::county_from(&data::bundled("gradabm_ma_county_age_groups.csv"), fips, seed)
    }

    /// As [`Population::county`], from the age-group file `path`
    /// (`fips,num_agents,AGE_0_19,…,AGE_80`).
    ///
    /// # Errors
    /// As [`Population::county`].
    pub fn county_from(path: &Path, fips: u32, seed: u64) -> Result<Population, PopulationError> {
        let groups = data::load_county_age_groups(path, fips)?;
        Population::from_age_counts(&format!("county {fips}"), groups.counts, seed)
    }

    /// A generated population of `num_agents` agents with county `fips`'s age mix: the counts are
    /// the county's shares of `num_agents` rounded by largest remainder, so they sum to exactly
    /// `num_agents` (e.g. a 1 M-agent Middlesex for benchmarks).
    ///
    /// # Errors
    /// As [`Population::county`]; [`PopulationError::NoAgents`] for `num_agents == 0`.
    pub fn county_scaled(fips: u32, num_agents: u64, seed: u64) -> Result<Population, PopulationError> {
        let groups = data::load_county_age_groups(&data::bundled("gradabm_ma_county_age_groups.csv"), fips)?;
        let counts = scaled_counts(&groups.counts, num_agents);
        Population::from_age_counts(&format!("county {fips} scaled to {num_agents} agents"), counts, seed)
    }

    /// Number of agents.
    pub fn num_agents(&self) -> usize {
        self.ages.len()
    }

    /// Checks what the models rely on (the fields are public, so a population may be built by
    /// hand): at least one agent, one age per network agent (the simulation's gathers clamp
    /// out-of-range indices, so a mismatch would silently give wrong counts) and every age in 0..=7.
    /// [`Network`] itself keeps its edges inside its agents.
    ///
    /// # Errors
    /// [`PopulationError::Empty`], [`PopulationError::AgentsMismatch`] or
    /// [`PopulationError::BadAge`] (the first agent at fault).
    pub fn check(&self) -> Result<(), PopulationError> {
        if self.ages.is_empty() {
            return Err(PopulationError::Empty);
        }
        if self.ages.len() != self.network.num_agents() {
            return Err(PopulationError::AgentsMismatch {
                ages: self.ages.len(),
                network: self.network.num_agents(),
            });
        }
        match self.ages.iter().position(|&a| a > 7) {
            Some(agent) => Err(PopulationError::BadAge { agent, age: self.ages[agent] }),
            None => Ok(()),
        }
    }
}

/// `counts` scaled to sum to `total` by largest remainder (ties to the lower group); all zeros if
/// `counts` sums to zero.
pub fn scaled_counts(counts: &[u64; 8], total: u64) -> [u64; 8] {
    let sum: u128 = counts.iter().map(|&c| u128::from(c)).sum();
    if sum == 0 {
        return [0; 8];
    }
    let exact: Vec<u128> = counts.iter().map(|&c| u128::from(c) * u128::from(total)).collect();
    let mut out: [u64; 8] = std::array::from_fn(|g| (exact[g] / sum) as u64);
    let mut order: Vec<usize> = (0..8).collect();
    order.sort_by_key(|&g| std::cmp::Reverse(exact[g] % sum));
    let short = total - out.iter().sum::<u64>();
    for &g in order.iter().take(short as usize) {
        out[g] += 1;
    }
    out
}
