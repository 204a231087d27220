//! Equality-saturation simplification with egg (DESIGN §6, phase 1).
//!
//! [`simplify`] cuts each function body into regions of at most
//! [`SimplifyOptions::region_eqns`] consecutive equations (sub-functions of `scan`, `while_loop`,
//! `cond`, ... are simplified recursively as their own regions; the control-flow equation itself is an
//! opaque node), loads each region into an e-graph ([`lang`], with the type/constant/fact analysis of
//! [`analysis`]), applies the named rules of [`rules`] in rounds bounded by iteration, node and time
//! limits, extracts the cheapest program ([`extract`]: bytes, then flops, under the options'
//! [`CostModel`]) and keeps it only if it costs no more than the region as written. Every default rule is IEEE-exact: the result evaluates
//! bitwise equal to the input (NaN as NaN) on every input.
//!
//! ```
//! use kiln_transform::{simplify, SimplifyOptions};
//! let f = kiln_ir::parse("{ lambda a:f32[3] ; b:f32[] = 1.0 . let
//!     c:f32[3] = broadcast_in_dim[shape=(3,) broadcast_dimensions=()] b
//!     d:f32[3] = mul a c
//!     e:f32[3] = neg d
//!     g:f32[3] = neg e
//!   in (g) }").unwrap();
//! // Without wall-clock budgets, so that a loaded machine cannot stop the region early.
//! let hour = std::time::Duration::from_secs(3600);
//! let opts = SimplifyOptions { time_limit: hour, pass_time_limit: hour, ..SimplifyOptions::default() };
//! let (s, report) = simplify(&f, &opts);
//! assert!(s.eqns.is_empty()); // x*1 and neg(neg x) are gone: the output is the parameter
//! assert_eq!(report.fired("mul_one"), 1);
//! assert_eq!(report.fired("neg_neg"), 1);
//! ```

pub mod analysis;
pub mod extract;
pub mod lang;
mod region;
pub mod rules;

use extract::Cost;
pub use extract::CostModel;
use kiln_ir::{Array, Function, Var};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Settings of [`simplify`].
#[derive(Clone, Debug, PartialEq)]
pub struct SimplifyOptions {
    /// Allow rules that change float results (`x*0 → 0`, `x-x → 0`, constant reassociation,
    /// `log(exp x) → x`, `exp(log x) → x`). Off by default.
    pub fast_math: bool,
    /// Largest region, in equations (longer bodies are cut into consecutive windows).
    pub region_eqns: usize,
    /// Rewrite rounds per region.
    pub iter_limit: usize,
    /// A region stops growing at `node_factor × its initial nodes + 1000` e-nodes.
    pub node_factor: usize,
    /// Wall-clock budget per region for rewriting. Extraction and write-back must end by twice
    /// this after the region started, else the region is kept as written
    /// ([`StopReason::ExtractTimeLimit`]).
    pub time_limit: Duration,
    /// Wall-clock budget of the whole [`simplify`] call: regions reached after it are copied as
    /// written ([`StopReason::PassTimeLimit`]), and no region's work runs past it.
    pub pass_time_limit: Duration,
    /// Which results extraction counts as written to memory ([`CostModel::EveryResult`] by
    /// default).
    pub cost_model: CostModel,
}

impl Default for SimplifyOptions {
    fn default() -> SimplifyOptions {
        SimplifyOptions {
            fast_math: false,
            region_eqns: 1000,
            iter_limit: 8,
            node_factor: 4,
            time_limit: Duration::from_millis(50),
            pass_time_limit: Duration::from_secs(1),
            cost_model: CostModel::EveryResult,
        }
    }
}

/// Why a region's rewriting stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A round changed nothing: no rule can fire any more.
    Saturated,
    /// [`SimplifyOptions::iter_limit`] rounds ran.
    IterLimit,
    /// The e-graph reached its node limit.
    NodeLimit,
    /// [`SimplifyOptions::time_limit`] passed while rewriting (the rewritten graph is still
    /// extracted).
    TimeLimit,
    /// Loading or extraction could not finish by twice [`SimplifyOptions::time_limit`] (or by the
    /// pass deadline): the region was kept as written.
    ExtractTimeLimit,
    /// [`SimplifyOptions::pass_time_limit`] had passed before the region started: it was copied as
    /// written, untouched.
    PassTimeLimit,
}

/// What happened in one region.
#[derive(Clone, Debug)]
pub struct RegionReport {
    /// Where the region is: `main[0..12]`, `main/eqn 3 body[0..5]`, ...
    pub name: String,
    /// Equations in the region before.
    pub eqns_before: usize,
    /// Equations written back.
    pub eqns_after: usize,
    /// Rewrite rounds run.
    pub iterations: usize,
    /// E-nodes at the end.
    pub nodes: usize,
    /// E-classes at the end.
    pub classes: usize,
    /// Why rewriting stopped.
    pub stop: StopReason,
    /// How many times each rule changed the e-graph.
    pub fired: BTreeMap<&'static str, usize>,
    /// Cost of the region as written.
    pub cost_before: Cost,
    /// Cost of the extracted program (before the comparison with `cost_before`).
    pub cost_after: Cost,
    /// True if the extracted program replaced the region (it cost no more).
    pub accepted: bool,
    /// Work units of the extractor ([`extract::ExtractWork::visits`]; 0 if it did not run).
    pub extract_visits: usize,
    /// Time spent on the region (load, rewrite, extract, write back), sub-regions excluded.
    pub time: Duration,
}

/// What [`simplify`] did, region by region (sub-function regions first).
#[derive(Clone, Debug, Default)]
pub struct SimplifyReport {
    /// One entry per region.
    pub regions: Vec<RegionReport>,
    /// Total time of the call.
    pub time: Duration,
    /// Loop constants sunk into scan bodies between a function's regions and its bodies'.
    pub sunk: usize,
}

impl SimplifyReport {
    /// How many times rule `name` fired, over all regions.
    pub fn fired(&self, name: &str) -> usize {
        self.regions.iter().map(|r| r.fired.get(name).copied().unwrap_or(0)).sum()
    }

    /// Every rule that fired, with its total count.
    pub fn rules_fired(&self) -> BTreeMap<&'static str, usize> {
        let mut all = BTreeMap::new();
        for r in &self.regions {
            for (k, v) in &r.fired {
                *all.entry(*k).or_insert(0) += v;
            }
        }
        all
    }
}

impl fmt::Display for SimplifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "simplify: {} regions in {:.3} ms, {} loop constants sunk into scan bodies",
            self.regions.len(),
            self.time.as_secs_f64() * 1e3,
            self.sunk
        )?;
        for r in &self.regions {
            writeln!(
                f,
                "  {}: {} -> {} eqns, {} rounds, {} nodes, {} extract visits, stop {:?}, cost [{}] -> [{}]{}, {:.3} ms",
                r.name,
                r.eqns_before,
                r.eqns_after,
                r.iterations,
                r.nodes,
                r.extract_visits,
                r.stop,
                r.cost_before,
                r.cost_after,
                if r.accepted { "" } else { " (rejected)" },
                r.time.as_secs_f64() * 1e3
            )?;
            if !r.fired.is_empty() {
                let list: Vec<String> = r.fired.iter().map(|(k, v)| format!("{k}×{v}")).collect();
                writeln!(f, "    rules: {}", list.join(", "))?;
            }
        }
        Ok(())
    }
}

/// Simplifies `f` with the rules of [`rules::RULES`] under `opts`; returns the new function (same
/// parameter and output types) and a report. Every default rule is exact, so the result evaluates
/// bitwise equal to `f` (NaN as NaN); with `opts.fast_math` float results may differ in the last bits
/// and on special values. Dead equations are dropped on the way.
///
/// A function is simplified before the bodies of its scans (and other control flow): the loop
/// constants it leaves literal, or broadcasts of a literal scalar, then sink into the bodies
/// ([`crate::sink_scan_constants`], exact), so that each body is simplified knowing them. The
/// report lists the enclosing function's regions before its bodies'.
///
/// # Panics
/// Only on a kiln bug: `f` must be a verified function.
pub fn simplify(f: &Function, opts: &SimplifyOptions) -> (Function, SimplifyReport) {
    let start = Instant::now();
    let mut report = SimplifyReport::default();
    let out = simplify_body(f, opts, "main", start + opts.pass_time_limit, &mut report);
    report.time = start.elapsed();
    (out, report)
}

fn simplify_body(
    f: &Function,
    opts: &SimplifyOptions,
    name: &str,
    pass_deadline: Instant,
    report: &mut SimplifyReport,
) -> Function {
    // This function's regions first, sub-functions opaque; then the loop constants they proved
    // literal or uniform (an in-range mask decided by `decided_by_range`) sink into the scan
    // bodies, and each sub-function is simplified with what it received.
    let eqns = &f.eqns;
    let mut last_use = vec![0usize; f.vars.len()];
    for (i, e) in eqns.iter().enumerate() {
        for v in &e.inputs {
            last_use[v.index()] = last_use[v.index()].max(i + 1);
        }
    }
    for v in &f.outputs {
        last_use[v.index()] = usize::MAX;
    }

    let mut out = Function::new();
    let mut map: HashMap<Var, Var> = HashMap::new();
    for p in &f.params {
        let n = out.add_param(f.var_type(*p).clone());
        map.insert(*p, n);
    }
    let consts: HashMap<Var, Arc<Array>> = f.consts.iter().map(|c| (c.var, c.value.clone())).collect();
    let mut const_vars = HashMap::new();
    let window = opts.region_eqns.max(1);
    let mut startq = 0;
    while startq < eqns.len() {
        let end = (startq + window).min(eqns.len());
        let used_after: Vec<bool> = last_use.iter().map(|&u| u > end).collect();
        let mut w =
            region::Writer { out: &mut out, map: &mut map, const_vars: &mut const_vars, consts: &consts };
        let r = run_region(f, &eqns[startq..end], &used_after, opts, pass_deadline, &mut w);
        report.regions.push(RegionReport { name: format!("{name}[{startq}..{end}]"), ..r });
        startq = end;
    }
    let mut w = region::Writer { out: &mut out, map: &mut map, const_vars: &mut const_vars, consts: &consts };
    let outputs: Vec<Var> = f.outputs.iter().map(|v| w.var(*v)).collect();
    out.outputs = outputs;
    let (out, sunk) = crate::scan_constants::sink_one_level(&out);
    report.sunk += sunk;
    let mut out = if sunk > 0 { crate::dce(&out) } else { out };
    for (i, e) in out.eqns.iter_mut().enumerate() {
        let roles: Vec<String> = e.prim.named_subfunctions().into_iter().map(|(r, _)| r).collect();
        for (sub, role) in e.prim.subfunctions_mut().into_iter().zip(roles) {
            *sub = simplify_body(sub, opts, &format!("{name}/eqn {i} {role}"), pass_deadline, report);
        }
    }
    out
}

/// Loads, rewrites, extracts and writes back one region.
fn run_region(
    f: &Function,
    eqns: &[kiln_ir::Eqn],
    used_after: &[bool],
    opts: &SimplifyOptions,
    pass_deadline: Instant,
    w: &mut region::Writer,
) -> RegionReport {
    let start = Instant::now();
    let before = w.out.eqns.len();
    let untouched = |stop, w: &mut region::Writer| {
        w.copy(eqns);
        RegionReport {
            name: String::new(),
            eqns_before: eqns.len(),
            eqns_after: eqns.len(),
            iterations: 0,
            nodes: 0,
            classes: 0,
            stop,
            fired: BTreeMap::new(),
            cost_before: Cost::default(),
            cost_after: Cost::default(),
            accepted: false,
            extract_visits: 0,
            time: start.elapsed(),
        }
    };
    if start > pass_deadline {
        return untouched(StopReason::PassTimeLimit, w);
    }
    let rewrite_deadline = (start + opts.time_limit).min(pass_deadline);
    let deadline = (start + 2 * opts.time_limit).min(pass_deadline);
    let mut r = region::load(f, eqns, used_after, opts.cost_model);
    if Instant::now() > deadline {
        return untouched(StopReason::ExtractTimeLimit, w);
    }
    let (iterations, stop, fired) = saturate(&mut r.graph, opts, rewrite_deadline);
    r.locs = r.locs.iter().map(|(id, loc)| (r.graph.find(*id), loc.clone())).collect();
    let roots: Vec<egg::Id> = r.roots.iter().map(|(_, id)| *id).collect();
    let (stop, cost_after, accepted, extract_visits) =
        match extract::extract(&r.graph, &roots, Some(deadline)) {
            Ok((sel, work)) => {
                let cost_after = extract::dag_cost(&r.graph, &sel);
                let accepted = cost_after <= r.cost_before;
                if accepted {
                    w.emit(&r, &sel);
                } else {
                    w.copy(eqns);
                }
                (stop, cost_after, accepted, work.visits)
            }
            Err(extract::ExtractError::Deadline) => {
                w.copy(eqns);
                (StopReason::ExtractTimeLimit, r.cost_before, false, 0)
            }
        };
    RegionReport {
        name: String::new(),
        eqns_before: eqns.len(),
        eqns_after: w.out.eqns.len() - before,
        iterations,
        nodes: r.graph.total_number_of_nodes(),
        classes: r.graph.number_of_classes(),
        stop,
        fired,
        cost_before: r.cost_before,
        cost_after,
        accepted,
        extract_visits,
        time: start.elapsed(),
    }
}

/// Applies the rules in rounds (search everything, then apply every match, then rebuild) until
/// nothing changes or a limit is hit; returns the rounds run, why it stopped, and the rule counts.
fn saturate(
    g: &mut analysis::Graph,
    opts: &SimplifyOptions,
    deadline: Instant,
) -> (usize, StopReason, BTreeMap<&'static str, usize>) {
    let node_limit = opts.node_factor * g.total_number_of_nodes() + 1000;
    let mut fired = BTreeMap::new();
    for iter in 0..opts.iter_limit {
        let ctx = rules::Ctx { g, fast_math: opts.fast_math };
        // Tuple classes (multi-result primitives) are opaque: no rule reads them as values.
        let mut ids: Vec<egg::Id> = g.classes().filter(|c| c.data.is_value()).map(|c| c.id).collect();
        ids.sort();
        let mut matches = vec![];
        for (k, id) in ids.into_iter().enumerate() {
            // A round's matching can be long on a big graph: check the clock as it goes.
            if k % 256 == 255 && Instant::now() > deadline {
                return (iter + 1, StopReason::TimeLimit, fired);
            }
            for node in &g[id].nodes {
                for rule in rules::RULES {
                    if rule.fast_math_only && !opts.fast_math {
                        continue;
                    }
                    if let Some(t) = (rule.apply)(&ctx, id, node) {
                        matches.push((rule.name, id, t));
                    }
                }
            }
        }
        if Instant::now() > deadline {
            return (iter + 1, StopReason::TimeLimit, fired);
        }
        let mut changed = false;
        for (name, id, t) in matches {
            let want = g[id].data.tys.clone();
            let Some(new) = region::add_term(g, &t) else { continue };
            if g[new].data.tys == want && g.union(id, new) {
                *fired.entry(name).or_insert(0) += 1;
                changed = true;
            }
            if g.total_number_of_nodes() > node_limit {
                g.rebuild();
                return (iter + 1, StopReason::NodeLimit, fired);
            }
        }
        g.rebuild();
        if !changed {
            return (iter + 1, StopReason::Saturated, fired);
        }
        if Instant::now() > deadline {
            return (iter + 1, StopReason::TimeLimit, fired);
        }
    }
    (opts.iter_limit, StopReason::IterLimit, fired)
}
