//! The chat's approver: asks the person at the terminal whether a call may run.
//!
//! The question is printed above the prompt; the next line typed answers it instead of being
//! sent to the agent: `y` allows once, `a` allows the same call (tool and command or path) for
//! the rest of the session, anything else denies, and a longer text is passed on to the model
//! as the reason. Only the chat's own agent can ask: a subagent's question is answered
//! `Unavailable` (the model reads that nobody could be asked), as is any question while a
//! previous one is still open.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_session::{Message, SessionId};
use dsh_tools::{ApprovalOutcome, ApprovalRequest, Approver};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use dsh_harness::Harness;
use dsh_kernel::KernelError;

use crate::Printer;

/// What the user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run it once.
    Once,
    /// Run it, and the same call again without asking, for the rest of the session.
    Session,
    /// Do not run it; the optional text is the reason.
    Deny(Option<String>),
}

impl Answer {
    /// Reads a typed line.
    pub fn parse(line: &str) -> Answer {
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" | "1" => Answer::Once,
            "a" | "always" | "2" => Answer::Session,
            "" | "n" | "no" | "3" => Answer::Deny(None),
            _ => Answer::Deny(Some(line.trim().to_owned())),
        }
    }
}

/// Delivers a denial's reason to the asking agent.
type ReasonSink = Box<dyn Fn(&SessionId, Message) + Send + Sync>;

/// The terminal approver of one chat.
pub struct TerminalApprover {
    printer: Printer,
    /// The chat's current agent: the only one that may ask.
    current: Arc<Mutex<Option<SessionId>>>,
    pending: Mutex<Option<oneshot::Sender<Answer>>>,
    /// Calls allowed for the session: (agent, tool, what it runs or writes).
    granted: Mutex<Vec<(SessionId, String, String)>>,
    /// Where a denial's reason goes (steering the asking agent).
    reasons: Mutex<Option<ReasonSink>>,
}

impl TerminalApprover {
    /// An approver printing through `printer` for the agent in `current`.
    pub fn new(printer: Printer, current: Arc<Mutex<Option<SessionId>>>) -> Self {
        Self {
            printer,
            current,
            pending: Mutex::default(),
            granted: Mutex::default(),
            reasons: Mutex::default(),
        }
    }

    /// Where denial reasons are sent (the chat steers its agent with them).
    pub fn on_reason(&self, send: impl Fn(&SessionId, Message) + Send + Sync + 'static) {
        *self.reasons.lock() = Some(Box::new(send));
    }

    /// Hands a typed line to an open question; false when none is open (the line is input).
    pub fn answer(&self, line: &str) -> bool {
        match self.pending.lock().take() {
            Some(tx) => {
                let _ = tx.send(Answer::parse(line));
                true
            }
            None => false,
        }
    }

    fn say(&self, text: String) {
        (self.printer.lock())(text);
    }
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome {
        if self.current.lock().as_ref() != Some(&request.agent_id) {
            return ApprovalOutcome::Unavailable;
        }
        let what = request.subject();
        let key = (
            request.agent_id.clone(),
            request.tool_name.clone(),
            what.clone(),
        );
        if self.granted.lock().contains(&key) {
            return ApprovalOutcome::AllowedOnce;
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock();
            if pending.is_some() {
                return ApprovalOutcome::Unavailable;
            }
            *pending = Some(tx);
        }
        let reason = request
            .reason
            .as_deref()
            .unwrap_or("it needs your approval");
        self.say(format!(
            "\n? {} wants to run: {reason}\n  [y] allow once  [a] allow for this session  \
             [n] deny (or type a reason)\n",
            request.tool_name
        ));
        let answer = tokio::select! {
            answer = rx => answer.unwrap_or(Answer::Deny(None)),
            () = request.cancel.cancelled() => {
                self.pending.lock().take();
                return ApprovalOutcome::Cancelled;
            }
        };
        match answer {
            Answer::Once => ApprovalOutcome::AllowedOnce,
            Answer::Session => {
                self.granted.lock().push(key);
                ApprovalOutcome::AllowedForSession
            }
            Answer::Deny(reason) => {
                if let (Some(reason), Some(send)) = (reason, &*self.reasons.lock()) {
                    send(
                        &request.agent_id,
                        Message::user_text(format!(
                            "(I denied `{}` {what}: {reason})",
                            request.tool_name
                        )),
                    );
                }
                ApprovalOutcome::Rejected
            }
        }
    }
}

/// Provides a terminal approver for the chat on the harness' context; denial reasons steer the
/// asking agent.
pub fn install(
    harness: &Harness,
    printer: Printer,
    current: Arc<Mutex<Option<SessionId>>>,
) -> Result<Arc<TerminalApprover>, KernelError> {
    let approver = Arc::new(TerminalApprover::new(printer, current));
    let registry = harness.core().registry.clone();
    approver.on_reason(move |id, message| {
        if let Some(agent) = registry.get(id) {
            let _ = agent.steer(message);
        }
    });
    harness
        .context()
        .provide::<dyn Approver>(approver.clone())?;
    Ok(approver)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_session::CallId;
    use tokio_util::sync::CancellationToken;

    fn approver() -> (Arc<TerminalApprover>, Arc<Mutex<Vec<String>>>) {
        let printed = Arc::new(Mutex::new(Vec::new()));
        let printer: Printer = Arc::new(Mutex::new(Box::new({
            let printed = printed.clone();
            move |text: String| printed.lock().push(text)
        })));
        let current = Arc::new(Mutex::new(Some(SessionId::new("me"))));
        (Arc::new(TerminalApprover::new(printer, current)), printed)
    }

    fn request(agent: &str, command: &str) -> ApprovalRequest {
        ApprovalRequest {
            agent_id: SessionId::new(agent),
            tool_name: "bash".into(),
            reason: Some("run outside the sandbox".into()),
            call_id: CallId::new("c1"),
            arguments: Arc::new(serde_json::json!({ "command": command })),
            effects: dsh_tools::ToolEffects::none().runs(command),
            cancel: CancellationToken::new(),
        }
    }

    async fn ask(approver: &Arc<TerminalApprover>, agent: &str, line: &str) -> ApprovalOutcome {
        let asking = tokio::spawn({
            let approver = approver.clone();
            let request = request(agent, "make install");
            async move { approver.request(request).await }
        });
        // Answer only once the question is open (bounded: a regression fails, not hangs).
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while !approver.answer(line) {
                if asking.is_finished() {
                    return;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        asking.await.unwrap()
    }

    #[tokio::test]
    async fn the_answers_allow_once_for_the_session_or_deny() {
        let (approver, printed) = approver();
        assert_eq!(
            ask(&approver, "me", "y").await,
            ApprovalOutcome::AllowedOnce
        );
        assert!(printed.lock()[0].contains("run outside the sandbox"));
        assert_eq!(ask(&approver, "me", "no").await, ApprovalOutcome::Rejected);
        assert_eq!(
            ask(&approver, "me", "a").await,
            ApprovalOutcome::AllowedForSession
        );
        // Granted for the session: answered without a question.
        let asked = printed.lock().len();
        let again = approver.request(request("me", "make install")).await;
        assert_eq!(again, ApprovalOutcome::AllowedOnce);
        assert_eq!(printed.lock().len(), asked);
    }

    #[tokio::test]
    async fn a_denial_with_text_reaches_the_model_as_the_reason() {
        let (approver, _) = approver();
        let sent = Arc::new(Mutex::new(Vec::new()));
        approver.on_reason({
            let sent = sent.clone();
            move |_, message: Message| sent.lock().push(message.text())
        });
        let outcome = ask(&approver, "me", "use the staging dir instead").await;
        assert_eq!(outcome, ApprovalOutcome::Rejected);
        assert!(sent.lock()[0].contains("use the staging dir instead"));
    }

    #[tokio::test]
    async fn a_subagent_cannot_ask() {
        let (approver, printed) = approver();
        let outcome = approver.request(request("child", "make install")).await;
        assert_eq!(outcome, ApprovalOutcome::Unavailable);
        assert!(printed.lock().is_empty());
    }
}
