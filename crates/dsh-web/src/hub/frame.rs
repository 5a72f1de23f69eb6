//! JSON-RPC 2.0 frames as the hub sees them: it routes them by kind and id, and reads only the
//! few fields it needs (a session id, a prompt's text); everything else passes through as it
//! came.

use std::sync::Arc;

use serde_json::{Value, json};

/// One frame, classified.
pub(crate) enum Frame {
    /// A call that wants an answer.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A call that wants none.
    Notification { method: String, params: Value },
    /// An answer (`result` or `error`) to the request with this id.
    Response { id: Value },
}

/// Frame text as it is stored and fanned out: cloning is a reference count.
pub(crate) type Text = Arc<str>;

impl Frame {
    /// Classifies a parsed frame; `None` for anything that is not one of the three shapes.
    pub(crate) fn classify(value: &Value) -> Option<Frame> {
        let object = value.as_object()?;
        let params = object.get("params").cloned().unwrap_or(Value::Null);
        match (
            object.get("id"),
            object.get("method").and_then(Value::as_str),
        ) {
            (Some(id), Some(method)) => Some(Frame::Request {
                id: id.clone(),
                method: method.to_owned(),
                params,
            }),
            (None, Some(method)) => Some(Frame::Notification {
                method: method.to_owned(),
                params,
            }),
            (Some(id), None) if object.contains_key("result") || object.contains_key("error") => {
                Some(Frame::Response { id: id.clone() })
            }
            _ => None,
        }
    }
}

/// A request id as a map key (ids may be numbers or strings).
pub(crate) fn key(id: &Value) -> String {
    id.to_string()
}

/// `params.sessionId`, when it is a string.
pub(crate) fn session_of(params: &Value) -> Option<String> {
    params.get("sessionId")?.as_str().map(str::to_owned)
}

/// `value` with its `id` replaced.
pub(crate) fn with_id(mut value: Value, id: Value) -> Value {
    if let Some(object) = value.as_object_mut() {
        object.insert("id".to_owned(), id);
    }
    value
}

/// A successful answer.
pub(crate) fn result(id: &Value, result: Value) -> Text {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
        .to_string()
        .into()
}

/// An error answer.
pub(crate) fn error(id: &Value, code: i64, message: &str) -> Text {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into()
}

/// A notification.
pub(crate) fn notification(method: &str, params: Value) -> Text {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
        .to_string()
        .into()
}

/// JSON-RPC's "invalid params".
pub(crate) const INVALID_PARAMS: i64 = -32602;

/// JSON-RPC's "parse error".
pub(crate) const PARSE_ERROR: i64 = -32700;

/// JSON-RPC's "method not found".
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;

/// The text of a prompt's text blocks, joined by blank lines (resource links and other blocks
/// are the agent's to read; a mirror of the prompt shows what was typed).
pub(crate) fn prompt_text(params: &Value) -> String {
    params
        .get("prompt")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n")
        })
        .unwrap_or_default()
}

/// The `session/update` that shows `text` as the person's message in session `session` (what
/// the bridge's replay sends for a stored prompt), for the other tabs watching it. `steer`
/// marks a message sent while the agent was working.
pub(crate) fn user_message(session: &str, text: &str, steer: bool) -> Text {
    let mut update = json!({
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": text},
    });
    if steer && let Some(object) = update.as_object_mut() {
        object.insert("_meta".to_owned(), json!({"dsh": {"steer": true}}));
    }
    notification(
        "session/update",
        json!({"sessionId": session, "update": update}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_told_apart_by_id_and_method() {
        let request = json!({"jsonrpc":"2.0","id":7,"method":"session/new","params":{}});
        assert!(matches!(
            Frame::classify(&request),
            Some(Frame::Request { .. })
        ));
        let note = json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}});
        assert!(matches!(
            Frame::classify(&note),
            Some(Frame::Notification { .. })
        ));
        let answer = json!({"jsonrpc":"2.0","id":"a","result":null});
        assert!(matches!(
            Frame::classify(&answer),
            Some(Frame::Response { .. })
        ));
        assert!(Frame::classify(&json!({"jsonrpc":"2.0","id":1})).is_none());
        assert!(Frame::classify(&json!([1, 2])).is_none());
    }

    #[test]
    fn a_prompts_text_blocks_are_its_text() {
        let params = json!({"prompt": [
            {"type": "text", "text": "one"},
            {"type": "resource_link", "uri": "file:///x", "name": "x"},
            {"type": "text", "text": "two"}
        ]});
        assert_eq!(prompt_text(&params), "one\n\ntwo");
    }
}
