//! The private scratch directory (spill files) is used through its descriptor: renaming it
//! away and planting a symlink in its place sends nothing elsewhere.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::{command, executor_with};
use dsh_shell::ShellExecutor;

/// Output big enough to spill with the default tail.
const SPILL: &str = "seq 1 40000";

#[tokio::test]
async fn spill_files_stay_in_the_scratch_directory_dsh_made_even_when_it_is_swapped() {
    let base = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let exec = executor_with(|c| c.scratch_dir = Some(base.path().join("scratch")));
    let first = exec.run(command(&exec, SPILL)).await.unwrap();
    let spill: PathBuf = first.stdout.spill_path.clone().unwrap();
    let dir = spill.parent().unwrap().to_path_buf();
    assert!(
        dir.starts_with(base.path().join("scratch")),
        "{}",
        dir.display()
    );
    // The attack: move the directory away and put a symlink to another place at its name.
    let moved = dir.with_extension("moved");
    std::fs::rename(&dir, &moved).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), &dir).unwrap();
    let second = exec.run(command(&exec, SPILL)).await.unwrap();
    let name = second.stdout.spill_path.unwrap();
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    assert!(moved.join(name.file_name().unwrap()).exists());
    exec.dispose().await;
}
