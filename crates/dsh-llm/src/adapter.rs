//! The trait every model provider implements.

use async_trait::async_trait;
use dsh_session::{LlmFailure, StreamChunk};
use futures::stream::BoxStream;
use tokio_util::sync::CancellationToken;

use crate::config::GenerateOptions;
use crate::model::ModelInfo;
use crate::retry::RetryPolicy;

/// What an adapter produces: chunks, or a failure item that the runtime turns into the
/// terminal `finish`. Adapters may also end with their own `finish{error}` chunk.
pub type ChunkStream = BoxStream<'static, Result<StreamChunk, LlmFailure>>;

/// What consumers of [`crate::Llm`] receive: plain chunks that always end with exactly one
/// `finish` (the runtime has already normalized every adapter failure into it).
pub type LlmStream = BoxStream<'static, StreamChunk>;

/// A model provider behind one or more route names.
///
/// Object safe, so adapters of different crates sit in one registry as `Arc<dyn Adapter>`.
/// An adapter makes exactly one provider request per `stream` call (retries are the loop's
/// business, so that each attempt is logged) and must honour `options.cancel` promptly.
#[async_trait]
pub trait Adapter: Send + Sync + 'static {
    /// The retry policy for `provider`, captured when the adapter is registered. `None` means
    /// failures on this route are never retried by the runtime's policy.
    fn retry_policy(&self, provider: &str) -> Option<RetryPolicy> {
        let _ = provider;
        Some(RetryPolicy::default())
    }

    /// Advisory catalog of models on `provider` (front ends list it; unlisted ids still work).
    fn list_models(&self, provider: &str) -> Vec<ModelInfo> {
        let _ = provider;
        Vec::new()
    }

    /// Facts about `model` on `provider`. Ids missing from the catalog must still resolve,
    /// with sensible defaults, because providers ship models faster than catalogs update.
    async fn resolve_model(
        &self,
        provider: &str,
        model: &str,
        cancel: &CancellationToken,
    ) -> Result<ModelInfo, LlmFailure>;

    /// Starts one request. Construction must not block; all I/O happens when the stream is
    /// polled.
    fn stream(&self, options: GenerateOptions) -> ChunkStream;
}
