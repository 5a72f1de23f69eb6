//! The LLM seam of dsh.
//!
//! Everything above this crate (the agent loop, compaction, titles) talks to models through
//! [`Llm`]; everything below it (HTTP adapters, the scripted test adapter) implements
//! [`Adapter`]. The seam exists so that the loop never sees transport details: whatever an
//! adapter does wrong, the consumer receives plain [`StreamChunk`]s ending in exactly one
//! `finish`, and the request configuration it logs is exactly what was sent.
//!
//! The message and stream vocabulary is owned by `dsh-session` (the session log records it
//! verbatim) and re-exported here so adapters need only this crate.

mod adapter;
mod assembler;
pub mod catalog;
mod config;
mod credential;
mod error;
mod model;
mod normalize;
mod prepared;
pub mod retry;
mod runtime;

pub use adapter::{Adapter, ChunkStream, LlmStream};
pub use assembler::BlockAssembler;
pub use catalog::{ModelCatalog, ModelFacts, ModelOverride, ModelPrice};
pub use config::{
    AdapterDefaults, GenerateOptions, LlmCallConfig, ProviderWebSearch, Purpose, ToolSchema,
    image_base64,
};
pub use credential::{USER_AGENT, normalize_api_key};
pub use error::{BoxError, LlmError};
pub use model::{ModelInfo, ReasoningInfo};
pub use normalize::{normalize_stream, terminal_failure};
pub use prepared::PreparedCall;
pub use retry::{Backoff, RetryDecision, RetryPolicy};
pub use runtime::{AdapterRegistration, Llm};

pub use dsh_session::{
    Attachments, BlockType, CallId, ContentBlock, FailureCode, FinishReason, ImageRef, LlmFailure,
    Message, MessageId, MessageSource, Role, SessionId, StreamChunk, TokenUsage,
};
