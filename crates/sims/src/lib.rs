//! kiln's simulations. [`epi`]: GradABM-style differentiable agent-based epidemics.
#![warn(missing_docs)]

pub mod epi;
