//! A `tools/call` result as a dsh tool output.
//!
//! Text stays text. An image goes through `dsh-images` into the attachment store and reaches
//! the model as an image (a model without vision reads a line in its place, as for any
//! image); one that cannot be stored or decoded becomes a one-line placeholder saying why.
//! Audio and binary resources become placeholders (the model learns something arrived and what
//! it was), an embedded text resource keeps its text under a header line, and a result with no
//! content but structured content shows that JSON. `isError` makes the output an error report
//! the model reads as such.

use dsh_session::{Attachments, ContentBlock};
use dsh_tools::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock as McpContent, ResourceContents};
use serde_json::json;

/// The output for `result` of `tool` on `server`; images are stored in `attachments`.
pub fn to_output(
    server: &str,
    tool: &str,
    result: CallToolResult,
    attachments: Option<&dyn Attachments>,
) -> ToolOutput {
    let mut content: Vec<ContentBlock> = result
        .content
        .iter()
        .map(|c| block(c, attachments))
        .collect();
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

fn block(content: &McpContent, attachments: Option<&dyn Attachments>) -> ContentBlock {
    let text = match content {
        McpContent::Text(text) => text.text.clone(),
        McpContent::Image(image) => match stored_image(&image.data, attachments) {
            Ok(block) => return block,
            Err(why) => format!(
                "[image: {}, {} bytes; not shown: {why}]",
                image.mime_type,
                decoded_len(&image.data)
            ),
        },
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

/// The contents of a read resource as blocks the model reads, each under a header naming its
/// URI and MIME type: text as text, an image as an image (stored in `attachments`), other
/// binary content as a placeholder saying what it was.
pub fn resource_blocks(
    contents: &[ResourceContents],
    attachments: Option<&dyn Attachments>,
) -> Vec<ContentBlock> {
    let mut blocks = Vec::new();
    for content in contents {
        match content {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => blocks.push(ContentBlock::text(format!(
                "[resource: {uri}, {}]\n{text}",
                mime_type.as_deref().unwrap_or("text/plain")
            ))),
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => {
                let mime = mime_type.as_deref().unwrap_or("application/octet-stream");
                let image = mime
                    .starts_with("image/")
                    .then(|| stored_image(blob, attachments));
                match image {
                    Some(Ok(block)) => {
                        blocks.push(ContentBlock::text(format!("[resource: {uri}, {mime}]")));
                        blocks.push(block);
                    }
                    Some(Err(why)) => blocks.push(ContentBlock::text(format!(
                        "[resource: {uri}, {mime}, {} bytes; not shown: {why}]",
                        decoded_len(blob)
                    ))),
                    None => blocks.push(ContentBlock::text(format!(
                        "[resource: {uri}, {mime}, {} bytes; binary, not shown]",
                        decoded_len(blob)
                    ))),
                }
            }
            _ => blocks.push(ContentBlock::text(
                "[resource content of a kind dsh does not show yet]",
            )),
        }
    }
    if blocks.is_empty() {
        blocks.push(ContentBlock::text("(the resource is empty)"));
    }
    blocks
}

/// An image block for base64 `data`, checked by its bytes (not the server's word for its
/// type), downscaled and stored; else why not.
fn stored_image(data: &str, attachments: Option<&dyn Attachments>) -> Result<ContentBlock, String> {
    use base64::Engine as _;
    let store = attachments.ok_or("no attachment store")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("not valid base64 ({e})"))?;
    let attached = dsh_images::attach(store, &bytes).map_err(|e| e.to_string())?;
    Ok(ContentBlock::Image {
        attachment: attached.image,
    })
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
        let out = to_output("s", "t", result, None);
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
                "[image: image/png, 5 bytes; not shown: no attachment store]",
                "[resource: file:///a]\nbody"
            ]
        );
    }

    #[test]
    fn an_empty_result_still_says_something() {
        let out = to_output("s", "t", CallToolResult::success(Vec::new()), None);
        assert!(!out.is_error);
        assert_eq!(out.content, vec![ContentBlock::text("(no output)")]);
    }

    #[test]
    fn an_image_is_stored_and_sent_as_an_image_and_a_broken_one_says_why() {
        use base64::Engine as _;
        let store = dsh_testkit::MemoryAttachments::new();
        let png = base64::engine::general_purpose::STANDARD.encode(dsh_testkit::TINY_PNG);
        let result = CallToolResult::success(vec![
            McpContent::Image(ImageContent::new(png, "image/png")),
            McpContent::Image(ImageContent::new("aGVsbG8=", "image/png")),
        ]);
        let out = to_output("s", "t", result, Some(&store));
        let ContentBlock::Image { attachment } = &out.content[0] else {
            panic!("an image block: {:?}", out.content[0]);
        };
        assert_eq!(attachment.media_type, "image/png");
        assert_eq!((attachment.width, attachment.height), (Some(2), Some(1)));
        assert_eq!(store.get(attachment).unwrap(), dsh_testkit::TINY_PNG);
        // "hello" is no image, whatever the server says.
        let said = out.content[1].as_text().unwrap();
        assert!(
            said.starts_with("[image: image/png, 5 bytes; not shown: not an image"),
            "{said}"
        );
    }
}
