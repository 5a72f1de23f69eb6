//! The real `dsh` binary for end-to-end tests of crates other than `dsh-cli`.
//!
//! Only `dsh-cli`'s own tests get `CARGO_BIN_EXE_dsh`; a library crate cannot depend on a
//! binary on stable Cargo. Such a test used to look for `target/<profile>/dsh` and pass without
//! testing when it was absent or broken. [`dsh_binary`] instead builds it when absent (with the
//! cargo that built the test, into the same target directory and profile) and fails the test
//! when it cannot be built or does not start.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The `dsh` binary of this test's target directory and profile, built first when absent.
///
/// # Panics
///
/// When the binary cannot be built, or `dsh --help` fails (a binary that crashes at start):
/// the test must fail, not pass without testing.
pub fn dsh_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(locate_or_build).clone()
}

fn locate_or_build() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own executable");
    // <target>/<profile>/deps/<test>-<hash>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test executable lives in <target>/<profile>/deps");
    let bin = profile_dir.join(format!("dsh{}", std::env::consts::EXE_SUFFIX));
    if !bin.is_file() {
        build(profile_dir);
    }
    assert!(
        bin.is_file(),
        "no dsh binary at {} after building it",
        bin.display()
    );
    let help = Command::new(&bin)
        .arg("--help")
        .env("DSH_HOME", std::env::temp_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    assert!(
        help.status.success(),
        "{} --help failed ({}): {}",
        bin.display(),
        help.status,
        String::from_utf8_lossy(&help.stderr)
    );
    bin
}

/// `cargo build -p dsh-cli --bin dsh` into `profile_dir`'s target directory and profile.
fn build(profile_dir: &Path) {
    let target_dir = profile_dir
        .parent()
        .expect("a profile directory lives in a target directory");
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug");
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", "dsh-cli", "--bin", "dsh"])
        .arg("--target-dir")
        .arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cargo} to build dsh: {e}"));
    assert!(status.success(), "building dsh failed: {status}");
}
