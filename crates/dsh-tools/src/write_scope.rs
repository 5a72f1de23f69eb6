//! Where a call's file writes may land: the sandbox's writable roots, as a seam between the
//! guard (which decides) and the file tools (which open the files).
//!
//! The guard decides a call may write a path because it lies in a writable root; the tool opens
//! the file afterwards. Checked by name twice, the two could disagree: a command running in the
//! background can turn a directory into a symlink between them. So the guard also tells the
//! tool the roots themselves ([`WritePlace`]), and the tool resolves the path *beneath* a
//! root's directory descriptor (dsh-fs's `Place`): whatever the tree looks like by then, the
//! write lands inside that root or fails.
//!
//! A context without a [`WriteScope`] (no guard: an embedder) writes anywhere.

use std::path::{Path, PathBuf};

use crate::call_context::ToolCallContext;

/// A writable root: the directory, canonical, and the name the configuration gave it (they
/// differ when the configured path runs through a symlink, e.g. a workspace under a linked
/// home), so a tool can map the paths a model writes, which use either, onto the directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRoot {
    /// The directory, with every symlink resolved.
    pub path: PathBuf,
    /// The directory as configured.
    pub alias: PathBuf,
}

impl WriteRoot {
    /// `file` relative to this root, when it lies under either of its names.
    pub fn relative<'a>(&self, file: &'a Path) -> Option<&'a Path> {
        file.strip_prefix(&self.path)
            .or_else(|_| file.strip_prefix(&self.alias))
            .ok()
    }
}

/// Where one call may write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WritePlace {
    /// Anywhere: nothing confines this session's writes (`danger-full-access`).
    Anywhere,
    /// Only beneath one of `roots`, and never inside one of `holes` (paths inside the roots
    /// that stay read-only: `.git`, `.dsh`, dsh's home).
    Beneath {
        /// The writable roots.
        roots: Vec<WriteRoot>,
        /// Read-only places inside them, canonical.
        holes: Vec<PathBuf>,
    },
    /// The user approved this call beyond the sandbox: a path under a root is still resolved
    /// beneath it (the approval named that place, not wherever a symlink leads by the time
    /// the file is opened); any other path is written where it is.
    Approved {
        /// The writable roots.
        roots: Vec<WriteRoot>,
    },
}

/// The guard's answer to "where may this call write?", provided on the context as
/// `ctx.provide::<dyn WriteScope>(…)`.
pub trait WriteScope: Send + Sync {
    /// Where `call` may write.
    fn place(&self, call: &ToolCallContext) -> WritePlace;
}
