//! Whether a repository's own configuration makes `git` run programs.
//!
//! `git status` looks harmless, and an allow rule such as `bash(git status*)` lets it run
//! without asking. But a repository's `.git/config` can name programs git runs on its own:
//! `core.fsmonitor` on every status, `core.hooksPath` hooks, a pager, clean/smudge filters,
//! diff drivers, aliases that shadow commands, includes of other files. A sandboxed command (or
//! a cloned repository) can plant them; run unconfined (`danger-full-access`) on an allow
//! rule's word, git would then run the planted program with the user's full rights. So before
//! an allow rule lets `git` run unconfined, the guard reads the repository's configuration and
//! keeps the rule out of it when any such key is set (the call then asks, or is refused, as an
//! unconfined command without a rule would be).

use std::path::{Path, PathBuf};

/// The largest git config read.
const CONFIG_LIMIT: u64 = 1 << 20;

/// The first setting of the repository around `dir` that makes git run a program, as
/// `section.key`, if any. An unreadable configuration counts as one (dsh cannot tell).
pub(crate) fn program_setting(dir: &Path) -> Option<String> {
    for config in configs(dir) {
        match dsh_fs::read_placed(&config, CONFIG_LIMIT, dsh_fs::Oversize::Refuse) {
            Ok(None) => {}
            Ok(Some(file)) => {
                if let Some(key) = risky_key(&String::from_utf8_lossy(&file.bytes)) {
                    return Some(key);
                }
            }
            Err(e) => return Some(format!("an unreadable {} ({e})", config.display())),
        }
    }
    None
}

/// The config files of the repository `dir` is in: git's own discovery, upward from `dir`;
/// a `.git` file (worktree, submodule) names the git directory and its common directory.
fn configs(dir: &Path) -> Vec<PathBuf> {
    for ancestor in dir.ancestors() {
        let dot_git = ancestor.join(".git");
        if dot_git.is_dir() {
            return vec![dot_git.join("config")];
        }
        if dot_git.is_file() {
            let Some(gitdir) = std::fs::read_to_string(&dot_git).ok().and_then(|text| {
                let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?;
                Some(ancestor.join(line.trim()))
            }) else {
                return Vec::new();
            };
            let mut found = vec![gitdir.join("config")];
            if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
                found.push(gitdir.join(common.trim()).join("config"));
            }
            return found;
        }
    }
    Vec::new()
}

/// The first key of `config` (git's INI format) that runs a program.
fn risky_key(config: &str) -> Option<String> {
    let mut section = String::new();
    for line in config.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let name = header.split([']', ' ', '"']).next().unwrap_or("");
            section = name.trim().to_ascii_lowercase();
            // A section header may carry a key on the same line (`[core] fsmonitor = x`).
            let Some((_, rest)) = header.split_once(']') else {
                continue;
            };
            if rest.trim().is_empty() {
                continue;
            }
            if let Some(found) = risky(&section, rest.trim()) {
                return Some(found);
            }
            continue;
        }
        if let Some(found) = risky(&section, line) {
            return Some(found);
        }
    }
    None
}

fn risky(section: &str, line: &str) -> Option<String> {
    let key = line
        .split(['=', ' ', '\t'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let runs = match section {
        "core" => matches!(
            key.as_str(),
            "fsmonitor" | "hookspath" | "pager" | "sshcommand" | "editor" | "askpass" | "gitproxy"
        ),
        "alias" | "pager" | "include" | "includeif" | "filter" => true,
        "diff" | "merge" => matches!(key.as_str(), "external" | "textconv" | "command" | "driver"),
        _ => false,
    };
    runs.then(|| format!("{section}.{key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_run_programs_are_found_and_plain_ones_are_not() {
        assert_eq!(
            risky_key("[core]\n\tbare = false\n[user]\nname = x\n"),
            None
        );
        assert_eq!(
            risky_key("[core]\n\tfsmonitor = touch /tmp/pwned\n").as_deref(),
            Some("core.fsmonitor")
        );
        assert_eq!(
            risky_key("[CORE]\n  HooksPath=/tmp/h\n").as_deref(),
            Some("core.hookspath")
        );
        assert_eq!(
            risky_key("[alias]\n\tst = !sh\n").as_deref(),
            Some("alias.st")
        );
        assert_eq!(
            risky_key("[pager]\n\tstatus = sh -c x\n").as_deref(),
            Some("pager.status")
        );
        assert_eq!(
            risky_key("[include]\n\tpath = ../x\n").as_deref(),
            Some("include.path")
        );
        assert_eq!(
            risky_key("[filter \"lfs\"]\n\tclean = x\n").as_deref(),
            Some("filter.clean")
        );
        assert_eq!(risky_key("[remote \"origin\"]\n\turl = x\n"), None);
    }

    #[test]
    fn a_repository_is_found_upward_and_its_config_read() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        std::fs::create_dir_all(repo.path().join("src/deep")).unwrap();
        std::fs::write(repo.path().join(".git/config"), "[core]\nbare = false\n").unwrap();
        assert_eq!(program_setting(&repo.path().join("src/deep")), None);
        std::fs::write(
            repo.path().join(".git/config"),
            "[core]\nfsmonitor = touch /tmp/x\n",
        )
        .unwrap();
        assert_eq!(
            program_setting(&repo.path().join("src/deep")).as_deref(),
            Some("core.fsmonitor")
        );
    }
}
