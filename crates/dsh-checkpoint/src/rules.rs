//! Which files a checkpoint leaves out: what git would ignore.
//!
//! The rules are git's: `.gitignore` files in the workspace and in its parents up to the
//! repository root, the repository's `.git/info/exclude`, and the user's global excludes file;
//! they apply in directories that are not git repositories too. A deeper file's rule wins over
//! a shallower one, and an ignored directory is not entered (git cannot re-include a file
//! inside it either). `.git` itself is always left out.

use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The ignore rules in force at one directory of the walk.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// Matchers from the shallowest (global, exclude, parents) to the deepest.
    layers: Vec<std::sync::Arc<Gitignore>>,
}

impl Rules {
    /// The rules at the workspace root.
    pub fn root(workspace: &Path) -> Self {
        let mut layers = Vec::new();
        let (global, _) = Gitignore::global();
        if !global.is_empty() {
            layers.push(std::sync::Arc::new(global));
        }
        if let Some(repo) = repository_root(workspace) {
            let exclude = repo.join(".git/info/exclude");
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
                if let Some(m) = matcher(dir, &dir.join(".gitignore")) {
                    layers.push(m);
                }
            }
        }
        Self { layers }
    }

    /// The rules inside `dir`, which holds a `.gitignore` when `has_gitignore`.
    pub fn enter(&self, dir: &Path, has_gitignore: bool) -> Self {
        if !has_gitignore {
            return self.clone();
        }
        let mut next = self.clone();
        if let Some(m) = matcher(dir, &dir.join(".gitignore")) {
            next.layers.push(m);
        }
        next
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

fn matcher(root: &Path, file: &Path) -> Option<std::sync::Arc<Gitignore>> {
    if !file.is_file() {
        return None;
    }
    let mut builder = GitignoreBuilder::new(root);
    // A rule file that cannot be read or parsed in part still contributes its good lines.
    let _ = builder.add(file);
    builder
        .build()
        .ok()
        .filter(|g| !g.is_empty())
        .map(std::sync::Arc::new)
}

/// The directory holding the `.git` of the repository `dir` is in, if any.
pub fn repository_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|a| a.join(".git").exists())
        .map(Path::to_path_buf)
}
