//! The durable session log of dsh.
//!
//! The session log is the truth: everything the model sees is derived from durable events
//! recorded here. This crate holds the identifiers, messages and stream vocabulary that the
//! log records, the event vocabulary itself, the in-memory [`Session`], the [`SessionStore`]
//! and the persistence seam.

pub mod ids;
pub mod message;
pub mod stream;

pub use ids::{CallId, MessageId, SessionId};
pub use message::{ContentBlock, ImageRef, Message, MessageSource, Role};
pub use stream::{BlockType, FailureCode, FinishReason, LlmFailure, StreamChunk, TokenUsage};
