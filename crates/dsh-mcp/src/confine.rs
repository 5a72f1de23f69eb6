//! The seam through which a stdio server runs inside its session's sandbox.
//!
//! dsh-mcp does not know sandboxes: the composition root provides a [`CommandConfinement`] on
//! the context (dsh wires dsh-guard's Landlock policy into it), and every stdio server of a
//! set started on that context is spawned from the command it returns. Without one, servers
//! run as configured (an embedder without a sandbox).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use dsh_kernel::BoxError;

/// Wraps a stdio server's program in the sandbox of the session it serves.
pub trait CommandConfinement: Send + Sync {
    /// The command that runs `program args…` confined for a session working in `workspace`,
    /// or why it may not run (a confining mode that cannot be enforced): the server is then
    /// reported as failed and never started unconfined. dsh-mcp sets the command's working
    /// directory, environment, stdio and process group itself.
    fn confine(
        &self,
        workspace: &Path,
        program: &str,
        args: &[String],
    ) -> Result<Command, BoxError>;
}

struct FnConfinement<F>(F);

impl<F> CommandConfinement for FnConfinement<F>
where
    F: Fn(&Path, &str, &[String]) -> Result<Command, BoxError> + Send + Sync,
{
    fn confine(
        &self,
        workspace: &Path,
        program: &str,
        args: &[String],
    ) -> Result<Command, BoxError> {
        (self.0)(workspace, program, args)
    }
}

/// A [`CommandConfinement`] from a function, ready for
/// `ctx.provide::<dyn CommandConfinement>(…)`.
pub fn confinement<F>(confine: F) -> Arc<dyn CommandConfinement>
where
    F: Fn(&Path, &str, &[String]) -> Result<Command, BoxError> + Send + Sync + 'static,
{
    Arc::new(FnConfinement(confine))
}
