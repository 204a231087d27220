//! `kiln-sims rollout` and `kiln-sims apg` as a user runs them: a tiny rollout's printed numbers, a
//! tiny APG run's files, and bad input giving a clear error, a non-zero exit and nothing written.

use std::process::Command;

mod common;
use common::cli::{kiln_sims, listing};

/// A fresh scratch folder for one test.
fn scratch(test: &str) -> common::cli::Scratch {
    common::cli::scratch("cli-rigid", test)
}

/// The number printed right after `label` in `stdout`.
fn number_after(stdout: &str, label: &str) -> f64 {
    let rest =
        &stdout[stdout.find(label).unwrap_or_else(|| panic!("no {label:?} in {stdout}")) + label.len()..];
    let text: String = rest.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    text.parse().unwrap_or_else(|_| panic!("no number after {label:?} in {stdout}"))
}

#[test]
fn tiny_inverted_pendulum_rollout_prints_throughput_and_reward() {
    let o = kiln_sims(&["rollout", "--env", "inverted_pendulum", "--batch", "4", "--steps", "20"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    assert!(number_after(&stdout, "throughput:") > 0.0, "{stdout}");
    assert!(number_after(&stdout, "compile:") > 0.0, "{stdout}");
    // Brax's inverted_pendulum pays exactly 1 per env step, alive or not, and the auto-reset
    // wrapper keeps every environment stepping: so each step earns 1, and each environment's sum
    // over 20 steps is the 20 steps it was stepped (within (0, 20]: never more than one per step).
    let per_step = number_after(&stdout, "mean reward:");
    assert_eq!(per_step, 1.0, "{stdout}");
    let per_env = number_after(&stdout, "per env step,");
    assert!(per_env > 0.0 && per_env <= 20.0, "{stdout}");
    assert_eq!(per_env, 20.0, "{stdout}");
}

#[test]
fn tiny_apg_run_writes_curve_png_and_csv() {
    let dir = scratch("apg");
    let out = dir.join("out");
    let iterations = 3;
    let o = kiln_sims(&[
        "apg",
        "--iterations",
        &iterations.to_string(),
        "--batch",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(listing(&out), vec!["curve.csv", "curve.png"]);
    assert_eq!(listing(&dir), vec!["out"], "nothing left beside --out");
    let png = std::fs::read(out.join("curve.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    let mut reader = csv::Reader::from_path(out.join("curve.csv")).unwrap();
    assert_eq!(reader.headers().unwrap(), vec!["iteration", "mean_return"]);
    let rows: Vec<(usize, f64)> = reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            (r[0].parse().unwrap(), r[1].parse().unwrap())
        })
        .collect();
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), (0..iterations).collect::<Vec<_>>());
    // Each step's reward cos θ − 0.01 x² − 0.001 u² is at most 1, so a 200-step return is at most
    // 200; a pendulum starting within 0.01 rad of upright keeps most of it for a while (> 0).
    for &(_, r) in &rows {
        assert!(r > 0.0 && r <= 200.0, "return {r} outside (0, 200]");
    }
    // The printed final return is the CSV's last row.
    let last = number_after(&stdout, "untrained →");
    assert!((last - rows[rows.len() - 1].1).abs() < 1e-3, "{stdout}");
}

/// Runs a failing command; checks the exit code, that stderr names every `expected` piece, and
/// (for apg, with `--out` holding a previous run's `curve.csv`) that `--out` is untouched.
fn fails_cleanly(test: &str, args: &[&str], expected: &[&str]) {
    let dir = scratch(test);
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("curve.csv"), "previous run").unwrap();
    let mut all = args.to_vec();
    if args[0] == "apg" {
        all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_kiln-sims")).args(&all).current_dir(&dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{test}: expected failure, got {:?}; stderr {stderr}", o.status);
    for piece in expected {
        assert!(stderr.contains(piece), "{test}: stderr lacks {piece:?}: {stderr}");
    }
    assert_eq!(listing(&out), vec!["curve.csv"], "{test}: --out changed");
    assert_eq!(std::fs::read_to_string(out.join("curve.csv")).unwrap(), "previous run");
    assert_eq!(listing(&dir), vec!["out"], "{test}: something was written beside --out");
}

#[test]
fn rollout_rejects_batch_zero() {
    fails_cleanly(
        "r-batch",
        &["rollout", "--env", "inverted_pendulum", "--batch", "0"],
        &["--batch 0", "positive"],
    );
}

#[test]
fn rollout_rejects_steps_zero() {
    fails_cleanly("r-steps", &["rollout", "--steps", "0"], &["--steps 0", "positive"]);
}

#[test]
fn rollout_rejects_unknown_env_and_pipeline_and_dtype() {
    fails_cleanly("r-env", &["rollout", "--env", "humanoid"], &["--env", "humanoid", "inverted_pendulum"]);
    fails_cleanly("r-pipe", &["rollout", "--pipeline", "generalized"], &["--pipeline", "generalized"]);
    fails_cleanly("r-dtype", &["rollout", "--dtype", "f16"], &["--dtype", "f16", "f32 or f64"]);
}

#[test]
fn apg_rejects_bad_numbers_and_writes_nothing() {
    fails_cleanly("a-batch", &["apg", "--batch", "0"], &["--batch 0", "positive"]);
    fails_cleanly("a-iter", &["apg", "--iterations", "0"], &["--iterations 0", "positive"]);
    fails_cleanly("a-lr", &["apg", "--lr", "-1"], &["--lr -1", "positive"]);
    fails_cleanly("a-lr-nan", &["apg", "--lr", "NaN"], &["--lr NaN", "positive"]);
    // More envs than kiln's RNG draws in one call: an error, not a panic.
    fails_cleanly("a-huge", &["apg", "--batch", "100000000000"], &["batch 100000000000", "2^32"]);
    // Under 2^32 but far too many to simulate: the compiled step's size check refuses it before
    // anything is allocated (the reset keys used to be split eagerly: a 32 GB allocation abort).
    fails_cleanly(
        "a-too-big",
        &["apg", "--batch", "4000000000"],
        &["u32[2]", "needs", "more than this process can allocate", "apg.rs"],
    );
    fails_cleanly("a-trunc", &["apg", "--truncation", "7"], &["--truncation", "'7'", "200"]);
}

#[test]
fn apg_refuses_a_folder_holding_other_files() {
    let dir = scratch("a-foreign");
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let o = kiln_sims(&["apg", "--iterations", "1", "--batch", "1", "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("notes.txt") && stderr.contains("--out"), "{stderr}");
    assert_eq!(listing(&out), vec!["notes.txt"]);
}

#[cfg(target_os = "linux")]
#[test]
fn apg_refuses_an_unwritable_out_before_training() {
    // Regression: an `--out` no folder can be made in was reported only after every iteration.
    common::cli::assert_unwritable_out_refused_at_once("apg", &["--iterations", "1000"]);
}

#[test]
fn rollout_rejects_a_bad_json_path_before_running() {
    fails_cleanly(
        "r-json",
        &[
            "rollout",
            "--env",
            "inverted_pendulum",
            "--batch",
            "2",
            "--steps",
            "5",
            "--json",
            "no/such/dir/r.json",
        ],
        &["--json no/such/dir/r.json", "folder no/such/dir"],
    );
    fails_cleanly(
        "r-json-dir",
        &["rollout", "--batch", "2", "--steps", "5", "--json", "out"],
        &["--json out", "is a folder"],
    );
    // Checked before the rollout runs (a long rollout would otherwise end in this error): nothing
    // of the run is printed.
    let o = kiln_sims(&["rollout", "--batch", "2", "--steps", "5", "--json", "no/such/dir/r.json"]);
    assert!(!o.status.success());
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!stdout.contains("throughput:"), "the rollout ran first: {stdout}");
}

#[test]
fn rollout_writes_its_measurements_as_json() {
    let dir = scratch("r-json-ok");
    let path = dir.join("r.json");
    let o = kiln_sims(&[
        "rollout",
        "--env",
        "inverted_pendulum",
        "--batch",
        "2",
        "--steps",
        "5",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // 2 environments × 5 env steps; Brax's inverted pendulum pays 1 per step.
    assert_eq!(report["env_steps"], 10);
    assert_eq!(report["mean_reward"], 1.0);
}
