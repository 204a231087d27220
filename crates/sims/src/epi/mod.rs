//! GradABM-style differentiable agent-based epidemics (issue 7): COVID (SEIRM) and flu (SIRS)
//! on loaded or generated populations.
//!
//! ```
//! use kiln::prelude::*;
//! use kiln_sims::epi::{CovidModel, CovidParams, Population, UpdateForm};
//! let pop = Population::synthetic(500, 1);
//! let model = CovidModel::new(&pop, 14, UpdateForm::KeepGrad);
//! let params = CovidParams::constant(14, 2.5, 0.02, 5.0);
//! let daily = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| m.simulate(&p, &k))
//!     .call(&(model, params, kiln::random::key(0u32)))?;
//! assert_eq!(daily.infections.shape().dims(), &[14]);
//! # Ok::<(), kiln::Error>(())
//! ```

pub mod calibrate;
pub mod data;
pub mod disease;
pub mod flu;
pub mod model;
pub mod network;
pub mod params;
pub mod population;

pub use data::DataError;
pub use flu::{FluDaily, FluModel};
pub use model::{AgentState, CovidModel, Daily, UpdateForm, bernoulli_straight_through};
pub use network::{DEGREE_BY_AGE_25011, DegreeMoments, Network};
pub use params::{CovidParams, FluParams};
pub use population::{Population, PopulationError};
