//! `kiln-sims calibrate` as a user runs it: bad input gives a clear error, a non-zero exit and leaves
//! `--out` untouched; a short run writes the three files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kiln_sims(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln-sims")).args(args).output().expect("the binary runs")
}

/// A fresh scratch folder for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-sims-cli-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
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
fn flu_is_not_available_yet() {
    fails_cleanly("flu", &["--disease", "flu"], &["flu", "not available yet"]);
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
        !o.status.success() && stderr.contains("thesis.tex") && stderr.contains("not a kiln-sims output"),
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
