//! Minimum vertex cuts by maximum flow (Dinic's algorithm), for choosing which values a scan step
//! stores for its backward pass (see [`super::partition`]): the cheapest set of values that
//! separates what cannot be recomputed from what the backward pass reads.

use std::collections::VecDeque;

/// A capacity no cut pays.
pub(crate) const INF: u64 = u64::MAX / 4;

/// A directed flow network with integer capacities.
pub(crate) struct FlowNet {
    /// Per node: indices into `edges` of its outgoing edges (each paired with its reverse at `^ 1`).
    adj: Vec<Vec<usize>>,
    /// `(to, remaining capacity)`.
    edges: Vec<(usize, u64)>,
}

impl FlowNet {
    pub(crate) fn new(nodes: usize) -> FlowNet {
        FlowNet { adj: vec![Vec::new(); nodes], edges: Vec::new() }
    }

    pub(crate) fn add_edge(&mut self, from: usize, to: usize, cap: u64) {
        self.adj[from].push(self.edges.len());
        self.edges.push((to, cap));
        self.adj[to].push(self.edges.len());
        self.edges.push((from, 0));
    }

    /// Pushes the maximum flow from `s` to `t`; returns the nodes still reachable from `s` in the
    /// residual network (the source side of a minimum cut).
    pub(crate) fn min_cut_source_side(&mut self, s: usize, t: usize) -> Vec<bool> {
        loop {
            let level = self.levels(s);
            if level[t] == usize::MAX {
                return level.iter().map(|&l| l != usize::MAX).collect();
            }
            let mut next = vec![0usize; self.adj.len()];
            while self.augment(s, t, INF, &level, &mut next) > 0 {}
        }
    }

    /// BFS distances from `s` over edges with capacity left (`usize::MAX`: unreachable).
    fn levels(&self, s: usize) -> Vec<usize> {
        let mut level = vec![usize::MAX; self.adj.len()];
        level[s] = 0;
        let mut queue = VecDeque::from([s]);
        while let Some(u) = queue.pop_front() {
            for &e in &self.adj[u] {
                let (v, cap) = self.edges[e];
                if cap > 0 && level[v] == usize::MAX {
                    level[v] = level[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        level
    }

    /// One augmenting path along increasing levels (iterative DFS with per-node edge cursors);
    /// returns the flow pushed (0: blocking flow reached).
    fn augment(&mut self, s: usize, t: usize, limit: u64, level: &[usize], next: &mut [usize]) -> u64 {
        let mut path: Vec<usize> = Vec::new();
        let mut u = s;
        loop {
            if u == t {
                let pushed = path.iter().map(|&e| self.edges[e].1).fold(limit, u64::min);
                for &e in &path {
                    self.edges[e].1 -= pushed;
                    self.edges[e ^ 1].1 += pushed;
                }
                return pushed;
            }
            let mut advanced = false;
            while next[u] < self.adj[u].len() {
                let e = self.adj[u][next[u]];
                let (v, cap) = self.edges[e];
                if cap > 0 && level[v] == level[u] + 1 {
                    path.push(e);
                    u = v;
                    advanced = true;
                    break;
                }
                next[u] += 1;
            }
            if !advanced {
                // Dead end: retreat and skip the edge that led here.
                let Some(e) = path.pop() else { return 0 };
                u = self.edges[e ^ 1].0;
                next[u] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_the_cheapest_vertex() {
        // s -> a(10) -> b(3) -> t and s -> c(5) -> t, vertices split in/out: the cut is {b, c}, 8.
        // Nodes: s 0, t 1, a 2/3, b 4/5, c 6/7.
        let mut net = FlowNet::new(8);
        net.add_edge(0, 2, INF);
        net.add_edge(2, 3, 10);
        net.add_edge(3, 4, INF);
        net.add_edge(4, 5, 3);
        net.add_edge(5, 1, INF);
        net.add_edge(0, 6, INF);
        net.add_edge(6, 7, 5);
        net.add_edge(7, 1, INF);
        let side = net.min_cut_source_side(0, 1);
        // b's in-node is on the source side, its out-node is not: b is cut; likewise c; a is not.
        assert_eq!((side[4], side[5]), (true, false));
        assert_eq!((side[6], side[7]), (true, false));
        assert_eq!((side[2], side[3]), (true, true));
    }
}
