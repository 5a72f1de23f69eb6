//! The Agent Client Protocol bridge of dsh: what `dsh acp` serves to editors.
//!
//! [`serve`] speaks ACP protocol v1 (newline-delimited JSON-RPC, through the
//! `agent-client-protocol` crate) over any byte pipe and maps it onto dsh agents:
//!
//! - `initialize` (load, list and close supported; text and resource-link prompts),
//!   `authenticate` (nothing to do), `session/new` (the ACP `sessionId` *is* the dsh session
//!   id), `session/load` (resume, then replay the stored conversation), `session/resume`
//!   (resume without the replay), `session/list`,
//!   `session/close`, `session/set_mode` (`default` asks before mutating tools, `auto`,
//!   `read-only`), `session/prompt` and `session/cancel`.
//! - Streaming `session/update`s derived from the durable session log: message and thought
//!   chunks, tool-call cards with diffs and console output, usage.
//! - One prompt per session, settled when the agent is idle and its output delivered;
//!   queue-aware cancel (seed decision 000): a prompt cancelled before it started never runs.
//!   Interrupt and send: a prompt that arrives while the previous one is being cancelled waits
//!   for that one to settle and then runs; one that overlaps an uncancelled prompt is refused.
//! - Permission requests for mutating tools, failing closed on any client error, disconnect or
//!   cancel ([`ApprovalPolicy`]).
//! - Leak-free disconnect: the bridge holds each session's `AgentHandle` and disposes it, so
//!   after the client goes away no bridge-owned agent or session-store entry remains, even for
//!   a `session/new` that raced the close ([`BridgeClosing`] marks the moment).
//! - A bad frame costs one parse error, never the connection: bytes that are not UTF-8 are
//!   replaced, a line longer than [`MAX_FRAME_BYTES`] is skipped without being buffered.
//! - The same teardown on the front end's request ([`serve_until`]: a signal handler's stop),
//!   with the connection still open so outstanding prompts are answered `cancelled`.
//! - Any transport: a byte pipe framed by lines ([`serve`], stdio) or a message transport
//!   whose items are whole frames ([`serve_frames_until`]: a WebSocket, an in-process channel).
//!
//! A front end composes the core services, then hands the context and its stdio over:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use dsh_acp::{AcpOptions, ApprovalPolicy};
//! use dsh_agent::AgentOptions;
//! use dsh_kernel::Context;
//!
//! let ctx = Context::new();
//! let _core = dsh_agent_loop::mount_core(&ctx, Default::default()).await?;
//! // ... register an adapter, mount the shell, the builtin tools and persistence ...
//! let options = AcpOptions::new(AgentOptions::route("deepseek", "deepseek-chat"))
//!     .with_approval(ApprovalPolicy::MutatingTools);
//! // Route tracing to stderr first: stdout carries protocol frames only.
//! dsh_acp::serve(ctx, options, tokio::io::stdin(), tokio::io::stdout()).await?;
//! # Ok(())
//! # }
//! ```

mod bridge;
mod commands;
mod editor;
mod errors;
mod files;
mod frames;
mod hangup;
mod list;
mod mcp;
mod models;
mod modes;
mod open;
mod options;
mod permission;
mod plan;
mod planning;
mod progress;
mod prompt;
mod question;
mod record;
mod replay;
mod resume;
mod server;
mod settle;
mod teardown;
mod terminal;
mod translate;
mod unconfigured;
mod updates;
mod watch;

pub use bridge::BridgeClosing;
pub use errors::AcpError;
pub use frames::MAX_FRAME_BYTES;
pub use modes::Mode;
pub use options::{AcpOptions, AgentSetupHook, ApprovalPolicy};
pub use server::{serve, serve_frames_until, serve_until};
pub use settle::CANCEL_ANSWER_DEADLINE;
pub use unconfigured::serve_unconfigured;
