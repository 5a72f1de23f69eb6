//! Which children an agent has, read from its own log.
//!
//! Every `subagent` result records the child's session id in its `meta` (`childSession`), so
//! the parent's log is the list of its children, across restarts and resumes, and the only
//! one: an agent can continue ([`crate::SubagentRequest::resume`]) or list
//! (`subagent_list`) exactly the children its own calls started, never another session's.

use std::collections::HashMap;

use dsh_agent::AgentRef;
use dsh_session::{CallId, ContentBlock, EventKind, SessionId};
use serde_json::Value;

/// The tool whose results name children.
const SUBAGENT_TOOL: &str = "subagent";

/// One child as its parent's log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildRecord {
    /// The child's session id (what `resume` takes).
    pub session: SessionId,
    /// The label of the call that started it (the latest call that continued it, if any).
    pub description: String,
    /// Epoch milliseconds of the latest result that named it.
    pub last_activity: u64,
    /// Whether that result was an error (a failed or cancelled run).
    pub failed: bool,
}

/// The children `parent`'s own `subagent` calls started or continued, oldest first.
pub fn children_in_log(parent: &AgentRef) -> Vec<ChildRecord> {
    let mut labels: HashMap<CallId, String> = HashMap::new();
    let mut children: Vec<ChildRecord> = Vec::new();
    for event in parent.session().events() {
        match &event.kind {
            EventKind::ToolCall(call) if call.name == SUBAGENT_TOOL => {
                let label = serde_json::from_str::<Value>(&call.arguments)
                    .ok()
                    .and_then(|a| a.get("description")?.as_str().map(str::to_owned))
                    .unwrap_or_default();
                labels.insert(call.call_id.clone(), label);
            }
            EventKind::ToolResult(result) => {
                let Some(child) = result
                    .meta
                    .as_ref()
                    .and_then(|m| m.get("childSession")?.as_str())
                else {
                    continue;
                };
                let Some((call_id, is_error)) =
                    result.message.content.iter().find_map(|b| match b {
                        ContentBlock::ToolResult {
                            tool_call_id,
                            is_error,
                            ..
                        } => Some((tool_call_id, *is_error)),
                        _ => None,
                    })
                else {
                    continue;
                };
                let Some(label) = labels.get(call_id) else {
                    continue;
                };
                let record = ChildRecord {
                    session: SessionId::new(child),
                    description: label.clone(),
                    last_activity: event.time,
                    failed: is_error,
                };
                match children.iter_mut().find(|c| c.session == record.session) {
                    Some(known) => *known = record,
                    None => children.push(record),
                }
            }
            _ => {}
        }
    }
    children
}
