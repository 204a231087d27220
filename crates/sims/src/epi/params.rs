//! The calibrated parameters, as tensors so gradients flow to them.

use kiln::prelude::*;

/// COVID-19 parameters: per-week R0 and mortality (day `t` uses week `t / 7`) and the initial
/// infected percentage. All `f32`; `r0` and `mortality` are `f32[W]` with `W = ceil(days / 7)`,
/// `initial_pct` is `f32[]` (percent, e.g. 0.5 for 0.5 %).
///
/// The reference's bounds: R0 ∈ [1, 8], mortality ∈ [0.001, 0.02], initial % ∈ [0.01, 1].
#[derive(Tree, Clone, Debug)]
pub struct CovidParams {
    /// Basic reproduction number per week, `f32[W]`.
    pub r0: Tensor,
    /// Fraction of agents leaving I who die, per week, `f32[W]`.
    pub mortality: Tensor,
    /// Percentage of agents exposed on day 0, `f32[]`.
    pub initial_pct: Tensor,
}

impl CovidParams {
    /// The same values every week for a `days`-day run (concrete tensors).
    pub fn constant(days: usize, r0: f32, mortality: f32, initial_pct: f32) -> CovidParams {
        let weeks = days.div_ceil(7);
        CovidParams {
            r0: Tensor::full(&[weeks], r0),
            mortality: Tensor::full(&[weeks], mortality),
            initial_pct: Tensor::scalar(initial_pct),
        }
    }
}

/// Influenza parameters: per-week R0 (day `t` uses week `t / 7`) and the initial infected
/// percentage. `r0` is `f32[W]` with `W = ceil(days / 7)`, `initial_pct` is `f32[]` (percent).
///
/// The reference's bounds: R0 ∈ [1.05, 2.6], initial % ∈ [0.1, 5]; expert values 1.3 and 1.0.
#[derive(Tree, Clone, Debug)]
pub struct FluParams {
    /// Basic reproduction number per week, `f32[W]`.
    pub r0: Tensor,
    /// Percentage of agents infected on day 0, `f32[]`.
    pub initial_pct: Tensor,
}

impl FluParams {
    /// The same R0 every week for a `days`-day run (concrete tensors).
    pub fn constant(days: usize, r0: f32, initial_pct: f32) -> FluParams {
        FluParams { r0: Tensor::full(&[days.div_ceil(7)], r0), initial_pct: Tensor::scalar(initial_pct) }
    }
}
