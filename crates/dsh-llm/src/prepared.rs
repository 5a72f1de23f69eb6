//! A call whose configuration is frozen and whose adapter is pinned.

use std::sync::Arc;

use dsh_session::{ContentBlock, FailureCode, ImageRef, LlmFailure, Message};

use crate::adapter::{Adapter, LlmStream};
use crate::config::{AdapterDefaults, GenerateOptions, LlmCallConfig};
use crate::normalize::terminal_failure;
use crate::retry::RetryPolicy;
use crate::runtime::{Registry, single};

/// The result of [`crate::Llm::prepare_call`]: the exact configuration that will be sent
/// (log it in `request/header`), which fields came from the adapter, the route's retry policy
/// and the model's context window.
///
/// It holds the very adapter instance that resolved the model, so a route re-registered in
/// between cannot receive a request prepared for another adapter. Streaming consumes it.
pub struct PreparedCall {
    /// The frozen configuration, defaults materialized.
    pub config: LlmCallConfig,
    /// Which fields of `config` the adapter supplied.
    pub adapter_defaults: AdapterDefaults,
    /// The retry policy captured for the route when its adapter registered.
    pub retry_policy: Option<RetryPolicy>,
    /// The model's context window, when known.
    pub context_window: Option<u64>,
    /// Whether the model reads images. A model that does not gets a line of text in place of
    /// each image, and no tool that returns images.
    pub vision: bool,
    pub(crate) adapter: Arc<dyn Adapter>,
    pub(crate) registry: Arc<Registry>,
}

impl std::fmt::Debug for PreparedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedCall")
            .field("config", &self.config)
            .field("adapter_defaults", &self.adapter_defaults)
            .field("retry_policy", &self.retry_policy)
            .field("context_window", &self.context_window)
            .field("vision", &self.vision)
            .finish_non_exhaustive()
    }
}

impl PreparedCall {
    /// Streams the request with the pinned adapter.
    ///
    /// `options.config` must equal the prepared config (the log says what was sent, so a
    /// changed config would make it lie); otherwise the stream is a single terminal
    /// `finish{error: INVALID_PREPARED_CALL}` and no request is made.
    pub fn stream(self, options: GenerateOptions) -> LlmStream {
        if options.config != self.config {
            let failure = LlmFailure::new(
                FailureCode::InvalidPreparedCall,
                format!(
                    "the request config differs from the prepared one (prepared {}, got {})",
                    describe(&self.config),
                    describe(&options.config)
                ),
            );
            return single(terminal_failure(failure, &options.cancel));
        }
        let mut options = options;
        if !self.vision {
            describe_images(&mut options.messages, &self.config.model);
        }
        self.registry.dispatch(&self.adapter, options)
    }
}

/// Replaces every image block (tool results included) with a line saying what it was, for a
/// model that reads no images: the conversation stays complete and provider-valid, and the
/// model knows an image was there.
fn describe_images(messages: &mut [Arc<Message>], model: &str) {
    fn describe(blocks: &[ContentBlock], model: &str) -> Option<Vec<ContentBlock>> {
        let touched = blocks.iter().any(|b| match b {
            ContentBlock::Image { .. } => true,
            ContentBlock::ToolResult { content, .. } => content
                .iter()
                .any(|c| matches!(c, ContentBlock::Image { .. })),
            _ => false,
        });
        touched.then(|| {
            blocks
                .iter()
                .map(|b| match b {
                    ContentBlock::Image { attachment } => {
                        ContentBlock::text(image_line(attachment, model))
                    }
                    ContentBlock::ToolResult {
                        tool_call_id,
                        content,
                        is_error,
                    } => ContentBlock::ToolResult {
                        tool_call_id: tool_call_id.clone(),
                        content: describe(content, model).unwrap_or_else(|| content.clone()),
                        is_error: *is_error,
                    },
                    other => other.clone(),
                })
                .collect()
        })
    }
    for message in messages.iter_mut() {
        if let Some(content) = describe(&message.content, model) {
            let mut changed = (**message).clone();
            changed.content = content;
            *message = Arc::new(changed);
        }
    }
}

fn image_line(image: &ImageRef, model: &str) -> String {
    let size = match (image.width, image.height) {
        (Some(w), Some(h)) => format!(", {w}×{h}"),
        _ => String::new(),
    };
    format!(
        "[image: {}, {} KB{size}; not shown: model `{model}` does not read images]",
        image.media_type,
        image.bytes.div_ceil(1024)
    )
}

fn describe(config: &LlmCallConfig) -> String {
    serde_json::to_string(config).unwrap_or_else(|_| format!("{config:?}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{CallId, MessageSource};

    #[test]
    fn a_model_without_vision_reads_a_line_for_each_image_tool_results_included() {
        let image = ImageRef {
            attachment_id: format!("sha256:{}", "a".repeat(64)),
            media_type: "image/png".into(),
            bytes: 2048,
            width: Some(640),
            height: Some(480),
        };
        let mut messages = vec![
            Arc::new(Message::user(
                vec![
                    ContentBlock::text("look"),
                    ContentBlock::Image {
                        attachment: image.clone(),
                    },
                ],
                MessageSource::User,
            )),
            Arc::new(Message::user(
                vec![ContentBlock::ToolResult {
                    tool_call_id: CallId::new("c1"),
                    content: vec![ContentBlock::Image { attachment: image }],
                    is_error: false,
                }],
                MessageSource::User,
            )),
        ];
        let untouched = Arc::new(Message::user_text("no images here"));
        messages.push(untouched.clone());
        describe_images(&mut messages, "deepseek-v4-flash");
        let line = "[image: image/png, 2 KB, 640×480; not shown: model `deepseek-v4-flash` \
                    does not read images]";
        assert_eq!(messages[0].content[1], ContentBlock::text(line));
        let ContentBlock::ToolResult { content, .. } = &messages[1].content[0] else {
            panic!("a tool result stays a tool result");
        };
        assert_eq!(content, &vec![ContentBlock::text(line)]);
        // Messages without images are shared, not copied.
        assert!(Arc::ptr_eq(&messages[2], &untouched));
    }
}
