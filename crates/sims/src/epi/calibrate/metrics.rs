//! Forecast scores: normalized deviation, RMSE, and the persistence baseline.

use serde::Serialize;

/// Normalized deviation `ND = Σ|y − ŷ| / Σ|y|` of a forecast `predicted` against `observed` (same
/// length), or `None` when `Σ|y| = 0` (undefined) or the series are empty or of different lengths.
///
/// ```
/// use kiln_sims::epi::calibrate::nd;
/// assert_eq!(nd(&[1.0, 3.0], &[2.0, 2.0]), Some(0.5)); // (1 + 1) / 4
/// ```
pub fn nd(observed: &[f64], predicted: &[f64]) -> Option<f64> {
    let denom: f64 = observed.iter().map(|y| y.abs()).sum();
    if observed.len() != predicted.len() || observed.is_empty() || denom == 0.0 {
        return None;
    }
    Some(observed.iter().zip(predicted).map(|(y, p)| (y - p).abs()).sum::<f64>() / denom)
}

/// Root-mean-square error `sqrt(mean((y − ŷ)²))`, or `None` for empty series or different lengths.
///
/// ```
/// use kiln_sims::epi::calibrate::rmse;
/// assert_eq!(rmse(&[1.0, 3.0], &[2.0, 5.0]), Some(2.5f64.sqrt())); // sqrt((1 + 4) / 2)
/// ```
pub fn rmse(observed: &[f64], predicted: &[f64]) -> Option<f64> {
    if observed.len() != predicted.len() || observed.is_empty() {
        return None;
    }
    let sse: f64 = observed.iter().zip(predicted).map(|(y, p)| (y - p) * (y - p)).sum();
    Some((sse / observed.len() as f64).sqrt())
}

/// The persistence forecast: the last training value repeated for `horizon` days.
pub fn persistence(training: &[f64], horizon: usize) -> Vec<f64> {
    vec![training.last().copied().unwrap_or(0.0); horizon]
}

/// ND and RMSE of one forecast (`None` where undefined, see [`nd`], [`rmse`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Score {
    /// Normalized deviation.
    pub nd: Option<f64>,
    /// Root-mean-square error, in the series' units (deaths per day).
    pub rmse: Option<f64>,
}

impl Score {
    /// The score of `predicted` against `observed`.
    pub fn of(observed: &[f64], predicted: &[f64]) -> Score {
        Score { nd: nd(observed, predicted), rmse: rmse(observed, predicted) }
    }
}

/// The model's forecast score next to the persistence baseline's, over the same observed days.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ForecastScores {
    /// Days of the forecast window that have observations (scores cover these).
    pub days_scored: usize,
    /// The calibrated model's forecast.
    pub model: Score,
    /// The last training value carried forward.
    pub persistence: Score,
}

impl ForecastScores {
    /// Scores `forecast` and the persistence baseline of `training` against `observed`, the observed
    /// days after training (possibly fewer than the forecast's; the forecast is cut to match).
    pub fn new(training: &[f64], observed: &[f64], forecast: &[f64]) -> ForecastScores {
        let n = observed.len().min(forecast.len());
        let (y, f) = (&observed[..n], &forecast[..n]);
        ForecastScores {
            days_scored: n,
            model: Score::of(y, f),
            persistence: Score::of(y, &persistence(training, n)),
        }
    }
}
