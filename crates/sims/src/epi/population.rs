//! Agents and their contact network: the static part of a simulation.

use super::data::{self, DataError};
use super::network::{Network, SplitMix64};
use std::path::Path;

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

    /// Number of agents.
    pub fn num_agents(&self) -> usize {
        self.ages.len()
    }
}
