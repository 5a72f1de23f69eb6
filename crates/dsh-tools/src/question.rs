//! The question seam: asking a person something richer than "may this call run?".
//!
//! [`crate::Approver`] answers yes or no about one call. A tool that needs the person's
//! *choice* — which of two designs, whether a plan may go ahead and, if not, what to change —
//! asks through a [`Questioner`] instead: each question offers a few options and always
//! accepts free text, and the answer is the option chosen or the text typed. Front ends
//! provide one (`ctx.provide::<dyn Questioner>(arc)`): the chat prints the question and reads
//! the next line, the terminal UI shows a card, an editor gets an ACP elicitation or a
//! permission-style request. Where none is provided (`dsh run`), nobody can be asked and the
//! tool says so at once: a question never hangs a run.

use async_trait::async_trait;
use dsh_session::{CallId, SessionId};
use tokio_util::sync::CancellationToken;

/// One option of a question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuestionOption {
    /// What the person picks; also the answer the asking tool reads.
    pub label: String,
    /// What picking it means, when the label alone does not say.
    pub description: Option<String>,
}

impl QuestionOption {
    /// An option with a label only.
    pub fn new(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            description: None,
        }
    }

    /// The same option with a description.
    #[must_use]
    pub fn described(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// What kind of decision a question is, so a front end can show it as such. The answer is
/// read the same way whatever a front end makes of it: an intent changes presentation only.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum QuestionIntent {
    /// A choice among the options (or free text).
    #[default]
    Choice,
    /// A plan submitted for review: [`Question::detail`] holds the plan (Markdown); the
    /// option labelled `approve` approves it, anything else (another option, or text, which
    /// is the person's feedback) keeps the session planning.
    PlanReview {
        /// The label of the approving option.
        approve: String,
    },
}

/// One question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// A short heading (a few words), when the asker gave one.
    pub header: Option<String>,
    /// The question itself.
    pub question: String,
    /// Longer text shown with the question but never selectable (a plan under review).
    pub detail: Option<String>,
    /// The options, in the order to show them (the asking tool keeps them to 2–4).
    pub options: Vec<QuestionOption>,
    /// How to present it.
    pub intent: QuestionIntent,
}

impl Question {
    /// A choice among `options`.
    pub fn choice(question: impl Into<String>, options: Vec<QuestionOption>) -> Self {
        Self {
            header: None,
            question: question.into(),
            detail: None,
            options,
            intent: QuestionIntent::Choice,
        }
    }

    /// Whether `reply` approves a [`QuestionIntent::PlanReview`] question (never for a choice).
    pub fn approves(&self, reply: &Reply) -> bool {
        match (&self.intent, reply) {
            (QuestionIntent::PlanReview { approve }, Reply::Chosen(label)) => label == approve,
            _ => false,
        }
    }
}

/// The questions of one call, asked together.
#[derive(Clone, Debug)]
pub struct QuestionRequest {
    /// The asking agent (the front end routes the question to its session; it answers
    /// [`QuestionOutcome::Unavailable`] for an agent it does not show, such as a subagent).
    pub agent_id: SessionId,
    /// The asking call.
    pub call_id: CallId,
    /// The questions, answered in order.
    pub questions: Vec<Question>,
    /// The turn's cancellation: stop waiting (answer `Cancelled`) when it fires.
    pub cancel: CancellationToken,
}

/// The answer to one question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The label of the option the person picked.
    Chosen(String),
    /// What the person typed instead of picking.
    Text(String),
}

impl Reply {
    /// The answer as the person gave it: the label, or the text.
    pub fn text(&self) -> &str {
        match self {
            Reply::Chosen(label) | Reply::Text(label) => label,
        }
    }
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuestionOutcome {
    /// One reply per question, in order.
    Answered(Vec<Reply>),
    /// The person dismissed the question without answering.
    Declined,
    /// The question was withdrawn (the turn was cancelled, the session closed).
    Cancelled,
    /// Nobody can be asked (no front end shows this agent, or none is attached).
    Unavailable,
}

/// The question service, provided by a front end as `ctx.provide::<dyn Questioner>(arc)`.
/// Without one, asking tools answer at once that no person can be asked.
#[async_trait]
pub trait Questioner: Send + Sync + 'static {
    /// Asks and waits for the answer (or the request's cancellation).
    async fn ask(&self, request: QuestionRequest) -> QuestionOutcome;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_option_approves_a_plan_and_a_choice_approves_nothing() {
        let review = Question {
            intent: QuestionIntent::PlanReview {
                approve: "Approve".into(),
            },
            ..Question::choice(
                "Approve?",
                vec![QuestionOption::new("Approve"), QuestionOption::new("No")],
            )
        };
        assert!(review.approves(&Reply::Chosen("Approve".into())));
        assert!(!review.approves(&Reply::Chosen("No".into())));
        assert!(!review.approves(&Reply::Text("Approve".into())));
        let choice = Question::choice("Which?", vec![QuestionOption::new("Approve")]);
        assert!(!choice.approves(&Reply::Chosen("Approve".into())));
    }
}
