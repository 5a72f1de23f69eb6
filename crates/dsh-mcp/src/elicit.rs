//! A server's `elicitation/create` (form mode) as questions to the person, through the
//! question seam (`dsh_tools::Questioner`) the front end provides: the chat prints them, the
//! terminal UI shows a card, an editor gets its own request.
//!
//! A server asks while it handles one of dsh's calls, so the question goes to the session of
//! the server's latest running call (the only one, unless agents share the server). Each
//! property of the requested schema is one question: an enum offers its values, a boolean
//! offers `yes` and `no`, anything else takes free text; replies are converted back to the
//! property's type. Nobody to ask (`dsh run`, no running call, a subagent) declines, with the
//! reason in the result's `_meta` and the log; a person dismissing the card declines, a
//! cancelled turn cancels. URL mode is not declared and is declined.

use std::sync::Arc;

use dsh_session::{CallId, SessionId};
use dsh_tools::{Question, QuestionOption, QuestionOutcome, QuestionRequest, Questioner, Reply};
use parking_lot::Mutex;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// Who can be asked on behalf of one running call.
#[derive(Clone)]
pub(crate) struct Asker {
    pub(crate) questioner: Option<Arc<dyn Questioner>>,
    pub(crate) agent_id: SessionId,
    pub(crate) call_id: CallId,
    pub(crate) cancel: CancellationToken,
}

/// The server's running calls, newest last, each under its own number.
pub(crate) type RunningCalls = Arc<Mutex<Vec<(u64, Asker)>>>;

/// Keeps a call among the running ones while it lives.
pub(crate) struct RunningCall {
    calls: RunningCalls,
    id: u64,
}

impl RunningCall {
    pub(crate) fn register(calls: &RunningCalls, asker: Asker) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        calls.lock().push((id, asker));
        Self {
            calls: calls.clone(),
            id,
        }
    }
}

impl Drop for RunningCall {
    fn drop(&mut self) {
        self.calls.lock().retain(|(id, _)| *id != self.id);
    }
}

/// Answers `params` from `server` by asking the person of its latest running call.
pub(crate) async fn elicit(
    server: &str,
    calls: &RunningCalls,
    params: ElicitRequestParams,
) -> ElicitResult {
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = params
    else {
        return declined(server, "dsh answers form elicitations only");
    };
    let asker = calls.lock().last().map(|(_, a)| a.clone());
    let Some(asker) = asker else {
        return declined(
            server,
            "no call of dsh's is running to ask the person about",
        );
    };
    let Some(questioner) = asker.questioner.clone() else {
        return declined(server, "nobody can be asked here (a headless run)");
    };
    let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
    let fields = fields(&schema);
    if fields.is_empty() {
        return declined(server, "the requested schema has no fields dsh can ask for");
    }
    let questions: Vec<Question> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| f.question(server, if i == 0 { Some(&message) } else { None }))
        .collect();
    let outcome = questioner
        .ask(QuestionRequest {
            agent_id: asker.agent_id.clone(),
            call_id: asker.call_id.clone(),
            questions,
            cancel: asker.cancel.clone(),
        })
        .await;
    match outcome {
        QuestionOutcome::Answered(replies) if replies.len() == fields.len() => {
            let mut content = Map::new();
            for (field, reply) in fields.iter().zip(&replies) {
                match field.value(reply) {
                    Some(value) => {
                        content.insert(field.name.clone(), value);
                    }
                    None => {
                        return declined(
                            server,
                            &format!("the answer for `{}` is not a {}", field.name, field.kind),
                        );
                    }
                }
            }
            let mut result = ElicitResult::new(ElicitationAction::Accept);
            result.content = Some(Value::Object(content));
            result
        }
        QuestionOutcome::Cancelled => ElicitResult::new(ElicitationAction::Cancel),
        QuestionOutcome::Declined => ElicitResult::new(ElicitationAction::Decline),
        _ => declined(server, "the person could not be asked in this session"),
    }
}

fn declined(server: &str, reason: &str) -> ElicitResult {
    tracing::info!(server, reason, "declined an MCP server's elicitation");
    serde_json::from_value(json!({"action": "decline", "_meta": {"dsh/reason": reason}}))
        .unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Decline))
}

/// One property of a requested schema.
struct Field {
    name: String,
    title: Option<String>,
    description: Option<String>,
    kind: String,
    choices: Vec<(String, Option<String>)>,
}

/// The properties of `schema`, in its order.
fn fields(schema: &Value) -> Vec<Field> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    properties
        .iter()
        .map(|(name, p)| {
            let kind = text(p, "type").unwrap_or_else(|| "string".to_owned());
            let mut choices: Vec<(String, Option<String>)> = Vec::new();
            if let Some(values) = p.get("enum").and_then(Value::as_array) {
                let names = p.get("enumNames").and_then(Value::as_array);
                for (i, v) in values.iter().filter_map(Value::as_str).enumerate() {
                    let label = names
                        .and_then(|n| n.get(i))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    choices.push((v.to_owned(), label));
                }
            } else if let Some(one_of) = p.get("oneOf").and_then(Value::as_array) {
                for option in one_of {
                    if let Some(value) = text(option, "const") {
                        choices.push((value, text(option, "title")));
                    }
                }
            } else if kind == "boolean" {
                choices = vec![("yes".to_owned(), None), ("no".to_owned(), None)];
            }
            Field {
                name: name.clone(),
                title: text(p, "title"),
                description: text(p, "description"),
                kind,
                choices,
            }
        })
        .collect()
}

impl Field {
    fn question(&self, server: &str, message: Option<&str>) -> Question {
        let what = self
            .description
            .clone()
            .or_else(|| self.title.clone())
            .unwrap_or_else(|| self.name.clone());
        let question = match message {
            Some(message) => format!("{message}\n{what}"),
            None => what,
        };
        let options = self
            .choices
            .iter()
            .map(|(value, label)| match label {
                Some(label) if label != value => QuestionOption::new(value).described(label),
                _ => QuestionOption::new(value),
            })
            .collect();
        let mut q = Question::choice(question, options);
        q.header = Some(format!(
            "{server}: {}",
            self.title.as_deref().unwrap_or(&self.name)
        ));
        q
    }

    /// The reply as a value of the field's type; `None` when it is not one.
    fn value(&self, reply: &Reply) -> Option<Value> {
        let text = reply.text().trim();
        match self.kind.as_str() {
            "boolean" => match text.to_ascii_lowercase().as_str() {
                "yes" | "y" | "true" => Some(Value::Bool(true)),
                "no" | "n" | "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "integer" => text.parse::<i64>().ok().map(Value::from),
            "number" => text.parse::<f64>().ok().map(Value::from),
            _ => Some(Value::String(text.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn replies_become_values_of_each_fields_type() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"},
            "ok": {"type": "boolean"},
            "c": {"type": "string", "enum": ["r", "b"], "enumNames": ["Red", "Blue"]}
        }});
        let fields = fields(&schema);
        let by = |name: &str| fields.iter().find(|f| f.name == name).unwrap();
        assert_eq!(by("n").value(&Reply::Text("42".into())), Some(json!(42)));
        assert_eq!(by("n").value(&Reply::Text("x".into())), None);
        assert_eq!(
            by("ok").value(&Reply::Chosen("yes".into())),
            Some(json!(true))
        );
        let q = by("c").question("s", Some("Pick"));
        assert_eq!(q.question, "Pick\nc");
        assert_eq!(q.options[1], QuestionOption::new("b").described("Blue"));
    }
}
