//! Which files a checkpoint leaves out: what git would ignore.
//!
//! The rules are git's: `.gitignore` files in the workspace and in its parents up to the
//! repository root, the repository's `.git/info/exclude`, and the user's global excludes file;
//! they apply in directories that are not git repositories too. A deeper file's rule wins over
//! a shallower one, and an ignored directory is not entered (git cannot re-include a file
//! inside it either). `.git` itself is always left out.
//!
//! Each set of rules carries a *fingerprint* of the files it came from (their stats, taken
//! before they are read): a directory's remembered listing, with its entries already sorted
//! into ignored and not, is reused only under rules with the same fingerprint, so editing any
//! ignore file (or pointing `core.excludesFile` elsewhere) reclassifies every directory below it.

use std::hash::{Hash, Hasher};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::cache::Stat;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The ignore rules in force at one directory of the walk.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// Matchers from the shallowest (global, exclude, parents) to the deepest.
    layers: Vec<Arc<Gitignore>>,
    /// Stands for every rule file these rules were read from (see the module docs).
    pub fingerprint: u64,
    /// Whether every rule file had settled when it was read: one changed within the racy
    /// window may change again without its stat changing, so nothing classified under it is
    /// remembered as trusted.
    pub settled: bool,
}

/// A directory's own `.gitignore` as last read: its stat and its matcher.
#[derive(Clone, Debug)]
pub struct IgnoreFile {
    stat: Option<Stat>,
    settled: bool,
    matcher: Option<Arc<Gitignore>>,
}

/// Mixes one rule file (its path and stat, or its absence) into a fingerprint.
fn mix(hasher: &mut impl Hasher, path: &Path, stat: Option<&Stat>) {
    path.hash(hasher);
    stat.hash(hasher);
}

fn stat_path(path: &Path) -> Option<Stat> {
    std::fs::symlink_metadata(path).ok().map(|m| Stat::of(&m))
}

impl Rules {
    /// The rules at the workspace root; `exclude` (directories never recorded) is part of
    /// the fingerprint.
    pub fn root(workspace: &Path, exclude: &[PathBuf], now: SystemTime) -> Self {
        let mut layers = Vec::new();
        let mut hasher = std::hash::DefaultHasher::new();
        let mut settled = true;
        exclude.hash(&mut hasher);
        // Stats are taken before the files are read: a change after the stat shows next time.
        let mut note = |path: &Path, hasher: &mut std::hash::DefaultHasher| {
            let stat = stat_path(path);
            settled &= stat.is_none_or(|s| s.settled(now));
            mix(hasher, path, stat.as_ref());
        };
        if let Some(global) = ignore::gitignore::gitconfig_excludes_path() {
            note(&global, &mut hasher);
        }
        let (global, _) = Gitignore::global();
        if !global.is_empty() {
            layers.push(Arc::new(global));
        }
        if let Some(repo) = repository_root(workspace) {
            let exclude = repo.join(".git/info/exclude");
            note(&exclude, &mut hasher);
            if let Some(m) = matcher(&repo, &exclude) {
                layers.push(m);
            }
            // Parents' .gitignore files, from the repository root down to the workspace's
            // parent (the workspace's own is added by the walk).
            let mut parents: Vec<&Path> = workspace
                .ancestors()
                .skip(1)
                .take_while(|p| p.starts_with(&repo))
                .collect();
            parents.reverse();
            for dir in parents {
                let file = dir.join(".gitignore");
                note(&file, &mut hasher);
                if let Some(m) = matcher(dir, &file) {
                    layers.push(m);
                }
            }
        }
        Self {
            layers,
            fingerprint: hasher.finish(),
            settled,
        }
    }

    /// The rules inside `dir` (open as `fd`), which holds a `.gitignore` when
    /// `has_gitignore`. `previous` is that file as last read: its matcher is reused when its
    /// stat did not change. Returns the file as read now, to remember.
    pub fn enter(
        &self,
        fd: impl AsFd,
        dir: &Path,
        has_gitignore: bool,
        previous: Option<&IgnoreFile>,
        now: SystemTime,
    ) -> (Self, Option<IgnoreFile>) {
        if !has_gitignore {
            return (self.clone(), None);
        }
        let stat =
            nix::sys::stat::fstatat(fd, ".gitignore", nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                .ok()
                .map(|s| Stat::from_raw(&s));
        let file = match previous.filter(|p| p.settled && p.stat.is_some() && p.stat == stat) {
            Some(p) => p.clone(),
            None => IgnoreFile {
                stat,
                settled: stat.is_some_and(|s| s.settled(now)),
                matcher: matcher(dir, &dir.join(".gitignore")),
            },
        };
        let mut next = self.clone();
        let mut hasher = std::hash::DefaultHasher::new();
        self.fingerprint.hash(&mut hasher);
        mix(&mut hasher, dir, stat.as_ref());
        next.fingerprint = hasher.finish();
        next.settled &= file.settled;
        if let Some(m) = &file.matcher {
            next.layers.push(m.clone());
        }
        (next, Some(file))
    }

    /// Whether `path` (absolute) is ignored.
    pub fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        for layer in self.layers.iter().rev() {
            match layer.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }
}

fn matcher(root: &Path, file: &Path) -> Option<Arc<Gitignore>> {
    if !file.is_file() {
        return None;
    }
    let mut builder = GitignoreBuilder::new(root);
    // A rule file that cannot be read or parsed in part still contributes its good lines.
    let _ = builder.add(file);
    builder.build().ok().filter(|g| !g.is_empty()).map(Arc::new)
}

/// The directory holding the `.git` of the repository `dir` is in, if any.
pub fn repository_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|a| a.join(".git").exists())
        .map(Path::to_path_buf)
}
