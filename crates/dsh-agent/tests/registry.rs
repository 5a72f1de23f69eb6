//! Registry, factory and initiator invariants (INV-REG, INV-FAC seam, G2–G5).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_agent::events::{AgentCreated, AgentDisposed};
use dsh_agent::*;
use dsh_session::*;
use futures::FutureExt;
use parking_lot::Mutex;

type Log = Arc<Mutex<Vec<String>>>;

fn lifecycle(w: &World) -> Log {
    let log: Log = Arc::default();
    let l = log.clone();
    let _ = w
        .ctx
        .on::<AgentCreated>(move |a| l.lock().push(format!("created:{}", a.id())))
        .unwrap();
    let l = log.clone();
    let _ = w
        .ctx
        .on::<AgentDisposed>(move |a| l.lock().push(format!("disposed:{}", a.id())))
        .unwrap();
    log
}

fn unpublished(w: &World, id: &str) -> Arc<TestAgent> {
    let s = w
        .store
        .prepare(Some(id.into()), SessionMeta::default(), None)
        .unwrap();
    test_agent(&w.ctx, s)
}

#[tokio::test]
async fn register_get_list_and_dispose_pair_lifecycle_edges() {
    let w = world();
    let log = lifecycle(&w);
    let owner = w.ctx.child("owner").unwrap();
    let a: AgentRef = unpublished(&w, "a");
    let _reg = w.registry.register(&owner, a.clone()).unwrap();
    assert!(same_agent(&w.registry.get(&"a".into()).unwrap(), &a));
    assert_eq!(w.registry.list().len(), 1);
    assert_eq!(w.registry.roots().len(), 1);
    let dup: AgentRef = unpublished(&w, "a");
    let err = w.registry.register(&owner, dup).unwrap_err();
    assert_eq!(err.to_string(), "agent \"a\" is already registered");
    owner.scope().dispose().await;
    assert!(w.registry.get(&"a".into()).is_none());
    assert_eq!(*log.lock(), ["created:a", "disposed:a"]);
}

#[test]
fn agent_id_must_equal_session_id() {
    struct Liar(Arc<TestAgent>, SessionId);
    impl Agent for Liar {
        fn id(&self) -> &SessionId {
            &self.1
        }
        fn session(&self) -> &Arc<Session> {
            self.0.session()
        }
        fn status(&self) -> AgentStatus {
            AgentStatus::Idle
        }
        fn options(&self) -> &AgentOptions {
            self.0.options()
        }
        fn ctx(&self) -> &dsh_kernel::Context {
            self.0.ctx()
        }
        fn inbox(&self) -> &Inbox {
            self.0.inbox()
        }
        fn send(&self, m: Message, t: InboxTarget, w: bool) -> Result<MessageId, AgentError> {
            self.0.send(m, t, w)
        }
        fn cancel(&self, c: CancelCause, o: CancelOptions) {
            self.0.cancel(c, o)
        }
        fn when_idle(&self) -> futures::future::BoxFuture<'static, ()> {
            self.0.when_idle()
        }
    }
    let w = world();
    let liar: AgentRef = Arc::new(Liar(unpublished(&w, "real"), "fake".into()));
    assert!(matches!(
        w.registry.enter(liar, None),
        Err(AgentError::IdMismatch { .. })
    ));
}

#[test]
fn stale_detach_cannot_remove_a_later_agent_with_the_same_id() {
    let w = world();
    let first: AgentRef = unpublished(&w, "x");
    let stale = w.registry.enter(first, None).unwrap();
    stale.detach();
    let second: AgentRef = unpublished(&w, "x");
    let _live = w.registry.enter(second.clone(), None).unwrap();
    stale.detach();
    assert!(same_agent(&w.registry.get(&"x".into()).unwrap(), &second));
}

#[test]
fn entered_but_unannounced_agents_emit_no_lifecycle_edges() {
    let w = world();
    let log = lifecycle(&w);
    let a: AgentRef = unpublished(&w, "quiet");
    w.registry.enter(a, None).unwrap().detach();
    assert!(log.lock().is_empty());
}

#[test]
fn a_synchronous_created_veto_rolls_back_with_paired_edges() {
    let w = world();
    let log = lifecycle(&w);
    let _ = w
        .ctx
        .on_fallible::<AgentCreated>(|_| Err("veto".into()))
        .unwrap();
    let a: AgentRef = unpublished(&w, "v");
    let err = w.registry.register(&w.ctx, a).unwrap_err();
    assert!(matches!(err, AgentError::CreatedVetoed { .. }));
    assert_eq!(*log.lock(), ["created:v", "disposed:v"]);
    assert!(w.registry.get(&"v".into()).is_none());
}

#[test]
fn a_detach_requested_by_a_creation_listener_waits_for_the_dispatch() {
    let w = world();
    let log: Log = Arc::default();
    let slot: Arc<Mutex<Option<AgentDetach>>> = Arc::default();
    let (s, l, r) = (slot.clone(), log.clone(), w.registry.clone());
    let _ = w
        .ctx
        .on::<AgentCreated>(move |a| {
            l.lock().push("first".into());
            if let Some(d) = s.lock().take() {
                d.detach();
            }
            l.lock()
                .push(format!("after-detach(live={})", r.get(a.id()).is_some()));
        })
        .unwrap();
    let l = log.clone();
    let _ = w
        .ctx
        .on::<AgentCreated>(move |_| l.lock().push("second".into()))
        .unwrap();
    let l = log.clone();
    let _ = w
        .ctx
        .on::<AgentDisposed>(move |_| l.lock().push("disposed".into()))
        .unwrap();
    let a: AgentRef = unpublished(&w, "d");
    *slot.lock() = Some(w.registry.enter(a.clone(), None).unwrap());
    w.registry.announce(&a).unwrap();
    assert_eq!(
        *log.lock(),
        ["first", "after-detach(live=true)", "second", "disposed"]
    );
}

#[test]
fn announce_requires_the_exact_live_entry_once() {
    let w = world();
    let a: AgentRef = unpublished(&w, "a");
    assert!(matches!(
        w.registry.announce(&a),
        Err(AgentError::NotLive { .. })
    ));
    let _d = w.registry.enter(a.clone(), None).unwrap();
    w.registry.announce(&a).unwrap();
    assert!(matches!(
        w.registry.announce(&a),
        Err(AgentError::AlreadyAnnounced { .. })
    ));
}

fn factory(w: &World) -> Arc<TestFactory> {
    Arc::new(TestFactory {
        root: w.ctx.clone(),
        store: w.store.clone(),
        registry: w.registry.clone(),
        owners: Mutex::new(Vec::new()),
    })
}

#[tokio::test]
async fn create_without_a_factory_is_a_clear_error() {
    let w = world();
    let err = w
        .registry
        .create(&w.ctx, CreateAgentOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no agent factory registered (load an agent-loop plugin)"
    );
}

#[tokio::test]
async fn a_second_factory_is_refused_and_the_slot_clears_with_its_provider() {
    let w = world();
    let provider = w.ctx.child("loop").unwrap();
    let _r = w.registry.set_factory(&provider, factory(&w)).unwrap();
    assert!(matches!(
        w.registry.set_factory(&w.ctx, factory(&w)),
        Err(AgentError::FactoryExists)
    ));
    provider.scope().dispose().await;
    assert!(matches!(
        w.registry
            .create(&w.ctx, CreateAgentOptions::default())
            .await,
        Err(AgentError::NoFactory)
    ));
    let _r = w.registry.set_factory(&w.ctx, factory(&w)).unwrap();
}

#[tokio::test]
async fn agents_created_through_an_agents_context_are_its_children() {
    let w = world();
    let f = factory(&w);
    let _r = w.registry.set_factory(&w.ctx, f.clone()).unwrap();
    let parent = w
        .registry
        .create(
            &w.ctx,
            CreateAgentOptions {
                session_id: Some("parent".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let child = w
        .registry
        .create(
            parent.agent().ctx(),
            CreateAgentOptions {
                session_id: Some("child".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(*f.owners.lock(), [None, Some("parent".into())]);
    assert_eq!(w.registry.list().len(), 2);
    let roots: Vec<String> = w
        .registry
        .roots()
        .iter()
        .map(|a| a.id().to_string())
        .collect();
    assert_eq!(roots, ["parent"]);
    assert!(w.registry.is_owned_by(&"child".into(), parent.agent()));
    assert!(!w.registry.is_owned_by(&"parent".into(), child.agent()));
    assert_eq!(w.registry.children_of(parent.agent()).len(), 1);
    child.dispose().await;
    parent.dispose().await;
    assert!(w.registry.list().is_empty());
}

#[tokio::test]
async fn a_registry_observer_holding_only_a_bare_agent_cannot_tear_it_down() {
    let w = world();
    let _r = w.registry.set_factory(&w.ctx, factory(&w)).unwrap();
    let handle = w
        .registry
        .create(
            &w.ctx,
            CreateAgentOptions {
                session_id: Some("owned".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // All an observer gets is an `AgentRef`: it can cancel work, but the type offers no
    // teardown, so the agent stays registered and its session stays live.
    let bare = w.registry.get(&"owned".into()).unwrap();
    bare.cancel(CancelCause::User, CancelOptions::default());
    drop(bare);
    assert!(w.registry.get(&"owned".into()).is_some());
    assert!(w.store.get(&"owned".into()).is_some());
    // The handle's dispose is memoized across clones and reaches quiescence once.
    let clone = handle.clone();
    futures::join!(handle.dispose(), clone.dispose());
    assert!(w.registry.get(&"owned".into()).is_none());
    assert!(w.store.get(&"owned".into()).is_none());
    handle.dispose().await;
}

#[tokio::test]
async fn setup_runs_unpublished_with_the_agents_scoped_context() {
    let w = world();
    let _r = w.registry.set_factory(&w.ctx, factory(&w)).unwrap();
    let seen: Arc<Mutex<Option<(bool, bool)>>> = Arc::default();
    let (s, r) = (seen.clone(), w.registry.clone());
    let handle = w
        .registry
        .create(
            &w.ctx,
            CreateAgentOptions {
                session_id: Some("s".into()),
                setup: Some(Box::new(move |ctx| {
                    async move {
                        let is_agent_ctx = agent_of(&ctx).is_some_and(|a| a.id() == "s");
                        *s.lock() = Some((is_agent_ctx, r.get(&"s".into()).is_some()));
                        Ok(None)
                    }
                    .boxed()
                })),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(*seen.lock(), Some((true, false)));
    handle.dispose().await;
}

#[tokio::test]
async fn initiator_is_absent_outside_boundaries_and_isolated_between_them() {
    let w = world();
    let init = w.registry.initiator();
    assert!(init.current().unwrap().is_none());
    assert_eq!(
        init.require().unwrap_err().to_string(),
        "no initiating agent is active"
    );
    let a: AgentRef = unpublished(&w, "a");
    let b: AgentRef = unpublished(&w, "b");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let ra = w.registry.clone();
    let fa = init
        .scope(Some(a.clone()), async move {
            rx.await.unwrap();
            ra.initiator().require().unwrap().id().to_string()
        })
        .unwrap();
    let rb = w.registry.clone();
    let fb = init
        .scope(Some(b.clone()), async move {
            let outer = rb.initiator().require().unwrap().id().to_string();
            let hidden = rb
                .initiator()
                .scope(None, async { rb.initiator().current().unwrap().is_none() });
            let hidden = hidden.unwrap().await;
            let restored = rb.initiator().require().unwrap().id().to_string();
            tx.send(()).unwrap();
            (outer, hidden, restored)
        })
        .unwrap();
    let (ra, rb) = futures::join!(fa, fb);
    assert_eq!(ra, "a");
    assert_eq!(rb, ("b".to_owned(), true, "b".to_owned()));
    let sync = init.scope_sync(Some(a.clone()), || init.require().unwrap().id().to_string());
    assert_eq!(sync.unwrap(), "a");
}

#[tokio::test]
async fn closing_the_initiator_rejects_new_boundaries_and_drains_active_ones() {
    let w = world();
    let a: AgentRef = unpublished(&w, "a");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let active = w.registry.initiator().scope(Some(a.clone()), rx).unwrap();
    let active = tokio::spawn(active);
    let registry = w.registry.clone();
    let closing = tokio::spawn(async move { registry.initiator().close().await });
    tokio::task::yield_now().await;
    assert!(matches!(
        w.registry.initiator().scope(Some(a.clone()), async {}),
        Err(AgentError::InitiatorDisposed)
    ));
    assert!(!closing.is_finished());
    tx.send(()).unwrap();
    active.await.unwrap().unwrap();
    closing.await.unwrap();
    assert!(matches!(
        w.registry.initiator().current(),
        Err(AgentError::InitiatorDisposed)
    ));
}

#[tokio::test]
async fn a_boundary_that_closes_the_initiator_does_not_wait_for_itself() {
    let w = world();
    let a: AgentRef = unpublished(&w, "a");
    let registry = w.registry.clone();
    let boundary = w
        .registry
        .initiator()
        .scope(Some(a), async move {
            registry.initiator().close().await;
            "closed from inside"
        })
        .unwrap();
    // Waiting for itself would deadlock: the bound turns that into a failure.
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(60), boundary)
        .await
        .expect("a boundary closing the initiator waited for itself");
    assert_eq!(outcome, "closed from inside");
    assert!(
        matches!(
            w.registry.initiator().current(),
            Err(AgentError::InitiatorDisposed)
        ),
        "the initiator is closed"
    );
}
