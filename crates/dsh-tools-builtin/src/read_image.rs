//! The `read_image` tool: shows a vision model an image file from the workspace.

use async_trait::async_trait;
use dsh_kernel::Context;
use dsh_session::{Attachments, ContentBlock};
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::blocking::off_thread;
use crate::path::{display, non_empty, resolve, working_dir};

const DESCRIPTION: &str = "\
Looks at an image file (PNG, JPEG, GIF or WebP): screenshots, diagrams, rendered output, UI \
mock-ups. `file_path` may be relative to the session's working directory. Large images are \
scaled down to 1568 pixels on their long edge.";

/// Arguments of `read_image`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ReadImageArgs {
    /// The image file, relative to the session's working directory or absolute.
    pub file_path: String,
}

/// The `read_image` tool. Offered only to models that read images
/// ([`TypedTool::needs_vision`]); the image is stored once in the attachment store the
/// harness provides (`dyn Attachments`) and enters the conversation by reference.
#[derive(Debug, Clone)]
pub struct ReadImageTool {
    ctx: Context,
}

impl ReadImageTool {
    /// A tool finding the attachment store through `ctx` at each call.
    pub fn new(ctx: Context) -> Self {
        Self { ctx }
    }
}

#[async_trait]
impl TypedTool for ReadImageTool {
    type Args = ReadImageArgs;

    fn name(&self) -> &str {
        "read_image"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn needs_vision(&self) -> bool {
        true
    }

    fn is_concurrency_safe(&self, _args: &ReadImageArgs) -> bool {
        true
    }

    fn effects(&self, args: &ReadImageArgs) -> ToolEffects {
        ToolEffects::none().reads(args.file_path.as_str())
    }

    async fn run(
        &self,
        args: ReadImageArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        non_empty("file_path", &args.file_path)?;
        let store = self.ctx.get::<dyn Attachments>().ok_or_else(|| {
            ToolError::new("read_image is unavailable: no attachment store is configured")
        })?;
        let base = working_dir(call)?;
        let path = resolve(&base, &args.file_path);
        let shown = display(&base, &path);
        let attached = {
            let shown = shown.clone();
            off_thread("read_image", Some(call.cancel()), move || {
                let bytes =
                    dsh_images::read_file(&path).map_err(|e| ToolError::new(e.to_string()))?;
                dsh_images::attach(store.as_ref(), &bytes)
                    .map_err(|e| ToolError::new(format!("{shown}: {e}")))
            })
            .await?
        };
        let image = &attached.image;
        let size = match (image.width, image.height) {
            (Some(w), Some(h)) => format!("{w}×{h}"),
            _ => "unknown size".to_owned(),
        };
        let scaled = attached
            .scaled_from
            .map(|(w, h)| format!(", scaled down from {w}×{h}"))
            .unwrap_or_default();
        Ok(ToolOutput::new(vec![
            ContentBlock::text(format!("{shown} ({}, {size}{scaled}):", image.media_type)),
            ContentBlock::Image {
                attachment: image.clone(),
            },
        ])
        .with_meta(json!({
            "path": shown,
            "attachment": image.attachment_id,
            "mediaType": image.media_type,
            "width": image.width,
            "height": image.height,
        })))
    }

    fn present_call(&self, args: &ReadImageArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("View {}", args.file_path),
            kind: ToolKind::Read,
        })
    }
}
