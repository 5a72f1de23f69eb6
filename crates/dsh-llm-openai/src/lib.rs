//! An OpenAI-compatible chat-completions streaming adapter for dsh.
//!
//! DeepSeek is the default route (`deepseek`): its extensions (`thinking`, reasoning
//! passback via `reasoning_content`, cache-hit usage) are on. The `openai-compatible` route
//! speaks plain chat completions for OpenAI, vLLM, llama.cpp's server, Ollama and the like,
//! configured by base URL.
//!
//! Layers, one file each: `translate` turns events into stream chunks, `request` turns
//! options into the request body, `http_error` turns error responses into failures, and
//! [`OpenAiAdapter`] drives one request. The HTTP/SSE plumbing (the streaming driver with its
//! idle timeout and prompt cancellation, the SSE parser, keys, the request log, error wording)
//! is `dsh-llm-http`'s, shared with every other provider crate.

mod adapter;
mod config;
mod http_error;
mod models;
mod request;
mod responses;
mod responses_adapter;
mod translate;
mod usage;
mod wire;

pub use adapter::OpenAiAdapter;
pub use config::{OpenAiAdapterConfig, ProviderKind, ThinkingMode};
/// The key types of [`OpenAiAdapterConfig::api_key`], re-exported so a configuration can be
/// written with this crate alone.
pub use dsh_llm_http::{ApiKeySource, Secret};
pub use models::list_model_ids;
pub use responses::ResponsesTranslator;
pub use responses_adapter::{ResponsesAdapter, openai_models};
pub use translate::{Progress, Translator};
