//! kiln's simulations. [`epi`]: GradABM-style differentiable agent-based epidemics. [`rigid`]:
//! Brax-style rigid bodies (MJCF loading so far).
#![warn(missing_docs)]

pub mod epi;
pub mod rigid;
