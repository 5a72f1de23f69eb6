//! Identifiers shared by every layer of dsh.
//!
//! Ids are opaque strings on the wire (so logs written by other implementations read the same),
//! but distinct types in Rust so a message id can never be passed where a session id is meant.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps an existing identifier verbatim.
            pub fn new(id: impl Into<Arc<str>>) -> Self {
                Self(id.into())
            }

            /// The identifier as it appears on the wire.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::new(s)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self::new(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }
    };
}

string_id! {
    /// Identity of a session, and of the one live agent that drives it (an agent's id always
    /// equals its session's id).
    SessionId
}

string_id! {
    /// Identity of one message occurrence. Unique while the message is pending in an inbox;
    /// the inbox, the log and live notifications all address messages by it.
    MessageId
}

string_id! {
    /// A tool call's id as chosen by the model provider; a `tool/result` answers exactly one.
    CallId
}

impl SessionId {
    /// Mints a fresh random session id of the form `session-<uuid>`.
    pub fn generate() -> Self {
        Self::new(format!("session-{}", uuid::Uuid::new_v4()))
    }
}

impl MessageId {
    /// Mints a fresh random message id (a UUIDv4, as the reference implementation does).
    pub fn generate() -> Self {
        Self::new(uuid::Uuid::new_v4().to_string())
    }
}
