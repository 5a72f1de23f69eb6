//! PostgreSQL session persistence for dsh.
//!
//! Teams running dsh on many machines want one place that holds every session: list them all,
//! resume a CI agent's session on a laptop, fork it there. This crate stores sessions in
//! PostgreSQL behind the same [`dsh_session::Persistence`] seam as the JSONL files:
//!
//! - [`PostgresStore`]: load with durable crash repair, listing, summaries, storage-level fork.
//! - [`PostgresPersistencePlugin`]: the write-behind feed from `session/event`, the
//!   `session/flush` barrier (which means *committed*) and the teardown drain.
//! - [`PostgresConfig`]: where the server is; the password comes from an environment variable
//!   and is never stored in config or logged.
//!
//! Schema: versioned, idempotent migrations run on first use ([`schema`]). Each event is kept as
//! the exact JSON text dsh-session serializes (so a round trip is byte-identical) plus its
//! `data` as JSONB for queries. A batch is one transaction that also advances the session row's
//! event count from the count the writer expects, so a gap or a duplicate seq cannot be
//! committed, even by two writers racing.
//!
//! One writer per session across machines: a writer holds a PostgreSQL advisory lock on its own
//! connection (the lease) while the session is live; a load, which may repair, takes it too. A
//! second dsh resuming a live session gets "in use by another writer". The lease dies with the
//! writer's connection, so a crashed writer never leaves a session locked.

mod batch;
mod config;
mod error;
mod follow;
mod lease;
mod plugin;
mod rows;
pub mod schema;
mod store;
mod transfer;
mod writer;

pub use config::{ConfigError, PostgresConfig};
pub use follow::Followed;
pub use plugin::PostgresPersistencePlugin;
pub use store::{DEFAULT_BATCH_WINDOW, PostgresStore};
