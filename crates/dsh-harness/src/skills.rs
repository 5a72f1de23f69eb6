//! Where a workspace's skills and custom commands come from, for `dsh skills list` and
//! `dsh config show` (sessions find theirs in their agent's setup, the same way).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use dsh_skills::{Catalog, Places};

use crate::config::Settings;

/// The places searched for a session working in `cwd` under `settings`.
pub fn places(settings: &Settings, cwd: &Path) -> Places {
    Places::for_workspace(
        cwd,
        settings.home.value.clone(),
        crate::env::process_env("HOME").map(PathBuf::from),
    )
}

/// What applies to a session working in `cwd`: `dsh skills list`.
pub fn list(settings: &Settings, cwd: &Path) -> String {
    dsh_skills::render_list(&Catalog::discover(&places(settings, cwd)))
}

/// The skill and command folders for `cwd`, nearest first, as comment lines of
/// `dsh config show`.
pub fn render_folders(out: &mut String, settings: &Settings, cwd: &Path) {
    let places = places(settings, cwd);
    let _ = writeln!(
        out,
        "\n# skills, nearest folder first (`dsh skills list` shows them):"
    );
    for root in places.skill_roots() {
        let _ = writeln!(out, "#   {} ({})", root.dir.display(), root.scope.as_str());
    }
    let _ = writeln!(out, "# custom commands (/NAME), nearest folder first:");
    for root in places.command_roots() {
        let _ = writeln!(out, "#   {} ({})", root.dir.display(), root.scope.as_str());
    }
}
