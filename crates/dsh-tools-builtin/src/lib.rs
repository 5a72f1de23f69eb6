//! The built-in tools of dsh.
//!
//! - `bash` runs one fresh `bash -c` per call through the [`ShellExecutor`] service, in the
//!   foreground (timeout, exit/timeout/signal markers, output tail with a pointer to the full
//!   output) or in the background as a task owned by the calling agent.
//! - `bash_output` and `bash_kill` read and stop background tasks behind the owner fence of
//!   seed decision 3: a task with an owner is touched only by the agent whose id is that owner;
//!   the executor merely stores the token ([`ShellExecutor::owner_of`]), the policy lives here.
//!   When the owning agent is disposed its tasks are stopped and forgotten, since nobody else
//!   may touch them.
//! - `read`, `write` and `edit` work on files relative to the session's working directory,
//!   with a read-before-write policy kept per session in [`FileObservations`].
//! - `glob` and `grep` search with ripgrep's walker and searcher, honouring `.gitignore`.
//! - `todo_write` keeps the session's checklist as durable `todo/write` events.
//!
//! [`BuiltinToolsPlugin`] registers all of them, provides the observation service and delivers
//! completion notices of background tasks to their owning agents.
//!
//! [`ShellExecutor`]: dsh_shell::ShellExecutor
//! [`ShellExecutor::owner_of`]: dsh_shell::ShellExecutor::owner_of

mod bash;
mod bash_kill;
mod bash_output;
mod blocking;
mod edit;
mod excerpt;
mod fence;
mod glob;
mod grep;
mod notice;
mod observe;
mod path;
mod place;
mod plugin;
mod read;
mod read_image;
mod render;
mod routed;
mod todo;
mod walk;
mod write;

pub use bash::{BashArgs, BashTool};
pub use bash_kill::{BashKillArgs, BashKillTool};
pub use bash_output::{BashOutputArgs, BashOutputTool};
pub use edit::{EDIT_AMBIGUOUS, EDIT_NO_MATCH, EditArgs, EditTool};
pub use fence::{FOREIGN_TASK, SHELL_UNAVAILABLE, UNKNOWN_TASK};
pub use glob::{GlobArgs, GlobTool};
pub use grep::{GrepArgs, GrepTool};
pub use notice::NOTICE_PLUGIN;
pub use observe::{FS_NOT_OBSERVED, FS_STALE_VERSION, FileObservations, FileVersion, Violation};
pub use plugin::BuiltinToolsPlugin;
pub use read::{ReadArgs, ReadTool};
pub use read_image::{ReadImageArgs, ReadImageTool};
pub use todo::{TodoArg, TodoArgStatus, TodoWriteArgs, TodoWriteTool};
pub use write::{WriteArgs, WriteTool};
