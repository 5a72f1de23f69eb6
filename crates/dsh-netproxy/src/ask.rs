//! Asking the person about a blocked host while the command's connection waits.
//!
//! The proxy does not know how to reach a person: the harness gives it an [`Asker`] (the
//! front end's approver under the `ask` policy). Questions about the same host from the same
//! session are asked once at a time: a build that opens eight connections to a blocked
//! registry shows one card, and every waiting connection gets its answer.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::refuse::Refusal;

/// One question: may a command of `session` reach `host`, which the lists refuse?
#[derive(Debug, Clone)]
pub struct Question {
    /// The session whose person is asked.
    pub session: String,
    /// The tool call whose command asked, when known.
    pub call: Option<String>,
    /// The port the command asked for.
    pub port: u16,
    /// Why the lists refuse the host (its host is the one asked about).
    pub refusal: Refusal,
    /// How long the asker may take; past it the host is refused (the asker withdraws its
    /// question when this runs out).
    pub timeout: Duration,
}

/// The person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Let this call's commands reach the host (the rest of the call, not only this request:
    /// a build opens many connections).
    Once,
    /// Let every command of the session reach the host from now on.
    Session,
    /// Refuse, with what the command's report says about it ("the user refused it").
    Deny(String),
}

/// A future answer.
pub type AnswerFuture = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// Who is asked about a blocked host. Implementations must answer within
/// [`Question::timeout`] (withdrawing their question then); the proxy also stops waiting a
/// little after it.
pub trait Asker: Send + Sync + std::fmt::Debug {
    /// Asks `question`.
    fn ask(&self, question: Question) -> AnswerFuture;
}

/// What the proxy allows past the question's own timeout before it stops waiting.
const GRACE: Duration = Duration::from_secs(5);

/// An open question's answer, `None` until it comes.
type Pending = watch::Receiver<Option<Answer>>;

/// The questions in flight, one per session and host.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    open: Mutex<HashMap<(String, String), Pending>>,
}

impl InFlight {
    /// The answer to `question`, asking `asker` unless the same question is already open.
    /// The asking runs in a task of its own, so a client that gives up does not withdraw
    /// the question from the others waiting on it; `record` keeps the answer (in the ticket
    /// or the session's list) before the question closes, so no request after it asks again.
    pub(crate) async fn answer(
        self: &Arc<Self>,
        asker: &Arc<dyn Asker>,
        question: Question,
        record: impl FnOnce(&Answer) + Send + 'static,
    ) -> Answer {
        let key = (question.session.clone(), question.refusal.host().to_owned());
        let mut rx = {
            let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            match open.get(&key) {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    open.insert(key.clone(), rx.clone());
                    let asker = asker.clone();
                    let this = self.clone();
                    tokio::spawn(async move {
                        let bound = question.timeout + GRACE;
                        let answer = tokio::time::timeout(bound, asker.ask(question))
                            .await
                            .unwrap_or_else(|_| Answer::Deny("nobody answered in time".into()));
                        record(&answer);
                        // Closed before sending: every waiter reads the answer from the
                        // channel, and a new question after this one asks again.
                        this.open
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(&key);
                        let _ = tx.send(Some(answer));
                    });
                    rx
                }
            }
        };
        match rx.wait_for(Option::is_some).await {
            Ok(answer) => answer
                .clone()
                .unwrap_or_else(|| Answer::Deny(String::new())),
            Err(_) => Answer::Deny("the question was dropped".into()),
        }
    }
}
