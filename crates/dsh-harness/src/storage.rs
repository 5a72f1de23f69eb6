//! The sessions directory must be writable before anything runs.
//!
//! Otherwise the first turn fails when its session is first written, after the provider was
//! already asked. Checked when a front end composes the harness; the error names the
//! directory and the cause (permission denied, read-only file system, not a directory…).

use std::path::Path;

use crate::error::HarnessError;

/// Creates `root` if needed and checks that this process may write in it.
pub fn check_writable(root: &Path) -> Result<(), HarnessError> {
    let unusable = |cause: &dyn std::fmt::Display| {
        HarnessError::store_message(format!(
            "cannot store sessions in {}: {cause}; set DSH_HOME to a writable directory",
            root.display()
        ))
    };
    std::fs::create_dir_all(root).map_err(|e| unusable(&e))?;
    nix::unistd::access(
        root,
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
    )
    .map_err(|e| unusable(&e.desc()))?;
    Ok(())
}
