//! Event dispatch invariants (INV-EVT, INV-SCOPE-3).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use dsh_kernel::{BoxError, Context, Next, Notification, Parallel, ScopeTag, Serial, Waterfall};
use futures::FutureExt;
use parking_lot::Mutex;

struct Ping;
impl Notification for Ping {
    const NAME: &'static str = "test/ping";
    type Payload = String;
}

struct Step;
impl Serial for Step {
    const NAME: &'static str = "test/step";
    type Payload = u32;
}

struct Flush;
impl Parallel for Flush {
    const NAME: &'static str = "test/flush";
    type Payload = ();
}

struct Decide;
impl Waterfall for Decide {
    const NAME: &'static str = "test/decide";
    type Payload = Vec<String>;
    type Output = Vec<String>;
}

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn push(log: &Log, s: impl Into<String>) {
    log.lock().push(s.into());
}

#[test]
fn panicking_emit_listener_does_not_stop_the_next_listener() {
    let ctx = Context::new();
    let out = log();
    let _ = ctx
        .on::<Ping>(|_| panic!("first listener explodes"))
        .unwrap();
    let o = out.clone();
    let _ = ctx.on::<Ping>(move |p| push(&o, p.clone())).unwrap();
    ctx.emit::<Ping>(&"hello".to_owned());
    assert_eq!(*out.lock(), ["hello"]);
}

#[test]
fn failing_emit_listener_is_contained_but_try_emit_treats_it_as_a_veto() {
    let ctx = Context::new();
    let out = log();
    let o = out.clone();
    let _ = ctx.on::<Ping>(move |_| push(&o, "first")).unwrap();
    let _ = ctx
        .on_fallible::<Ping>(|_| Err::<(), BoxError>("nope".into()))
        .unwrap();
    let o = out.clone();
    let _ = ctx.on::<Ping>(move |_| push(&o, "third")).unwrap();

    ctx.emit::<Ping>(&String::new());
    assert_eq!(*out.lock(), ["first", "third"]);

    out.lock().clear();
    let err = ctx.try_emit::<Ping>(&String::new()).unwrap_err();
    assert_eq!(err.to_string(), "nope");
    assert_eq!(*out.lock(), ["first"], "listeners after the veto never run");
}

#[test]
fn scoped_listener_never_sees_another_scopes_events() {
    let root = Context::new();
    let a_tag = ScopeTag::new("a");
    let b_tag = ScopeTag::new("b");
    let a = root.tagged_child("a", a_tag.clone()).unwrap();
    let b = root.tagged_child("b", b_tag.clone()).unwrap();
    let out = log();
    let o = out.clone();
    let _ = a.on::<Ping>(move |p| push(&o, format!("a:{p}"))).unwrap();
    let o = out.clone();
    let _ = root
        .on::<Ping>(move |p| push(&o, format!("global:{p}")))
        .unwrap();

    b.emit::<Ping>(&"from-b".to_owned());
    a.emit::<Ping>(&"from-a".to_owned());
    root.emit::<Ping>(&"untagged".to_owned());
    assert_eq!(
        *out.lock(),
        [
            "global:from-b",
            "a:from-a",
            "global:from-a",
            "global:untagged"
        ]
    );
}

#[test]
fn scoped_listener_hears_events_carried_by_descendants_only() {
    let root = Context::new();
    let parent = ScopeTag::new("parent");
    let child = ScopeTag::child_of(&parent, "child");
    let pctx = root.tagged_child("p", parent.clone()).unwrap();
    let cctx = root.tagged_child("c", child.clone()).unwrap();
    let out = log();
    let o = out.clone();
    let _ = pctx
        .on::<Ping>(move |p| push(&o, format!("parent:{p}")))
        .unwrap();
    let o = out.clone();
    let _ = cctx
        .on::<Ping>(move |p| push(&o, format!("child:{p}")))
        .unwrap();
    cctx.emit::<Ping>(&"up".to_owned());
    pctx.emit::<Ping>(&"down".to_owned());
    assert_eq!(*out.lock(), ["parent:up", "child:up", "parent:down"]);
}

/// Untagged, ancestor-tagged and carrier-tagged listeners are filed apart (so dispatch does not
/// grow with the number of scopes); merged for a dispatch they still run in registration order,
/// and the outermost waterfall listener is still the first registered.
#[tokio::test]
async fn listeners_filed_under_different_tags_run_in_registration_order() {
    let root = Context::new();
    let parent = ScopeTag::new("parent");
    let child = ScopeTag::child_of(&parent, "child");
    let pctx = root.tagged_child("p", parent.clone()).unwrap();
    let cctx = root.tagged_child("c", child.clone()).unwrap();
    let out = log();
    for (n, ctx) in [
        (1, &cctx),
        (2, &root),
        (3, &pctx),
        (4, &cctx),
        (5, &root),
        (6, &pctx),
    ] {
        let o = out.clone();
        let _ = ctx.on::<Ping>(move |_| push(&o, n.to_string())).unwrap();
        let _ = ctx
            .on_waterfall::<Decide, _>(move |mut seen, next| {
                seen.push(n.to_string());
                next.run(seen)
            })
            .unwrap();
    }
    cctx.emit::<Ping>(&String::new());
    assert_eq!(*out.lock(), ["1", "2", "3", "4", "5", "6"]);
    let chain = cctx
        .waterfall::<Decide>(Vec::new(), |seen| async move { Ok(seen) }.boxed())
        .await
        .unwrap();
    assert_eq!(chain, ["1", "2", "3", "4", "5", "6"]);
}

#[test]
fn global_registration_through_a_tagged_context_hears_everything() {
    let root = Context::new();
    let a = root.tagged_child("a", ScopeTag::new("a")).unwrap();
    let b = root.tagged_child("b", ScopeTag::new("b")).unwrap();
    let out = log();
    let o = out.clone();
    let _ = a.on_global::<Ping>(move |p| push(&o, p.clone())).unwrap();
    b.emit::<Ping>(&"b".to_owned());
    assert_eq!(*out.lock(), ["b"]);
}

#[test]
fn listeners_may_reenter_the_bus_without_deadlock() {
    let ctx = Context::new();
    let out = log();
    let inner = ctx.clone();
    let o = out.clone();
    let _ = ctx
        .on::<Ping>(move |p| {
            if p == "outer" {
                let o2 = o.clone();
                let _ = inner
                    .on::<Ping>(move |p| push(&o2, format!("late:{p}")))
                    .unwrap();
                inner.emit::<Ping>(&"inner".to_owned());
            }
            push(&o, p.clone());
        })
        .unwrap();
    ctx.emit::<Ping>(&"outer".to_owned());
    // The late listener joined after the outer dispatch took its snapshot.
    assert_eq!(*out.lock(), ["inner", "late:inner", "outer"]);
}

#[tokio::test]
async fn waterfall_listener_that_does_not_call_next_short_circuits() {
    let ctx = Context::new();
    let out = log();
    let _ = ctx
        .on_waterfall::<Decide, _>(|_, _next| async { Ok(vec!["short".to_owned()]) })
        .unwrap();
    let o = out.clone();
    let _ = ctx
        .on_waterfall::<Decide, _>(move |p, next| {
            push(&o, "inner ran");
            next.run(p)
        })
        .unwrap();
    let o = out.clone();
    let result = ctx
        .waterfall::<Decide>(vec![], move |p| {
            push(&o, "default ran");
            async move { Ok(p) }.boxed()
        })
        .await
        .unwrap();
    assert_eq!(result, ["short"]);
    assert!(out.lock().is_empty());
}

#[tokio::test]
async fn waterfall_outermost_return_is_authoritative_and_next_may_rewrite_the_payload() {
    let ctx = Context::new();
    let _ = ctx
        .on_waterfall::<Decide, _>(|mut p: Vec<String>, next: Next<Decide>| async move {
            p.push("outer-down".into());
            let mut out = next.run(p).await?;
            out.push("outer-up".into());
            Ok(out)
        })
        .unwrap();
    let _ = ctx
        .on_waterfall::<Decide, _>(|mut p: Vec<String>, next: Next<Decide>| async move {
            p.push("inner-down".into());
            next.run(p).await
        })
        .unwrap();
    let result = ctx
        .waterfall::<Decide>(vec!["seed".into()], |mut p| {
            async move {
                p.push("default".into());
                Ok(p)
            }
            .boxed()
        })
        .await
        .unwrap();
    assert_eq!(
        result,
        ["seed", "outer-down", "inner-down", "default", "outer-up"]
    );
}

#[tokio::test]
async fn waterfall_listener_errors_and_panics_propagate_to_the_dispatcher() {
    let ctx = Context::new();
    let reg = ctx
        .on_waterfall::<Decide, _>(|_, _| async { Err::<Vec<String>, BoxError>("bad".into()) })
        .unwrap();
    let err = ctx
        .waterfall::<Decide>(vec![], |p| async move { Ok(p) }.boxed())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "bad");
    reg.dispose().await;
    let _ = ctx
        .on_waterfall::<Decide, _>(|_, _| async { panic!("listener panics") })
        .unwrap();
    let err = ctx
        .waterfall::<Decide>(vec![], |p| async move { Ok(p) }.boxed())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
}

#[tokio::test]
async fn serial_awaits_in_order_and_stops_at_the_first_error() {
    let ctx = Context::new();
    let out = log();
    let o = out.clone();
    let _ = ctx
        .on_serial::<Step, _>(move |n| {
            let o = o.clone();
            async move {
                tokio::task::yield_now().await;
                push(&o, format!("first:{n}"));
                Ok(())
            }
        })
        .unwrap();
    let _ = ctx
        .on_serial::<Step, _>(|_| async { Err::<(), BoxError>("stop".into()) })
        .unwrap();
    let o = out.clone();
    let _ = ctx
        .on_serial::<Step, _>(move |n| {
            push(&o, format!("third:{n}"));
            async { Ok(()) }
        })
        .unwrap();
    let err = ctx.serial::<Step>(7).await.unwrap_err();
    assert_eq!(err.to_string(), "stop");
    assert_eq!(*out.lock(), ["first:7"]);
}

#[tokio::test]
async fn parallel_starts_every_listener_before_awaiting_any() {
    let ctx = Context::new();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..3 {
        let rx = rx.clone();
        let started = started.clone();
        let _ = ctx
            .on_parallel::<Flush, _>(move |()| {
                started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut rx = rx.clone();
                async move {
                    rx.wait_for(|v| *v)
                        .await
                        .map_err(|e| Box::new(e) as BoxError)?;
                    Ok(())
                }
            })
            .unwrap();
    }
    let fut = ctx.parallel::<Flush>(());
    assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 3);
    tx.send(true).unwrap();
    fut.await.unwrap();
}

#[tokio::test]
async fn disposed_registration_stops_delivery() {
    let ctx = Context::new();
    let out = log();
    let o = out.clone();
    let reg = ctx.on::<Ping>(move |p| push(&o, p.clone())).unwrap();
    ctx.emit::<Ping>(&"one".to_owned());
    reg.dispose().await;
    ctx.emit::<Ping>(&"two".to_owned());
    assert_eq!(*out.lock(), ["one"]);
}

/// INV-EVT (serial/parallel): a listener that panics before it returns its future is reported
/// to the dispatcher as an error, like one whose future panics; the panic never unwinds into
/// the dispatching task (for the loop, that task is an agent's driver).
#[tokio::test]
async fn serial_and_parallel_listeners_panicking_before_their_future_are_errors() {
    let ctx = Context::new();
    let _ = ctx
        .on_serial::<Step, _>(|n| {
            assert!(n != 7, "serial listener explodes synchronously");
            async { Ok(()) }
        })
        .unwrap();
    let outcome = AssertUnwindSafe(ctx.serial::<Step>(7)).catch_unwind().await;
    let err = outcome.expect("serial must not unwind").unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");

    let out = log();
    let _ = ctx
        .on_parallel::<Flush, _>(|()| -> futures::future::Ready<Result<(), BoxError>> {
            panic!("parallel listener explodes synchronously")
        })
        .unwrap();
    let o = out.clone();
    let _ = ctx
        .on_parallel::<Flush, _>(move |()| {
            let o = o.clone();
            async move {
                push(&o, "second ran");
                Ok(())
            }
        })
        .unwrap();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| ctx.parallel::<Flush>(())));
    let fut = outcome.expect("parallel must not unwind");
    let err = fut.await.unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
    assert_eq!(*out.lock(), ["second ran"]);
}
