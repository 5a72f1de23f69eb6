//! The network by allow-list in a composition: dsh-netproxy's proxy and lists behind
//! dsh-guard's seams (neither crate knows the other), and the person asked about a blocked
//! host through the front end's approver.

use std::sync::Arc;
use std::time::Duration;

use dsh_guard::{
    ApprovalPolicy, BlockedHost, HostPolicy, HostRefusal, NetworkProxy, ProxyEndpoint, ProxyOwner,
    SessionPolicies,
};
use dsh_kernel::Context;
use dsh_netproxy::{
    Answer, AnswerFuture, Asker, DomainPolicy, LazyProxy, Owner, Question, Refusal,
};
use dsh_session::{CallId, SessionId};
use dsh_tools::{ApprovalOutcome, ApprovalRequest, Approver, ToolEffects};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The proxy, started by the first confined command that needs it.
#[derive(Debug)]
pub(crate) struct NetProxy(pub(crate) LazyProxy);

fn owner(session: Option<&str>, call: Option<&str>) -> Owner {
    Owner {
        session: session.map(str::to_owned),
        call: call.map(str::to_owned),
    }
}

impl NetworkProxy for NetProxy {
    fn enlist(&self, who: ProxyOwner<'_>) -> Result<ProxyEndpoint, String> {
        let proxy = self.0.get()?;
        Ok(ProxyEndpoint {
            port: proxy.port(),
            url: proxy.url_for(&owner(who.session, who.call)),
        })
    }

    fn take_blocked(&self, session: &str, call: &str) -> Vec<BlockedHost> {
        // A proxy that never started refused nothing.
        let Some(proxy) = self.0.running() else {
            return Vec::new();
        };
        proxy
            .take_blocked(&owner(Some(session), Some(call)))
            .into_iter()
            .map(|b| BlockedHost {
                host: b.host().to_owned(),
                port: b.port,
                line: b.to_string(),
            })
            .collect()
    }
}

/// The configured lists, as the guard consults them for tools that connect themselves.
#[derive(Debug)]
pub(crate) struct ListedHosts(pub(crate) DomainPolicy);

impl HostPolicy for ListedHosts {
    fn refusal(&self, host: &str) -> Option<HostRefusal> {
        Refusal::of(host, &self.0.decide(host)).map(|r| HostRefusal {
            reason: r.reason(),
            denied: !r.askable(),
        })
    }
}

/// How long the approver has to settle after its question is withdrawn at the timeout.
const WITHDRAW_GRACE: Duration = Duration::from_secs(2);

/// Asks the person of the command's session, through the front end's approver, when the
/// session's approval policy is `ask`; under `never` and `auto` (and with nobody to ask: a
/// headless run, a subagent the chat cannot route) the host stays blocked.
#[derive(Debug)]
pub(crate) struct AskThePerson {
    pub(crate) ctx: Context,
    /// The configured (or the front end's default) policy.
    pub(crate) approval: ApprovalPolicy,
    /// A session's own policy (an editor's mode) wins.
    pub(crate) policies: Arc<SessionPolicies>,
    /// The composition's runtime: the approver runs there (the proxy has a thread and
    /// runtime of its own, which a front end's approver must not depend on).
    pub(crate) runtime: Option<tokio::runtime::Handle>,
}

impl Asker for AskThePerson {
    fn ask(&self, question: Question) -> AnswerFuture {
        let session = SessionId::new(question.session.as_str());
        let policy = self.policies.get(&session).unwrap_or(self.approval);
        if policy != ApprovalPolicy::Ask {
            let note = format!("nobody is asked under the approval policy `{policy}`");
            return Box::pin(std::future::ready(Answer::Deny(note)));
        }
        let Some(approver) = self.ctx.get::<dyn Approver>() else {
            return Box::pin(std::future::ready(Answer::Deny(
                "nobody could be asked".into(),
            )));
        };
        let host = question.refusal.host().to_owned();
        let cancel = CancellationToken::new();
        let request = ApprovalRequest {
            agent_id: session,
            // One name per host: a front end that remembers "allow for this session" by tool
            // name then remembers this host, not the whole network.
            tool_name: format!("network access to {host}"),
            reason: Some(format!(
                "a command wants to reach {host}:{}, which is {}. Allow once lets this call's \
                 commands reach it; for this session adds it to the session's allow-list.",
                question.port,
                question.refusal.reason()
            )),
            call_id: CallId::new(format!("dsh-network-{host}")),
            arguments: Arc::new(json!({ "host": host, "port": question.port })),
            effects: ToolEffects::none().reaches(host),
            cancel: cancel.clone(),
        };
        let asking = async move { approver.request(request).await };
        let mut task = match &self.runtime {
            Some(runtime) => runtime.spawn(asking),
            None => tokio::spawn(asking),
        };
        let timeout = question.timeout;
        Box::pin(async move {
            let outcome = tokio::select! {
                outcome = &mut task => outcome.unwrap_or(ApprovalOutcome::Unavailable),
                () = tokio::time::sleep(timeout) => {
                    // Withdrawn, so the card goes and the approver is free for the next one.
                    cancel.cancel();
                    let _ = tokio::time::timeout(WITHDRAW_GRACE, task).await;
                    return Answer::Deny(format!(
                        "nobody answered within {} s",
                        timeout.as_secs()
                    ));
                }
            };
            match outcome {
                ApprovalOutcome::AllowedOnce => Answer::Once,
                ApprovalOutcome::AllowedForSession => Answer::Session,
                ApprovalOutcome::Rejected => Answer::Deny("the user refused it".into()),
                ApprovalOutcome::Cancelled => Answer::Deny("the question was withdrawn".into()),
                ApprovalOutcome::Unavailable => Answer::Deny("nobody could be asked".into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use async_trait::async_trait;

    /// Never answers on its own; says when its question was withdrawn.
    struct Silent(tokio::sync::mpsc::UnboundedSender<&'static str>);

    #[async_trait]
    impl Approver for Silent {
        async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome {
            let _ = self.0.send("asked");
            request.cancel.cancelled().await;
            let _ = self.0.send("withdrawn");
            ApprovalOutcome::Cancelled
        }
    }

    struct Says(ApprovalOutcome);

    #[async_trait]
    impl Approver for Says {
        async fn request(&self, _: ApprovalRequest) -> ApprovalOutcome {
            self.0
        }
    }

    fn asker(ctx: &Context, approval: ApprovalPolicy) -> AskThePerson {
        AskThePerson {
            ctx: ctx.clone(),
            approval,
            policies: Arc::default(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    fn question(timeout: Duration) -> Question {
        Question {
            session: "s1".into(),
            call: Some("c1".into()),
            port: 443,
            refusal: Refusal::NotListed {
                host: "new.example".into(),
            },
            timeout,
        }
    }

    #[tokio::test]
    async fn an_unanswered_question_is_withdrawn_at_its_timeout_and_refuses() {
        let ctx = Context::new();
        let (tx, mut said) = tokio::sync::mpsc::unbounded_channel();
        ctx.provide::<dyn Approver>(Arc::new(Silent(tx))).unwrap();
        let answer = dsh_testkit::bounded(
            asker(&ctx, ApprovalPolicy::Ask).ask(question(Duration::from_millis(50))),
        )
        .await;
        assert_eq!(answer, Answer::Deny("nobody answered within 0 s".into()));
        assert_eq!(said.recv().await, Some("asked"));
        assert_eq!(said.recv().await, Some("withdrawn"));
    }

    #[tokio::test]
    async fn the_person_s_answers_map_to_once_session_and_refusal() {
        for (outcome, expected) in [
            (ApprovalOutcome::AllowedOnce, Answer::Once),
            (ApprovalOutcome::AllowedForSession, Answer::Session),
            (
                ApprovalOutcome::Rejected,
                Answer::Deny("the user refused it".into()),
            ),
        ] {
            let ctx = Context::new();
            ctx.provide::<dyn Approver>(Arc::new(Says(outcome)))
                .unwrap();
            let answer = asker(&ctx, ApprovalPolicy::Ask)
                .ask(question(Duration::from_secs(5)))
                .await;
            assert_eq!(answer, expected);
        }
    }

    #[tokio::test]
    async fn never_auto_and_a_missing_approver_refuse_without_asking() {
        let ctx = Context::new();
        let answer = asker(&ctx, ApprovalPolicy::Ask)
            .ask(question(Duration::from_secs(5)))
            .await;
        assert_eq!(answer, Answer::Deny("nobody could be asked".into()));
        ctx.provide::<dyn Approver>(Arc::new(Says(ApprovalOutcome::AllowedOnce)))
            .unwrap();
        for policy in [ApprovalPolicy::Never, ApprovalPolicy::Auto] {
            let answer = asker(&ctx, policy)
                .ask(question(Duration::from_secs(5)))
                .await;
            assert!(matches!(answer, Answer::Deny(_)), "{policy}: {answer:?}");
        }
        // A session's own policy (an editor's mode) wins over the configured one.
        let mut open = asker(&ctx, ApprovalPolicy::Never);
        let policies = Arc::new(SessionPolicies::default());
        policies.set(&SessionId::new("s1"), Some(ApprovalPolicy::Ask));
        open.policies = policies;
        let answer = open.ask(question(Duration::from_secs(5))).await;
        assert_eq!(answer, Answer::Once);
    }
}
