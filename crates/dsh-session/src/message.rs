//! Messages and content blocks: what the model reads and writes.
//!
//! Messages are immutable once created; the log, the inbox and derived history share them
//! behind `Arc`. The JSON shape matches the reference implementation (camelCase fields,
//! `type`-tagged blocks, `kind`-tagged sources) so a session file reads the same whichever
//! implementation wrote it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{CallId, MessageId};

/// Longest `summary` of a [`Message::notice`], in characters.
pub const NOTICE_SUMMARY_CHARS: usize = 120;

/// `text` in at most `max` characters, the last one an ellipsis when it was cut: the one way
/// labels quoted in generated messages are shortened.
pub fn clip_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Who authored a message from the model's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// System text (rare in history: the system prompt travels in the request header).
    System,
    /// User prompts, steering, injected context and tool results.
    User,
    /// Model output.
    Assistant,
}

/// A reference to an image stored in an attachment store (content addressed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageRef {
    /// `sha256:<hex>` of the image bytes.
    pub attachment_id: String,
    /// MIME type, e.g. `image/png`.
    pub media_type: String,
    /// Size of the image in bytes.
    pub bytes: u64,
    /// Width in pixels, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Height in pixels, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

/// One block of message content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning ("thinking") text. Some providers require it to be passed back.
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// An image by reference.
    Image {
        /// Where the image bytes live.
        attachment: ImageRef,
    },
    /// A tool call requested by the model. Arguments stay the raw string the model produced,
    /// so invalid JSON is preserved and reported instead of being lost.
    ToolCall {
        /// Provider-chosen call id.
        id: CallId,
        /// Tool name.
        name: String,
        /// Raw JSON argument text.
        arguments: String,
    },
    /// The result of one tool call.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The call this answers.
        tool_call_id: CallId,
        /// Result content (text and images).
        content: Vec<ContentBlock>,
        /// Whether the result reports a failure.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// The text of a text block, `None` for every other kind.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text } => Some(text),
            _ => None,
        }
    }
}

/// Where a message came from. Exactly one source per message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum MessageSource {
    /// Typed by a person (or a front end acting for one).
    User,
    /// Produced by a plugin (injected context, notices, runtime-context snapshots).
    Plugin {
        /// The producing plugin's name (may be empty).
        plugin: String,
        /// Plugin-specific extra fields (`form`, `summary`, ...), kept verbatim.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// The result of a tool call.
    #[serde(rename_all = "camelCase")]
    Tool {
        /// The call this message answers.
        call_id: CallId,
    },
    /// Model output.
    #[serde(rename_all = "camelCase")]
    Model {
        /// Provider route that produced it.
        provider: String,
        /// Model id that produced it.
        model: String,
        /// Provider-specific state needed to replay this message to the same adapter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replay_state: Option<Value>,
    },
}

impl MessageSource {
    /// A plugin source with no extra fields.
    pub fn plugin(name: impl Into<String>) -> Self {
        Self::Plugin {
            plugin: name.into(),
            extra: Map::new(),
        }
    }
}

/// One immutable message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Occurrence identity.
    pub id: MessageId,
    /// Author role.
    pub role: Role,
    /// Content blocks in order.
    pub content: Vec<ContentBlock>,
    /// Provenance.
    pub source: MessageSource,
}

impl Message {
    /// A user-role message with a fresh id.
    pub fn user(content: Vec<ContentBlock>, source: MessageSource) -> Self {
        Self {
            id: MessageId::generate(),
            role: Role::User,
            content,
            source,
        }
    }

    /// A user-typed text prompt with a fresh id.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::user(vec![ContentBlock::text(text)], MessageSource::User)
    }

    /// Plugin-authored context text with a fresh id.
    pub fn plugin_text(plugin: impl Into<String>, text: impl Into<String>) -> Self {
        Self::user(
            vec![ContentBlock::text(text)],
            MessageSource::plugin(plugin),
        )
    }

    /// A plugin's notice (e.g. "a background task finished"): `text` for the model, and a
    /// source marked `form: "notice"` whose one-line `summary` (cut to
    /// [`NOTICE_SUMMARY_CHARS`]) is what a front end shows in place of the whole text.
    pub fn notice(plugin: impl Into<String>, text: impl Into<String>, summary: &str) -> Self {
        let mut extra = Map::new();
        extra.insert("form".into(), Value::from("notice"));
        extra.insert(
            "summary".into(),
            Value::from(clip_chars(summary, NOTICE_SUMMARY_CHARS)),
        );
        Self::user(
            vec![ContentBlock::text(text)],
            MessageSource::Plugin {
                plugin: plugin.into(),
                extra,
            },
        )
    }

    /// An assistant message produced by `provider`/`model`.
    pub fn assistant(
        content: Vec<ContentBlock>,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        Self {
            id: MessageId::generate(),
            role: Role::Assistant,
            content,
            source: MessageSource::Model {
                provider: provider.into(),
                model: model.into(),
                replay_state: None,
            },
        }
    }

    /// The tool-result message answering `call_id`: user role, one `tool-result` block,
    /// source `tool`.
    pub fn tool_result(call_id: CallId, content: Vec<ContentBlock>, is_error: bool) -> Self {
        Self {
            id: MessageId::generate(),
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_call_id: call_id.clone(),
                content,
                is_error,
            }],
            source: MessageSource::Tool { call_id },
        }
    }

    /// All text blocks joined without separators (reasoning excluded).
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect()
    }

    /// The tool calls this message requests, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&CallId, &str, &str)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => Some((id, name.as_str(), arguments.as_str())),
            _ => None,
        })
    }

    /// Whether the message has no content blocks (such assistant messages are kept in the log
    /// as completion anchors but never sent to the model).
    pub fn is_empty(&self) -> bool {
        self.content.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_chars_cuts_by_characters_with_an_ellipsis_last() {
        assert_eq!(clip_chars("abc", 3), "abc");
        assert_eq!(clip_chars("abcd", 3), "ab…");
        assert_eq!(clip_chars("éééé", 3), "éé…");
    }

    #[test]
    fn a_notice_carries_its_form_and_a_summary_cut_to_the_limit() {
        let m = Message::notice("p", "the whole text", &"s".repeat(500));
        assert_eq!(m.text(), "the whole text");
        let MessageSource::Plugin { plugin, extra } = &m.source else {
            panic!("not a plugin message");
        };
        assert_eq!(plugin, "p");
        assert_eq!(extra["form"], "notice");
        let summary = extra["summary"].as_str().unwrap();
        assert_eq!(summary.chars().count(), NOTICE_SUMMARY_CHARS);
        assert!(summary.ends_with('…'));
    }
    use serde_json::json;

    #[test]
    fn json_shape_matches_reference_names() {
        let m = Message {
            id: MessageId::new("m1"),
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_call_id: CallId::new("c1"),
                content: vec![ContentBlock::text("ok")],
                is_error: true,
            }],
            source: MessageSource::Tool {
                call_id: CallId::new("c1"),
            },
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({
                "id": "m1", "role": "user",
                "content": [{"type": "tool-result", "toolCallId": "c1",
                             "content": [{"type": "text", "text": "ok"}], "isError": true}],
                "source": {"kind": "tool", "callId": "c1"}
            })
        );
        let back: Message = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn plugin_source_keeps_extra_fields_verbatim() {
        let v = json!({"kind": "plugin", "plugin": "tool-jobs", "form": "notice", "summary": "s"});
        let s: MessageSource = serde_json::from_value(v.clone()).unwrap();
        match &s {
            MessageSource::Plugin { plugin, extra } => {
                assert_eq!(plugin, "tool-jobs");
                assert_eq!(extra.get("form"), Some(&json!("notice")));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
    }
}
