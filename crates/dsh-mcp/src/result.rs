//! A `tools/call` result as a dsh tool output.
//!
//! Text stays text. Images, audio and resources become one-line text placeholders for now (the
//! model learns something arrived and what it was; dsh's tool results carry no media yet), an
//! embedded text resource keeps its text under a header line, and a result with no content but
//! structured content shows that JSON. `isError` makes the output an error report the model
//! reads as such.

use dsh_session::ContentBlock;
use dsh_tools::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock as McpContent, ResourceContents};
use serde_json::json;

/// The output for `result` of `tool` on `server`.
pub fn to_output(server: &str, tool: &str, result: CallToolResult) -> ToolOutput {
    let mut content: Vec<ContentBlock> = result.content.iter().map(block).collect();
    if content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        content.push(ContentBlock::text(structured.to_string()));
    }
    if content.is_empty() {
        content.push(ContentBlock::text("(no output)"));
    }
    ToolOutput {
        content,
        is_error: result.is_error.unwrap_or(false),
        meta: Some(json!({"mcp": {"server": server, "tool": tool}})),
    }
}

fn block(content: &McpContent) -> ContentBlock {
    let text = match content {
        McpContent::Text(text) => text.text.clone(),
        McpContent::Image(image) => format!(
            "[image: {}, {} bytes; not shown]",
            image.mime_type,
            decoded_len(&image.data)
        ),
        McpContent::Audio(audio) => format!(
            "[audio: {}, {} bytes; not shown]",
            audio.mime_type,
            decoded_len(&audio.data)
        ),
        McpContent::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource: {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                "[resource: {uri}{}; binary, not shown]",
                mime_type
                    .as_deref()
                    .map(|m| format!(", {m}"))
                    .unwrap_or_default()
            ),
            _ => "[resource of a kind dsh does not show yet]".to_owned(),
        },
        McpContent::ResourceLink(link) => format!("[resource link: {} ({})]", link.uri, link.name),
        // A content kind newer than this client: say so rather than drop it silently.
        _ => "[content of a kind dsh does not show yet]".to_owned(),
    };
    ContentBlock::text(text)
}

/// The size of base64 `data` once decoded, without decoding it.
fn decoded_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use rmcp::model::{EmbeddedResource, ImageContent, TextContent};

    use super::*;

    #[test]
    fn media_becomes_placeholders_and_is_error_marks_the_output() {
        let mut result = CallToolResult::error(vec![
            McpContent::Text(TextContent::new("boom")),
            McpContent::Image(ImageContent::new("aGVsbG8=", "image/png")),
            McpContent::Resource(EmbeddedResource::new(
                ResourceContents::TextResourceContents {
                    uri: "file:///a".to_owned(),
                    mime_type: None,
                    text: "body".to_owned(),
                    meta: None,
                },
            )),
        ]);
        result.structured_content = None;
        let out = to_output("s", "t", result);
        assert!(out.is_error);
        let texts: Vec<String> = out
            .content
            .iter()
            .filter_map(|b| b.as_text().map(str::to_owned))
            .collect();
        assert_eq!(
            texts,
            [
                "boom",
                "[image: image/png, 5 bytes; not shown]",
                "[resource: file:///a]\nbody"
            ]
        );
    }

    #[test]
    fn an_empty_result_still_says_something() {
        let out = to_output("s", "t", CallToolResult::success(Vec::new()));
        assert!(!out.is_error);
        assert_eq!(out.content, vec![ContentBlock::text("(no output)")]);
    }
}
