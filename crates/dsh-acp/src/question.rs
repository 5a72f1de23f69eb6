//! Questions to the person at the editor (`ask_user_question`, a plan to approve).
//!
//! A client that declared form elicitation in `initialize` gets one `elicitation/create`
//! form: per question a single-select field with the options and a text field for an answer
//! in the person's own words. Any other client gets a permission-style request per question
//! (`session/request_permission` with the options as its choices, the plan on the call's
//! card): it cannot carry free text, but every client can answer it. Either way a failure, a
//! disconnect, a cancelled turn or a closed session ends the question, never hangs it.

use std::collections::BTreeMap;
use std::sync::Weak;

use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, ElicitationAction, ElicitationContentValue, ElicitationFormMode,
    ElicitationSchema, ElicitationSessionScope, EnumOption, PermissionOption, PermissionOptionKind,
    RequestPermissionOutcome, RequestPermissionRequest, StringPropertySchema, ToolCallContent,
    ToolCallId, ToolCallUpdate, ToolCallUpdateFields,
};
use async_trait::async_trait;
use dsh_tools::{Question, QuestionIntent, QuestionOutcome, QuestionRequest, Questioner, Reply};

use crate::bridge::Bridge;
use crate::record::{SessionState, wire_id};

/// The [`Questioner`] the bridge provides when the process has none: questions of its own
/// sessions go to their client; any other agent's are answered that nobody can be asked.
pub(crate) struct BridgeQuestioner {
    pub(crate) bridge: Weak<Bridge>,
}

#[async_trait]
impl Questioner for BridgeQuestioner {
    async fn ask(&self, request: QuestionRequest) -> QuestionOutcome {
        let Some(bridge) = self.bridge.upgrade() else {
            return QuestionOutcome::Unavailable;
        };
        let Some(record) = bridge.record(&request.agent_id) else {
            return QuestionOutcome::Unavailable;
        };
        let forms = bridge
            .client_capabilities()
            .elicitation
            .as_ref()
            .is_some_and(|e| e.supports_form());
        drop(bridge);
        if forms {
            elicit(&record.state, &request).await
        } else {
            permission_questions(&record.state, &request).await
        }
    }
}

/// The form field of question `i`'s options, and of its free-text answer.
fn fields(i: usize) -> (String, String) {
    (format!("q{}", i + 1), format!("q{}_text", i + 1))
}

/// The elicitation form for `request`'s questions.
pub(crate) fn form(state: &SessionState, request: &QuestionRequest) -> CreateElicitationRequest {
    let mut schema = ElicitationSchema::new();
    let mut message = String::new();
    for (i, q) in request.questions.iter().enumerate() {
        let (choice, text) = fields(i);
        let options: Vec<EnumOption> = q
            .options
            .iter()
            .map(|o| {
                EnumOption::new(o.label.clone(), o.label.clone()).description(o.description.clone())
            })
            .collect();
        let title = q.header.clone().unwrap_or_else(|| q.question.clone());
        schema = schema
            .property(
                choice,
                StringPropertySchema::new()
                    .title(title)
                    .description(q.question.clone())
                    .one_of(options),
                false,
            )
            .property(
                text,
                StringPropertySchema::new().title(match q.intent {
                    QuestionIntent::PlanReview { .. } => "Or say what to change".to_owned(),
                    QuestionIntent::Choice => "Or answer in your own words".to_owned(),
                }),
                false,
            );
        if !message.is_empty() {
            message.push_str("\n\n");
        }
        message.push_str(&q.question);
        if let Some(detail) = &q.detail {
            message.push_str("\n\n");
            message.push_str(detail);
        }
    }
    let scope = ElicitationSessionScope::new(wire_id(&state.id))
        .tool_call_id(ToolCallId::new(request.call_id.as_str()));
    CreateElicitationRequest::new(ElicitationFormMode::new(scope, schema), message)
}

/// The replies an accepted form's `content` gives `questions`: per question its typed text
/// when there is any, else its chosen option; `None` when a question was left unanswered or
/// chose something that is no option.
pub(crate) fn read_form(
    questions: &[Question],
    content: &BTreeMap<String, ElicitationContentValue>,
) -> Option<Vec<Reply>> {
    let text_of = |key: &str| match content.get(key) {
        Some(ElicitationContentValue::String(s)) if !s.trim().is_empty() => {
            Some(s.trim().to_owned())
        }
        _ => None,
    };
    questions
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let (choice, text) = fields(i);
            if let Some(text) = text_of(&text) {
                return Some(Reply::Text(text));
            }
            let chosen = text_of(&choice)?;
            q.options
                .iter()
                .any(|o| o.label == chosen)
                .then_some(Reply::Chosen(chosen))
        })
        .collect()
}

async fn elicit(state: &SessionState, request: &QuestionRequest) -> QuestionOutcome {
    if request.cancel.is_cancelled() {
        return QuestionOutcome::Cancelled;
    }
    // The call's card reaches the client before the question about it.
    state.updates.drained().await;
    let answer = state.conn.send_request(form(state, request)).block_task();
    let response = tokio::select! {
        answer = answer => match answer {
            Ok(response) => response,
            Err(error) => {
                tracing::warn!(session = %state.id, %error, "elicitation failed");
                return QuestionOutcome::Unavailable;
            }
        },
        () = request.cancel.cancelled() => return QuestionOutcome::Cancelled,
        () = state.closed.cancelled() => return QuestionOutcome::Unavailable,
    };
    match response.action {
        ElicitationAction::Accept(accepted) => {
            match read_form(&request.questions, &accepted.content.unwrap_or_default()) {
                Some(replies) => QuestionOutcome::Answered(replies),
                None => QuestionOutcome::Declined,
            }
        }
        ElicitationAction::Cancel => QuestionOutcome::Cancelled,
        _ => QuestionOutcome::Declined,
    }
}

/// The permission option id of option `i`.
fn option_id(i: usize) -> String {
    format!("option-{}", i + 1)
}

/// The permission request standing for `question` of call `request`.
pub(crate) fn permission_question(
    state: &SessionState,
    request: &QuestionRequest,
    question: &Question,
) -> RequestPermissionRequest {
    let options = question
        .options
        .iter()
        .enumerate()
        .map(|(i, o)| {
            // Only a plan's declining option is a "reject": every choice answers the question.
            let kind = match &question.intent {
                QuestionIntent::PlanReview { approve } if &o.label != approve => {
                    PermissionOptionKind::RejectOnce
                }
                _ => PermissionOptionKind::AllowOnce,
            };
            PermissionOption::new(option_id(i), o.label.clone(), kind)
        })
        .collect();
    let mut fields = ToolCallUpdateFields::new().title(question.question.clone());
    if let Some(detail) = &question.detail {
        fields = fields.content(vec![ToolCallContent::from(
            agent_client_protocol::v1::schema::ContentBlock::from(detail.clone()),
        )]);
    }
    RequestPermissionRequest::new(
        wire_id(&state.id),
        ToolCallUpdate::new(ToolCallId::new(request.call_id.as_str()), fields),
        options,
    )
}

async fn permission_questions(state: &SessionState, request: &QuestionRequest) -> QuestionOutcome {
    let mut replies = Vec::new();
    for question in &request.questions {
        if request.cancel.is_cancelled() {
            return QuestionOutcome::Cancelled;
        }
        state.updates.drained().await;
        let asked = permission_question(state, request, question);
        let answer = state.conn.send_request(asked).block_task();
        let outcome = tokio::select! {
            answer = answer => match answer {
                Ok(response) => response.outcome,
                Err(error) => {
                    tracing::warn!(session = %state.id, %error, "question failed");
                    return QuestionOutcome::Unavailable;
                }
            },
            () = request.cancel.cancelled() => return QuestionOutcome::Cancelled,
            () = state.closed.cancelled() => return QuestionOutcome::Unavailable,
        };
        let RequestPermissionOutcome::Selected(selected) = outcome else {
            return QuestionOutcome::Cancelled;
        };
        let chosen = (0..question.options.len())
            .find(|i| *selected.option_id.0 == *option_id(*i))
            .map(|i| question.options[i].label.clone());
        match chosen {
            Some(label) => replies.push(Reply::Chosen(label)),
            None => return QuestionOutcome::Declined,
        }
    }
    QuestionOutcome::Answered(replies)
}
