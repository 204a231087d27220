//! Running the built `kiln-sims` binary in the CLI tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn kiln_sims(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln-sims")).args(args).output().expect("the binary runs")
}

/// Runs `kiln-sims <command> --out /proc/kiln-sims-no-out <args>` and asserts that the unwritable
/// `--out` is the error, reported before the command's `kiln-sims <command>:` banner (so before any
/// work). /proc takes no new folders, even for root.
#[cfg(target_os = "linux")]
pub fn assert_unwritable_out_refused_at_once(command: &str, args: &[&str]) {
    let mut all = vec![command, "--out", "/proc/kiln-sims-no-out"];
    all.extend_from_slice(args);
    let o = kiln_sims(&all);
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "{stderr}");
    assert!(stderr.contains("--out /proc/kiln-sims-no-out: cannot create a folder in /proc: "), "{stderr}");
    assert!(!stdout.contains(&format!("kiln-sims {command}:")), "reported only after starting: {stdout}");
}

/// A fresh scratch folder for one test of the suite `suite`, removed when the guard drops.
pub fn scratch(suite: &str, test: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("kiln-sims-{suite}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A scratch folder that is deleted with everything in it when dropped (also when the test fails).
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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

/// A scratch file holding `contents` in a folder of its own (`kiln-sims-{suite}-{pid}-{name}`:
/// tests of one binary run in parallel), deleted with the folder when the guard drops.
pub fn scratch_file(suite: &str, name: &str, contents: &str) -> ScratchFile {
    let dir = scratch(suite, name);
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    ScratchFile { _dir: dir, path }
}

/// A file inside a [`Scratch`] folder; derefs to the file's path.
pub struct ScratchFile {
    _dir: Scratch,
    path: PathBuf,
}

impl std::ops::Deref for ScratchFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}
