//! Calendar dates as day numbers, enough for daily and weekly series: parse and print `YYYY-MM-DD`,
//! add days, and CDC epiweeks (`YYYYWW`, the weekly ILI's time axis).

use std::fmt;

/// A proleptic-Gregorian calendar date, stored as days since 1970-01-01 (so `a - b` is a day count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(i64);

impl Date {
    /// Parses `YYYY-MM-DD`: digits only, a year from 0001 to 9999 and a real calendar day
    /// (`2021-02-29` is rejected).
    ///
    /// # Errors
    /// A message quoting the text.
    ///
    /// ```
    /// use kiln_sims::epi::calibrate::Date;
    /// let d = Date::parse("2020-03-15").unwrap();
    /// assert_eq!(d.add_days(17).to_string(), "2020-04-01");
    /// assert!(Date::parse("2020-02-30").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Date, String> {
        let bad = || format!("\"{text}\" is not a date YYYY-MM-DD");
        let parts: Vec<&str> = text.trim().split('-').collect();
        let [y, m, d] = parts.as_slice() else { return Err(bad()) };
        // Digits only: `parse` would take a sign ("+020" as year 20).
        let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
        if !(digits(y, 4) && digits(m, 2) && digits(d, 2)) || *y == "0000" {
            return Err(bad());
        }
        let (y, m, d): (i64, u32, u32) =
            (y.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?, d.parse().map_err(|_| bad())?);
        if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
            return Err(bad());
        }
        Ok(Date(days_from_civil(y, m, d)))
    }

    /// The first day (a Sunday) of CDC epiweek `yyyyww` (e.g. `201740`). CDC (MMWR) weeks run Sunday
    /// to Saturday; week 1 is the first such week with at least four days in the year (the one
    /// holding January 4), so a year has 52 or 53 weeks.
    ///
    /// # Errors
    /// A message quoting the value when the year is not 1..=9999, or the week is 0 or past the
    /// year's last week.
    ///
    /// ```
    /// use kiln_sims::epi::calibrate::Date;
    /// assert_eq!(Date::from_epiweek(201740).unwrap().to_string(), "2017-10-01");
    /// assert_eq!(Date::from_epiweek(201801).unwrap().to_string(), "2017-12-31");
    /// assert!(Date::from_epiweek(201753).is_err()); // 2017 has 52 weeks
    /// ```
    pub fn from_epiweek(yyyyww: u32) -> Result<Date, String> {
        let (year, week) = (i64::from(yyyyww / 100), i64::from(yyyyww % 100));
        if !(1..=9999).contains(&year) {
            return Err(format!("\"{yyyyww}\" is not an epiweek YYYYWW (years run from 0001 to 9999)"));
        }
        let first = epiweek_one(year);
        let weeks = epiweek_one(year + 1).days_since(first) / 7;
        if !(1..=weeks).contains(&week) {
            return Err(format!("\"{yyyyww}\" is not an epiweek YYYYWW (year {year} has weeks 1..={weeks})"));
        }
        Ok(first.add_days(7 * (week - 1)))
    }

    /// The CDC epiweek `YYYYWW` holding this day.
    ///
    /// ```
    /// use kiln_sims::epi::calibrate::Date;
    /// assert_eq!(Date::parse("2018-01-06").unwrap().epiweek(), 201801); // a Saturday
    /// assert_eq!(Date::parse("2015-01-03").unwrap().epiweek(), 201453); // 2014 had 53 weeks
    /// ```
    pub fn epiweek(self) -> u32 {
        let (mut year, _, _) = civil_from_days(self.0);
        if self < epiweek_one(year) {
            year -= 1;
        } else if self >= epiweek_one(year + 1) {
            year += 1;
        }
        let week = self.days_since(epiweek_one(year)) / 7 + 1;
        (year * 100 + week) as u32
    }

    /// The date `n` days later (earlier for negative `n`).
    pub fn add_days(self, n: i64) -> Date {
        Date(self.0 + n)
    }

    /// Days from `earlier` to `self`.
    pub fn days_since(self, earlier: Date) -> i64 {
        self.0 - earlier.0
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = civil_from_days(self.0);
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

/// The Sunday starting epiweek 1 of `year`: the Sunday on or before January 4.
fn epiweek_one(year: i64) -> Date {
    let jan4 = days_from_civil(year, 1, 4);
    // 1970-01-01 (day 0) was a Thursday: weekday 4 with Sunday = 0.
    Date(jan4 - (jan4 + 4).rem_euclid(7))
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's `days_from_civil` / `civil_from_days` (public domain), eras of 400 years.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}
