//! Observed series: daily (date, value) from the bundled county file or a user's `date,deaths` CSV,
//! smoothed and cut to a training window; weekly ILI by CDC epiweek.

use super::dates::Date;
use crate::epi::data::{CovidDaily, DataError, FluWeekly};
use std::path::Path;

/// A daily series over consecutive dates starting at `start` (one value per day).
#[derive(Clone, Debug, PartialEq)]
pub struct DailySeries {
    /// The first day.
    pub start: Date,
    /// One value per day from `start` (deaths per day).
    pub values: Vec<f64>,
}

impl DailySeries {
    /// The date of entry `i`.
    pub fn date(&self, i: usize) -> Date {
        self.start.add_days(i as i64)
    }

    /// The last day (the loaders never make an empty series).
    ///
    /// # Panics
    /// On an empty series built by hand (it has no last day), at the caller's line.
    #[track_caller]
    pub fn end(&self) -> Date {
        assert!(!self.values.is_empty(), "DailySeries::end: the series is empty");
        self.date(self.values.len() - 1)
    }

    /// A county's daily deaths from [`crate::epi::data::load_county_covid_daily`]; empty days (before
    /// reporting began) count as 0. `path` is the file it came from, for errors.
    ///
    /// # Errors
    /// [`DataError::Content`] errors naming the county for a date that does not parse or breaks the
    /// day-by-day sequence, or deaths that are not a finite number (`NaN`, `inf`).
    pub fn from_county(daily: &CovidDaily, path: &Path) -> Result<DailySeries, DataError> {
        let content = |message: String| DataError::Content { path: path.to_path_buf(), message };
        let start =
            Date::parse(&daily.dates[0]).map_err(|m| content(format!("county {}: {m}", daily.fips)))?;
        for (i, d) in daily.dates.iter().enumerate() {
            let date = Date::parse(d).map_err(|m| content(format!("county {}: {m}", daily.fips)))?;
            if date != start.add_days(i as i64) {
                return Err(content(format!(
                    "county {}: date {d} breaks the day-by-day sequence (expected {})",
                    daily.fips,
                    start.add_days(i as i64)
                )));
            }
        }
        // The loader refuses these; a `CovidDaily` built otherwise may still hold them.
        if let Some((d, v)) = daily
            .dates
            .iter()
            .zip(&daily.deaths)
            .find_map(|(d, v)| v.filter(|v| !v.is_finite()).map(|v| (d, v)))
        {
            return Err(content(format!(
                "county {}: deaths on {d} are {v}, not a finite number",
                daily.fips
            )));
        }
        Ok(DailySeries { start, values: daily.deaths.iter().map(|d| d.unwrap_or(0.0)).collect() })
    }

    /// A user's daily series: a CSV with a header naming `date` (`YYYY-MM-DD`) and `deaths` columns
    /// (other columns are ignored), one row per consecutive day, deaths a finite number.
    ///
    /// # Errors
    /// [`DataError`] naming the file, and the line and value where one is at fault: a missing file, a
    /// missing column, a date that does not parse or is not the day after the previous row, a deaths
    /// value that is not a finite number, or no rows.
    pub fn load_csv(path: &Path) -> Result<DailySeries, DataError> {
        let file = std::fs::File::open(path)
            .map_err(|source| DataError::Open { path: path.to_path_buf(), source })?;
        let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(file);
        let line_err =
            |line: u64, message: String| DataError::Line { path: path.to_path_buf(), line, message };
        let headers: Vec<String> = reader
            .headers()
            .map_err(|e| crate::epi::data::csv_error(path, e))?
            .iter()
            .map(|h| h.trim_start_matches('\u{feff}').trim().to_string())
            .collect();
        let column = |name: &str| {
            headers.iter().position(|h| h == name).ok_or_else(|| DataError::Content {
                path: path.to_path_buf(),
                message: format!(
                    "no column \"{name}\" in the header (columns: {}); expected date,deaths",
                    headers.join(", ")
                ),
            })
        };
        let (date_col, deaths_col) = (column("date")?, column("deaths")?);
        let mut start = None;
        let mut values = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| crate::epi::data::csv_error(path, e))?;
            // The line is counted in the text only for an error (see `data::line_of`).
            let at = |message: String| line_err(crate::epi::data::line_of(path, record.position()), message);
            let get = |i: usize, name: &str| {
                record.get(i).map(str::trim).ok_or_else(|| {
                    at(format!("missing column {name} (the line has {} fields)", record.len()))
                })
            };
            let date = Date::parse(get(date_col, "date")?).map_err(at)?;
            let raw = get(deaths_col, "deaths")?;
            let deaths: f64 = raw
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| at(format!("deaths \"{raw}\" is not a finite number")))?;
            let first = *start.get_or_insert(date);
            let expected = first.add_days(values.len() as i64);
            if date != expected {
                return Err(at(format!(
                    "date {date} is not the day after the previous row (expected {expected})"
                )));
            }
            values.push(deaths);
        }
        match start {
            Some(start) => Ok(DailySeries { start, values }),
            None => Err(DataError::Content { path: path.to_path_buf(), message: "no data rows".into() }),
        }
    }

    /// The 7-day trailing mean (the reference's smoothing of the target): entry `i` is the mean of
    /// entries `i-6..=i`, or of those that exist near the start.
    pub fn smoothed(&self) -> DailySeries {
        DailySeries { start: self.start, values: trailing_mean(&self.values, 7) }
    }

    /// The entries from `from` to `to` inclusive, with their first date, or `None` when the window is
    /// empty or not inside the series.
    pub fn window(&self, from: Date, to: Date) -> Option<DailySeries> {
        let (a, b) = (from.days_since(self.start), to.days_since(self.start));
        if a < 0 || b < a || b >= self.values.len() as i64 {
            return None;
        }
        Some(DailySeries { start: from, values: self.values[a as usize..=b as usize].to_vec() })
    }
}

/// The trailing mean over `width` entries (fewer at the start): `out[i] = mean(x[i+1-width..=i])`.
///
/// # Panics
/// If `width` is 0 (a mean of nothing), at the caller's line.
///
/// ```
/// use kiln_sims::epi::calibrate::trailing_mean;
/// assert_eq!(trailing_mean(&[1.0, 3.0, 5.0, 7.0], 2), vec![1.0, 2.0, 4.0, 6.0]);
/// ```
#[track_caller]
pub fn trailing_mean(x: &[f64], width: usize) -> Vec<f64> {
    assert!(width > 0, "trailing_mean: width 0 (a mean of nothing); use 1 or more");
    (0..x.len())
        .map(|i| {
            let lo = (i + 1).saturating_sub(width);
            x[lo..=i].iter().sum::<f64>() / (i + 1 - lo) as f64
        })
        .collect()
}

/// A weekly series over consecutive CDC epiweeks, indexed by the weeks' first days (Sundays).
#[derive(Clone, Debug, PartialEq)]
pub struct WeeklySeries {
    /// The first day of the first week.
    pub start: Date,
    /// One value per week from `start` (ILI, percent).
    pub values: Vec<f64>,
}

impl WeeklySeries {
    /// The first day of week `i`.
    pub fn date(&self, i: usize) -> Date {
        self.start.add_days(7 * i as i64)
    }

    /// The first day of the last week (the loaders never make an empty series).
    ///
    /// # Panics
    /// On an empty series built by hand (it has no last week), at the caller's line.
    #[track_caller]
    pub fn end(&self) -> Date {
        assert!(!self.values.is_empty(), "WeeklySeries::end: the series is empty");
        self.date(self.values.len() - 1)
    }

    /// A region's weekly ILI from [`crate::epi::data::load_flu_weekly`]. `path` is the file it came
    /// from, for errors.
    ///
    /// # Errors
    /// [`DataError::Content`] naming the region and epiweek when an epiweek is not one, or is not
    /// the week after the previous one, or its ILI is not a finite non-negative number.
    pub fn from_flu(weekly: &FluWeekly, path: &Path) -> Result<WeeklySeries, DataError> {
        let content = |message: String| DataError::Content { path: path.to_path_buf(), message };
        let mut start = None;
        for (i, &w) in weekly.epiweeks.iter().enumerate() {
            let date =
                Date::from_epiweek(w).map_err(|m| content(format!("region {}: {m}", weekly.region)))?;
            let first = *start.get_or_insert(date);
            if date != first.add_days(7 * i as i64) {
                return Err(content(format!(
                    "region {}: epiweek {w} is not the week after {}",
                    weekly.region,
                    weekly.epiweeks[i - 1]
                )));
            }
        }
        // The loader refuses these; a `FluWeekly` built otherwise may still hold them.
        if let Some((w, v)) =
            weekly.epiweeks.iter().zip(&weekly.ili).find(|(_, v)| !(v.is_finite() && **v >= 0.0))
        {
            return Err(content(format!(
                "region {}: ILI of epiweek {w} is {v}, not a finite non-negative percentage",
                weekly.region
            )));
        }
        match start {
            Some(start) => Ok(WeeklySeries { start, values: weekly.ili.clone() }),
            None => Err(content(format!("region {}: no weeks", weekly.region))),
        }
    }

    /// The weeks from the one starting `from` to the one starting `to` inclusive (both Sundays of
    /// weeks in the series), or `None` when the window is empty, not inside the series, or its ends
    /// are not week starts.
    pub fn window(&self, from: Date, to: Date) -> Option<WeeklySeries> {
        let (a, b) = (from.days_since(self.start), to.days_since(self.start));
        if a < 0 || b < a || a % 7 != 0 || b % 7 != 0 || b / 7 >= self.values.len() as i64 {
            return None;
        }
        Some(WeeklySeries { start: from, values: self.values[(a / 7) as usize..=(b / 7) as usize].to_vec() })
    }
}
