//! Running the built `kiln-sims` binary in the CLI tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn kiln_sims(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln-sims")).args(args).output().expect("the binary runs")
}

/// A fresh scratch folder for one test of the suite `suite`.
pub fn scratch(suite: &str, test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-sims-{suite}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The sorted names in `dir`.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
