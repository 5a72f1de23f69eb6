//! Scope, service and plugin lifecycle invariants (INV-SCOPE-1, INV-SCOPE-2).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

use std::sync::Arc;

use dsh_kernel::{BoxError, Context, KernelError, Notification, Plugin, ScopeTag, ScopedRegistry};
use parking_lot::Mutex;

struct Ping;
impl Notification for Ping {
    const NAME: &'static str = "test/ping";
    type Payload = u32;
}

trait Greeter: Send + Sync {
    fn greet(&self) -> String;
}

struct English;
impl Greeter for English {
    fn greet(&self) -> String {
        "hello".into()
    }
}

/// Provides a service, a listener and a registry entry; fails on demand after registering.
#[derive(Clone)]
struct Sample {
    seen: Arc<Mutex<Vec<u32>>>,
    registry: Arc<ScopedRegistry<&'static str>>,
    fail: bool,
}

impl Plugin for Sample {
    fn name(&self) -> &str {
        "sample"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        ctx.provide::<dyn Greeter>(Arc::new(English))?;
        let seen = self.seen.clone();
        let _ = ctx.on::<Ping>(move |n| seen.lock().push(*n))?;
        let _ = self.registry.register(ctx, "tool", "sample-tool")?;
        if self.fail {
            return Err("apply failed on purpose".into());
        }
        Ok(())
    }
}

fn sample(fail: bool) -> Sample {
    Sample {
        seen: Arc::default(),
        registry: ScopedRegistry::new(),
        fail,
    }
}

#[tokio::test]
async fn plugin_unmount_then_remount_restores_a_working_plugin_without_stale_registrations() {
    let ctx = Context::new();
    let plugin = sample(false);

    let handle = ctx.plugin(plugin.clone()).await.unwrap();
    assert_eq!(ctx.require::<dyn Greeter>().unwrap().greet(), "hello");
    ctx.emit::<Ping>(&1);
    handle.dispose().await;

    assert!(ctx.get::<dyn Greeter>().is_none());
    assert!(plugin.registry.visible(None).is_empty());
    ctx.emit::<Ping>(&2);

    let handle = ctx.plugin(plugin.clone()).await.unwrap();
    ctx.emit::<Ping>(&3);
    assert_eq!(ctx.require::<dyn Greeter>().unwrap().greet(), "hello");
    assert_eq!(plugin.registry.visible(None).len(), 1);
    // One listener per mount: 3 is seen once, 2 not at all.
    assert_eq!(*plugin.seen.lock(), [1, 3]);
    handle.dispose().await;
}

#[tokio::test]
async fn failing_plugin_apply_rolls_back_everything_it_registered() {
    let ctx = Context::new();
    let plugin = sample(true);
    let err = ctx.plugin(plugin.clone()).await.unwrap_err();
    assert!(matches!(err, KernelError::PluginApply { ref plugin, .. } if plugin == "sample"));
    assert!(ctx.get::<dyn Greeter>().is_none());
    assert!(plugin.registry.visible(None).is_empty());
    ctx.emit::<Ping>(&9);
    assert!(plugin.seen.lock().is_empty());
    // Nothing is left over that would block a corrected mount.
    ctx.plugin(sample(false)).await.unwrap();
}

#[tokio::test]
async fn registration_through_a_disposed_context_fails() {
    let root = Context::new();
    let child = root.child("short-lived").unwrap();
    child.scope().dispose().await;
    assert!(matches!(
        child.on::<Ping>(|_| {}),
        Err(KernelError::ScopeDisposed { .. })
    ));
    assert!(matches!(
        child.provide::<dyn Greeter>(Arc::new(English)),
        Err(KernelError::ScopeDisposed { .. })
    ));
    let registry = ScopedRegistry::<u8>::new();
    assert!(registry.register(&child, "x", 1).is_err());
    assert!(registry.visible(None).is_empty());
}

#[tokio::test]
async fn services_are_typed_unique_and_withdrawn_with_their_scope() {
    let root = Context::new();
    let provider = root.child("provider").unwrap();
    provider.provide::<dyn Greeter>(Arc::new(English)).unwrap();
    assert!(matches!(
        root.provide::<dyn Greeter>(Arc::new(English)),
        Err(KernelError::ServiceAlreadyProvided { .. })
    ));
    provider.scope().dispose().await;
    let err = root.require::<dyn Greeter>().err().unwrap();
    assert!(err.to_string().contains("Greeter"), "{err}");
    // A later provider is unaffected by the earlier provider's (already run) withdrawal.
    root.provide::<dyn Greeter>(Arc::new(English)).unwrap();
    provider.scope().dispose().await;
    assert!(root.get::<dyn Greeter>().is_some());
}

#[tokio::test]
async fn disposing_a_tagged_scope_removes_only_its_scoped_registrations() {
    let root = Context::new();
    let registry = ScopedRegistry::<&'static str>::new();
    let _ = registry.register(&root, "read", "global-read").unwrap();
    let agent_tag = ScopeTag::new("agent-a");
    let agent = root.tagged_child("agent-a", agent_tag.clone()).unwrap();
    let _ = registry.register(&agent, "read", "agent-read").unwrap();
    let _ = registry.register(&agent, "secret", "agent-only").unwrap();
    let other = ScopeTag::new("agent-b");

    assert_eq!(registry.get(Some(&agent_tag), "read"), Some("agent-read"));
    assert_eq!(registry.get(Some(&other), "read"), Some("global-read"));
    assert_eq!(registry.get(Some(&other), "secret"), None);
    assert_eq!(
        registry.visible(Some(&agent_tag)),
        [
            ("read".into(), "agent-read"),
            ("secret".into(), "agent-only")
        ]
    );

    agent.scope().dispose().await;
    assert_eq!(
        registry.visible(Some(&agent_tag)),
        [("read".into(), "global-read")]
    );
    assert_eq!(registry.scoped_layer_count(), 0);
}

#[tokio::test]
async fn child_scope_layers_inherit_from_ancestors_with_nearer_shadowing() {
    let registry = ScopedRegistry::<u8>::new();
    let parent = ScopeTag::new("parent");
    let child = ScopeTag::child_of(&parent, "child");
    registry.insert(None, "a", 0).unwrap();
    registry.insert(Some(&parent), "a", 1).unwrap();
    registry.insert(Some(&parent), "b", 1).unwrap();
    let id = registry.insert(Some(&child), "b", 2).unwrap();
    assert_eq!(
        registry.visible(Some(&child)),
        [("a".into(), 1), ("b".into(), 2)]
    );
    assert!(matches!(
        registry.insert(Some(&child), "b", 3),
        Err(KernelError::DuplicateName { .. })
    ));
    assert!(registry.remove(id));
    assert!(!registry.remove(id), "stale ids remove nothing");
    assert_eq!(
        registry.visible(Some(&child)),
        [("a".into(), 1), ("b".into(), 1)]
    );
}

#[tokio::test]
async fn context_locals_are_inherited_by_derived_contexts() {
    let root = Context::new();
    let with = root.with_local(Arc::new(42u32));
    let child = with.child("c").unwrap();
    assert_eq!(child.local::<u32>().as_deref(), Some(&42));
    assert!(root.local::<u32>().is_none());
}
