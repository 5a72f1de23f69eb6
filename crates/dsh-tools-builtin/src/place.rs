//! Where a file tool's write lands: beneath the writable root the guard allowed it for,
//! resolved from that root's directory descriptor (dsh-fs's [`Place`]), so a command that
//! turns a directory into a symlink between the guard's decision and the write cannot send the
//! write elsewhere. Every tool that declares a write effect opens its target here.

use std::io;
use std::path::{Path, PathBuf};

use dsh_fs::{Place, Root};
use dsh_tools::{ToolCallContext, ToolError, WritePlace, WriteScope};

/// Where `call` may write, as the context's guard says (anywhere without one).
pub(crate) fn write_place(call: &ToolCallContext) -> WritePlace {
    call.caller()
        .and_then(|c| c.ctx.get::<dyn WriteScope>())
        .map_or(WritePlace::Anywhere, |scope| scope.place(call))
}

/// One target, opened for a write.
#[derive(Debug)]
pub(crate) struct Target {
    /// The file.
    pub place: Place,
    /// Directories the file may not land in (canonical).
    holes: Vec<PathBuf>,
}

impl Target {
    /// Opens `path` (absolute, normalized) under `scope`: beneath the innermost root it lies
    /// in whose resolution stays inside (an outer root is tried when a symlink leads out of an
    /// inner one but stays inside the outer), or anywhere when the scope allows.
    pub(crate) fn open(scope: &WritePlace, path: &Path, shown: &str) -> Result<Target, ToolError> {
        let (roots, holes, approved) = match scope {
            WritePlace::Anywhere => {
                let place = Place::anywhere(path).map_err(|e| fs_error(shown, &e))?;
                return Ok(Target {
                    place,
                    holes: Vec::new(),
                });
            }
            WritePlace::Beneath { roots, holes } => (roots, holes.clone(), false),
            WritePlace::Approved { roots } => (roots, Vec::new(), true),
        };
        let mut candidates: Vec<(PathBuf, PathBuf)> = roots
            .iter()
            .filter_map(|root| Some((root.path.clone(), root.relative(path)?.to_path_buf())))
            .collect();
        // Innermost first: the root with the shortest remaining path.
        candidates.sort_by_key(|(_, rel)| rel.components().count());
        let mut escaped = None;
        for (root, rel) in candidates {
            let root = Root::open(&root).map_err(|e| fs_error(shown, &e))?;
            let place = Place::beneath(root, &rel);
            match place.real_parent() {
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => escaped = Some(e),
                _ => {
                    return Ok(Target {
                        place,
                        holes: holes.clone(),
                    });
                }
            }
        }
        if let Some(error) = escaped {
            return Err(fs_error(shown, &error));
        }
        if approved {
            let place = Place::anywhere(path).map_err(|e| fs_error(shown, &e))?;
            return Ok(Target { place, holes });
        }
        Err(ToolError::new(format!(
            "cannot write {shown}: it is outside the writable roots of this session"
        )))
    }

    /// Replaces the file with `bytes` (see [`Place::replace`]), refusing when the directory it
    /// lands in is (or is inside) one of the read-only places: judged by that directory's
    /// real name, on the descriptor the write then uses.
    pub(crate) fn replace(
        &self,
        bytes: &[u8],
        permissions: Option<std::fs::Permissions>,
        shown: &str,
    ) -> Result<std::fs::Metadata, ToolError> {
        let allow = |dir: &Path| match self.holes.iter().find(|hole| dir.starts_with(hole)) {
            Some(hole) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "it is inside {}, which stays read-only (.git, .dsh and dsh's home are \
                     never written from a sandboxed session)",
                    hole.display()
                ),
            )),
            None => Ok(()),
        };
        self.place
            .replace_if(bytes, permissions, &allow)
            .map_err(|e| fs_error(shown, &e))
    }
}

/// The model-facing error of a failed write.
pub(crate) fn fs_error(shown: &str, e: &io::Error) -> ToolError {
    ToolError::new(format!("cannot write {shown}: {e}"))
}
