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
}
