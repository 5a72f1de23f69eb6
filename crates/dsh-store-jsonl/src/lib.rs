//! Durable JSONL session persistence for dsh.
//!
//! Users must never lose a conversation: not on Ctrl-C, not on `kill -9`, not on a full disk.
//! This crate stores each session as one JSONL file (header on the first line, one
//! [`dsh_session::SessionEvent`] per line, exactly dsh-session's serde form) and provides:
//!
//! - [`JsonlStore`]: the [`dsh_session::Persistence`] backend — load with durable crash repair,
//!   listing from first lines, summaries, storage-level fork, locate.
//! - [`JsonlPersistencePlugin`]: the write-behind feed from `session/event`, the
//!   `session/flush` barrier and the teardown drain.
//! - [`layout`]: where files live (`projectKey`, `encodeSegment`, the sessions root).
//! - [`FileOps`]: the seam every session write goes through (fault injection in tests).
//!
//! Durability contract: when a flush returns `Ok`, every event the session held at the call is
//! on disk (`fdatasync`ed, and a new file's directory entry synced); after a crash, loading
//! keeps every such event, drops only a damaged tail after the last committed `turn/end`, and
//! closes an interrupted turn so the history stays provider-valid.
//!
//! One writer per file: a session's writer holds an exclusive advisory lock on its file, and a
//! load (which may repair) takes it too, so a second dsh process (or a second store) resuming
//! or inspecting a session that is being written fails with a clear error instead of
//! interleaving seqs or truncating the live writer's tail; a writer whose file grew since it
//! was loaded refuses to append to it. Locks die with their process, so a crash never leaves a
//! session locked.

mod attachments;
mod batch;
mod error;
mod follow;
mod fork;
mod fsync;
pub mod layout;
mod list;
mod load;
mod locate;
mod lock;
mod plugin;
mod repair;
mod store;
mod summary;
mod writer;

pub use attachments::FileAttachments;
pub use fsync::{FileOps, OsFileOps};
pub use layout::{sessions_root, sessions_root_from_env};
pub use plugin::JsonlPersistencePlugin;
pub use store::{DEFAULT_BATCH_WINDOW, DurableObserver, JsonlOptions, JsonlStore};
