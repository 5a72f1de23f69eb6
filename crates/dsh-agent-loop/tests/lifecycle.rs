//! Creation and disposal (seed 000 decision 2, DESIGN R5, spec/core.md §8.2–8.3, §10.6).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_agent::events::{AgentCreated, AgentDisposed, AgentSessionStart, AgentStatusChanged};
use dsh_agent::*;
use dsh_kernel::BoxError;
use dsh_prompt::Section;
use dsh_session::*;
use dsh_testkit::{Gate, Script};
use futures::FutureExt;
use parking_lot::Mutex;

type Log = Arc<Mutex<Vec<String>>>;

fn lifecycle_log(h: &H) -> Log {
    let log: Log = Arc::default();
    let l = log.clone();
    let _ = h
        .ctx
        .on::<SessionCreated>(move |s| l.lock().push(format!("session-created:{}", s.id())))
        .unwrap();
    let l = log.clone();
    let _ = h
        .ctx
        .on::<AgentCreated>(move |a| l.lock().push(format!("agent-created:{}", a.id())))
        .unwrap();
    let l = log.clone();
    let _ = h
        .ctx
        .on::<AgentSessionStart>(move |n| l.lock().push(format!("session-start:{}", n.agent.id())))
        .unwrap();
    let (l, store) = (log.clone(), h.core.store.clone());
    let _ = h
        .ctx
        .on::<AgentDisposed>(move |a| {
            l.lock().push(format!(
                "agent-disposed:{}(session-stored={})",
                a.id(),
                store.get(a.id()).is_some()
            ))
        })
        .unwrap();
    let l = log.clone();
    let _ = h
        .ctx
        .on::<SessionDisposed>(move |s| l.lock().push(format!("session-disposed:{}", s.id())))
        .unwrap();
    log
}

fn opts(id: &str) -> CreateAgentOptions {
    CreateAgentOptions {
        session_id: Some(id.into()),
        agent_options: AgentOptions::route("scripted", "m"),
        ..CreateAgentOptions::default()
    }
}

async fn publication_happens_after_setup_in_the_documented_order() {
    let h = harness().await;
    let log = lifecycle_log(&h);
    let (l, registry) = (log.clone(), h.core.registry.clone());
    let mut options = opts("a");
    options.setup = Some(Box::new(move |_ctx| {
        async move {
            l.lock().push(format!(
                "setup(registered={})",
                registry.get(&"a".into()).is_some()
            ));
            let l2 = l.clone();
            Ok(Some(Box::new(move || {
                l2.lock().push("commit".into());
                Ok(())
            }) as Commit))
        }
        .boxed()
    }));
    let handle = h.core.registry.create(&h.ctx, options).await.unwrap();
    assert_eq!(
        *log.lock(),
        [
            "setup(registered=false)",
            "commit",
            "session-created:a",
            "agent-created:a",
            "session-start:a"
        ]
    );
    handle.dispose().await;
}

async fn teardown_order_drains_the_turn_while_the_session_is_still_attached() {
    let h = harness().await;
    h.script(Script::new().hang_until_cancelled());
    let log = lifecycle_log(&h);
    let handle = h.agent().await;
    let a = handle.agent().clone();
    let (l, store) = (log.clone(), h.core.store.clone());
    let _ = h
        .ctx
        .on::<SessionEventFired>(move |n| {
            if n.event.type_name() == "turn/end" {
                l.lock().push(format!(
                    "turn-end(session-stored={})",
                    store.get(n.session.id()).is_some()
                ));
            }
        })
        .unwrap();
    a.followup(Message::user_text("go")).unwrap();
    h.adapter.wait_for_requests(1).await;
    handle.dispose().await;
    let tail: Vec<String> = log.lock().iter().skip(3).cloned().collect();
    assert_eq!(
        tail,
        [
            "turn-end(session-stored=true)",
            "agent-disposed:s(session-stored=true)",
            "session-disposed:s"
        ]
    );
    assert_eq!(turn_ends(&a), [aborted(CancelCause::Disposed)]);
    assert!(h.core.registry.get(&"s".into()).is_none());
    assert!(h.core.store.get(&"s".into()).is_none());
    assert_balanced(&a);
}

async fn disposal_mid_turn_never_starts_the_queued_tail_and_reports_running_then_idle() {
    let h = harness().await;
    h.script(Script::new().hang_until_cancelled());
    let handle = h.agent().await;
    let a = handle.agent().clone();
    a.followup(Message::user_text("one")).unwrap();
    a.followup(Message::user_text("two")).unwrap();
    h.adapter.wait_for_requests(1).await;
    handle.dispose().await;
    assert_eq!(h.adapter.requests().len(), 1);
    assert_eq!(
        h.statuses_of("s"),
        [AgentStatus::Running, AgentStatus::Idle]
    );
    assert_eq!(user_texts(&a), ["one"]);
}

async fn disposal_from_the_running_status_listener_stops_before_turn_start() {
    let h = harness().await;
    let slot: Arc<Mutex<Option<AgentHandle>>> = Arc::default();
    let pending: Arc<Mutex<Option<futures::future::BoxFuture<'static, ()>>>> = Arc::default();
    let (s, p) = (slot.clone(), pending.clone());
    let _ = h
        .ctx
        .on::<AgentStatusChanged>(move |c| {
            if c.status == AgentStatus::Running
                && let Some(handle) = s.lock().take()
            {
                *p.lock() = Some(handle.dispose());
            }
        })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent().clone();
    *slot.lock() = Some(handle);
    a.followup(Message::user_text("go")).unwrap();
    let dispose = pending.lock().take().unwrap();
    dispose.await;
    assert!(!types(&a).contains(&"turn/start".to_owned()));
    assert!(h.adapter.requests().is_empty());
}

async fn a_wake_after_disposal_began_is_not_latched() {
    let h = harness().await;
    h.script(Script::new().hang_until_cancelled());
    h.script(Script::text("never"));
    let handle = h.agent().await;
    let a = handle.agent().clone();
    a.followup(Message::user_text("one")).unwrap();
    h.adapter.wait_for_requests(1).await;
    let disposing = handle.dispose();
    let _ = a.followup(Message::user_text("late"));
    disposing.await;
    assert_eq!(h.adapter.requests().len(), 1);
}

async fn racing_disposers_share_one_boundary_and_the_id_becomes_reusable() {
    let h = harness().await;
    let log = lifecycle_log(&h);
    let owner = h.ctx.child("owner").unwrap();
    let handle = h.core.registry.create(&owner, opts("r")).await.unwrap();
    let h2 = handle.clone();
    // Each disposer returns only once the shared teardown is complete: the agent and its
    // session have left their registries by then.
    let (registry, store) = (h.core.registry.clone(), h.core.store.clone());
    let torn_down = move || registry.get(&"r".into()).is_none() && store.get(&"r".into()).is_none();
    let (t1, t2, t3) = (torn_down.clone(), torn_down.clone(), torn_down.clone());
    let (a, b, c) = bounded(async {
        futures::join!(
            async move {
                handle.dispose().await;
                t1()
            },
            async move {
                h2.dispose().await;
                t2()
            },
            async move {
                owner.scope().dispose().await;
                t3()
            },
        )
    })
    .await;
    assert!(
        a && b && c,
        "a disposer returned before the shared teardown completed"
    );
    let disposed = log
        .lock()
        .iter()
        .filter(|l| l.starts_with("agent-disposed:r"))
        .count();
    assert_eq!(disposed, 1, "exactly one agent/disposed: {:?}", log.lock());
    assert!(h.core.registry.get(&"r".into()).is_none());
    let again = h.core.registry.create(&h.ctx, opts("r")).await.unwrap();
    again.dispose().await;
}

async fn the_owners_scope_disposal_tears_the_agent_down() {
    let h = harness().await;
    let owner = h.ctx.child("owner").unwrap();
    let handle = h.core.registry.create(&owner, opts("owned")).await.unwrap();
    let a = handle.agent().clone();
    owner.scope().dispose().await;
    assert!(h.core.registry.get(&"owned".into()).is_none());
    assert!(h.core.store.get(&"owned".into()).is_none());
    assert!(
        a.ctx().on::<AgentCreated>(|_| {}).is_err(),
        "its context is inactive"
    );
}

async fn handle_disposal_removes_the_owner_effect() {
    let h = harness().await;
    let owner = h.ctx.child("owner").unwrap();
    let handle = h.core.registry.create(&owner, opts("x")).await.unwrap();
    let weak = Arc::downgrade(handle.agent());
    bounded(handle.dispose()).await;
    drop(handle);
    // The owner's deferred teardown held the agent; once the handle disposed it, the owner
    // keeps nothing of it alive.
    assert!(
        weak.upgrade().is_none(),
        "the owner's scope still holds the disposed agent's teardown effect"
    );
    // Creating the same id again under the same owner works, and disposing the owner later
    // touches only the new agent.
    let second = h.core.registry.create(&owner, opts("x")).await.unwrap();
    let a = second.agent().clone();
    owner.scope().dispose().await;
    assert!(h.core.registry.get(a.id()).is_none());
}

async fn concurrent_same_id_creation_publishes_exactly_one() {
    let h = harness().await;
    let (a, b) = futures::join!(
        h.core.registry.create(&h.ctx, opts("same")),
        h.core.registry.create(&h.ctx, opts("same"))
    );
    let (ok, err) = match (a, b) {
        (Ok(ok), Err(err)) | (Err(err), Ok(ok)) => (ok, err),
        other => panic!("expected one winner: {other:?}"),
    };
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(h.core.registry.list().len(), 1);
    ok.dispose().await;
    assert!(h.core.registry.list().is_empty());
    assert!(h.core.store.list().is_empty());
}

async fn a_rejecting_setup_publishes_nothing_and_releases_the_id() {
    let h = harness().await;
    let log = lifecycle_log(&h);
    let mut options = opts("fail");
    options.setup = Some(Box::new(|_| {
        async { Err::<Option<Commit>, BoxError>("no".into()) }.boxed()
    }));
    let err = h.core.registry.create(&h.ctx, options).await.unwrap_err();
    assert!(err.to_string().contains("setup failed"), "{err}");
    assert!(log.lock().is_empty());
    let ok = h.core.registry.create(&h.ctx, opts("fail")).await.unwrap();
    ok.dispose().await;
}

async fn a_throwing_agent_created_listener_rolls_back_with_paired_edges() {
    let h = harness().await;
    let log = lifecycle_log(&h);
    let _ = h
        .ctx
        .on_fallible::<AgentCreated>(|a| {
            if a.id() == "veto" {
                Err("vetoed".into())
            } else {
                Ok(())
            }
        })
        .unwrap();
    assert!(h.core.registry.create(&h.ctx, opts("veto")).await.is_err());
    assert_eq!(
        *log.lock(),
        [
            "session-created:veto",
            "agent-created:veto",
            "agent-disposed:veto(session-stored=true)",
            "session-disposed:veto"
        ]
    );
    assert!(h.core.registry.get(&"veto".into()).is_none());
}

async fn a_throwing_session_created_listener_emits_no_agent_disposal() {
    let h = harness().await;
    let log = lifecycle_log(&h);
    let _ = h
        .ctx
        .on_fallible::<SessionCreated>(|s| {
            if s.id() == "veto" {
                Err("vetoed".into())
            } else {
                Ok(())
            }
        })
        .unwrap();
    assert!(h.core.registry.create(&h.ctx, opts("veto")).await.is_err());
    assert_eq!(
        *log.lock(),
        ["session-created:veto", "session-disposed:veto"]
    );
    h.core
        .registry
        .create(&h.ctx, opts("other"))
        .await
        .unwrap()
        .dispose()
        .await;
}

async fn a_cancelled_creation_token_aborts_setup_but_not_a_returned_handle() {
    let h = harness().await;
    let token = tokio_util::sync::CancellationToken::new();
    token.cancel();
    let mut options = opts("pre");
    options.cancel = Some(token);
    let err = h.core.registry.create(&h.ctx, options).await.unwrap_err();
    assert!(err.to_string().contains("creation aborted"), "{err}");
    assert!(h.core.store.get(&"pre".into()).is_none());

    let token = tokio_util::sync::CancellationToken::new();
    let mut options = opts("live");
    options.cancel = Some(token.clone());
    let handle = h.core.registry.create(&h.ctx, options).await.unwrap();
    token.cancel();
    assert!(h.core.registry.get(&"live".into()).is_some());
    handle.dispose().await;
}

async fn scoped_persona_is_visible_only_to_its_agent_and_gone_after_dispose() {
    let h = harness().await;
    h.script(Script::text("a"));
    h.script(Script::text("b"));
    let mut options = opts("a");
    let prompt = h.core.prompt.clone();
    options.setup = Some(Box::new(move |ctx| {
        async move {
            let _ = prompt.section(
                &ctx,
                Section::new(dsh_prompt::PERSONA_SECTION, 0, "persona of a"),
            )?;
            Ok(None)
        }
        .boxed()
    }));
    let a = h.core.registry.create(&h.ctx, options).await.unwrap();
    let b = h.core.registry.create(&h.ctx, opts("b")).await.unwrap();
    a.agent().followup(Message::user_text("x")).unwrap();
    a.agent().when_idle().await;
    b.agent().followup(Message::user_text("y")).unwrap();
    b.agent().when_idle().await;
    let reqs = h.adapter.requests();
    assert!(reqs[0].system.as_deref().unwrap().contains("persona of a"));
    assert!(
        !reqs[1]
            .system
            .as_deref()
            .unwrap_or("")
            .contains("persona of a")
    );
    a.dispose().await;
    b.dispose().await;
}

async fn agent_scoped_listeners_hear_only_their_own_agent() {
    let h = harness().await;
    h.script(Script::text("a"));
    h.script(Script::text("b"));
    let a = h.agent_named("a").await;
    let b = h.agent_named("b").await;
    let heard: Arc<Mutex<Vec<String>>> = Arc::default();
    let hd = heard.clone();
    let _ = a
        .agent()
        .ctx()
        .on::<SessionEventFired>(move |n| hd.lock().push(n.session.id().to_string()))
        .unwrap();
    a.agent().followup(Message::user_text("x")).unwrap();
    a.agent().when_idle().await;
    b.agent().followup(Message::user_text("y")).unwrap();
    b.agent().when_idle().await;
    assert!(!heard.lock().is_empty());
    assert!(heard.lock().iter().all(|id| id == "a"));
}

async fn loop_unload_disposes_live_agents_and_rejects_later_creation() {
    let h = harness().await;
    h.script(Script::new().hang_until_cancelled());
    let handle = h.agent().await;
    let a = handle.agent().clone();
    a.followup(Message::user_text("go")).unwrap();
    h.adapter.wait_for_requests(1).await;
    h.core.shutdown().await;
    assert!(h.core.registry.list().is_empty());
    assert_eq!(turn_ends(&a), [aborted(CancelCause::Disposed)]);
    let err = h
        .core
        .agent_loop
        .create_agent(&h.ctx, opts("late"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not active"), "{err}");
}

async fn resume_without_persistence_is_a_clear_error() {
    let h = harness().await;
    let err = h
        .core
        .registry
        .resume(&h.ctx, ResumeAgentOptions::new("gone".into()))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot resume: session persistence is not configured"
    );
}

async fn invalid_options_publish_nothing() {
    let h = harness().await;
    let mut options = opts("bad");
    options.agent_options.max_tokens = Some(0);
    let err = h.core.registry.create(&h.ctx, options).await.unwrap_err();
    assert!(err.to_string().contains("maxTokens"));
    let mut options = opts("rel");
    options.meta.cwd = Some("relative/dir".into());
    assert!(h.core.registry.create(&h.ctx, options).await.is_err());
    assert!(h.core.store.list().is_empty());
}

async fn children_created_through_a_parents_context_are_owned_by_it() {
    let h = harness().await;
    let parent = h.agent_named("parent").await;
    let child = h
        .core
        .registry
        .create(parent.agent().ctx(), opts("child"))
        .await
        .unwrap();
    assert!(h.core.registry.is_owned_by(&"child".into(), parent.agent()));
    let roots: Vec<String> = h
        .core
        .registry
        .roots()
        .iter()
        .map(|a| a.id().to_string())
        .collect();
    assert_eq!(roots, ["parent"]);
    // Disposing the parent tears its child down too (its scope owns the child).
    parent.dispose().await;
    assert!(h.core.registry.get(child.agent().id()).is_none());
}

async fn config_declared_agents_start_with_the_loop_and_are_owned_by_it() {
    let config = dsh_agent_loop::CoreConfig {
        loop_config: dsh_agent_loop::LoopConfig {
            agents: vec![
                dsh_agent_loop::ConfiguredAgent {
                    id: "config-agent".into(),
                    provider: Some("scripted".into()),
                    model: Some("m".into()),
                    cwd: Some("/tmp".into()),
                    ..Default::default()
                },
                dsh_agent_loop::ConfiguredAgent {
                    id: "exact".into(),
                    session_id: Some("exact-id".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        },
        ..Default::default()
    };
    let h = harness_with(config).await;
    assert!(
        h.core.registry.list().is_empty(),
        "nothing starts before the composition is done"
    );
    h.core.agent_loop.start_configured().await;
    let ids: Vec<String> = h
        .core
        .registry
        .list()
        .iter()
        .map(|a| a.id().to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids[0].starts_with("config-agent-session-"), "{ids:?}");
    assert_eq!(ids[1], "exact-id");
    let first = h.core.registry.get(&ids[0].as_str().into()).unwrap();
    assert_eq!(
        first.session().header().cwd.as_deref(),
        Some(std::path::Path::new("/tmp"))
    );
    assert_eq!(h.core.registry.roots().len(), 2);
    h.core.shutdown().await;
    assert!(h.core.registry.list().is_empty());
}

async fn config_validation_rejects_conflicting_and_duplicate_identities() {
    use dsh_agent_loop::{ConfiguredAgent, LoopConfig};
    let both = LoopConfig {
        agents: vec![ConfiguredAgent {
            id: "a".into(),
            session_id: Some("x".into()),
            resume_session_id: Some("y".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(
        both.validate()
            .unwrap_err()
            .to_string()
            .contains("mutually exclusive")
    );
    let dup = LoopConfig {
        agents: vec![
            ConfiguredAgent {
                id: "a".into(),
                session_id: Some("x".into()),
                ..Default::default()
            },
            ConfiguredAgent {
                id: "b".into(),
                session_id: Some("x".into()),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    assert!(
        dup.validate()
            .unwrap_err()
            .to_string()
            .contains("duplicate")
    );
}

async fn a_config_agent_that_cannot_resume_is_reported_not_fatal() {
    use dsh_agent_loop::{ConfigStartFailed, ConfiguredAgent, CoreConfig, LoopConfig};
    let ctx = dsh_kernel::Context::new();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let f = failures.clone();
    let _ = ctx
        .on::<ConfigStartFailed>(move |n| f.lock().push(n.error.clone()))
        .unwrap();
    let core = dsh_agent_loop::mount_core(
        &ctx,
        CoreConfig {
            loop_config: LoopConfig {
                agents: vec![ConfiguredAgent {
                    id: "r".into(),
                    resume_session_id: Some("missing".into()),
                    ..Default::default()
                }],
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    core.agent_loop.start_configured().await;
    assert!(core.registry.list().is_empty());
    assert_eq!(failures.lock().len(), 1);
    assert!(
        failures.lock()[0].contains("persistence"),
        "{:?}",
        failures.lock()
    );
}

/// DESIGN §2 (a `turn/start` always gets its `turn/end`): when the registry's initiator scope
/// is closed, a wake may not start driver work; it must then not open a turn it can never
/// close. The prompt stays queued and the agent goes back to idle.
async fn a_wake_refused_by_a_closed_initiator_scope_opens_no_turn() {
    let h = harness().await;
    let handle = h.agent().await;
    let a = handle.agent().clone();
    h.core.registry.initiator().close().await;
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_balanced(&a);
    assert!(!types(&a).contains(&"turn/start".to_owned()));
    assert_eq!(a.inbox().next_turn().len(), 1);
    assert_eq!(a.status(), AgentStatus::Idle);
    assert!(h.adapter.requests().is_empty());
    handle.dispose().await;
}

async fn a_panic_in_the_driver_ends_the_turn_error_returns_to_idle_and_disposal_completes() {
    let h = harness().await;
    h.script(Script::text("never reached"));
    let handle = h.agent().await;
    let a = handle.agent().clone();
    // A session validator is not a contained extension point: its panic unwinds through the
    // driver's run.
    a.session()
        .add_validator(Arc::new(|_: &Session, e: &SessionEvent| {
            if matches!(e.kind, EventKind::StepStart(_)) {
                panic!("validator bug");
            }
            Ok(())
        }));
    a.followup(Message::user_text("go")).unwrap();
    bounded(a.when_idle()).await;
    match &turn_ends(&a)[..] {
        [TurnEndReason::Error { error }] => assert_eq!(error.code.as_str(), "INTERNAL_ERROR"),
        other => panic!("expected one error turn, got {other:?}"),
    }
    assert_eq!(
        h.statuses_of("s"),
        [AgentStatus::Running, AgentStatus::Idle]
    );
    assert_balanced(&a);
    bounded(handle.dispose()).await;
    assert!(h.core.registry.get(a.id()).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_follow_the_phase_order_when_sends_race_the_settle_on_another_thread() {
    for i in 0..200 {
        let h = harness().await;
        h.script(Script::text("one"));
        h.script(Script::text("two"));
        let id = format!("m{i}");
        let handle = h.agent_named(&id).await;
        let a = handle.agent().clone();
        a.followup(Message::user_text("1")).unwrap();
        // The second send runs on the other worker, racing the first run's settle and its
        // `idle`.
        let b = a.clone();
        bounded(tokio::spawn(async move {
            b.followup(Message::user_text("2")).unwrap();
        }))
        .await
        .unwrap();
        bounded(a.when_idle()).await;
        assert_status_order(&h.statuses_of(&id));
        bounded(handle.dispose()).await;
    }
}

async fn shutdown_waits_for_a_resume_still_loading_from_persistence() {
    struct Parked {
        gate: Gate,
        ended: Arc<std::sync::atomic::AtomicBool>,
    }
    struct Ended(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Ended {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    #[async_trait::async_trait]
    impl Persistence for Parked {
        async fn load(&self, id: &SessionId) -> Result<StoredSession, PersistenceError> {
            let _ended = Ended(self.ended.clone());
            self.gate.pass().await;
            Err(PersistenceError::NotFound { id: id.clone() })
        }
        async fn list(&self) -> Result<Vec<SessionHeader>, PersistenceError> {
            Ok(Vec::new())
        }
    }
    let h = harness().await;
    let gate = Gate::new();
    let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    h.ctx
        .provide::<dyn Persistence>(Arc::new(Parked {
            gate: gate.clone(),
            ended: ended.clone(),
        }))
        .unwrap();
    let (registry, ctx) = (h.core.registry.clone(), h.ctx.clone());
    let resume = tokio::spawn(async move {
        registry
            .resume(&ctx, ResumeAgentOptions::new("parked".into()))
            .await
            .map(|_| ())
    });
    bounded(gate.reached()).await;
    bounded(h.core.shutdown()).await;
    assert!(
        ended.load(std::sync::atomic::Ordering::SeqCst),
        "shutdown returned while a resume was still loading"
    );
    let err = bounded(resume).await.unwrap().unwrap_err();
    assert!(err.to_string().contains("shutting down"), "{err}");
    assert!(h.core.registry.get(&"parked".into()).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_racing_two_disposers_never_lands_after_the_session_detached() {
    for i in 0..200 {
        let h = harness().await;
        h.script(Script::text("ok"));
        let id = format!("d{i}");
        let handle = h.agent_named(&id).await;
        let a = handle.agent().clone();
        // The log's length when the session left the store.
        let at_detach: Arc<Mutex<Option<usize>>> = Arc::default();
        let (at, session, sid) = (at_detach.clone(), a.session().clone(), id.clone());
        let _ = h
            .ctx
            .on::<SessionDisposed>(move |s| {
                if s.id().as_str() == sid {
                    *at.lock() = Some(session.events().len());
                }
            })
            .unwrap();
        let (h1, h2) = (handle.clone(), handle.clone());
        let d1 = tokio::spawn(async move { h1.dispose().await });
        let d2 = tokio::spawn(async move { h2.dispose().await });
        let _ = a.followup(Message::user_text("late"));
        bounded(d1).await.unwrap();
        bounded(d2).await.unwrap();
        bounded(a.when_idle()).await;
        let detached_at = at_detach.lock().expect("session/disposed was emitted");
        // A send to a disposed agent may still queue its message; no run may start.
        let late: Vec<String> = types(&a)[detached_at..]
            .iter()
            .filter(|t| !t.starts_with("agent/inbox/"))
            .cloned()
            .collect();
        assert!(
            late.is_empty(),
            "a run logged {late:?} after the session detached"
        );
        assert_balanced(&a);
    }
}

/// Every lifecycle test runs on the current-thread runtime and on a two-worker multi-thread
/// runtime, where wakes, settles and disposers really run in parallel (INV-STAT-1/3).
macro_rules! on_both_runtimes {
    ($($name:ident),* $(,)?) => {
        mod current_thread {
            $(#[tokio::test]
            async fn $name() {
                super::$name().await
            })*
        }
        mod multi_thread {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name().await
            })*
        }
    };
}

on_both_runtimes!(
    shutdown_waits_for_a_resume_still_loading_from_persistence,
    publication_happens_after_setup_in_the_documented_order,
    teardown_order_drains_the_turn_while_the_session_is_still_attached,
    disposal_mid_turn_never_starts_the_queued_tail_and_reports_running_then_idle,
    disposal_from_the_running_status_listener_stops_before_turn_start,
    a_wake_after_disposal_began_is_not_latched,
    racing_disposers_share_one_boundary_and_the_id_becomes_reusable,
    the_owners_scope_disposal_tears_the_agent_down,
    handle_disposal_removes_the_owner_effect,
    concurrent_same_id_creation_publishes_exactly_one,
    a_rejecting_setup_publishes_nothing_and_releases_the_id,
    a_throwing_agent_created_listener_rolls_back_with_paired_edges,
    a_throwing_session_created_listener_emits_no_agent_disposal,
    a_cancelled_creation_token_aborts_setup_but_not_a_returned_handle,
    scoped_persona_is_visible_only_to_its_agent_and_gone_after_dispose,
    agent_scoped_listeners_hear_only_their_own_agent,
    loop_unload_disposes_live_agents_and_rejects_later_creation,
    resume_without_persistence_is_a_clear_error,
    invalid_options_publish_nothing,
    children_created_through_a_parents_context_are_owned_by_it,
    config_declared_agents_start_with_the_loop_and_are_owned_by_it,
    config_validation_rejects_conflicting_and_duplicate_identities,
    a_config_agent_that_cannot_resume_is_reported_not_fatal,
    a_wake_refused_by_a_closed_initiator_scope_opens_no_turn,
    a_panic_in_the_driver_ends_the_turn_error_returns_to_idle_and_disposal_completes,
);
