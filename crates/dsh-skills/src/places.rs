//! Where skills and custom commands are found, nearest first.
//!
//! Skills come from the project (`.dsh/skills`, `.agents/skills`, `.claude/skills`: dsh's own
//! place, the cross-vendor one, Claude Code's) and from the person (`$DSH_HOME/skills`,
//! `~/.agents/skills`, `~/.claude/skills`). Commands come from `.dsh/commands`,
//! `.claude/commands` and `$DSH_HOME/commands`. The project is the repository the session
//! works in (the nearest directory holding `.git`, else the working directory itself), so a
//! session started in a subdirectory still finds the repository's skills. On a name clash the
//! nearer root wins: the project's over the person's, and dsh's own folder over the others.

use std::path::{Path, PathBuf};

/// Whose a root is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The project's (checked in with the code).
    Project,
    /// The person's (every project).
    User,
}

impl Scope {
    /// `project` or `user`, as `dsh skills list` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::User => "user",
        }
    }
}

/// One folder searched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// The folder.
    pub dir: PathBuf,
    /// Whose it is.
    pub scope: Scope,
}

/// The places of one session: its project and the person's folders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Places {
    /// The project root (see [`project_root`]).
    pub project: PathBuf,
    /// `$DSH_HOME`.
    pub dsh_home: PathBuf,
    /// The person's home directory, when known.
    pub home: Option<PathBuf>,
}

impl Places {
    /// The places of a session working in `cwd`.
    pub fn for_workspace(cwd: &Path, dsh_home: impl Into<PathBuf>, home: Option<PathBuf>) -> Self {
        Self {
            project: project_root(cwd),
            dsh_home: dsh_home.into(),
            home,
        }
    }

    /// The skill folders, nearest first, each once.
    pub fn skill_roots(&self) -> Vec<Root> {
        let mut roots = vec![
            project(&self.project, ".dsh/skills"),
            project(&self.project, ".agents/skills"),
            project(&self.project, ".claude/skills"),
            user(&self.dsh_home, "skills"),
        ];
        if let Some(home) = &self.home {
            roots.push(user(home, ".agents/skills"));
            roots.push(user(home, ".claude/skills"));
        }
        dedup(roots)
    }

    /// The command folders, nearest first, each once.
    pub fn command_roots(&self) -> Vec<Root> {
        dedup(vec![
            project(&self.project, ".dsh/commands"),
            project(&self.project, ".claude/commands"),
            user(&self.dsh_home, "commands"),
        ])
    }
}

fn project(base: &Path, rel: &str) -> Root {
    Root {
        dir: base.join(rel),
        scope: Scope::Project,
    }
}

fn user(base: &Path, rel: &str) -> Root {
    Root {
        dir: base.join(rel),
        scope: Scope::User,
    }
}

/// The roots without repeats: `$DSH_HOME` may be the project's `.dsh`, and a session started
/// in the home directory has the person's folders as its project's. The first (nearest)
/// occurrence keeps its place; paths are compared as far as they exist.
fn dedup(roots: Vec<Root>) -> Vec<Root> {
    let mut seen: Vec<PathBuf> = Vec::new();
    roots
        .into_iter()
        .filter(|r| {
            let key = r.dir.canonicalize().unwrap_or_else(|_| r.dir.clone());
            let fresh = !seen.contains(&key);
            seen.push(key);
            fresh
        })
        .collect()
}

/// The repository `cwd` is in: the nearest ancestor (or `cwd` itself) holding `.git`, else
/// `cwd`.
pub fn project_root(cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(cwd)
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_project_is_the_repository_and_its_folders_come_before_the_persons() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        let places = Places::for_workspace(
            &repo.join("src/deep"),
            dir.path().join("dsh"),
            Some(dir.path().join("home")),
        );
        assert_eq!(places.project, repo);
        let roots: Vec<(String, Scope)> = places
            .skill_roots()
            .into_iter()
            .map(|r| {
                let rel = r.dir.strip_prefix(dir.path()).unwrap();
                (rel.display().to_string(), r.scope)
            })
            .collect();
        assert_eq!(
            roots,
            [
                ("repo/.dsh/skills".to_owned(), Scope::Project),
                ("repo/.agents/skills".to_owned(), Scope::Project),
                ("repo/.claude/skills".to_owned(), Scope::Project),
                ("dsh/skills".to_owned(), Scope::User),
                ("home/.agents/skills".to_owned(), Scope::User),
                ("home/.claude/skills".to_owned(), Scope::User),
            ]
        );
    }

    #[test]
    fn a_session_in_the_home_directory_searches_each_folder_once() {
        let home = tempfile::tempdir().unwrap();
        let places = Places::for_workspace(
            home.path(),
            home.path().join(".dsh"),
            Some(home.path().to_path_buf()),
        );
        let roots = places.skill_roots();
        assert_eq!(roots.len(), 3, "{roots:?}");
        assert!(roots.iter().all(|r| r.scope == Scope::Project));
        assert_eq!(places.command_roots().len(), 2);
    }
}
