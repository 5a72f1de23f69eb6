//! An Anthropic Messages API streaming adapter for dsh.
//!
//! Claude models, and DeepSeek's Anthropic-compatible endpoint, speak the Messages API: the
//! system prompt and tools travel apart from the conversation, tool calls and results are
//! content blocks, thinking blocks carry signatures that must be passed back verbatim, and
//! prompt caching is asked for with `cache_control` breakpoints.
//!
//! Layers, one file each: `request` turns options into the request body (breakpoints on the
//! system prompt and the newest conversation block, so consecutive steps hit the cache),
//! `translate` turns SSE events into stream chunks, `errors` classifies error responses, and
//! [`AnthropicAdapter`] drives one request with an idle timeout and prompt cancellation. The
//! HTTP/SSE plumbing (the streaming driver, SSE framing, key handling, request log and error
//! wording) is `dsh-llm-http`'s, shared with every other provider crate.

mod adapter;
mod config;
mod errors;
mod request;
mod translate;
mod wire;

pub use adapter::AnthropicAdapter;
pub use config::{
    ANTHROPIC_API_KEY_ENV, ANTHROPIC_BASE_URL_ENV, ANTHROPIC_DEFAULT_BASE_URL, AnthropicConfig,
    anthropic_models, claude_info,
};
/// The key source of [`AnthropicConfig::api_key`], re-exported so a configuration can be
/// written with this crate alone.
pub use dsh_llm_http::ApiKeySource;
pub use translate::Translator;
