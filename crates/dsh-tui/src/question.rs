//! Questions the agent asks the person (`ask_user_question`, a plan to approve): the
//! [`Questioner`] service the UI provides, and the question card's state.
//!
//! Like approvals, each request travels to the app on a channel and its outcome comes back on
//! a oneshot; a request whose turn is cancelled is withdrawn. Only the agent on screen may ask:
//! a subagent (or a session the UI no longer shows) is answered that nobody can be asked, so
//! its tool says so at once instead of waiting on a card nobody sees.
//!
//! A card answers one question at a time. For a choice, a digit picks an option and any other
//! key starts an answer in the person's own words (Enter sends it). For a plan, `y` approves
//! and `n` asks what to change (Enter with nothing typed keeps planning without feedback).
//! Esc withdraws what is being typed, and on an empty answer dismisses the request.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use dsh_session::SessionId;
use dsh_tools::{Question, QuestionIntent, QuestionOutcome, QuestionRequest, Questioner, Reply};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use crate::approval::ARMING;

/// One request on its way to the app.
#[derive(Debug)]
pub struct QuestionAsk {
    /// The questions.
    pub request: QuestionRequest,
    /// Where the outcome goes.
    pub reply: oneshot::Sender<QuestionOutcome>,
}

/// The question service of the UI.
pub struct TuiQuestioner {
    tx: mpsc::UnboundedSender<QuestionAsk>,
    /// The session on screen: the only one whose agent may ask.
    shown: Arc<Mutex<Option<SessionId>>>,
}

impl TuiQuestioner {
    /// The questioner and the receiving end the app reads requests from; `shown` is the
    /// session on screen.
    pub fn new(
        shown: Arc<Mutex<Option<SessionId>>>,
    ) -> (Self, mpsc::UnboundedReceiver<QuestionAsk>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx, shown }, rx)
    }
}

#[async_trait]
impl Questioner for TuiQuestioner {
    async fn ask(&self, request: QuestionRequest) -> QuestionOutcome {
        if self.shown.lock().as_ref() != Some(&request.agent_id) {
            return QuestionOutcome::Unavailable;
        }
        let cancel = request.cancel.clone();
        let (reply, outcome) = oneshot::channel();
        if self.tx.send(QuestionAsk { request, reply }).is_err() {
            return QuestionOutcome::Unavailable;
        }
        tokio::select! {
            outcome = outcome => outcome.unwrap_or(QuestionOutcome::Unavailable),
            () = cancel.cancelled() => QuestionOutcome::Cancelled,
        }
    }
}

/// What a key did to a card.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The key was used; the card stays.
    Kept,
    /// The key was not for the card (it goes to the draft).
    Ignored,
    /// The request is over: the outcome was sent and the card goes.
    Done,
}

/// A question card on screen.
#[derive(Debug)]
pub struct QuestionCard {
    /// The request.
    pub ask: QuestionAsk,
    /// When it appeared (arming starts then).
    pub shown: Instant,
    /// Replies to the questions before the current one.
    pub replies: Vec<Reply>,
    /// The answer being typed in the person's own words, once they started one.
    pub text: Option<String>,
}

impl QuestionCard {
    /// A card shown at `now`.
    pub fn new(ask: QuestionAsk, now: Instant) -> Self {
        Self {
            ask,
            shown: now,
            replies: Vec::new(),
            text: None,
        }
    }

    /// The question being answered.
    pub fn current(&self) -> Option<&Question> {
        self.ask.request.questions.get(self.replies.len())
    }

    /// Whether keys count at `now` (see [`crate::approval::Card::armed`]).
    pub fn armed(&self, now: Instant, last_typed: Option<Instant>) -> bool {
        now.saturating_duration_since(self.shown) >= ARMING
            && last_typed.is_none_or(|t| now.saturating_duration_since(t) >= ARMING)
    }

    /// Whether the turn behind it was cancelled (the card should go).
    pub fn withdrawn(&self) -> bool {
        self.ask.request.cancel.is_cancelled() || self.ask.reply.is_closed()
    }

    /// Ends the request with `outcome` (the card goes).
    pub fn finish(self, outcome: QuestionOutcome) {
        let _ = self.ask.reply.send(outcome);
    }

    /// Ends the request after [`Step::Done`]: answered when every question was, else
    /// dismissed.
    pub fn close(self) {
        let outcome = if self.current().is_none() {
            QuestionOutcome::Answered(self.replies.clone())
        } else {
            QuestionOutcome::Declined
        };
        self.finish(outcome);
    }

    /// Records `reply` to the current question: [`Step::Done`] after the last one.
    fn answer(&mut self, reply: Reply) -> Step {
        self.replies.push(reply);
        self.text = None;
        if self.current().is_some() {
            Step::Kept
        } else {
            Step::Done
        }
    }

    /// A key, typed into the card. `armed` guards choices and the start of typed answers:
    /// keys pressed while the card arms belong to the draft.
    pub fn key(&mut self, key: CardKey, armed: bool) -> Step {
        let Some(question) = self.current().cloned() else {
            return Step::Done;
        };
        if let Some(text) = &mut self.text {
            return match key {
                CardKey::Enter => {
                    let text = text.trim().to_owned();
                    match (&question.intent, text.is_empty()) {
                        (QuestionIntent::PlanReview { .. }, true) => {
                            let keep = keep_planning(&question);
                            self.answer(keep)
                        }
                        (_, true) => Step::Kept,
                        (_, false) => self.answer(Reply::Text(text)),
                    }
                }
                CardKey::Esc => {
                    self.text = None;
                    Step::Kept
                }
                CardKey::Backspace => {
                    text.pop();
                    Step::Kept
                }
                CardKey::Char(c) => {
                    text.push(c);
                    Step::Kept
                }
            };
        }
        if key == CardKey::Esc {
            return Step::Done;
        }
        if !armed {
            return Step::Ignored;
        }
        match (&question.intent, key) {
            (QuestionIntent::PlanReview { approve }, CardKey::Char('y')) => {
                let approve = Reply::Chosen(approve.clone());
                self.answer(approve)
            }
            (QuestionIntent::PlanReview { .. }, CardKey::Char('n')) => {
                self.text = Some(String::new());
                Step::Kept
            }
            (QuestionIntent::Choice, CardKey::Char(c)) => {
                let picked = c
                    .to_digit(10)
                    .and_then(|d| (d as usize).checked_sub(1))
                    .and_then(|i| question.options.get(i));
                match picked {
                    Some(option) => self.answer(Reply::Chosen(option.label.clone())),
                    None => {
                        self.text = Some(c.to_string());
                        Step::Kept
                    }
                }
            }
            _ => Step::Ignored,
        }
    }
}

/// The reply that keeps a plan in planning without feedback: the option that does not
/// approve.
fn keep_planning(question: &Question) -> Reply {
    let approve = match &question.intent {
        QuestionIntent::PlanReview { approve } => approve.as_str(),
        QuestionIntent::Choice => "",
    };
    question
        .options
        .iter()
        .find(|o| o.label != approve)
        .map_or_else(
            || Reply::Text(String::new()),
            |o| Reply::Chosen(o.label.clone()),
        )
}

/// The keys a question card reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CardKey {
    /// A printable character.
    Char(char),
    /// Enter.
    Enter,
    /// Esc.
    Esc,
    /// Backspace.
    Backspace,
}
