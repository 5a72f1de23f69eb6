//! SessionStore invariants (INV-STORE, INV-SES-6/7).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

use std::sync::Arc;

use dsh_kernel::{Context, ScopeTag};
use dsh_session::*;
use parking_lot::Mutex;

type Log = Arc<Mutex<Vec<String>>>;

fn setup() -> (Context, Arc<SessionStore>, Log) {
    let ctx = Context::new();
    let store = SessionStore::new(&ctx);
    let log: Log = Arc::default();
    let l = log.clone();
    let _ = ctx
        .on::<SessionCreated>(move |s| l.lock().push(format!("created:{}", s.id())))
        .unwrap();
    let l = log.clone();
    let _ = ctx
        .on::<SessionDisposed>(move |s| l.lock().push(format!("disposed:{}", s.id())))
        .unwrap();
    (ctx, store, log)
}

fn user(text: &str) -> EventKind {
    EventKind::UserMessage(Arc::new(Message::user_text(text)))
}

#[test]
fn same_id_preparations_coexist_but_only_one_enters() {
    let (_ctx, store, _) = setup();
    let id = SessionId::new("dup");
    let a = store
        .prepare(Some(id.clone()), SessionMeta::default(), None)
        .unwrap();
    let b = store
        .prepare(Some(id.clone()), SessionMeta::default(), None)
        .unwrap();
    let _detach = store.enter(&a, None).unwrap();
    let err = store.enter(&b, None).err().unwrap();
    assert_eq!(err.to_string(), "session \"dup\" already exists");
    assert!(matches!(
        store.prepare(Some(id), SessionMeta::default(), None),
        Err(SessionError::AlreadyExists { .. })
    ));
}

#[test]
fn entered_but_never_announced_session_emits_no_lifecycle_edges() {
    let (_ctx, store, log) = setup();
    let s = store.prepare(None, SessionMeta::default(), None).unwrap();
    let detach = store.enter(&s, None).unwrap();
    detach.detach();
    assert!(log.lock().is_empty());
    assert!(store.get(s.id()).is_none());
}

#[test]
fn every_announcement_is_paired_with_exactly_one_disposal() {
    let (_ctx, store, log) = setup();
    let s = store
        .prepare(Some("a".into()), SessionMeta::default(), None)
        .unwrap();
    let detach = store.enter(&s, None).unwrap();
    store.announce(&s).unwrap();
    assert!(matches!(
        store.announce(&s),
        Err(SessionError::AlreadyAnnounced { .. })
    ));
    detach.detach();
    detach.detach();
    assert_eq!(*log.lock(), ["created:a", "disposed:a"]);
}

#[test]
fn a_synchronous_created_veto_rolls_back_and_frees_the_id() {
    let (ctx, store, log) = setup();
    let _ = ctx
        .on_fallible::<SessionCreated>(|s| {
            if s.id() == "vetoed" {
                Err("not this one".into())
            } else {
                Ok(())
            }
        })
        .unwrap();
    let s = store
        .prepare(Some("vetoed".into()), SessionMeta::default(), None)
        .unwrap();
    let detach = store.enter(&s, None).unwrap();
    let err = store.announce(&s).unwrap_err();
    assert!(matches!(err, SessionError::CreatedVetoed { .. }));
    detach.detach();
    assert_eq!(*log.lock(), ["created:vetoed", "disposed:vetoed"]);
    assert!(store.get(s.id()).is_none());
    let again = store
        .prepare(Some("vetoed".into()), SessionMeta::default(), None)
        .unwrap();
    let _d = store.enter(&again, None).unwrap();
}

#[test]
fn stale_detach_cannot_remove_a_later_same_id_entry() {
    let (_ctx, store, _) = setup();
    let first = store
        .prepare(Some("x".into()), SessionMeta::default(), None)
        .unwrap();
    let stale = store.enter(&first, None).unwrap();
    stale.detach();
    let second = store
        .prepare(Some("x".into()), SessionMeta::default(), None)
        .unwrap();
    let _live = store.enter(&second, None).unwrap();
    stale.detach();
    assert!(Arc::ptr_eq(&store.get(&"x".into()).unwrap(), &second));
}

#[test]
fn detach_requested_during_created_dispatch_waits_for_it_to_unwind() {
    let (ctx, store, log) = setup();
    let slot: Arc<Mutex<Option<Arc<SessionDetach>>>> = Arc::default();
    let s2 = slot.clone();
    let st = store.clone();
    let l = log.clone();
    let _ = ctx
        .on::<SessionCreated>(move |s| {
            if let Some(d) = s2.lock().take() {
                d.detach();
            }
            l.lock().push(format!(
                "after-detach-still-live:{}",
                st.get(s.id()).is_some()
            ));
        })
        .unwrap();
    let l = log.clone();
    let _ = ctx
        .on::<SessionCreated>(move |_| l.lock().push("second".into()))
        .unwrap();
    let s = store
        .prepare(Some("r".into()), SessionMeta::default(), None)
        .unwrap();
    let detach = Arc::new(store.enter(&s, None).unwrap());
    *slot.lock() = Some(detach.clone());
    store.announce(&s).unwrap();
    assert_eq!(
        *log.lock(),
        [
            "created:r",
            "after-detach-still-live:true",
            "second",
            "disposed:r"
        ]
    );
    assert!(store.get(s.id()).is_none());
}

#[test]
fn session_events_are_published_synchronously_in_append_order() {
    let (ctx, store, _) = setup();
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let s2 = seen.clone();
    let _ = ctx
        .on::<SessionEventFired>(move |n| {
            // The event is already in the log when listeners run.
            assert!(n.session.event(n.event.seq).is_some());
            s2.lock().push(n.event.seq);
        })
        .unwrap();
    let s = store.prepare(None, SessionMeta::default(), None).unwrap();
    s.append(user("before attach")).unwrap();
    let _d = store.enter(&s, None).unwrap();
    for i in 0..3 {
        s.append(user(&format!("m{i}"))).unwrap();
        assert_eq!(seen.lock().last(), Some(&(i + 1)));
    }
    assert_eq!(*seen.lock(), [1, 2, 3]);
}

#[test]
fn reentrant_append_from_a_listener_is_refused_and_contained() {
    let (ctx, store, _) = setup();
    let outcome: Arc<Mutex<Option<String>>> = Arc::default();
    let o = outcome.clone();
    let _ = ctx
        .on::<SessionEventFired>(move |n| {
            if n.event.seq == 0 {
                let err = n.session.append(user("nested")).unwrap_err();
                *o.lock() = Some(err.to_string());
            }
        })
        .unwrap();
    let s = store.prepare(None, SessionMeta::default(), None).unwrap();
    let _d = store.enter(&s, None).unwrap();
    s.append(user("outer")).unwrap();
    assert!(
        outcome
            .lock()
            .as_deref()
            .unwrap()
            .contains("cannot reenter")
    );
    assert_eq!(s.len(), 1);
    s.append(user("later")).unwrap();
}

#[test]
fn a_failing_event_observer_never_fails_the_committed_append() {
    let (ctx, store, _) = setup();
    let _ = ctx
        .on::<SessionEventFired>(|_| panic!("observer explodes"))
        .unwrap();
    let s = store.prepare(None, SessionMeta::default(), None).unwrap();
    let _d = store.enter(&s, None).unwrap();
    s.append(user("x")).unwrap();
    assert_eq!(s.len(), 1);
}

#[test]
fn detach_requested_inside_a_publication_takes_effect_after_it() {
    let (ctx, store, log) = setup();
    let slot: Arc<Mutex<Option<SessionDetach>>> = Arc::default();
    let s2 = slot.clone();
    let l = log.clone();
    let st = store.clone();
    let _ = ctx
        .on::<SessionEventFired>(move |n| {
            if let Some(d) = s2.lock().take() {
                d.detach();
                l.lock()
                    .push(format!("live-during:{}", st.get(n.session.id()).is_some()));
            }
        })
        .unwrap();
    let s = store
        .prepare(Some("p".into()), SessionMeta::default(), None)
        .unwrap();
    let d = store.enter(&s, None).unwrap();
    store.announce(&s).unwrap();
    *slot.lock() = Some(d);
    s.append(user("x")).unwrap();
    assert_eq!(*log.lock(), ["created:p", "live-during:true", "disposed:p"]);
    assert!(!s.is_attached());
}

#[test]
fn scoped_listeners_hear_only_sessions_carried_by_their_tag() {
    let (ctx, store, _) = setup();
    let tag = ScopeTag::new("agent-a");
    let scoped = ctx.tagged_child("agent-a", tag.clone()).unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s2 = seen.clone();
    let _ = scoped
        .on::<SessionEventFired>(move |n| s2.lock().push(n.session.id().to_string()))
        .unwrap();
    let a = store
        .prepare(Some("a".into()), SessionMeta::default(), None)
        .unwrap();
    let b = store
        .prepare(Some("b".into()), SessionMeta::default(), None)
        .unwrap();
    let _da = store.enter(&a, Some(tag)).unwrap();
    let _db = store.enter(&b, Some(ScopeTag::new("agent-b"))).unwrap();
    a.append(user("x")).unwrap();
    b.append(user("y")).unwrap();
    assert_eq!(*seen.lock(), ["a"]);
}

#[tokio::test]
async fn flush_runs_every_listener_and_reports_the_first_failure() {
    let (ctx, store, _) = setup();
    let s = store
        .prepare(Some("f".into()), SessionMeta::default(), None)
        .unwrap();
    assert!(matches!(
        store.flush(&s).await,
        Err(SessionError::NotLive { .. })
    ));
    let d = store.enter(&s, None).unwrap();
    let flushed: Arc<Mutex<u32>> = Arc::default();
    let f = flushed.clone();
    let _ = ctx
        .on_parallel::<SessionFlush, _>(move |_| {
            *f.lock() += 1;
            async { Ok(()) }
        })
        .unwrap();
    store.flush(&s).await.unwrap();
    assert_eq!(*flushed.lock(), 1);
    let _ = ctx
        .on_parallel::<SessionFlush, _>(|_| async { Err("disk full".into()) })
        .unwrap();
    let err = store.flush(&s).await.unwrap_err();
    assert!(matches!(err, SessionError::Flush { .. }));
    d.detach();
    assert!(store.flush(&s).await.is_err());
}

#[test]
fn fork_prepares_a_child_with_lineage() {
    let (_ctx, store, _) = setup();
    let meta = SessionMeta {
        cwd: Some("/work".into()),
        ..SessionMeta::default()
    };
    let parent = store.prepare(Some("parent".into()), meta, None).unwrap();
    parent.append(user("hello")).unwrap();
    let child = store.fork(&parent, None, Some("child".into())).unwrap();
    assert_eq!(child.header().parent_session.as_ref().unwrap(), "parent");
    assert_eq!(child.header().seed_length, Some(1));
    assert_eq!(
        child.header().cwd.as_deref(),
        Some(std::path::Path::new("/work"))
    );
    assert_eq!(child.derive_messages(), parent.derive_messages());
    assert!(matches!(child.events()[1].kind, EventKind::SessionEndSeed));
}
