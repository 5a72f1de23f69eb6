//! A tool call's progress reports (an MCP server's `notifications/progress`) as
//! `tool_call_update`s, so an editor's card shows how far the call is while it runs.

use agent_client_protocol::v1::schema::{
    ContentBlock, SessionUpdate, ToolCallContent, ToolCallId, ToolCallUpdate, ToolCallUpdateFields,
};
use dsh_session::LiveUpdate;

/// The card update for `update` when it is a progress report: its content becomes the
/// report's words (`step 2 (2/3)`); the call's result replaces it when the call ends. Live
/// output chunks are not sent (the result carries the output, and a terminal card shows it).
pub(crate) fn card_update(update: &LiveUpdate) -> Option<SessionUpdate> {
    let LiveUpdate::ToolProgress {
        call_id,
        progress,
        total,
        message,
    } = update
    else {
        return None;
    };
    let amount = match total {
        Some(total) => format!("{progress}/{total}"),
        None => progress.to_string(),
    };
    let text = match message {
        Some(message) if !message.is_empty() => format!("{message} ({amount})"),
        _ => format!("progress {amount}"),
    };
    Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        ToolCallId::new(call_id.as_str()),
        ToolCallUpdateFields::new().content(vec![ToolCallContent::from(ContentBlock::from(text))]),
    )))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_progress_report_becomes_the_cards_content_and_output_chunks_send_nothing() {
        let update = card_update(&LiveUpdate::ToolProgress {
            call_id: "c1".into(),
            progress: 2.0,
            total: Some(3.0),
            message: Some("step 2".to_owned()),
        })
        .unwrap();
        let json = serde_json::to_value(&update).unwrap();
        assert_eq!(json["sessionUpdate"], "tool_call_update");
        assert_eq!(json["toolCallId"], "c1");
        assert_eq!(json["content"][0]["content"]["text"], "step 2 (2/3)");
        assert!(
            card_update(&LiveUpdate::ToolOutput {
                call_id: "c1".into(),
                text: "x".to_owned(),
                skipped: 0,
            })
            .is_none()
        );
    }
}
