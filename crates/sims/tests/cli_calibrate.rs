//! `kiln-sims calibrate` as a user runs it: bad input gives a clear error, a non-zero exit and leaves
//! `--out` untouched; a short run writes the three files.

use std::path::Path;

use kiln::prelude::*;
use kiln_sims::epi::calibrate::flu::{flu_with_days, simulate_flu_weekly};
use kiln_sims::epi::calibrate::{simulate_mean, with_days};
use kiln_sims::epi::{CovidModel, CovidParams, FluModel, FluParams, Population, UpdateForm};

mod common;
use common::cli::{kiln_sims, listing};

/// A fresh scratch folder for one test.
fn scratch(test: &str) -> common::cli::Scratch {
    common::cli::scratch("cli", test)
}

/// Runs a failing command against an `--out` holding a previous run's `params.json`; checks the exit
/// code, that stderr contains every `expected` piece, and that `--out` and its parent are unchanged.
fn fails_cleanly(test: &str, args: &[&str], expected: &[&str]) {
    let dir = scratch(test);
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("params.json"), "previous run").unwrap();
    let out_arg = out.to_str().unwrap();
    let mut all = vec!["calibrate", "--out", out_arg];
    all.extend_from_slice(args);
    let o = kiln_sims(&all);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{test}: expected failure, got {:?}; stderr {stderr}", o.status);
    for piece in expected {
        assert!(stderr.contains(piece), "{test}: stderr lacks {piece:?}: {stderr}");
    }
    assert_eq!(listing(&out), vec!["params.json"], "{test}: --out changed");
    assert_eq!(std::fs::read_to_string(out.join("params.json")).unwrap(), "previous run");
    assert_eq!(listing(&dir), vec!["out"], "{test}: something was left beside --out");
}

#[test]
fn missing_csv() {
    fails_cleanly(
        "missing",
        &["--data", "/nonexistent/deaths.csv"],
        &["/nonexistent/deaths.csv", "cannot read"],
    );
}

#[test]
fn malformed_csv_names_file_line_and_value() {
    let dir = scratch("malformed-input");
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "date,deaths\n2020-04-01,1\n2020-04-02,two\n").unwrap();
    let expected = format!("{}:3: deaths \"two\" is not a finite number", bad.display());
    fails_cleanly("malformed", &["--data", bad.to_str().unwrap()], &[&expected]);
}

#[test]
fn county_not_in_the_file() {
    fails_cleanly("county", &["--county", "99999"], &["county 99999 is not in the file", "25011"]);
}

#[test]
fn empty_date_window() {
    fails_cleanly(
        "window",
        &["--start", "2020-05-01", "--end", "2020-04-01"],
        &["empty date window: --start 2020-05-01 is after --end 2020-04-01"],
    );
    fails_cleanly(
        "outside",
        &["--start", "2019-01-01", "--end", "2019-02-01"],
        &["2019-01-01..2019-02-01", "not inside"],
    );
    fails_cleanly("baddate", &["--start", "2020-04-31"], &["--start", "\"2020-04-31\" is not a date"]);
}

#[test]
fn non_positive_agents() {
    fails_cleanly("agents0", &["--agents", "0"], &["--agents 0", "must be positive"]);
    fails_cleanly("agents-5", &["--agents", "-5"], &["--agents -5", "must be positive"]);
    fails_cleanly("agentsx", &["--agents", "many"], &["'many'", "--agents"]);
}

#[test]
fn flu_bad_input_names_the_value() {
    fails_cleanly(
        "flu-region",
        &["--disease", "flu", "--region", "ZZ"],
        &["region \"ZZ\" is not in the file", "MA"],
    );
    fails_cleanly(
        "flu-window",
        &["--disease", "flu", "--start", "201750", "--end", "201740"],
        // Epiweeks 201750 and 201740 start on these Sundays.
        &["empty date window: --start 2017-12-10 is after --end 2017-10-01"],
    );
    fails_cleanly(
        "flu-week",
        &["--disease", "flu", "--start", "201753"],
        &["--start", "\"201753\"", "1..=52"],
    );
    fails_cleanly(
        "flu-horizon",
        &["--disease", "flu", "--horizon", "10"],
        &["--horizon 10", "multiple of 7"],
    );
    fails_cleanly("covid-region", &["--region", "MA"], &["--region", "flu"]);
    fails_cleanly(
        "flu-outside",
        &["--disease", "flu", "--start", "201501", "--end", "201510"],
        &["not inside", "region MA"],
    );
}

#[test]
fn too_many_prediction_weeks_for_the_window() {
    // Three windows ending 7 days apart at 2020-03-28: the first would end on 2020-03-14.
    fails_cleanly(
        "weeks",
        &["--start", "2020-03-15", "--end", "2020-03-28", "--prediction-weeks", "3"],
        &["--prediction-weeks", "2020-03-14", "before its start 2020-03-15"],
    );
    fails_cleanly("warm0", &["--warm-epochs", "0"], &["--warm-epochs 0", "positive"]);
    // Each option is named on its own (they shared one message), and negative values reach the
    // checks instead of clap's "unexpected argument '-1'".
    fails_cleanly("horizon0", &["--horizon", "0"], &["--horizon 0: must be positive"]);
    fails_cleanly("ensemble0", &["--ensemble", "0"], &["--ensemble 0: must be positive"]);
    fails_cleanly("weeks0", &["--prediction-weeks", "0"], &["--prediction-weeks 0: must be positive"]);
    fails_cleanly("weeks-1", &["--prediction-weeks", "-1"], &["'-1'", "--prediction-weeks"]);
    fails_cleanly("lr-neg", &["--lr", "-0.1"], &["--lr -0.1: must be a finite positive number"]);
    fails_cleanly("lr-inf", &["--lr", "inf"], &["--lr inf: must be a finite positive number"]);
}

#[test]
fn overflowing_counts_and_an_lr_beyond_f32_are_named() {
    // `b + 1 + horizon` and `7 (weeks − 1)` used to wrap (a slice panic, a capacity overflow).
    fails_cleanly(
        "horizon-max",
        &["--horizon", "18446744073709551615"],
        &["--horizon 18446744073709551615: at most 3650 days"],
    );
    fails_cleanly(
        "weeks-max",
        &["--prediction-weeks", "18446744073709551615"],
        &[
            "--prediction-weeks: 18446744073709551615 prediction weeks",
            "before its start 2020-03-15",
            "at most 6 prediction weeks",
        ],
    );
    // 1e39 is finite as f64 but not as the f32 the parameters are (it made the loss NaN).
    fails_cleanly(
        "lr-f32",
        &["--lr", "1e39"],
        &["--lr 1000000000000000000000000000000000000000: must be a finite positive number, also as f32"],
    );
    // 10^12 epochs used to reserve 4 TB of losses and abort; now the fit starts, and this series
    // (1e300 deaths, inf as f32) stops it at its first loss.
    let data = scratch("epochs-data");
    let csv = data.join("deaths.csv");
    let rows: String = (1..=20).map(|d| format!("2020-03-{d:02},1e300\n")).collect();
    std::fs::write(&csv, format!("date,deaths\n{rows}")).unwrap();
    fails_cleanly(
        "epochs-huge",
        &[
            "--data",
            csv.to_str().unwrap(),
            "--epochs",
            "1000000000000",
            "--agents",
            "500",
            "--horizon",
            "7",
            "--prediction-weeks",
            "1",
        ],
        &["the loss became inf at epoch 0"],
    );
}

#[cfg(target_os = "linux")]
#[test]
fn an_unwritable_out_is_refused_before_training() {
    common::cli::assert_unwritable_out_refused_at_once("calibrate", &["--epochs", "30"]);
}

#[test]
fn draw_counts_that_cannot_be_simulated_are_refused_before_training() {
    fails_cleanly("fensemble0", &["--forecast-ensemble", "0"], &["--forecast-ensemble 0: must be positive"]);
    // 10^9 draws of Franklin's 70,916 agents: 258 TiB for one f32 each, past a 47/48-bit address
    // space (128 / 256 TiB), so refused under any overcommit policy.
    fails_cleanly(
        "fensemble-huge",
        &["--forecast-ensemble", "1000000000"],
        &[
            "--forecast-ensemble 1000000000: 1000000000 draws of 70916 agents",
            "more than this process can allocate",
        ],
    );
    // Past 2^32 draws (one random::split key each).
    fails_cleanly(
        "ensemble-huge",
        &["--ensemble", "100000000000000000"],
        &["--ensemble 100000000000000000: 100000000000000000 draws: at most 2^32"],
    );
}

#[test]
fn a_folder_given_as_data_is_named_without_a_line() {
    let dir = scratch("data-folder");
    let expected = format!("{}: ", dir.display());
    let out = dir.join("out");
    let o = kiln_sims(&["calibrate", "--data", dir.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains(&expected) && !stderr.contains(":1:"), "{stderr}");
}

#[test]
fn out_holding_other_files_is_refused() {
    let dir = scratch("foreign");
    let out = dir.join("mine");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("thesis.tex"), "precious").unwrap();
    let o = kiln_sims(&["calibrate", "--out", out.to_str().unwrap(), "--agents", "500", "--epochs", "1"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && stderr.contains("thesis.tex")
            && stderr.contains("not one of this command's outputs (params.json, series.csv, plot.png)"),
        "{stderr}"
    );
    assert_eq!(listing(&out), vec!["thesis.tex"]);
}

#[test]
fn short_run_on_bundled_data_writes_the_three_files() {
    let dir = scratch("short");
    let out = dir.join("run");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("params.json"), "previous run").unwrap(); // replaced
    let args = [
        "calibrate",
        "--out",
        out.to_str().unwrap(),
        "--agents",
        "3000",
        "--epochs",
        "3",
        "--start",
        "2020-03-15",
        "--end",
        "2020-03-28",
        "--seed",
        "4",
        "--prediction-weeks",
        "1",
        "--forecast-ensemble",
        "3",
    ];
    let o = kiln_sims(&args);
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "stdout {stdout}\nstderr {stderr}");
    assert!(stdout.contains("persistence") && stdout.contains("ND"), "{stdout}");
    assert_eq!(listing(&out), vec!["params.json", "plot.png", "series.csv"]);
    assert_eq!(listing(&dir), vec!["run"], "no temporary folder left");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("params.json")).unwrap()).unwrap();
    assert_eq!(json["county"], 25011);
    assert_eq!(json["agents"], 3000);
    assert_eq!(json["epochs"], 3);
    assert_eq!(json["losses"].as_array().unwrap().len(), 3);
    let weeks = json["weeks"].as_array().unwrap();
    assert_eq!(weeks.len(), 2, "14 training days are 2 weeks");
    assert_eq!(weeks[1]["start"], "2020-03-22");
    for w in weeks {
        let (r0, m) = (w["r0"].as_f64().unwrap(), w["mortality"].as_f64().unwrap());
        assert!((1.0..=8.0).contains(&r0) && (0.001..=0.02).contains(&m), "{w}");
    }
    assert_eq!(json["scores"]["days_scored"], 28);
    // scale = 25011's population / agents.
    assert!((json["scale"].as_f64().unwrap() - 70_916.0 / 3000.0).abs() < 1e-3);

    let csv = std::fs::read_to_string(out.join("series.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "date,observed,fitted,forecast,persistence");
    assert_eq!(lines.len(), 1 + 14 + 28);
    assert!(lines[1].starts_with("2020-03-15,") && lines[42].starts_with("2020-04-25,"), "{}", lines[42]);
    let cells = |i: usize| lines[i].split(',').map(str::to_string).collect::<Vec<_>>();
    // Training rows have a fitted value and no forecast; forecast rows the other way round.
    assert!(!cells(14)[2].is_empty() && cells(14)[3].is_empty());
    assert!(cells(15)[2].is_empty() && !cells(15)[3].is_empty() && !cells(15)[4].is_empty());
    // 2020-03-28 is the first day with 25011 deaths in its trailing week: 2020-03-26 and -27, one each.
    assert_eq!(cells(14)[1], format!("{:.6}", 2.0 / 7.0));
    assert_eq!(cells(11)[1], "0.000000"); // 2020-03-25

    // The fitted (training rows) and forecast curves are the mean of --forecast-ensemble draws
    // under the fitted parameters: recomputed here from params.json with the library.
    assert_eq!(json["forecast_ensemble"], 3);
    let population = Population::county_scaled(25011, 3000, 4).unwrap();
    let model = with_days(&CovidModel::new(&population, 14, UpdateForm::KeepGrad), 14 + 28);
    let f32s = |key: &str| weeks.iter().map(|w| w[key].as_f64().unwrap() as f32).collect::<Vec<_>>();
    let params = CovidParams {
        r0: Tensor::from_vec(&[2], f32s("r0")),
        mortality: Tensor::from_vec(&[2], f32s("mortality")),
        initial_pct: Tensor::scalar(json["initial_pct"].as_f64().unwrap() as f32),
    };
    let (_, deaths) = simulate_mean(&model, &params, 3, 4).unwrap();
    let (_, one_draw) = simulate_mean(&model, &params, 1, 4).unwrap();
    assert_ne!(deaths, one_draw, "three draws differ from one");
    let scale = f64::from(json["scale"].as_f64().unwrap() as f32);
    for (day, d) in deaths.iter().enumerate() {
        let column = if day < 14 { 2 } else { 3 };
        assert_eq!(cells(day + 1)[column], format!("{:.6}", d * scale), "day {day}");
    }
    // Training draws --ensemble seeds whatever --forecast-ensemble is: one forecast draw gives the
    // same fit (parameters and every epoch's loss).
    let out1 = dir.join("one-draw");
    let mut args1 = args.to_vec();
    args1[2] = out1.to_str().unwrap();
    *args1.last_mut().unwrap() = "1";
    assert!(kiln_sims(&args1).status.success());
    let json1 = read_json(&out1.join("params.json"));
    for key in ["weeks", "initial_pct", "losses", "final_loss"] {
        assert_eq!(json1[key], json[key], "{key}");
    }
    assert_eq!(json1["forecast_ensemble"], 1);

    let png = std::fs::read(out.join("plot.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{} bytes", png.len());
}

#[test]
fn short_run_on_a_user_series() {
    let dir = scratch("user");
    let data = dir.join("mine.csv");
    let deaths: Vec<f64> = (0..30).map(|d| f64::from((d * 7) % 5)).collect();
    let mut text = String::from("date,deaths\n");
    for (d, v) in deaths.iter().enumerate() {
        text += &format!("2021-01-{:02},{v}\n", d + 1);
    }
    std::fs::write(&data, text).unwrap();
    let out = dir.join("fit");
    let args = [
        "calibrate",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--agents",
        "1000",
        "--epochs",
        "2",
        "--horizon",
        "7",
        "--prediction-weeks",
        "1",
    ];
    let o = kiln_sims(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("params.json")).unwrap()).unwrap();
    // By default the window ends `horizon` days before the series does: 30 − 7 = 23 training days.
    assert_eq!(
        (json["train_start"].as_str(), json["train_end"].as_str()),
        (Some("2021-01-01"), Some("2021-01-23"))
    );
    assert_eq!(json["scores"]["days_scored"], 7);
    // The observed column is the 7-day trailing mean of the file, and persistence its last training value.
    let csv = std::fs::read_to_string(out.join("series.csv")).unwrap();
    let rows: Vec<Vec<String>> =
        csv.lines().skip(1).map(|l| l.split(',').map(str::to_string).collect()).collect();
    assert_eq!(rows.len(), 30);
    for (i, row) in rows.iter().enumerate() {
        let lo = i.saturating_sub(6);
        let mean = deaths[lo..=i].iter().sum::<f64>() / (i + 1 - lo) as f64;
        assert_eq!(row[1], format!("{mean:.6}"), "row {i}");
    }
    let last_training = &rows[22][1];
    assert!(rows[23..].iter().all(|r| &r[4] == last_training));
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn read_rows(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>());
    (lines.next().unwrap(), lines.collect())
}

fn num(cell: &str) -> f64 {
    cell.parse().unwrap_or_else(|_| panic!("{cell:?} is not a number"))
}

#[test]
fn covid_two_prediction_weeks() {
    let dir = scratch("weeks2");
    let out = dir.join("run");
    let args = [
        "calibrate",
        "--out",
        out.to_str().unwrap(),
        "--agents",
        "1000",
        "--epochs",
        "2",
        "--warm-epochs",
        "1",
        "--prediction-weeks",
        "2",
        "--start",
        "2020-03-15",
        "--end",
        "2020-03-28",
    ];
    let o = kiln_sims(&args);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("2020-03-21") && stdout.contains("mean of 2"), "{stdout}");
    let json = read_json(&out.join("params.json"));
    let weeks = json["prediction_weeks"].as_array().unwrap();
    assert_eq!(weeks.len(), 2);
    // Windows from 2020-03-15 ending 7 days apart, the last on --end; the first fit gets --epochs,
    // the warm-started one --warm-epochs.
    assert_eq!(
        (weeks[0]["train_end"].as_str(), weeks[0]["train_steps"].as_u64()),
        (Some("2020-03-21"), Some(7))
    );
    assert_eq!(
        (weeks[1]["train_end"].as_str(), weeks[1]["train_steps"].as_u64()),
        (Some("2020-03-28"), Some(14))
    );
    assert_eq!((weeks[0]["epochs"].as_u64(), weeks[0]["warm_start"].as_bool()), (Some(2), Some(false)));
    assert_eq!((weeks[1]["epochs"].as_u64(), weeks[1]["warm_start"].as_bool()), (Some(1), Some(true)));
    assert_eq!(weeks[0]["weeks"].as_array().unwrap().len(), 1);
    assert_eq!(json["losses"].as_array().unwrap().len(), 1, "top-level fields are the last week's");
    assert_eq!(json["train_end"], "2020-03-28");

    let (header, rows) = read_rows(&out.join("series.csv"));
    assert_eq!(
        header,
        ["date", "observed", "fitted", "forecast", "persistence", "forecast_after_2020-03-21"]
    );
    assert_eq!(rows.len(), 14 + 28);
    // The first week's forecast covers 2020-03-22..2020-04-18 (rows 7..35).
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(!row[5].is_empty(), (7..35).contains(&i), "row {i}: {row:?}");
    }
    // Its persistence baseline is the observed value of 2020-03-21 (row 6), scored on the next 28
    // observed days: RMSE and ND recomputed here from the observed column.
    let observed: Vec<f64> = rows.iter().map(|r| num(&r[1])).collect();
    let (last, ahead) = (observed[6], &observed[7..35]);
    let rmse = (ahead.iter().map(|y| (y - last).powi(2)).sum::<f64>() / 28.0).sqrt();
    let nd = ahead.iter().map(|y| (y - last).abs()).sum::<f64>() / ahead.iter().map(|y| y.abs()).sum::<f64>();
    let p = &weeks[0]["scores"]["persistence"];
    assert!((p["rmse"].as_f64().unwrap() - rmse).abs() < 1e-5, "{p} vs {rmse}");
    assert!((p["nd"].as_f64().unwrap() - nd).abs() < 1e-5, "{p} vs {nd}");
    assert_eq!(weeks[0]["scores"]["days_scored"], 28);
    // The mean over the two weeks.
    for who in ["model", "persistence"] {
        for what in ["nd", "rmse"] {
            let v = |w: &serde_json::Value| w["scores"][who][what].as_f64().unwrap();
            let mean = json["mean_scores"][who][what].as_f64().unwrap();
            assert!((mean - (v(&weeks[0]) + v(&weeks[1])) / 2.0).abs() < 1e-12, "{who} {what}");
        }
    }
    assert_eq!(json["mean_scores"]["weeks"], 2);
}

#[test]
fn flu_short_run_writes_weekly_files() {
    let dir = scratch("flu");
    let out = dir.join("run");
    let args = [
        "calibrate",
        "--disease",
        "flu",
        "--out",
        out.to_str().unwrap(),
        "--agents",
        "1500",
        "--epochs",
        "2",
        "--warm-epochs",
        "1",
        "--prediction-weeks",
        "2",
        "--start",
        "201740",
        "--end",
        "2017-10-25", // a Wednesday of epiweek 201743
        "--forecast-ensemble",
        "2",
    ];
    let o = kiln_sims(&args);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("MA weekly ILI") && stdout.contains("201742"), "{stdout}");
    assert_eq!(listing(&out), vec!["params.json", "plot.png", "series.csv"]);
    let json = read_json(&out.join("params.json"));
    assert_eq!((json["disease"].as_str(), json["region"].as_str()), (Some("flu"), Some("MA")));
    assert_eq!((json["train_start"].as_str(), json["train_end"].as_str()), (Some("201740"), Some("201743")));
    let weeks = json["weeks"].as_array().unwrap();
    assert_eq!(weeks.len(), 4, "201740..201743");
    assert_eq!(weeks[3]["start"], "2017-10-22");
    for w in weeks {
        let r0 = w["r0"].as_f64().unwrap();
        assert!((1.05..=2.6).contains(&r0) && w.get("mortality").is_none(), "{w}");
    }
    assert_eq!(json["initial_pct"], 1.0, "held at the published expert value");
    assert_eq!(json["scale"], 1.0, "ILI is a percentage: no scaling");
    let pw = json["prediction_weeks"].as_array().unwrap();
    assert_eq!((pw[0]["train_end"].as_str(), pw[0]["train_steps"].as_u64()), (Some("201742"), Some(3)));
    assert_eq!((pw[1]["train_end"].as_str(), pw[1]["train_steps"].as_u64()), (Some("201743"), Some(4)));
    assert_eq!(json["scores"]["days_scored"], 4, "4 forecast weeks");

    let (header, rows) = read_rows(&out.join("series.csv"));
    assert_eq!(
        header,
        ["epiweek", "week_start", "observed", "fitted", "forecast", "persistence", "forecast_after_201742"]
    );
    assert_eq!(rows.len(), 4 + 4, "4 training weeks, 4 forecast weeks");
    let weeks_col: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(weeks_col, ["201740", "201741", "201742", "201743", "201744", "201745", "201746", "201747"]);
    assert_eq!(rows[0][1], "2017-10-01");
    // MA's ILI in the bundled file: 201740 0.68067, 201743 0.9611, 201747 1.66174.
    assert_eq!(
        (rows[0][2].as_str(), rows[3][2].as_str(), rows[7][2].as_str()),
        ("0.680670", "0.961100", "1.661740")
    );
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(!row[3].is_empty(), i < 4, "fitted, row {i}");
        assert_eq!(!row[4].is_empty(), i >= 4, "forecast, row {i}");
        assert_eq!(row[5].is_empty(), i < 4, "persistence, row {i}");
        assert_eq!(!row[6].is_empty(), (3..7).contains(&i), "first week's forecast, row {i}");
        if i >= 4 {
            assert_eq!(row[5], "0.961100", "persistence repeats 201743");
        }
        // Simulated ILI is a percentage of the agents.
        for cell in &row[3..] {
            if !cell.is_empty() {
                assert!((0.0..=100.0).contains(&num(cell)), "row {i}: {row:?}");
            }
        }
    }
    // Fitted and forecast weekly ILI: the mean of --forecast-ensemble draws, recomputed here.
    let population = Population::county_scaled(25011, 1500, 0).unwrap();
    let model = flu_with_days(&FluModel::new(&population, 7 * 4, UpdateForm::KeepGrad), 7 * 8);
    let r0 = weeks.iter().map(|w| w["r0"].as_f64().unwrap() as f32).collect::<Vec<_>>();
    let params = FluParams { r0: Tensor::from_vec(&[4], r0), initial_pct: Tensor::scalar(1.0f32) };
    let ili = simulate_flu_weekly(&model, &params, 2, 0).unwrap();
    assert_ne!(ili, simulate_flu_weekly(&model, &params, 1, 0).unwrap(), "two draws differ from one");
    for (i, (row, v)) in rows.iter().zip(&ili).enumerate() {
        assert_eq!(row[if i < 4 { 3 } else { 4 }], format!("{v:.6}"), "week {i}");
    }
    let png = std::fs::read(out.join("plot.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{} bytes", png.len());
}
