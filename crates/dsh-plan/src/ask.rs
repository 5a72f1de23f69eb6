//! `ask_user_question`: the model asks the person to choose, instead of guessing.
//!
//! Up to four questions, each with two to four options; the person may always type their own
//! answer instead. The answer is the tool result. Where nobody can be asked (`dsh run`, a
//! subagent), the call fails at once with a reason, so a run never waits for a person who is
//! not there.

use std::fmt::Write as _;

use async_trait::async_trait;
use dsh_tools::{
    Question, QuestionOption, QuestionOutcome, QuestionRequest, Questioner, Reply, ToolCallContext,
    ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// The tool's name.
pub const ASK_USER_QUESTION: &str = "ask_user_question";

/// At most this many questions in one call.
pub const MAX_QUESTIONS: usize = 4;

/// Options of one question: at least, at most.
pub const OPTIONS: std::ops::RangeInclusive<usize> = 2..=4;

const DESCRIPTION: &str = "Ask the user to decide something you cannot settle yourself \
(a preference, a trade-off, which of several readings they meant). One to four questions, each \
with two to four distinct options; the user picks one or writes their own answer. Returns their \
answers. Do not ask what you can find out by reading the code. When no one can answer (a \
headless run) the call fails at once: then decide yourself and say what you assumed.";

/// One option, as the model gives it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct OptionArg {
    /// What the user picks (short: a few words).
    pub label: String,
    /// What choosing it means, when the label does not say.
    #[serde(default)]
    pub description: Option<String>,
}

/// One question, as the model gives it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct QuestionArg {
    /// The question, ending with a question mark.
    pub question: String,
    /// A very short heading for it (a word or two).
    #[serde(default)]
    pub header: Option<String>,
    /// Two to four distinct options.
    pub options: Vec<OptionArg>,
}

/// Arguments of `ask_user_question`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct AskArgs {
    /// One to four questions.
    pub questions: Vec<QuestionArg>,
}

/// The `ask_user_question` tool.
#[derive(Debug, Default)]
pub struct AskUserQuestionTool;

/// The questions `args` describes, or why they cannot be asked.
pub fn questions(args: &AskArgs) -> Result<Vec<Question>, String> {
    if args.questions.is_empty() || args.questions.len() > MAX_QUESTIONS {
        return Err(format!(
            "ask one to {MAX_QUESTIONS} questions (got {})",
            args.questions.len()
        ));
    }
    args.questions
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let n = i + 1;
            if q.question.trim().is_empty() {
                return Err(format!("question {n} is empty"));
            }
            if !OPTIONS.contains(&q.options.len()) {
                return Err(format!(
                    "question {n} has {} options; give {} to {}",
                    q.options.len(),
                    OPTIONS.start(),
                    OPTIONS.end()
                ));
            }
            let mut options: Vec<QuestionOption> = Vec::new();
            for o in &q.options {
                let label = o.label.trim();
                if label.is_empty() {
                    return Err(format!("question {n} has an option without a label"));
                }
                if options.iter().any(|x| x.label == label) {
                    return Err(format!("question {n} offers `{label}` twice"));
                }
                options.push(QuestionOption {
                    label: label.to_owned(),
                    description: o
                        .description
                        .as_deref()
                        .map(str::trim)
                        .filter(|d| !d.is_empty())
                        .map(str::to_owned),
                });
            }
            Ok(Question {
                header: q
                    .header
                    .as_deref()
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(str::to_owned),
                ..Question::choice(q.question.trim(), options)
            })
        })
        .collect()
}

/// The tool result for `replies` to `questions`.
pub fn answer_text(questions: &[Question], replies: &[Reply]) -> String {
    let mut out = String::from("The user answered:");
    for (i, (q, r)) in questions.iter().zip(replies).enumerate() {
        let answer = match r {
            Reply::Chosen(label) => label.clone(),
            Reply::Text(text) => format!("(in their own words) {text}"),
        };
        let _ = write!(out, "\n{}. {} → {answer}", i + 1, q.question);
    }
    out
}

#[async_trait]
impl TypedTool for AskUserQuestionTool {
    type Args = AskArgs;

    fn name(&self) -> &str {
        ASK_USER_QUESTION
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    /// It only asks the person.
    fn effects(&self, _args: &AskArgs) -> ToolEffects {
        ToolEffects::none()
    }

    fn present_call(&self, args: &AskArgs) -> Option<ToolPresentation> {
        let first = args.questions.first().map_or("", |q| q.question.as_str());
        Some(ToolPresentation::Generic {
            title: format!("Question: {first}"),
            kind: ToolKind::Other,
        })
    }

    async fn run(&self, args: AskArgs, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let questions =
            questions(&args).map_err(|e| ToolError::invalid_arguments(ASK_USER_QUESTION, e))?;
        let caller = call
            .caller()
            .ok_or_else(|| ToolError::new("ask_user_question needs a calling session"))?;
        let outcome = match caller.ctx.get::<dyn Questioner>() {
            Some(questioner) => {
                questioner
                    .ask(QuestionRequest {
                        agent_id: caller.agent_id.clone(),
                        call_id: call.call_id().clone(),
                        questions: questions.clone(),
                        cancel: call.cancel().clone(),
                    })
                    .await
            }
            None => QuestionOutcome::Unavailable,
        };
        match outcome {
            QuestionOutcome::Answered(replies) if replies.len() == questions.len() => {
                Ok(ToolOutput::text(answer_text(&questions, &replies)))
            }
            QuestionOutcome::Answered(_) => Err(ToolError::new(
                "the answer did not cover every question; ask again",
            )),
            QuestionOutcome::Declined => Err(ToolError::coded(
                "QuestionError",
                "QUESTION_DECLINED",
                "the user dismissed the question without answering; go on with your best \
                 judgement and say what you assumed, or ask differently",
            )),
            QuestionOutcome::Cancelled => Err(ToolError::aborted()),
            QuestionOutcome::Unavailable => Err(ToolError::coded(
                "QuestionError",
                "NO_USER",
                "no one can answer questions in this session (nobody is at a prompt: a \
                 headless run or a subagent). Decide yourself, say in your answer what you \
                 assumed, and go on",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn args(value: serde_json::Value) -> AskArgs {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn questions_need_two_to_four_distinct_labelled_options() {
        let ok = args(serde_json::json!({"questions": [{
            "question": " Which database? ", "header": "DB",
            "options": [{"label": "SQLite"}, {"label": "Postgres", "description": " shared "}]
        }]}));
        let qs = questions(&ok).unwrap();
        assert_eq!(qs[0].question, "Which database?");
        assert_eq!(qs[0].options[1].description.as_deref(), Some("shared"));
        for (bad, says) in [
            (serde_json::json!({"questions": []}), "one to 4"),
            (
                serde_json::json!({"questions": [{"question": "q", "options": [{"label": "a"}]}]}),
                "1 options",
            ),
            (
                serde_json::json!({"questions": [{"question": "q", "options": [{"label": "a"}, {"label": " a"}]}]}),
                "twice",
            ),
            (
                serde_json::json!({"questions": [{"question": "", "options": [{"label": "a"}, {"label": "b"}]}]}),
                "empty",
            ),
        ] {
            let e = questions(&args(bad)).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn the_answer_names_each_question_and_marks_free_text() {
        let qs = questions(&args(serde_json::json!({"questions": [
            {"question": "A?", "options": [{"label": "x"}, {"label": "y"}]},
            {"question": "B?", "options": [{"label": "x"}, {"label": "y"}]}
        ]})))
        .unwrap();
        let text = answer_text(
            &qs,
            &[Reply::Chosen("y".into()), Reply::Text("neither".into())],
        );
        assert_eq!(
            text,
            "The user answered:\n1. A? → y\n2. B? → (in their own words) neither"
        );
    }
}
