//! The plugin kernel of dsh.
//!
//! Everything in dsh is a plugin on a [`Context`]: services, tools, prompt sections and event
//! listeners are registered through a context, and every registration is an effect owned by a
//! [`Scope`], undone in reverse order when the scope is disposed. Unmounting a plugin and
//! mounting it again is a supported operation.
//!
//! - [`Context`]: cheap clone of the shared runtime (typed services, the event bus) bound to an
//!   owning [`Scope`] and an optional routing [`ScopeTag`].
//! - [`Scope`]: LIFO effects; idempotent, shared `dispose`; children disposed first.
//! - Events: [`Notification`], [`Serial`], [`Waterfall`] (with [`Next`]) and [`Parallel`], routed
//!   by scope tag so an agent's listeners never hear another agent's events.
//! - [`ScopedRegistry`]: a global layer plus per-tag layers with shadowing, for tools, prompt
//!   sections and variables.

mod context;
mod error;
mod events;
mod layers;
mod plugin;
mod scope;
mod services;
mod tag;

pub use context::{Context, Registration};
pub use error::{BoxError, KernelError};
pub use events::{EventBus, Next, Notification, Parallel, Serial, Waterfall};
pub use layers::ScopedRegistry;
pub use plugin::{Plugin, PluginHandle};
pub use scope::{Effect, EffectId, Scope};
pub use tag::ScopeTag;
