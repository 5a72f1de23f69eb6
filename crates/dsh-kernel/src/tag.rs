//! Scope tags: the routing identity of a scoped context.
//!
//! A tag names "whose" a registration or an event is (an agent's tag is minted for that agent).
//! Scoped registries inherit *down* the tag chain (a child sees its ancestors' layers, nearer
//! shadowing farther), and events are admitted *up* it (a listener tagged `p` hears events whose
//! carrier is `p` or a descendant of `p`, never a sibling's).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::KernelError;

static NEXT_TAG: AtomicU64 = AtomicU64::new(1);

/// Opaque routing identity with an optional parent, compared by identity.
#[derive(Clone)]
pub struct ScopeTag(Arc<TagInner>);

struct TagInner {
    id: u64,
    label: String,
    parent: OnceLock<ScopeTag>,
}

impl ScopeTag {
    /// Mints a new root tag. `label` is for diagnostics only.
    pub fn new(label: impl Into<String>) -> Self {
        Self(Arc::new(TagInner {
            id: NEXT_TAG.fetch_add(1, Ordering::Relaxed),
            label: label.into(),
            parent: OnceLock::new(),
        }))
    }

    /// Mints a new tag whose parent is `parent`.
    pub fn child_of(parent: &ScopeTag, label: impl Into<String>) -> Self {
        let tag = Self::new(label);
        // A fresh tag has no parent and cannot be its own ancestor.
        let _ = tag.0.parent.set(parent.clone());
        tag
    }

    /// Binds the parent once; a second bind or a cycle is rejected.
    pub fn bind_parent(&self, parent: &ScopeTag) -> Result<(), KernelError> {
        if parent.is_within(self) {
            return Err(KernelError::TagCycle {
                tag: self.label().to_owned(),
                parent: parent.label().to_owned(),
            });
        }
        self.0
            .parent
            .set(parent.clone())
            .map_err(|_| KernelError::TagAlreadyBound {
                tag: self.label().to_owned(),
            })
    }

    /// A process-unique number for this tag.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The diagnostic label.
    pub fn label(&self) -> &str {
        &self.0.label
    }

    /// The parent tag, if bound.
    pub fn parent(&self) -> Option<&ScopeTag> {
        self.0.parent.get()
    }

    /// Whether `self` is `ancestor` or one of its descendants.
    pub fn is_within(&self, ancestor: &ScopeTag) -> bool {
        let mut cur = Some(self);
        while let Some(t) = cur {
            if t == ancestor {
                return true;
            }
            cur = t.parent();
        }
        false
    }

    /// This tag and its ancestors, nearest first.
    pub fn chain(&self) -> impl Iterator<Item = &ScopeTag> {
        std::iter::successors(Some(self), |t| t.parent())
    }
}

impl PartialEq for ScopeTag {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ScopeTag {}

impl std::hash::Hash for ScopeTag {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.hash(state);
    }
}

impl fmt::Debug for ScopeTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScopeTag({}#{})", self.0.label, self.0.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_follows_the_parent_chain_only_upwards() {
        let root = ScopeTag::new("root");
        let a = ScopeTag::child_of(&root, "a");
        let b = ScopeTag::child_of(&root, "b");
        assert!(a.is_within(&root));
        assert!(a.is_within(&a));
        assert!(!root.is_within(&a));
        assert!(!a.is_within(&b));
    }

    #[test]
    fn binding_twice_or_in_a_cycle_is_rejected() {
        let a = ScopeTag::new("a");
        let b = ScopeTag::child_of(&a, "b");
        assert!(matches!(
            a.bind_parent(&b),
            Err(KernelError::TagCycle { .. })
        ));
        let c = ScopeTag::new("c");
        assert!(matches!(
            b.bind_parent(&c),
            Err(KernelError::TagAlreadyBound { .. })
        ));
    }
}
