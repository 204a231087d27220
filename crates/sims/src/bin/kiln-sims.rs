//! `kiln-sims`: kiln's simulations on the command line.
//!
//! `kiln-sims calibrate` fits a GradABM epidemic model by gradient descent through the
//! jit-compiled simulator — COVID (SEIRM: per-week R0 and mortality, initial infections) to a
//! county's 7-day-smoothed daily deaths, or flu (SIRS: per-week R0) to a state's weekly ILI —
//! for several prediction weeks (training windows ending 7 days apart, each warm-started from the
//! previous one), forecasts the following 28 days after each, scores every forecast against the
//! observed values and a persistence baseline, and writes `params.json`, `series.csv` and
//! `plot.png` into `--out` (all or nothing: they are written to a temporary folder beside it and
//! moved in at the end).

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use kiln::prelude::DType;
use kiln_sims::epi::calibrate::{
    self, DailySeries, Date, FitConfig, ForecastScores, MeanScores, Objective, RawParams, Targets,
    WeeklySeries,
    flu::{FluFitConfig, FluRaw, fit_flu, flu_with_days, simulate_flu_weekly},
    mean_scores, persistence,
    plot::{PlotData, write_png},
    prediction_ends,
};
use kiln_sims::epi::data::{self, DataError};
use kiln_sims::epi::{CovidModel, FluModel, Population, UpdateForm};
use kiln_sims::rigid::apg::{self, ApgArgs, ApgResult};
use kiln_sims::rigid::envs::{EnvName, Pipeline};
use kiln_sims::rigid::rollout::{self, RolloutArgs};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The bundled real population and network (Franklin County, MA).
const FRANKLIN: u32 = 25011;
/// Agents of the generated population (the county's age mix and fitted contact counts,
/// `Population::county_scaled`) used for a county without a bundled network.
const DEFAULT_SYNTHETIC_AGENTS: usize = 100_000;
/// The default flu region (the state whose ILI is fitted).
const DEFAULT_REGION: &str = "MA";
/// The longest `--horizon`: ten years of days (it also keeps the day arithmetic from overflowing).
const MAX_HORIZON_DAYS: usize = 3650;

#[derive(Parser)]
#[command(
    name = "kiln-sims",
    version,
    about = "kiln's simulations: GradABM-style epidemics (calibrate) and Brax-style rigid bodies (rollout, apg)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Calibrate an epidemic model and forecast, for several prediction weeks.
    ///
    /// COVID (default): Franklin County, MA daily deaths (7-day mean), training from 2020-03-15 to
    /// 2020-04-11, -18 and -25, 28-day forecasts. Flu: MA weekly ILI, training from epiweek 201740
    /// to 201748, 201749 and 201750, 4-week forecasts, simulated on the county's population (ILI is
    /// a percentage, so any population can carry it; the published model does the same).
    #[command(verbatim_doc_comment)]
    Calibrate(CalibrateArgs),
    /// Roll out a batch of Brax environments under a random linear policy and measure throughput.
    ///
    /// B environments (Brax's episode wrapper, 1000 steps, and auto-reset) take T env steps each
    /// as jit-compiled `scan`s of the `vmap`ped step; prints env-steps/s, compile time and the
    /// mean reward.
    #[command(verbatim_doc_comment)]
    Rollout(RolloutCli),
    /// Train a policy by analytic policy gradients on kiln's dense-reward pendulum balancing task.
    ///
    /// The gradient of the mean 200-step return (reward cos θ − 0.01 x² − 0.001 u², spring
    /// inverted pendulum, Brax's reset noise) goes through the checkpointed rollout; Adam with
    /// global-norm clipping follows it. Writes curve.png and curve.csv into --out.
    #[command(verbatim_doc_comment)]
    Apg(ApgCli),
}

#[derive(clap::Args)]
struct RolloutCli {
    /// Brax environment: ant, inverted_pendulum, inverted_double_pendulum or reacher.
    #[arg(long, default_value = "ant", value_parser = EnvName::parse)]
    env: EnvName,
    /// Physics pipeline (Brax's backend): spring or positional.
    #[arg(long, default_value = "spring", value_parser = Pipeline::parse)]
    pipeline: Pipeline,
    /// Number of environments stepped together.
    #[arg(long, default_value_t = 1024, allow_hyphen_values = true)]
    batch: i64,
    /// Env steps per environment.
    #[arg(long, default_value_t = 1000, allow_hyphen_values = true)]
    steps: i64,
    /// Seed of the reset noise and of the policy's weights.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    seed: u64,
    /// Float dtype: f32 (Brax's default) or f64.
    #[arg(long, default_value = "f32", value_parser = parse_dtype)]
    dtype: DType,
    /// Also write the measurements (env-steps/s, compile s, ...) as a JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ApgCli {
    /// Gradient steps.
    #[arg(long, default_value_t = ApgArgs::default().iterations as i64, allow_hyphen_values = true)]
    iterations: i64,
    /// Environments per gradient.
    #[arg(long, default_value_t = ApgArgs::default().batch as i64, allow_hyphen_values = true)]
    batch: i64,
    /// Seed of the policy initialization and the reset keys.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    seed: u64,
    /// Adam learning rate.
    #[arg(long, default_value_t = ApgArgs::default().lr, allow_hyphen_values = true)]
    lr: f64,
    /// Stop the gradient through the state every K env steps (Brax APG's truncation_length; K must
    /// divide the 200-step episode), or `none` for the full-horizon gradient, which explodes on
    /// this unstable task.
    #[arg(long, value_name = "K|none", default_value = "10", value_parser = parse_truncation)]
    truncation: Truncation,
    /// Hidden layer widths of the policy's MLP, comma-separated (none: a linear policy).
    #[arg(long, value_name = "N,N..", value_delimiter = ',')]
    hidden: Vec<usize>,
    /// Output folder for curve.png and curve.csv (created; a previous apg output there is replaced).
    #[arg(long, value_name = "DIR", default_value = "apg")]
    out: PathBuf,
}

/// `--truncation`: a segment length or the full horizon (`None`).
#[derive(Clone, Copy, Debug)]
struct Truncation(Option<usize>);

fn parse_truncation(text: &str) -> Result<Truncation, String> {
    if text == "none" {
        return Ok(Truncation(None));
    }
    let horizon = ApgArgs::default().horizon;
    match text.parse::<usize>() {
        Ok(k) if k > 0 && horizon % k == 0 => Ok(Truncation(Some(k))),
        _ => Err(format!("expected `none` or a positive divisor of the {horizon}-step episode")),
    }
}

fn parse_dtype(text: &str) -> Result<DType, String> {
    match text {
        "f32" => Ok(DType::F32),
        "f64" => Ok(DType::F64),
        _ => Err("expected f32 or f64".into()),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Disease {
    /// COVID-19 (SEIRM), fitted to daily deaths.
    Covid,
    /// Influenza (SIRS), fitted to a state's weekly ILI.
    Flu,
}

#[derive(clap::Args)]
struct CalibrateArgs {
    /// County FIPS code (MA): the simulated population (its size and age mix) and, for COVID, its
    /// deaths in the bundled file (unless --data).
    #[arg(long, default_value_t = FRANKLIN, allow_hyphen_values = true)]
    county: u32,
    /// Flu only: the state (or DC) whose weekly ILI is fitted [default: MA].
    #[arg(long, value_name = "STATE")]
    region: Option<String>,
    /// Your own series. COVID: a CSV with `date,deaths` columns (YYYY-MM-DD, one row per day).
    /// Flu: a CSV with `region,epiweek,ili` columns (the bundled file's format, consecutive weeks).
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,
    /// Disease model.
    #[arg(long, value_enum, default_value_t = Disease::Covid)]
    disease: Disease,
    /// Simulate a generated population of N agents with the county's age mix and contact counts
    /// [default: the real 25011 population, or 100000 for other counties].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    agents: Option<i64>,
    /// Optimizer steps of the first (earliest) prediction week's fit.
    #[arg(long, default_value_t = 100, allow_hyphen_values = true)]
    epochs: i64,
    /// Optimizer steps of each later prediction week's fit, warm-started from the previous week's
    /// parameters.
    #[arg(long, value_name = "N", default_value_t = 40, allow_hyphen_values = true)]
    warm_epochs: i64,
    /// Training windows, all from --start, ending 7 days apart (the last on --end); each is fitted,
    /// forecast and scored.
    #[arg(long, value_name = "K", default_value_t = 3, allow_hyphen_values = true)]
    prediction_weeks: usize,
    /// Seed of the simulation noise (and of a synthetic population).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    seed: u32,
    /// Output folder (created; a previous kiln-sims output there is replaced).
    #[arg(long, value_name = "DIR", default_value = "calibration")]
    out: PathBuf,
    /// First training day [COVID default: 2020-03-15 for the bundled data, else the series' first
    /// day]. Flu: an epiweek YYYYWW or a date in it [default: 201740, else the first week].
    #[arg(long, value_name = "DATE")]
    start: Option<String>,
    /// Last training day of the last prediction week [COVID default: 2020-04-25 for the bundled
    /// data, else the horizon before the series' end, or its end if the series is not longer than
    /// the horizon]. Flu: an epiweek or a date in it [default: 201750, else the horizon before the
    /// last week, or the last week].
    #[arg(long, value_name = "DATE")]
    end: Option<String>,
    /// Days to forecast after each training window (flu: a multiple of 7; 28 = 4 weeks; at most
    /// 3650).
    #[arg(long, default_value_t = 28, allow_hyphen_values = true)]
    horizon: usize,
    /// Noise seeds simulated per optimizer step (the loss compares their mean curve).
    #[arg(long, value_name = "DRAWS", default_value_t = 1, allow_hyphen_values = true)]
    ensemble: usize,
    /// Noise seeds whose mean curve is the fitted and forecast curve (one draw of a small outbreak
    /// can lie far from the model's mean).
    #[arg(long, value_name = "DRAWS", default_value_t = 16, allow_hyphen_values = true)]
    forecast_ensemble: usize,
    /// Adam learning rate.
    #[arg(long, default_value_t = 0.05, allow_hyphen_values = true)]
    lr: f64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Calibrate(args) => run_calibrate(&args),
        Command::Rollout(args) => run_rollout(&args),
        Command::Apg(args) => run_apg(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("kiln-sims: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn data_err(e: DataError) -> String {
    e.to_string()
}

/// The observed target on a regular grid: daily deaths (step 1 day) or weekly ILI (step 7 days,
/// dates are the weeks' Sundays).
struct Observed {
    start: Date,
    step_days: i64,
    values: Vec<f64>,
}

impl Observed {
    fn end(&self) -> Date {
        self.start.add_days(self.step_days * (self.values.len() as i64 - 1))
    }

    /// The index of `date` (a grid point inside the series; checked by the caller).
    fn index(&self, date: Date) -> usize {
        (date.days_since(self.start) / self.step_days) as usize
    }

    fn date(&self, i: usize) -> Date {
        self.start.add_days(self.step_days * i as i64)
    }
}

/// Everything checked and loaded before any simulation runs.
struct Inputs {
    source: String,
    /// The flu region (None for COVID).
    region: Option<String>,
    observed: Observed,
    train_start: Date,
    /// The last training day (COVID) or week (flu) of each prediction week, oldest first.
    ends: Vec<Date>,
    /// Forecast steps (days for COVID, weeks for flu).
    horizon: usize,
    population_size: u64,
    population: Population,
    synthetic: bool,
    epochs: usize,
    warm_epochs: usize,
}

fn positive_steps(flag: &str, n: i64) -> Result<usize, String> {
    usize::try_from(n)
        .ok()
        .filter(|&e| e > 0)
        .ok_or_else(|| format!("{flag} {n}: must be a positive number of steps"))
}

/// A flu `--start`/`--end`: an epiweek `YYYYWW` or a date, as the first day of its epiweek.
fn parse_week(flag: &str, text: &str) -> Result<Date, String> {
    let date = if text.len() == 6 && text.bytes().all(|b| b.is_ascii_digit()) {
        Date::from_epiweek(text.parse().map_err(|_| format!("{flag}: \"{text}\""))?)
    } else {
        Date::parse(text).map_err(|m| format!("{m} nor an epiweek YYYYWW"))
    };
    let date = date.map_err(|m| format!("{flag}: {m}"))?;
    Date::from_epiweek(date.epiweek()).map_err(|m| format!("{flag}: {m}"))
}

fn check_inputs(args: &CalibrateArgs) -> Result<Inputs, String> {
    if let Some(n) = args.agents
        && n <= 0
    {
        return Err(format!("--agents {n}: the number of agents must be positive"));
    }
    let epochs = positive_steps("--epochs", args.epochs)?;
    let warm_epochs = positive_steps("--warm-epochs", args.warm_epochs)?;
    for (flag, n) in [
        ("--ensemble", args.ensemble),
        ("--forecast-ensemble", args.forecast_ensemble),
        ("--horizon", args.horizon),
        ("--prediction-weeks", args.prediction_weeks),
    ] {
        if n == 0 {
            return Err(format!("{flag} 0: must be positive"));
        }
    }
    if args.horizon > MAX_HORIZON_DAYS {
        return Err(format!("--horizon {}: at most {MAX_HORIZON_DAYS} days (ten years)", args.horizon));
    }
    check_lr(args.lr)?;
    let flu = args.disease == Disease::Flu;
    if !flu && args.region.is_some() {
        return Err("--region selects the ILI series of --disease flu; COVID uses --county".into());
    }
    if flu && args.horizon % 7 != 0 {
        return Err(format!("--horizon {}: flu forecasts whole weeks, use a multiple of 7", args.horizon));
    }
    check_out(&args.out)?;

    let ages_file = data::bundled("gradabm_ma_county_age_groups.csv");
    let county = data::load_county_age_groups(&ages_file, args.county).map_err(data_err)?;
    let bundled = args.data.is_none();
    let (source, region, observed) = if flu {
        let region = args.region.clone().unwrap_or_else(|| DEFAULT_REGION.into());
        let file = args.data.clone().unwrap_or_else(|| data::bundled("gradabm_flu_state_weekly_ili.csv"));
        let weekly = data::load_flu_weekly(&file, &region).map_err(data_err)?;
        let series = WeeklySeries::from_flu(&weekly, &file).map_err(data_err)?;
        let observed = Observed { start: series.start, step_days: 7, values: series.values };
        (file.display().to_string(), Some(region), observed)
    } else {
        let (source, raw) = match &args.data {
            Some(path) => (path.display().to_string(), DailySeries::load_csv(path).map_err(data_err)?),
            None => {
                let file = data::bundled("gradabm_ma_county_covid_daily.csv");
                let daily = data::load_county_covid_daily(&file, args.county).map_err(data_err)?;
                (file.display().to_string(), DailySeries::from_county(&daily, &file).map_err(data_err)?)
            }
        };
        let smoothed = raw.smoothed();
        (source, None, Observed { start: smoothed.start, step_days: 1, values: smoothed.values })
    };
    let horizon = args.horizon / observed.step_days as usize;
    let parse = |flag: &str, text: &str| {
        if flu { parse_week(flag, text) } else { Date::parse(text).map_err(|m| format!("{flag}: {m}")) }
    };
    let (default_start, default_end) = if flu { ("201740", "201750") } else { ("2020-03-15", "2020-04-25") };
    let train_start = match &args.start {
        Some(s) => parse("--start", s)?,
        None if bundled => parse("--start", default_start)?,
        None => observed.start,
    };
    let train_end = match &args.end {
        Some(s) => parse("--end", s)?,
        None if bundled => parse("--end", default_end)?,
        None if observed.values.len() > horizon => observed.date(observed.values.len() - 1 - horizon),
        None => observed.end(),
    };
    if train_end < train_start {
        return Err(format!("empty date window: --start {train_start} is after --end {train_end}"));
    }
    if train_start < observed.start || train_end > observed.end() {
        return Err(format!(
            "the date window {train_start}..{train_end} is not inside the series of {source}{} \
             ({}..{})",
            region.as_ref().map_or(String::new(), |r| format!(", region {r}")),
            observed.start,
            observed.end()
        ));
    }
    let ends = prediction_ends(train_start, train_end, args.prediction_weeks)
        .map_err(|m| format!("--prediction-weeks: {m}"))?;
    let (population, synthetic) = match args.agents {
        None if args.county == FRANKLIN => (Population::franklin_county().map_err(data_err)?, false),
        None => {
            let n = usize::try_from(county.num_agents).unwrap_or(usize::MAX).min(DEFAULT_SYNTHETIC_AGENTS);
            let p = Population::county_scaled(args.county, n as u64, u64::from(args.seed));
            (p.map_err(|e| e.to_string())?, true)
        }
        Some(n) => {
            let p = Population::county_scaled(args.county, n as u64, u64::from(args.seed));
            (p.map_err(|e| e.to_string())?, true)
        }
    };
    check_draws(args, population.num_agents())?;
    Ok(Inputs {
        source,
        region,
        observed,
        train_start,
        ends,
        horizon,
        population_size: county.num_agents,
        population,
        synthetic,
        epochs,
        warm_epochs,
    })
}

/// Refuses draw counts whose batched state cannot exist before any training runs (else a huge
/// `--forecast-ensemble` fails only after every fit), with the library's own check
/// ([`calibrate::check_ensemble`]: one f32 per agent per draw is the least a K-draw simulation
/// holds, and the allocator is asked for it).
fn check_draws(args: &CalibrateArgs, agents: usize) -> Result<(), String> {
    for (flag, k) in [("--ensemble", args.ensemble), ("--forecast-ensemble", args.forecast_ensemble)] {
        calibrate::check_ensemble(k, agents).map_err(|e| match e {
            calibrate::CalibrateError::Config(m) => format!("{flag} {k}: {m}"),
            calibrate::CalibrateError::Kiln(e) => format!("{flag} {k}: {e}"),
        })?;
    }
    Ok(())
}

/// A learning rate must be a finite positive number, also as the f32 the parameters are (1e39
/// would pass as f64 and turn the loss NaN; 1e-50 would be 0).
fn check_lr(lr: f64) -> Result<(), String> {
    let as_f32 = lr as f32;
    if lr > 0.0 && lr.is_finite() && as_f32 > 0.0 && as_f32.is_finite() {
        Ok(())
    } else {
        Err(format!(
            "--lr {lr}: must be a finite positive number, also as f32 (between {:e} and {:e})",
            f32::from_bits(1),
            f32::MAX
        ))
    }
}

/// The files a previous run leaves in `--out` (which may be replaced).
const OUTPUTS: [&str; 3] = ["params.json", "series.csv", "plot.png"];

/// `--out` must be absent, empty, or hold only a previous run's files (never replace anything else).
fn check_out(out: &Path) -> Result<(), String> {
    check_out_for(out, &OUTPUTS)
}

/// [`check_out`] for a command whose previous outputs are `outputs` (calibrate's or apg's).
fn check_out_for(out: &Path, outputs: &[&str]) -> Result<(), String> {
    match std::fs::read_dir(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("--out {}: {e}", out.display())),
        Ok(entries) => {
            for entry in entries {
                let name = entry.map_err(|e| format!("--out {}: {e}", out.display()))?.file_name();
                if !outputs.iter().any(|o| name == *o) {
                    return Err(format!(
                        "--out {}: the folder holds {:?}, which is not one of this command's outputs \
                         ({}); choose a new or empty folder",
                        out.display(),
                        name,
                        outputs.join(", ")
                    ));
                }
            }
            Ok(())
        }
    }
}

/// A temporary folder beside `--out`, removed on drop unless moved into place by [`Staging::commit`].
struct Staging {
    dir: PathBuf,
    done: bool,
}

impl Staging {
    fn new(out: &Path) -> Result<Staging, String> {
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| format!("--out {}: {e}", out.display()))?;
        let name = out.file_name().map_or("out".into(), |n| n.to_string_lossy().into_owned());
        let dir = parent.join(format!(".{name}.kiln-sims-tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).map_err(|e| {
            format!("--out {}: cannot create a folder in {}: {e}", out.display(), parent.display())
        })?;
        Ok(Staging { dir, done: false })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Moves the folder to `out`, replacing a previous output there (checked by [`check_out`]).
    fn commit(self, out: &Path) -> Result<(), String> {
        self.commit_for(out, &OUTPUTS)
    }

    /// [`Staging::commit`] for a command whose previous outputs are `outputs`.
    fn commit_for(mut self, out: &Path, outputs: &[&str]) -> Result<(), String> {
        check_out_for(out, outputs)?;
        if out.exists() {
            let old = self.dir.with_extension("old");
            std::fs::rename(out, &old).map_err(|e| format!("{}: {e}", out.display()))?;
            std::fs::rename(&self.dir, out).map_err(|e| format!("{}: {e}", out.display()))?;
            let _ = std::fs::remove_dir_all(&old);
        } else {
            std::fs::rename(&self.dir, out).map_err(|e| format!("{}: {e}", out.display()))?;
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[derive(Serialize)]
struct WeekParams {
    start: String,
    r0: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    mortality: Option<f32>,
}

/// The fit of one prediction week: its parameters, curves and scores.
#[derive(Serialize)]
struct WindowFit {
    train_end: String,
    /// Steps of the training window (days for COVID, weeks for flu).
    train_steps: usize,
    epochs: usize,
    warm_start: bool,
    weeks: Vec<WeekParams>,
    initial_pct: f32,
    final_loss: f32,
    scores: ForecastScores,
    #[serde(skip)]
    losses: Vec<f32>,
    #[serde(skip)]
    fitted: Vec<f64>,
    #[serde(skip)]
    forecast: Vec<f64>,
    #[serde(skip)]
    persistence: Vec<f64>,
}

/// The parameters a prediction week hands to the next one's fit.
enum Warm {
    Covid(RawParams),
    Flu(FluRaw),
}

#[derive(Serialize)]
struct ParamsFile<'a> {
    disease: Disease,
    county: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<&'a str>,
    data: &'a str,
    target: &'static str,
    population: u64,
    agents: usize,
    synthetic_population: bool,
    scale: f32,
    train_start: String,
    train_end: String,
    horizon_days: usize,
    epochs: usize,
    warm_epochs: usize,
    lr: f64,
    clip_norm: f64,
    ensemble: usize,
    forecast_ensemble: usize,
    seed: u32,
    /// The last prediction week's fit (ending at `train_end`).
    weeks: &'a [WeekParams],
    initial_pct: f32,
    final_loss: f32,
    losses: &'a [f32],
    scores: ForecastScores,
    /// Every prediction week, oldest first (the last is the one above).
    prediction_weeks: &'a [WindowFit],
    mean_scores: MeanScores,
    wall_seconds: f64,
}

/// What the run fits, for messages and files.
fn target_name(disease: Disease) -> &'static str {
    match disease {
        Disease::Covid => "daily deaths, 7-day trailing mean",
        Disease::Flu => "weekly ILI, percent",
    }
}

/// Fits the training window `train` (observed values from `inputs.train_start`), warm-started
/// from `warm`, forecasts `inputs.horizon` steps and scores them against `truth_after`.
fn fit_window(
    args: &CalibrateArgs,
    inputs: &Inputs,
    train: &[f64],
    truth_after: &[f64],
    warm: Option<&Warm>,
    bar: &ProgressBar,
) -> Result<(WindowFit, Warm), String> {
    let steps = train.len();
    let epochs = if warm.is_some() { inputs.warm_epochs } else { inputs.epochs };
    let progress = |_, loss: f32| {
        bar.set_message(format!("{loss:.5}"));
        bar.inc(1);
    };
    let week_start = |w: usize| inputs.train_start.add_days(7 * w as i64).to_string();
    let (weeks, initial_pct, losses, curve, next) = match args.disease {
        Disease::Covid => {
            let model = CovidModel::new(&inputs.population, steps, UpdateForm::KeepGrad);
            let scale = covid_scale(inputs);
            let config = FitConfig {
                epochs,
                lr: args.lr,
                ensemble: args.ensemble,
                seed: args.seed,
                objective: Objective::DeathsMse,
                scale,
                ..FitConfig::default()
            };
            let init = match warm {
                Some(Warm::Covid(raw)) => Some(raw),
                _ => None,
            };
            let fitted = calibrate::fit_from(&model, &Targets::deaths(train), &config, init, progress)
                .map_err(|e| e.to_string())?;
            let long = calibrate::with_days(&model, steps + inputs.horizon);
            let (_, deaths) =
                calibrate::simulate_mean(&long, &fitted.params, args.forecast_ensemble, args.seed)
                    .map_err(|e| e.to_string())?;
            let weeks = (fitted.params.r0.to_vec::<f32>().into_iter())
                .zip(fitted.params.mortality.to_vec::<f32>())
                .enumerate()
                .map(|(w, (r0, m))| WeekParams { start: week_start(w), r0, mortality: Some(m) })
                .collect();
            let curve = deaths.iter().map(|d| d * f64::from(scale)).collect();
            let initial = fitted.params.initial_pct.item::<f32>();
            (weeks, initial, fitted.losses, curve, Warm::Covid(fitted.raw))
        }
        Disease::Flu => {
            let model = FluModel::new(&inputs.population, 7 * steps, UpdateForm::KeepGrad);
            let config = FluFitConfig {
                epochs,
                lr: args.lr,
                ensemble: args.ensemble,
                seed: args.seed,
                ..FluFitConfig::default()
            };
            let init = match warm {
                Some(Warm::Flu(raw)) => Some(raw),
                _ => None,
            };
            let fitted = fit_flu(&model, train, &config, init, progress).map_err(|e| e.to_string())?;
            let long = flu_with_days(&model, 7 * (steps + inputs.horizon));
            let curve = simulate_flu_weekly(&long, &fitted.params, args.forecast_ensemble, args.seed)
                .map_err(|e| e.to_string())?;
            let weeks = (fitted.params.r0.to_vec::<f32>().into_iter())
                .enumerate()
                .map(|(w, r0)| WeekParams { start: week_start(w), r0, mortality: None })
                .collect();
            (weeks, config.initial_pct, fitted.losses, curve, Warm::Flu(fitted.raw))
        }
    };
    let (fitted, forecast) = curve.split_at(steps);
    let window = WindowFit {
        train_end: String::new(),
        train_steps: steps,
        epochs,
        warm_start: warm.is_some(),
        weeks,
        initial_pct,
        final_loss: *losses.last().expect("epochs > 0"),
        scores: ForecastScores::new(train, truth_after, forecast),
        losses,
        fitted: fitted.to_vec(),
        forecast: forecast.to_vec(),
        persistence: persistence(train, inputs.horizon),
    };
    Ok((window, next))
}

/// COVID's simulated counts are multiplied by population / agents (flu's ILI is a percentage).
fn covid_scale(inputs: &Inputs) -> f32 {
    (inputs.population_size as f64 / inputs.population.num_agents() as f64) as f32
}

/// A date as the CLI shows it: the day (COVID) or the epiweek (flu).
fn label(disease: Disease, date: Date) -> String {
    match disease {
        Disease::Covid => date.to_string(),
        Disease::Flu => date.epiweek().to_string(),
    }
}

fn run_calibrate(args: &CalibrateArgs) -> Result<(), String> {
    let t0 = Instant::now();
    let inputs = check_inputs(args)?;
    // Made before training, so that an unwritable `--out` is reported at once, not after every fit.
    let staging = Staging::new(&args.out)?;
    let obs = &inputs.observed;
    let agents = inputs.population.num_agents();
    let scale = if args.disease == Disease::Covid { covid_scale(&inputs) } else { 1.0 };
    let k = inputs.ends.len();
    let last_end = inputs.ends[k - 1];
    let what = match (&inputs.region, args.disease) {
        (Some(r), _) => format!("flu, {r} weekly ILI"),
        (None, _) => format!("covid, county {} deaths", args.county),
    };
    println!(
        "kiln-sims calibrate: {what} from {}; {} agents of county {}{}; training {}..{} for {k} \
         prediction week(s) ending 7 days apart, forecast {} days (mean of {} draw{}); {} epochs, then {} \
         per later week",
        inputs.source,
        agents,
        args.county,
        if inputs.synthetic && args.disease == Disease::Covid {
            format!(" (synthetic, ×{scale:.3} to {})", inputs.population_size)
        } else if inputs.synthetic {
            " (synthetic)".to_string()
        } else {
            String::new()
        },
        label(args.disease, inputs.train_start),
        label(args.disease, last_end),
        args.horizon,
        args.forecast_ensemble,
        if args.forecast_ensemble == 1 { "" } else { "s" },
        inputs.epochs,
        inputs.warm_epochs,
    );

    // Saturating: huge --epochs/--warm-epochs are valid counts, only the progress bar's total.
    let total = inputs.epochs.saturating_add((k - 1).saturating_mul(inputs.warm_epochs));
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {prefix} epoch {pos}/{len} [{bar:30}] loss {msg} ({elapsed}, eta {eta})",
        )
        .map_err(|e| e.to_string())?
        .progress_chars("=> "),
    );
    let first = obs.index(inputs.train_start);
    let mut windows: Vec<WindowFit> = Vec::with_capacity(k);
    let mut warm = None;
    for (w, &end) in inputs.ends.iter().enumerate() {
        bar.set_prefix(format!("week {}/{k} (to {})", w + 1, label(args.disease, end)));
        let b = obs.index(end);
        let train = &obs.values[first..=b];
        let after = obs.values.len().min(b + 1 + inputs.horizon);
        let (mut window, next) =
            fit_window(args, &inputs, train, &obs.values[b + 1..after], warm.as_ref(), &bar)?;
        window.train_end = label(args.disease, end);
        windows.push(window);
        warm = Some(next);
    }
    bar.finish();
    let mean = mean_scores(&windows.iter().map(|w| w.scores).collect::<Vec<_>>());
    let last = &windows[k - 1];

    let file = ParamsFile {
        disease: args.disease,
        county: args.county,
        region: inputs.region.as_deref(),
        data: &inputs.source,
        target: target_name(args.disease),
        population: inputs.population_size,
        agents,
        synthetic_population: inputs.synthetic,
        scale,
        train_start: label(args.disease, inputs.train_start),
        train_end: label(args.disease, last_end),
        horizon_days: args.horizon,
        epochs: inputs.epochs,
        warm_epochs: inputs.warm_epochs,
        lr: args.lr,
        clip_norm: FitConfig::default().clip_norm,
        ensemble: args.ensemble,
        forecast_ensemble: args.forecast_ensemble,
        seed: args.seed,
        weeks: &last.weeks,
        initial_pct: last.initial_pct,
        final_loss: last.final_loss,
        losses: &last.losses,
        scores: last.scores,
        prediction_weeks: &windows,
        mean_scores: mean,
        wall_seconds: t0.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())?;
    let params_path = staging.path("params.json");
    std::fs::write(&params_path, json + "\n").map_err(|e| format!("{}: {e}", params_path.display()))?;
    write_series(&staging.path("series.csv"), args.disease, &inputs, &windows)?;
    write_plot(&staging.path("plot.png"), args, &inputs, &windows)?;
    staging.commit(&args.out)?;

    print_scores(args.disease, &windows, &mean);
    println!(
        "last week: R0 by week {:?}{}, initial {:.3} %; final loss {:.5}",
        last.weeks.iter().map(|w| w.r0).collect::<Vec<_>>(),
        match args.disease {
            Disease::Covid => format!(
                ", mortality by week {:?}",
                last.weeks.iter().filter_map(|w| w.mortality).collect::<Vec<_>>()
            ),
            Disease::Flu => String::new(),
        },
        last.initial_pct,
        last.final_loss
    );
    println!(
        "wrote {}/{{params.json, series.csv, plot.png}} in {:.1} s",
        args.out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The per-week table of forecast scores, model vs persistence, and their mean.
fn print_scores(disease: Disease, windows: &[WindowFit], mean: &MeanScores) {
    let f = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.3}"));
    let unit = match disease {
        Disease::Covid => "days",
        Disease::Flu => "weeks",
    };
    println!(
        "forecast scores ({}):\n{:<12} {:>6} {:>9} {:>11} {:>15} {:>17}",
        target_name(disease),
        "trained to",
        unit,
        "model ND",
        "model RMSE",
        "persistence ND",
        "persistence RMSE"
    );
    for w in windows {
        let s = w.scores;
        println!(
            "{:<12} {:>6} {:>9} {:>11} {:>15} {:>17}",
            w.train_end,
            s.days_scored,
            f(s.model.nd),
            f(s.model.rmse),
            f(s.persistence.nd),
            f(s.persistence.rmse)
        );
    }
    println!(
        "{:<12} {:>6} {:>9} {:>11} {:>15} {:>17}",
        format!("mean of {}", mean.weeks),
        "",
        f(mean.model.nd),
        f(mean.model.rmse),
        f(mean.persistence.nd),
        f(mean.persistence.rmse)
    );
}

/// One row per step from the training start to the last forecast: `date` (COVID; flu: `epiweek`
/// and `week_start`), `observed` where known, the last prediction week's `fitted`, `forecast`
/// and `persistence`, then `forecast_after_<end>` for each earlier prediction week; empty cells
/// where a series has no value.
fn write_series(path: &Path, disease: Disease, inputs: &Inputs, windows: &[WindowFit]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let mut w = csv::Writer::from_path(path).map_err(|e| err(&e))?;
    let obs = &inputs.observed;
    let first = obs.index(inputs.train_start);
    let last = &windows[windows.len() - 1];
    let earlier = &windows[..windows.len() - 1];
    let mut header: Vec<String> = match disease {
        Disease::Covid => vec!["date".into()],
        Disease::Flu => vec!["epiweek".into(), "week_start".into()],
    };
    header.extend(["observed", "fitted", "forecast", "persistence"].map(String::from));
    header.extend(earlier.iter().map(|e| format!("forecast_after_{}", e.train_end)));
    w.write_record(&header).map_err(|e| err(&e))?;
    let cell = |v: Option<&f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
    let steps = last.fitted.len();
    for i in 0..steps + last.forecast.len() {
        let date = obs.date(first + i);
        let mut row = match disease {
            Disease::Covid => vec![date.to_string()],
            Disease::Flu => vec![date.epiweek().to_string(), date.to_string()],
        };
        let after = i.checked_sub(steps);
        row.extend([
            cell(obs.values.get(first + i)),
            cell(last.fitted.get(i)),
            cell(after.and_then(|j| last.forecast.get(j))),
            cell(after.and_then(|j| last.persistence.get(j))),
        ]);
        for e in earlier {
            row.push(cell(i.checked_sub(e.fitted.len()).and_then(|j| e.forecast.get(j))));
        }
        w.write_record(&row).map_err(|e| err(&e))?;
    }
    w.flush().map_err(|e| err(&e))
}

fn write_plot(
    path: &Path,
    args: &CalibrateArgs,
    inputs: &Inputs,
    windows: &[WindowFit],
) -> Result<(), String> {
    let obs = &inputs.observed;
    let first = obs.index(inputs.train_start);
    let last = &windows[windows.len() - 1];
    let shown = obs.values.len().min(first + last.fitted.len() + last.forecast.len());
    let earlier: Vec<(usize, Vec<f64>)> =
        windows[..windows.len() - 1].iter().map(|w| (w.fitted.len(), w.forecast.clone())).collect();
    let (title, y_label) = match (&inputs.region, args.disease) {
        (Some(region), _) => (
            format!(
                "{region} weekly ILI: fitted {}..{}, {}-week forecasts of {} prediction weeks",
                label(args.disease, inputs.train_start),
                last.train_end,
                last.forecast.len(),
                windows.len()
            ),
            "ILI (% of visits; model: % newly infected)",
        ),
        (None, _) => (
            format!(
                "County {}: deaths per day, fitted {}..{}, {}-day forecasts of {} prediction weeks",
                args.county,
                inputs.train_start,
                last.train_end,
                last.forecast.len(),
                windows.len()
            ),
            "deaths per day (7-day mean)",
        ),
    };
    write_png(
        path,
        &PlotData {
            title: &title,
            y_label,
            start: inputs.train_start,
            step_days: obs.step_days,
            observed: &obs.values[first..shown],
            fitted: &last.fitted,
            forecast: &last.forecast,
            persistence: &last.persistence,
            earlier: &earlier,
        },
    )
}

/// A positive count from a signed flag (so that `--batch -1` reaches this message, not clap's).
fn positive(flag: &str, n: i64, what: &str) -> Result<usize, String> {
    usize::try_from(n).ok().filter(|&v| v > 0).ok_or_else(|| format!("{flag} {n}: {what} must be positive"))
}

/// `--json FILE` must name a file in an existing folder: checked before the rollout runs, so that
/// a mistyped folder is reported at once rather than after the whole run. The file itself is
/// written (created or replaced) only at the end, where any other error (permissions) shows.
fn check_json_path(path: &Path) -> Result<(), String> {
    let err = |why: &str| Err(format!("--json {}: {why}", path.display()));
    if path.is_dir() {
        return err("is a folder; name a file");
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => err(&format!("{} is not a folder", parent.display())),
        Err(e) => err(&format!("folder {}: {e}", parent.display())),
    }
}

fn run_rollout(args: &RolloutCli) -> Result<(), String> {
    let batch = positive("--batch", args.batch, "the number of environments")?;
    let steps = positive("--steps", args.steps, "the number of env steps")?;
    if let Some(path) = &args.json {
        check_json_path(path)?;
    }
    let settings = RolloutArgs {
        env: args.env,
        pipeline: args.pipeline,
        batch,
        steps,
        seed: args.seed,
        dtype: args.dtype,
        progress: true,
        ..RolloutArgs::default()
    };
    println!(
        "kiln-sims rollout: {} ({}, {}), batch {batch} × {steps} env steps, seed {}",
        args.env.name(),
        args.pipeline.name(),
        if args.dtype == DType::F64 { "f64" } else { "f32" },
        args.seed
    );
    let report = rollout::run(&settings).map_err(|e| e.to_string())?;
    println!(
        "throughput: {:.0} env-steps/s ({:.0} physics steps/s, {} env steps in {:.3} s)",
        report.env_steps_per_s, report.physics_steps_per_s, report.env_steps, report.run_s
    );
    println!("compile: {:.3} s (reset: {:.3} s)", report.compile_s, report.reset_s);
    // The summed reward per environment is the mean per-step reward times the steps.
    println!(
        "mean reward: {:.6} per env step, {:.4} per environment over {steps} steps; {} episodes done, \
         {} non-finite envs",
        report.mean_reward,
        report.mean_reward * steps as f64,
        report.episodes_done,
        report.nonfinite_envs
    );
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("--json {}: {e}", path.display()))?;
    }
    Ok(())
}

/// The files `kiln-sims apg` writes (which a later run may replace).
const APG_OUTPUTS: [&str; 2] = ["curve.png", "curve.csv"];

fn run_apg(args: &ApgCli) -> Result<(), String> {
    let iterations = positive("--iterations", args.iterations, "the number of gradient steps")?;
    let batch = positive("--batch", args.batch, "the number of environments")?;
    check_lr(args.lr)?;
    if let Some(w) = args.hidden.iter().find(|&&w| w == 0) {
        return Err(format!("--hidden {w}: layer widths must be positive"));
    }
    check_out_for(&args.out, &APG_OUTPUTS)?;
    // Made before training, so that an unwritable `--out` is reported at once.
    let staging = Staging::new(&args.out)?;
    let settings = ApgArgs {
        iterations,
        batch,
        seed: args.seed,
        lr: args.lr,
        truncation: args.truncation.0,
        hidden: args.hidden.clone(),
        progress: true,
        ..ApgArgs::default()
    };
    println!(
        "kiln-sims apg: {} policy, batch {batch}, {iterations} iterations, lr {}, truncation {}, seed {}",
        if args.hidden.is_empty() { "linear".to_string() } else { format!("MLP {:?}", args.hidden) },
        args.lr,
        args.truncation.0.map_or("none".to_string(), |k| k.to_string()),
        args.seed
    );
    let result = apg::train(&settings).map_err(|e| e.to_string())?;
    apg::write_curve_png(&staging.path("curve.png"), &result)?;
    write_curve_csv(&staging.path("curve.csv"), &result)?;
    staging.commit_for(&args.out, &APG_OUTPUTS)?;
    let first = result.returns.first().copied().unwrap_or(f64::NAN);
    let last = result.returns.last().copied().unwrap_or(f64::NAN);
    println!(
        "return: {first:.3} untrained → {last:.3} final (of {} possible); compile {:.2} s, train {:.2} s",
        result.best_possible, result.compile_s, result.train_s
    );
    println!("wrote {}/{{curve.png, curve.csv}}", args.out.display());
    Ok(())
}

/// `iteration,mean_return`: one row per iteration (the return before that iteration's update).
fn write_curve_csv(path: &Path, result: &ApgResult) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let mut w = csv::Writer::from_path(path).map_err(|e| err(&e))?;
    w.write_record(["iteration", "mean_return"]).map_err(|e| err(&e))?;
    for (i, r) in result.returns.iter().enumerate() {
        w.write_record([i.to_string(), format!("{r:.6}")]).map_err(|e| err(&e))?;
    }
    w.flush().map_err(|e| err(&e))
}
