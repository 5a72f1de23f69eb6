//! An OpenAI-compatible chat-completions streaming adapter for dsh.
//!
//! DeepSeek is the default route (`deepseek`): its extensions (`thinking`, reasoning
//! passback via `reasoning_content`, cache-hit usage) are on. The `openai-compatible` route
//! speaks plain chat completions for OpenAI, vLLM, llama.cpp's server, Ollama and the like,
//! configured by base URL.
//!
//! Layers, one file each: [`sse`] turns bytes into events, `translate` turns events into
//! stream chunks, `request` turns options into the request body, `http_error` turns error
//! responses into failures, and [`OpenAiAdapter`] drives one request with an idle timeout and
//! prompt cancellation.

mod adapter;
mod config;
pub mod driver;
mod http_error;
mod request;
mod responses;
mod responses_adapter;
mod secret;
pub mod sse;
mod translate;
mod usage;
mod wire;

pub use adapter::OpenAiAdapter;
pub use config::{OpenAiAdapterConfig, ProviderKind, ThinkingMode};
/// Error classification shared with the other HTTP adapters (Anthropic), so every provider's
/// failures get the same codes and the same cleaned-up messages.
pub use http_error::{classify as classify_failure, readable as readable_error, retry_after_ms};
pub use responses::ResponsesTranslator;
pub use responses_adapter::{ResponsesAdapter, openai_models};
pub use secret::{ApiKeySource, Secret};
pub use translate::{Progress, Translator};
