//! Scoped registries: a global layer plus one layer per scope tag.
//!
//! Tools, prompt sections and prompt variables are registered either globally or for one scope
//! (an agent). A lookup for a tag sees the global layer, then the layers of the tag's ancestors
//! (farthest first), then the tag's own layer; a nearer layer shadows a farther one by name.
//! Another agent's layer is never visible.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::context::{Context, Registration};
use crate::error::KernelError;
use crate::tag::ScopeTag;

struct Entry<V> {
    id: u64,
    name: String,
    value: V,
}

struct Layers<V> {
    global: Vec<Entry<V>>,
    scoped: HashMap<ScopeTag, Vec<Entry<V>>>,
}

/// A registry of named values layered by scope tag.
pub struct ScopedRegistry<V> {
    layers: Mutex<Layers<V>>,
    next: AtomicU64,
}

impl<V> Default for ScopedRegistry<V> {
    fn default() -> Self {
        Self {
            layers: Mutex::new(Layers {
                global: Vec::new(),
                scoped: HashMap::new(),
            }),
            next: AtomicU64::new(0),
        }
    }
}

impl<V: Clone + Send + Sync + 'static> ScopedRegistry<V> {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Inserts `value` under `name` in the layer of `tag` (global for `None`). A name can appear
    /// once per layer. Returns an entry id for [`ScopedRegistry::remove`].
    pub fn insert(
        &self,
        tag: Option<&ScopeTag>,
        name: impl Into<String>,
        value: V,
    ) -> Result<u64, KernelError> {
        let name = name.into();
        let mut layers = self.layers.lock();
        let layer = match tag {
            None => &mut layers.global,
            Some(t) => layers.scoped.entry(t.clone()).or_default(),
        };
        if layer.iter().any(|e| e.name == name) {
            return Err(KernelError::DuplicateName { name });
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        layer.push(Entry { id, name, value });
        Ok(id)
    }

    /// Removes exactly the entry `id`; a stale id never removes a later same-name entry.
    /// Empty scoped layers are reclaimed.
    pub fn remove(&self, id: u64) -> bool {
        let mut layers = self.layers.lock();
        if let Some(pos) = layers.global.iter().position(|e| e.id == id) {
            layers.global.remove(pos);
            return true;
        }
        let mut emptied = None;
        let mut found = false;
        for (tag, layer) in layers.scoped.iter_mut() {
            if let Some(pos) = layer.iter().position(|e| e.id == id) {
                layer.remove(pos);
                found = true;
                if layer.is_empty() {
                    emptied = Some(tag.clone());
                }
                break;
            }
        }
        if let Some(tag) = emptied {
            layers.scoped.remove(&tag);
        }
        found
    }

    /// Registers through `ctx`: into its tag's layer, as an effect of its scope.
    pub fn register(
        self: &Arc<Self>,
        ctx: &Context,
        name: impl Into<String>,
        value: V,
    ) -> Result<Registration, KernelError> {
        if !ctx.is_active() {
            return Err(KernelError::ScopeDisposed {
                scope: ctx.scope().label().to_owned(),
            });
        }
        let id = self.insert(ctx.tag(), name, value)?;
        let this = Arc::clone(self);
        match ctx.scope().defer(move || {
            this.remove(id);
        }) {
            Ok(effect) => Ok(Registration::from_effect(ctx.scope().clone(), effect)),
            Err(e) => {
                self.remove(id);
                Err(e)
            }
        }
    }

    /// Everything visible from `tag`: global, then ancestors farthest-first, then the tag's own
    /// layer; a nearer entry replaces a farther one of the same name in place. Order otherwise
    /// follows first registration.
    pub fn visible(&self, tag: Option<&ScopeTag>) -> Vec<(String, V)> {
        let layers = self.layers.lock();
        let mut out: Vec<(String, V)> = Vec::new();
        let mut push = |layer: &Vec<Entry<V>>| {
            for e in layer {
                match out.iter_mut().find(|(n, _)| *n == e.name) {
                    Some(slot) => slot.1 = e.value.clone(),
                    None => out.push((e.name.clone(), e.value.clone())),
                }
            }
        };
        push(&layers.global);
        if let Some(tag) = tag {
            let chain: Vec<&ScopeTag> = tag.chain().collect();
            for t in chain.into_iter().rev() {
                if let Some(layer) = layers.scoped.get(t) {
                    push(layer);
                }
            }
        }
        out
    }

    /// The nearest entry named `name` visible from `tag`.
    pub fn get(&self, tag: Option<&ScopeTag>, name: &str) -> Option<V> {
        let layers = self.layers.lock();
        if let Some(tag) = tag {
            for t in tag.chain() {
                if let Some(e) = layers
                    .scoped
                    .get(t)
                    .and_then(|l| l.iter().find(|e| e.name == name))
                {
                    return Some(e.value.clone());
                }
            }
        }
        layers
            .global
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.value.clone())
    }

    /// Only the entries of `tag`'s own layer (no inheritance).
    pub fn layer(&self, tag: Option<&ScopeTag>) -> Vec<(String, V)> {
        let layers = self.layers.lock();
        let layer = match tag {
            None => Some(&layers.global),
            Some(t) => layers.scoped.get(t),
        };
        layer
            .map(|l| {
                l.iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Number of scoped (non-global) layers currently held; empty layers are reclaimed.
    pub fn scoped_layer_count(&self) -> usize {
        self.layers.lock().scoped.len()
    }
}
