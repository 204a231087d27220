//! The static contact network as destination-sorted edge arrays (CSR by destination), so that one
//! day's infection pressure is `segment_sum(gather(factor, src), dst)` with sorted segments.

/// A directed contact network over `num_agents` agents, edges sorted by destination.
///
/// `src[e] → dst[e]`; `dst` is non-decreasing and `row_ptr[i]..row_ptr[i + 1]` are the edges into
/// agent `i` (`row_ptr` has `num_agents + 1` entries).
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    num_agents: usize,
    src: Vec<i32>,
    dst: Vec<i32>,
    row_ptr: Vec<u32>,
}

impl Network {
    /// The directed network of an undirected edge list, as the published simulator builds it: every
    /// pair `(u, v)` gives `u → v` and `v → u` (a self-loop `(u, u)` thus gives two edges `u → u`).
    ///
    /// # Panics
    /// If an index is `>= num_agents` or there are 2^31 or more directed edges (the loaders check
    /// indices and report them as data errors first).
    pub fn from_undirected(num_agents: usize, edges: &[(u32, u32)]) -> Network {
        assert!(edges.len() < (1 << 30), "kiln-sims: {} edges do not fit i32 indices", edges.len());
        assert!(i32::try_from(num_agents).is_ok(), "kiln-sims: {num_agents} agents do not fit i32");
        let directed: Vec<(u32, u32)> =
            edges.iter().map(|&(u, v)| (u, v)).chain(edges.iter().map(|&(u, v)| (v, u))).collect();
        for &(u, v) in &directed {
            assert!(
                (u as usize) < num_agents && (v as usize) < num_agents,
                "kiln-sims: edge ({u}, {v}) is out of range for {num_agents} agents"
            );
        }
        // Counting sort by destination: stable, O(E).
        let mut row_ptr = vec![0u32; num_agents + 1];
        for &(_, v) in &directed {
            row_ptr[v as usize + 1] += 1;
        }
        for i in 0..num_agents {
            row_ptr[i + 1] += row_ptr[i];
        }
        let mut next: Vec<u32> = row_ptr[..num_agents].to_vec();
        let (mut src, mut dst) = (vec![0i32; directed.len()], vec![0i32; directed.len()]);
        for &(u, v) in &directed {
            let slot = next[v as usize] as usize;
            next[v as usize] += 1;
            src[slot] = u as i32;
            dst[slot] = v as i32;
        }
        Network { num_agents, src, dst, row_ptr }
    }

    /// A uniform random network with `round(num_agents · undirected_per_agent)` undirected edges
    /// whose two ends are independent uniform agents (the synthetic populations of
    /// `anchor-gradabm.md` §3; 25011 has 3.525 per agent), from a SplitMix64 stream seeded by `seed`.
    pub fn uniform_random(num_agents: usize, undirected_per_agent: f64, seed: u64) -> Network {
        let mut rng = SplitMix64(seed);
        let n_edges = (num_agents as f64 * undirected_per_agent).round() as usize;
        let edges: Vec<(u32, u32)> = (0..n_edges)
            .map(|_| (rng.below(num_agents as u64) as u32, rng.below(num_agents as u64) as u32))
            .collect();
        Network::from_undirected(num_agents, &edges)
    }

    /// A contact network whose mean and variance of the degree per age group follow `degree` (for
    /// [`DEGREE_BY_AGE_25011`], those of the published Franklin County network), reproducible from
    /// `seed`. `ages[i]` (0..=7) is agent `i`'s age group.
    ///
    /// The fit (the published generator is not, see `anchor-gradabm.md` §1.2): every agent starts
    /// `k_i` contacts to uniformly random partners, so its degree is `k_i` plus the stubs it
    /// receives, about Poisson(`μ̄`) with `μ̄` the mean of `k` over all agents. Matching group `g`'s
    /// mean degree `d_g` gives `μ̄ = Σ n_g d_g / 2N` and `E[k | g] = d_g − μ̄`; matching its variance
    /// `s_g` gives `Var[k | g] = s_g − μ̄`. `k_i = 1 + NegBinomial` with that mean and variance (a
    /// Gamma–Poisson mixture; Poisson where the variance is not above the mean), so every agent has
    /// a contact, as in the published network (min degree 1). Because `μ̄` is solved per population,
    /// every county gets 25011's mean degree per age group whatever its age mix. Self-loops (an agent
    /// drawing itself, about 3.5 in 70k agents) and repeated pairs (about a dozen) are kept, as
    /// [`Network::from_undirected`] keeps them.
    ///
    /// # Panics
    /// If an age group is above 7 (populations check ages when they are built).
    pub fn contact_counts(ages: &[u8], degree: &[DegreeMoments; 8], seed: u64) -> Network {
        let n = ages.len();
        let mut per_group = [0usize; 8];
        for &a in ages {
            per_group[a as usize] += 1;
        }
        let total_degree: f64 = (0..8).map(|g| per_group[g] as f64 * degree[g].mean).sum();
        let stubs_in = total_degree / (2.0 * n.max(1) as f64);
        // (mean, variance) of the contacts an agent of each group starts, beyond its first.
        let extra: [(f64, f64); 8] = std::array::from_fn(|g| {
            let mean = (degree[g].mean - stubs_in - 1.0).max(0.0);
            (mean, (degree[g].variance - stubs_in).max(0.0))
        });
        let mut rng = SplitMix64(seed);
        let mut edges = Vec::with_capacity((n as f64 * stubs_in * 1.01) as usize + 16);
        for (i, &a) in ages.iter().enumerate() {
            let (mean, variance) = extra[a as usize];
            let k = 1 + rng.negative_binomial(mean, variance);
            for _ in 0..k {
                edges.push((i as u32, rng.below(n as u64) as u32));
            }
        }
        Network::from_undirected(n, &edges)
    }

    /// Mean and (population) variance of the degree of the agents of each age group, e.g. to
    /// compare a generated network with [`DEGREE_BY_AGE_25011`]; a group without agents gets NaN.
    pub fn degree_by_age(&self, ages: &[u8]) -> [DegreeMoments; 8] {
        let (mut count, mut sum, mut sum_sq) = ([0f64; 8], [0f64; 8], [0f64; 8]);
        for (i, &a) in ages.iter().enumerate() {
            let d = self.degree(i) as f64;
            count[a as usize] += 1.0;
            sum[a as usize] += d;
            sum_sq[a as usize] += d * d;
        }
        std::array::from_fn(|g| {
            let mean = sum[g] / count[g];
            DegreeMoments { mean, variance: sum_sq[g] / count[g] - mean * mean }
        })
    }

    /// Number of agents.
    pub fn num_agents(&self) -> usize {
        self.num_agents
    }

    /// Number of directed edges.
    pub fn num_edges(&self) -> usize {
        self.src.len()
    }

    /// Source agent of each directed edge (`i32[E]`).
    pub fn src(&self) -> &[i32] {
        &self.src
    }

    /// Destination agent of each directed edge, non-decreasing (`i32[E]`).
    pub fn dst(&self) -> &[i32] {
        &self.dst
    }

    /// CSR offsets: the edges into agent `i` are `row_ptr[i]..row_ptr[i + 1]` (`num_agents + 1`).
    pub fn row_ptr(&self) -> &[u32] {
        &self.row_ptr
    }

    /// In-degree of agent `i` (equal to its out-degree: the network is symmetric).
    pub fn degree(&self, i: usize) -> usize {
        (self.row_ptr[i + 1] - self.row_ptr[i]) as usize
    }
}

/// Mean and variance of agents' degree (directed edges into the agent; a self-loop counts twice).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DegreeMoments {
    /// Mean degree.
    pub mean: f64,
    /// Population variance of the degree.
    pub variance: f64,
}

/// The published 25011 network's degree by age group (0–19, 20–29, …, 80+), measured from
/// `gradabm_25011_agents.csv` and `gradabm_25011_random_network_edges.csv` (overall mean 7.05;
/// `tests/epi_population.rs` recomputes it from the files). Children have fewer contacts, the
/// 20–59s the most, with a variance about 2.5× the mean.
pub const DEGREE_BY_AGE_25011: [DegreeMoments; 8] = [
    DegreeMoments { mean: 5.7355, variance: 8.949 },
    DegreeMoments { mean: 7.8808, variance: 20.588 },
    DegreeMoments { mean: 7.7221, variance: 20.284 },
    DegreeMoments { mean: 7.5818, variance: 20.594 },
    DegreeMoments { mean: 7.6056, variance: 21.187 },
    DegreeMoments { mean: 6.6608, variance: 14.676 },
    DegreeMoments { mean: 6.7892, variance: 14.062 },
    DegreeMoments { mean: 7.2621, variance: 18.886 },
];

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast, well-mixed 64-bit generator for building
/// synthetic populations reproducibly (not for the simulation's noise, which is kiln's threefry).
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-32 for n < 2^32).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `(0, 1]`, safe under `ln`.
    fn unit_open(&mut self) -> f64 {
        1.0 - self.unit()
    }

    /// Standard normal (Box–Muller, one of the pair).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit_open(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Gamma(`shape`, 1) by Marsaglia–Tsang (2000), with `U^(1/shape)` boosting for `shape < 1`.
    fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            return self.gamma(shape + 1.0) * self.unit_open().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v > 0.0 && self.unit_open().ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// Poisson(`mean`) by Knuth's product of uniforms, in chunks of mean ≤ 30 (sums of Poissons are
    /// Poisson) so `exp(−mean)` never underflows.
    fn poisson(&mut self, mut mean: f64) -> u64 {
        let mut k = 0;
        while mean > 0.0 {
            let chunk = mean.min(30.0);
            mean -= chunk;
            let limit = (-chunk).exp();
            let mut prod = self.unit_open();
            while prod > limit {
                k += 1;
                prod *= self.unit_open();
            }
        }
        k
    }

    /// A count with the given mean and variance: negative binomial (Poisson of a Gamma rate) when
    /// the variance exceeds the mean, else Poisson(`mean`).
    fn negative_binomial(&mut self, mean: f64, variance: f64) -> u64 {
        if mean <= 0.0 {
            return 0;
        }
        if variance <= mean {
            return self.poisson(mean);
        }
        let shape = mean * mean / (variance - mean);
        let rate = self.gamma(shape) * (variance - mean) / mean;
        self.poisson(rate)
    }
}
