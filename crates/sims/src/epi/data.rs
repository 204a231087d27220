//! Loaders for the GradABM data files (see `crates/sims/data/README.md` for sources and licences).
//!
//! Every error names the file, and where it applies the line and the offending value:
//! `data/agents.csv:17: age_group "9" is not an age group 0..=7`.

use std::path::{Path, PathBuf};

/// The folder of the data bundled with the crate (`crates/sims/data`).
pub fn bundled_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data")
}

/// A bundled file by name, e.g. `bundled("gradabm_25011_agents.csv")`.
pub fn bundled(name: &str) -> PathBuf {
    bundled_dir().join(name)
}

/// Why a data file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file is missing or unreadable.
    #[error("{}: cannot read the file: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is malformed (wrong field count, a value that does not parse or is out of range).
    #[error("{}:{line}: {message}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong, quoting the value.
        message: String,
    },
    /// The file parses but does not hold what was asked for (an unknown county, no rows).
    #[error("{}: {message}", path.display())]
    Content {
        /// The file.
        path: PathBuf,
        /// What is missing.
        message: String,
    },
}

/// One CSV file read record by record, with errors located in it.
struct CsvFile {
    path: PathBuf,
    reader: csv::Reader<std::fs::File>,
}

impl CsvFile {
    fn open(path: &Path, has_headers: bool) -> Result<CsvFile, DataError> {
        let file = std::fs::File::open(path)
            .map_err(|source| DataError::Open { path: path.to_path_buf(), source })?;
        let reader = csv::ReaderBuilder::new().has_headers(has_headers).from_reader(file);
        Ok(CsvFile { path: path.to_path_buf(), reader })
    }

    /// The header's columns (BOM stripped).
    fn headers(&mut self) -> Result<Vec<String>, DataError> {
        let h = match self.reader.headers() {
            Ok(h) => h.clone(),
            Err(e) => return Err(self.csv_error(e)),
        };
        Ok(h.iter().map(|s| s.trim_start_matches('\u{feff}').to_string()).collect())
    }

    /// The position of column `name`, or an error naming the columns present.
    fn column(&mut self, name: &str) -> Result<usize, DataError> {
        let cols = self.headers()?;
        cols.iter().position(|c| c == name).ok_or_else(|| DataError::Content {
            path: self.path.clone(),
            message: format!("no column \"{name}\" in the header (columns: {})", cols.join(", ")),
        })
    }

    fn csv_error(&self, e: csv::Error) -> DataError {
        csv_error(&self.path, e)
    }

    /// Calls `f(record)` for every record; its error is located at the record's line.
    fn for_each(
        &mut self,
        mut f: impl FnMut(&csv::StringRecord) -> Result<(), String>,
    ) -> Result<(), DataError> {
        let mut record = csv::StringRecord::new();
        loop {
            match self.reader.read_record(&mut record) {
                Ok(false) => return Ok(()),
                Ok(true) => {
                    f(&record).map_err(|message| DataError::Line {
                        path: self.path.clone(),
                        line: line_of(&self.path, record.position()),
                        message,
                    })?;
                }
                Err(e) => return Err(self.csv_error(e)),
            }
        }
    }

    fn content(&self, message: String) -> DataError {
        DataError::Content { path: self.path.clone(), message }
    }
}

/// A CSV reader's error in `path`: a failed read (a folder, a device error) as [`DataError::Open`],
/// which names no line (the reader reports line 1 when it has read nothing), else at its line.
pub(crate) fn csv_error(path: &Path, e: csv::Error) -> DataError {
    let line = line_of(path, e.position());
    // Without the crate's "record N (line: L, byte: B)" prefix, whose line may be wrong (see
    // `line_of`); the error names the line itself.
    let message = match e.kind() {
        csv::ErrorKind::Utf8 { err, .. } => err.to_string(),
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("found a record with {len} fields, but the previous record has {expected_len} fields")
        }
        _ => e.to_string(),
    };
    match e.into_kind() {
        csv::ErrorKind::Io(source) => DataError::Open { path: path.to_path_buf(), source },
        _ => DataError::Line { path: path.to_path_buf(), line, message },
    }
}

/// The 1-based line of the CSV record at `pos` in `path` (0 without a position). The csv crate's
/// own line count is off after CRLF line ends and blank lines (rust-csv #395, #208), so the line
/// is counted in the text: a record's byte offset is where the reader stood before reading it
/// (at or before the previous line's end, before any blank lines), so line ends from there are
/// skipped, then the line ends before (`\n`, `\r\n` or a lone `\r`) counted. The file is read again,
/// only for an error; if that fails, the crate's count is used.
pub(crate) fn line_of(path: &Path, pos: Option<&csv::Position>) -> u64 {
    let Some(pos) = pos else { return 0 };
    let Ok(text) = std::fs::read(path) else { return pos.line() };
    let mut at = usize::try_from(pos.byte()).map_or(text.len(), |b| b.min(text.len()));
    while at < text.len() && matches!(text[at], b'\r' | b'\n') {
        at += 1;
    }
    let ends = (0..at).filter(|&i| text[i] == b'\n' || (text[i] == b'\r' && text.get(i + 1) != Some(&b'\n')));
    1 + ends.count() as u64
}

/// Field `i` of a record, parsed; the error quotes the column name and value.
fn field<T: std::str::FromStr>(r: &csv::StringRecord, i: usize, name: &str) -> Result<T, String> {
    let raw = r.get(i).ok_or_else(|| format!("missing column {name} (the line has {} fields)", r.len()))?;
    raw.trim().parse().map_err(|_| format!("{name} \"{raw}\" is not a valid {}", std::any::type_name::<T>()))
}

/// An optional float field: empty means missing (the COVID series starts with empty deaths);
/// `NaN` and `inf` (which parse as floats) are refused.
fn optional_f64(r: &csv::StringRecord, i: usize, name: &str) -> Result<Option<f64>, String> {
    match r.get(i).map(str::trim) {
        Some("") | None => Ok(None),
        Some(raw) => match field::<f64>(r, i, name)? {
            v if v.is_finite() => Ok(Some(v)),
            _ => Err(format!("{name} \"{raw}\" is not a finite number")),
        },
    }
}

/// The age group (0..=7: 0–19, 20–29, …, 70–79, 80+) of every agent of a GradABM agents file
/// (`,age_group,stage` with the agent index first; indices must run 0, 1, 2, … as the network refers
/// to them).
///
/// # Errors
/// [`DataError`] for a missing file, a missing `age_group` column, an index out of sequence, or an age
/// group outside 0..=7.
pub fn load_agent_ages(path: &Path) -> Result<Vec<u8>, DataError> {
    let mut f = CsvFile::open(path, true)?;
    let age_col = f.column("age_group")?;
    let mut ages = Vec::new();
    f.for_each(|r| {
        let index: usize = field(r, 0, "agent index")?;
        if index != ages.len() {
            return Err(format!("agent index {index} is out of sequence (expected {})", ages.len()));
        }
        let age: i64 = field(r, age_col, "age_group")?;
        match u8::try_from(age) {
            Ok(a) if a <= 7 => ages.push(a),
            _ => return Err(format!("age_group \"{age}\" is not an age group 0..=7")),
        }
        Ok(())
    })?;
    if ages.is_empty() {
        return Err(f.content("no agents".into()));
    }
    Ok(ages)
}

/// The undirected edges `(u, v)` of a GradABM network file (two agent indices per line, no header),
/// each index checked to be below `num_agents`. Self-loops are kept, as the published simulator keeps
/// them.
///
/// # Errors
/// [`DataError`] for a missing file, a line without two integer indices, or an index `>= num_agents`.
pub fn load_edges(path: &Path, num_agents: usize) -> Result<Vec<(u32, u32)>, DataError> {
    let mut f = CsvFile::open(path, false)?;
    let mut edges = Vec::new();
    f.for_each(|r| {
        if r.len() != 2 {
            return Err(format!("expected 2 fields (u,v), found {}", r.len()));
        }
        let u: u32 = field(r, 0, "u")?;
        let v: u32 = field(r, 1, "v")?;
        for x in [u, v] {
            if x as usize >= num_agents {
                return Err(format!("agent index {x} is out of range for {num_agents} agents"));
            }
        }
        edges.push((u, v));
        Ok(())
    })?;
    Ok(edges)
}

/// Population by age group of one county.
#[derive(Clone, Debug, PartialEq)]
pub struct CountyAgeGroups {
    /// County FIPS code, e.g. 25011.
    pub fips: u32,
    /// The county population (`num_agents`); for some counties not exactly the sum of `counts`.
    pub num_agents: u64,
    /// People in age groups 0–19, 20–29, …, 70–79, 80+.
    pub counts: [u64; 8],
}

/// The age-group counts of county `fips` from `gradabm_ma_county_age_groups.csv`
/// (`fips,num_agents,AGE_0_19,…,AGE_80`).
///
/// # Errors
/// [`DataError`] for a missing file, a malformed line, a county not in the file (the message lists
/// the counties present), or the county listed twice.
pub fn load_county_age_groups(path: &Path, fips: u32) -> Result<CountyAgeGroups, DataError> {
    let mut f = CsvFile::open(path, true)?;
    let headers = f.headers()?;
    if headers.len() != 10 {
        return Err(f.content(format!(
            "expected 10 columns (fips, num_agents, 8 age groups), found {}",
            headers.len()
        )));
    }
    let mut found = None;
    let mut present = Vec::new();
    let path = f.path.clone();
    let mut found_on = 0;
    f.for_each(|r| {
        let this: u32 = field(r, 0, "fips")?;
        present.push(this);
        if this == fips {
            // A second row would replace the first without a word: which one is meant is unknown.
            if found.is_some() {
                return Err(format!("county {fips} is listed again (first on line {found_on})"));
            }
            found_on = line_of(&path, r.position());
            let mut counts = [0u64; 8];
            for (k, c) in counts.iter_mut().enumerate() {
                *c = field(r, 2 + k, &headers[2 + k])?;
            }
            found = Some(CountyAgeGroups { fips, num_agents: field(r, 1, "num_agents")?, counts });
        }
        Ok(())
    })?;
    found.ok_or_else(|| f.content(format!("county {fips} is not in the file (counties: {present:?})")))
}

/// A county's daily COVID-19 series (incident counts; missing days are `None`).
#[derive(Clone, Debug, PartialEq)]
pub struct CovidDaily {
    /// County FIPS code.
    pub fips: u32,
    /// Dates as `YYYY-MM-DD`, consecutive and ascending as in the file.
    pub dates: Vec<String>,
    /// Daily new cases (`None` where the file is empty).
    pub cases: Vec<Option<f64>>,
    /// Daily new deaths (`None` where the file is empty; negative values are reporting corrections).
    pub deaths: Vec<Option<f64>>,
}

/// County `fips`'s rows of `gradabm_ma_county_covid_daily.csv`
/// (`geo_value,time_value,cases,deaths,…`).
///
/// # Errors
/// [`DataError`] for a missing file or column, a malformed or non-finite (`NaN`, `inf`) number, or
/// a county not in the file.
pub fn load_county_covid_daily(path: &Path, fips: u32) -> Result<CovidDaily, DataError> {
    let mut f = CsvFile::open(path, true)?;
    let (geo, time, cases_col, deaths_col) =
        (f.column("geo_value")?, f.column("time_value")?, f.column("cases")?, f.column("deaths")?);
    let mut out = CovidDaily { fips, dates: Vec::new(), cases: Vec::new(), deaths: Vec::new() };
    let mut present = std::collections::BTreeSet::new();
    f.for_each(|r| {
        let this: u32 = field(r, geo, "geo_value")?;
        present.insert(this);
        if this == fips {
            out.dates.push(r.get(time).unwrap_or_default().to_string());
            out.cases.push(optional_f64(r, cases_col, "cases")?);
            out.deaths.push(optional_f64(r, deaths_col, "deaths")?);
        }
        Ok(())
    })?;
    if out.dates.is_empty() {
        return Err(f.content(format!("county {fips} is not in the file (counties: {present:?})")));
    }
    Ok(out)
}

/// A region's weekly influenza-like-illness series.
#[derive(Clone, Debug, PartialEq)]
pub struct FluWeekly {
    /// Region code, e.g. `MA`.
    pub region: String,
    /// CDC epiweeks as `YYYYWW`, ascending as in the file.
    pub epiweeks: Vec<u32>,
    /// Weighted ILI, percent of visits.
    pub ili: Vec<f64>,
}

/// Region `region`'s rows of `gradabm_flu_state_weekly_ili.csv` (`region,epiweek,…,ili`); region
/// names are compared without surrounding spaces.
///
/// # Errors
/// [`DataError`] for a missing file or column, a malformed number, an ILI that is not a finite
/// non-negative number (`NaN`, `inf`, `-1`), or a region not in the file.
pub fn load_flu_weekly(path: &Path, region: &str) -> Result<FluWeekly, DataError> {
    let mut f = CsvFile::open(path, true)?;
    let (reg, week, ili_col) = (f.column("region")?, f.column("epiweek")?, f.column("ili")?);
    let mut out = FluWeekly { region: region.trim().to_string(), epiweeks: Vec::new(), ili: Vec::new() };
    let mut present = std::collections::BTreeSet::new();
    f.for_each(|r| {
        // Trimmed as every other field is (`field`): " MA" is region MA.
        let this = r.get(reg).unwrap_or_default().trim();
        if this == region.trim() {
            out.epiweeks.push(field(r, week, "epiweek")?);
            let ili: f64 = field(r, ili_col, "ili")?;
            if !(ili.is_finite() && ili >= 0.0) {
                let raw = r.get(ili_col).unwrap_or_default();
                return Err(format!("ili \"{raw}\" is not a finite non-negative percentage"));
            }
            out.ili.push(ili);
        } else if present.len() < 80 {
            present.insert(this.to_string());
        }
        Ok(())
    })?;
    if out.ili.is_empty() {
        let names: Vec<_> = present.into_iter().collect();
        return Err(
            f.content(format!("region \"{region}\" is not in the file (regions: {})", names.join(", ")))
        );
    }
    Ok(out)
}
