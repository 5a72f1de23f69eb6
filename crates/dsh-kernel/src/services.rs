//! The typed service table.
//!
//! Services are looked up by type (usually a trait object type such as `dyn ShellExecutor`), so
//! a consumer depends on a service definition, never on the crate that provides it.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

struct Slot {
    provision: u64,
    value: Box<dyn Any + Send + Sync>,
}

/// Typed `Arc` services keyed by type.
#[derive(Default)]
pub(crate) struct Services {
    slots: RwLock<HashMap<TypeId, Slot>>,
    next: AtomicU64,
}

impl Services {
    /// Inserts a service; returns the provision number that [`Services::remove`] needs.
    pub(crate) fn insert<T: ?Sized + Send + Sync + 'static>(&self, value: Arc<T>) -> Option<u64> {
        let mut slots = self.slots.write();
        let key = TypeId::of::<T>();
        if slots.contains_key(&key) {
            return None;
        }
        let provision = self.next.fetch_add(1, Ordering::Relaxed);
        slots.insert(
            key,
            Slot {
                provision,
                value: Box::new(value),
            },
        );
        Some(provision)
    }

    /// Removes the service only if it is still the exact provision, so a stale withdrawal
    /// never removes a later provider of the same type.
    pub(crate) fn remove<T: ?Sized + 'static>(&self, provision: u64) {
        let mut slots = self.slots.write();
        let key = TypeId::of::<T>();
        if slots.get(&key).is_some_and(|s| s.provision == provision) {
            slots.remove(&key);
        }
    }

    pub(crate) fn get<T: ?Sized + Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.slots
            .read()
            .get(&TypeId::of::<T>())
            .and_then(|s| s.value.downcast_ref::<Arc<T>>())
            .cloned()
    }

    pub(crate) fn name<T: ?Sized>() -> &'static str {
        type_name::<T>()
    }
}
