//! Several prediction weeks: training windows from one start date ending 7 days apart (as the
//! GradABM paper scores its forecasts: train up to week w, forecast the next 4 weeks, for several
//! consecutive w), and the mean of their scores.

use super::dates::Date;
use super::metrics::{ForecastScores, Score};
use serde::Serialize;

/// The last training day of each of `weeks` windows starting at `start`: `end − 7(weeks − 1)`,
/// …, `end − 7`, `end`, oldest first.
///
/// # Errors
/// A message naming the values when `weeks` is 0 or the earliest window would end before `start`
/// (it would be empty), however large `weeks` is.
///
/// ```
/// use kiln_sims::epi::calibrate::{Date, prediction_ends};
/// let d = |s| Date::parse(s).unwrap();
/// let ends = prediction_ends(d("2020-03-15"), d("2020-04-25"), 3).unwrap();
/// assert_eq!(ends, vec![d("2020-04-11"), d("2020-04-18"), d("2020-04-25")]);
/// ```
pub fn prediction_ends(start: Date, end: Date, weeks: usize) -> Result<Vec<Date>, String> {
    if weeks == 0 {
        return Err("prediction weeks: 0 given, at least 1 needed".into());
    }
    // Counted in whole weeks before any date is formed: `7 (weeks − 1)` days can overflow.
    let span = end.days_since(start);
    let most = if span < 0 { 0 } else { span as u64 / 7 + 1 };
    if weeks as u64 > most {
        let hint = format!("choose an earlier start, a later end or at most {most} prediction weeks");
        // The earliest end as a date only for a modest count (a far one would not print).
        return Err(match i64::try_from(weeks).ok().filter(|&w| w <= most as i64 + 1_000_000) {
            Some(w) => format!(
                "{weeks} prediction weeks: the earliest training window would end on {}, before its \
                 start {start}; {hint}",
                end.add_days(-7 * (w - 1))
            ),
            None => format!(
                "{weeks} prediction weeks: the earliest training window would end long before its \
                 start {start}; {hint}"
            ),
        });
    }
    let first = end.add_days(-7 * (weeks as i64 - 1));
    Ok((0..weeks).map(|k| first.add_days(7 * k as i64)).collect())
}

/// The mean forecast scores over several prediction weeks.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MeanScores {
    /// Prediction weeks averaged.
    pub weeks: usize,
    /// Mean ND and RMSE of the calibrated model's forecasts (over the weeks where each is defined;
    /// `None` where it is defined for none).
    pub model: Score,
    /// The same for the persistence baseline.
    pub persistence: Score,
}

/// The mean of each score over `scores`, skipping undefined (`None`) values.
///
/// ```
/// use kiln_sims::epi::calibrate::{ForecastScores, mean_scores};
/// let a = ForecastScores::new(&[1.0], &[2.0], &[2.0]); // model exact, persistence off by 1
/// let b = ForecastScores::new(&[1.0], &[4.0], &[2.0]); // model off by 2, persistence by 3
/// let m = mean_scores(&[a, b]);
/// assert_eq!(m.model.rmse, Some(1.0)); // (0 + 2) / 2
/// assert_eq!(m.persistence.rmse, Some(2.0)); // (1 + 3) / 2
/// ```
pub fn mean_scores(scores: &[ForecastScores]) -> MeanScores {
    let mean = |values: Vec<Option<f64>>| {
        let defined: Vec<f64> = values.into_iter().flatten().collect();
        (!defined.is_empty()).then(|| defined.iter().sum::<f64>() / defined.len() as f64)
    };
    let of = |pick: fn(&ForecastScores) -> Score| Score {
        nd: mean(scores.iter().map(|s| pick(s).nd).collect()),
        rmse: mean(scores.iter().map(|s| pick(s).rmse).collect()),
    };
    MeanScores { weeks: scores.len(), model: of(|s| s.model), persistence: of(|s| s.persistence) }
}
