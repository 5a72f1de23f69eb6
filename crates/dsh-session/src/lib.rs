//! The durable session log of dsh.
//!
//! The session log is the truth: everything the model sees is derived from durable events
//! recorded here.
//!
//! - Vocabulary: ids ([`SessionId`], [`MessageId`], [`CallId`]), [`Message`]s and
//!   [`ContentBlock`]s, the model stream ([`StreamChunk`], [`FinishReason`], [`TokenUsage`],
//!   [`LlmFailure`]) and the durable events ([`SessionEvent`], [`EventKind`]).
//! - [`Session`]: an append-only log with lossless-JSON validation before the log changes,
//!   surface operations, synchronous ordered publication and incremental derived history.
//! - [`SessionStore`]: prepare / enter / announce / detach, bound to the exact entry, with the
//!   `session/created`, `session/disposed`, `session/event` and `session/flush` events.
//! - The live feed (`session/live`, [`LiveUpdate`]): work in progress a front end shows and
//!   nothing logs.
//! - [`fork_seed`], [`interrupted_turn_closers`] and [`check_balanced`].

pub mod attachments;
pub mod error;
pub mod event;
pub mod follow;
pub mod fork;
pub mod header;
pub mod ids;
pub mod live;
pub mod lossless;
pub mod message;
pub mod persistence;
mod phrases;
pub mod relations;
pub mod repair;
pub mod rewind;
pub mod route_switched;
mod session;
pub mod session_rerooted;
pub mod store;
pub mod stream;
mod surface;
pub mod todo;

pub use attachments::{AttachmentError, Attachments, attachment_digest, image_media_type};
pub use error::SessionError;
pub use event::{
    AssistantChunk, AssistantMessage, CancelCause, EventKind, HeaderReason, InboxSplice,
    InboxTarget, RequestContext, RequestHeader, RequestHeaderEvent, Rewind, SessionEvent,
    SpliceOutcome, StepBoundary, SurfaceOp, ToolCall, ToolErrorInfo, ToolResult, TurnEnd,
    TurnEndReason, TurnStart,
};
pub use follow::{FollowedEvents, SessionFollow};
pub use fork::fork_seed;
pub use header::{SessionHeader, SessionMeta, SessionOrigin, now_ms};
pub use ids::{CallId, MessageId, SessionId};
pub use live::{LiveNotice, LiveUpdate, SessionLiveFired};
pub use message::{
    ContentBlock, ImageRef, Message, MessageSource, NOTICE_SUMMARY_CHARS, Role, clip_chars,
};
pub use persistence::{
    Persistence, PersistenceError, SessionListing, SessionLocation, SessionSummary, StoredSession,
};
pub use relations::{RelationChecker, check_relation, relational_validator};
pub use repair::{check_balanced, interrupted_turn_closers};
pub use rewind::{history_events, is_rewound, rewound_ranges};
pub use route_switched::RouteSwitched;
pub use session::{EventDraft, Session, Validator};
pub use session_rerooted::SessionRerooted;
pub use store::{
    SessionCreated, SessionDetach, SessionDisposed, SessionEventFired, SessionEventNotice,
    SessionFlush, SessionStore,
};
pub use stream::{BlockType, FailureCode, FinishReason, LlmFailure, StreamChunk, TokenUsage};
pub use todo::{TodoItem, TodoStatus, TodoWrite, current_todos};
