//! The chat's questioner: questions the agent asks (`ask_user_question`, a plan to approve)
//! printed above the prompt, answered by the next line typed.
//!
//! A choice is answered with an option's number (or its label), or with words of one's own;
//! an empty line dismisses the question. A plan is approved with `y`, kept in planning with
//! `n`, or kept in planning with the line typed as the feedback. As with approvals, only the
//! chat's own agent can ask (a subagent is answered that nobody can be asked), one question
//! at a time.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_session::SessionId;
use dsh_tools::{Question, QuestionIntent, QuestionOutcome, QuestionRequest, Questioner, Reply};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use dsh_harness::Harness;
use dsh_kernel::KernelError;

use crate::Printer;

/// The terminal questioner of one chat.
pub struct TerminalQuestioner {
    printer: Printer,
    /// The chat's current agent: the only one that may ask.
    current: Arc<Mutex<Option<SessionId>>>,
    pending: Mutex<Option<oneshot::Sender<String>>>,
}

/// What a typed line answers to `question`: `None` dismisses it.
pub fn read_reply(question: &Question, line: &str) -> Option<Reply> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let option = |i: usize| {
        question
            .options
            .get(i)
            .map(|o| Reply::Chosen(o.label.clone()))
    };
    if let QuestionIntent::PlanReview { approve } = &question.intent {
        return Some(match line.to_ascii_lowercase().as_str() {
            "y" | "yes" => Reply::Chosen(approve.clone()),
            "n" | "no" => question
                .options
                .iter()
                .find(|o| &o.label != approve)
                .map_or_else(
                    || Reply::Text(line.to_owned()),
                    |o| Reply::Chosen(o.label.clone()),
                ),
            _ => Reply::Text(line.to_owned()),
        });
    }
    if let Ok(n) = line.parse::<usize>()
        && let Some(reply) = n.checked_sub(1).and_then(option)
    {
        return Some(reply);
    }
    if let Some(o) = question
        .options
        .iter()
        .find(|o| o.label.eq_ignore_ascii_case(line))
    {
        return Some(Reply::Chosen(o.label.clone()));
    }
    Some(Reply::Text(line.to_owned()))
}

/// How `question` is shown above the prompt.
pub fn render(question: &Question) -> String {
    let mut out = String::from("\n");
    if let Some(header) = &question.header {
        out.push_str(&format!("[{header}] "));
    }
    out.push_str(&format!("? {}\n", question.question));
    if let Some(detail) = &question.detail {
        for line in detail.lines() {
            out.push_str(&format!("  │ {line}\n"));
        }
    }
    if let QuestionIntent::PlanReview { .. } = question.intent {
        out.push_str("  [y] approve and start  [n] keep planning (or type what to change)\n");
        return out;
    }
    for (i, o) in question.options.iter().enumerate() {
        match &o.description {
            Some(d) => out.push_str(&format!("  {}. {} — {d}\n", i + 1, o.label)),
            None => out.push_str(&format!("  {}. {}\n", i + 1, o.label)),
        }
    }
    out.push_str("  type a number, or your own answer (an empty line dismisses)\n");
    out
}

impl TerminalQuestioner {
    /// A questioner printing through `printer` for the agent in `current`.
    pub fn new(printer: Printer, current: Arc<Mutex<Option<SessionId>>>) -> Self {
        Self {
            printer,
            current,
            pending: Mutex::default(),
        }
    }

    /// Hands a typed line to an open question; false when none is open (the line is input).
    pub fn answer(&self, line: &str) -> bool {
        match self.pending.lock().take() {
            Some(tx) => {
                let _ = tx.send(line.to_owned());
                true
            }
            None => false,
        }
    }

    /// Waits for the next line, or `None` when the request was cancelled.
    async fn next_line(&self, request: &QuestionRequest) -> Option<String> {
        let (tx, rx) = oneshot::channel();
        *self.pending.lock() = Some(tx);
        tokio::select! {
            line = rx => line.ok(),
            () = request.cancel.cancelled() => {
                self.pending.lock().take();
                None
            }
        }
    }
}

#[async_trait]
impl Questioner for TerminalQuestioner {
    async fn ask(&self, request: QuestionRequest) -> QuestionOutcome {
        if self.current.lock().as_ref() != Some(&request.agent_id) || self.pending.lock().is_some()
        {
            return QuestionOutcome::Unavailable;
        }
        let mut replies = Vec::new();
        for question in &request.questions {
            (self.printer.lock())(render(question));
            let Some(line) = self.next_line(&request).await else {
                return QuestionOutcome::Cancelled;
            };
            match read_reply(question, &line) {
                Some(reply) => replies.push(reply),
                None => return QuestionOutcome::Declined,
            }
        }
        QuestionOutcome::Answered(replies)
    }
}

/// Provides a terminal questioner for the chat on the harness' context.
pub fn install(
    harness: &Harness,
    printer: Printer,
    current: Arc<Mutex<Option<SessionId>>>,
) -> Result<Arc<TerminalQuestioner>, KernelError> {
    let questioner = Arc::new(TerminalQuestioner::new(printer, current));
    harness
        .context()
        .provide::<dyn Questioner>(questioner.clone())?;
    Ok(questioner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_tools::QuestionOption;

    fn choice() -> Question {
        Question::choice(
            "Which store?",
            vec![
                QuestionOption::new("SQLite"),
                QuestionOption::new("Postgres"),
            ],
        )
    }

    #[test]
    fn a_number_or_a_label_picks_an_option_and_other_words_are_the_answer() {
        let q = choice();
        assert_eq!(read_reply(&q, "2"), Some(Reply::Chosen("Postgres".into())));
        assert_eq!(
            read_reply(&q, "sqlite"),
            Some(Reply::Chosen("SQLite".into()))
        );
        assert_eq!(read_reply(&q, "3"), Some(Reply::Text("3".into())));
        assert_eq!(read_reply(&q, " files "), Some(Reply::Text("files".into())));
        assert_eq!(read_reply(&q, "  "), None);
    }

    #[test]
    fn a_plan_is_approved_with_y_and_anything_else_keeps_planning() {
        let q = dsh_plan::review("# Plan\n1. do it");
        assert!(q.approves(&read_reply(&q, "y").unwrap()));
        let no = read_reply(&q, "n").unwrap();
        assert!(!q.approves(&no));
        assert_eq!(no, Reply::Chosen(dsh_plan::KEEP_PLANNING.into()));
        assert_eq!(
            read_reply(&q, "split step 1"),
            Some(Reply::Text("split step 1".into()))
        );
        let shown = render(&q);
        assert!(
            shown.contains("│ # Plan") && shown.contains("[y] approve"),
            "{shown}"
        );
    }
}
