//! Command hooks for dsh, in Claude Code's `hooks` format.
//!
//! Teams enforce policy with hooks (block `git push --force`, format after every edit, get told
//! when the agent needs them). dsh reads the format most users already have
//! (`{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", ...}]}]}}`)
//! from `$DSH_HOME/hooks.json`, `<workspace>/.dsh/hooks.json` and, when asked, Claude Code's
//! own settings files, and runs each hook through the session's shell executor (scrubbed
//! environment, the session's sandbox, process-group kill, a timeout) with the event as JSON on
//! standard input.
//!
//! - [`config`]: the file format, the event names and where files are read from.
//! - [`matcher`]: which tools a group runs for (dsh's and Claude Code's tool names both match).
//! - [`outcome`]: the output codec (exit 2 blocks; JSON decisions) and the most-restrictive
//!   merge.
//! - [`runner`]: runs one event's hooks in order and logs `hook/invoked` / `hook/result`.
//! - [`HooksPlugin`]: maps the events onto the loop (see its module docs for the table).

pub mod config;
mod error;
pub mod matcher;
pub mod outcome;
mod plugin;
pub mod runner;
mod trust;

pub use config::{HookCommand, HookEvent, HookSet, UntrustedFile};
pub use error::HooksError;
pub use plugin::{HOOKS_PLUGIN, HookSource, HooksOptions, HooksPlugin, MAX_FORCED_CONTINUATIONS};
pub use trust::{HookTrust, TrustAnswer, TrustGate, TrustQuestion};
