//! The session core of dsh: everything between a front end and the plugins.
//!
//! A front end (`dsh run`, the line chat, the terminal UI, `dsh acp`, `dsh web`, or a program
//! embedding dsh) starts one [`Harness`] from [`Settings`] and opens every session through
//! [`Harness::open`]. That is the only place that:
//!
//! - reads the configuration (`$DSH_HOME/config.toml`, then the environment, then flags; each
//!   value remembers its [`Source`] for `dsh config show`): [`config`];
//! - picks the session store, JSONL files or PostgreSQL: [`Store`];
//! - registers the provider routes: every configured provider, built lazily, so a session is
//!   continued on the route it was held on;
//! - composes the plugins: core services, the guard (sandbox and approvals), builtin tools,
//!   subagents, compaction, checkpoints, MCP servers, hooks, skills and custom commands, plan
//!   mode, persistence;
//! - resolves a session reference (an id, a unique prefix, the newest session of a
//!   directory, a fork) and applies the resume-route rule;
//! - builds each agent's setup (instruction files, reasoning effort, request budget) and says
//!   what a session runs under ([`EffectivePolicy`]);
//! - switches a running session's model or approval policy when a person asks
//!   ([`Harness::switch_route`], [`Harness::set_approval`]).
//!
//! Front ends keep only what is theirs: argument parsing, terminal or protocol I/O, signals
//! and exit codes. The ACP bridge, which creates agents for an editor itself, asks the
//! harness through the `dsh_agent::AgentPlanner` the harness provides on its context.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use dsh_harness::config::{Overrides, Settings};
//! use dsh_harness::{FrontEnd, Harness, HarnessOptions, SessionReference, SessionRequest};
//!
//! let settings = Settings::load(&Overrides::default())?;
//! let harness = Harness::start(settings, HarnessOptions::new(FrontEnd::Headless)).await?;
//! let opened = harness
//!     .open(SessionRequest::new(SessionReference::New).in_dir("/src/project"))
//!     .await?;
//! opened
//!     .agent()
//!     .followup(dsh_session::Message::user_text("explain this repository"))?;
//! harness.when_quiet(opened.agent()).await;
//! opened.handle.dispose().await;
//! harness.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod agent_setup;
mod compose;

pub mod config;
mod effort;
pub mod env;
mod error;
pub mod guard;
mod hooks;
mod images;
mod instructions;
mod lazy_adapter;
pub mod mcp;
mod network;
mod open;
mod planner;
mod policy;
pub mod project_mcp;
mod resume_route;
mod rewind;
mod routes;
pub mod secrets;
mod session_ref;
pub mod skills;
mod storage;
mod store;
mod switch;
pub mod usage;
mod workspace;

pub use agent_setup::AgentSpec;
pub use compose::{DRAIN, FrontEnd, Harness, HarnessOptions, PERSONA};
pub use config::{Overrides, Settings, Source, Sourced};
pub use error::{ConfigError, HarnessError};
pub use hooks::{FileHooks, HookSettings};
pub use open::{LocatedSession, OpenedSession, SessionReference, SessionRequest};
pub use planner::RouteOverrides;
pub use policy::EffectivePolicy;
pub use resume_route::Route;
pub use rewind::{diff_stored, prune_checkpoints, rewind_stored};
pub use store::{OriginFilter, Store};
pub use switch::{ModelChoice, ROUTE_EVENT};
pub use workspace::{same_dir, workspace_dir};
