//! Network by domain for confined commands.
//!
//! A confined command in `[sandbox] network = "allowlist"` may open a TCP connection to one
//! port only (Landlock's connect rule, set by dsh-guard): this crate's proxy on loopback. The
//! proxy reads the host a request names (a `CONNECT` target or an absolute-form URL), decides
//! by the user's [`DomainPolicy`] (deny wins; `*.` means subdomains), resolves the name
//! itself, refuses private addresses unless the name was allowed exactly, and tunnels or
//! forwards what passed. TLS is not intercepted: what is checked is the name in `CONNECT`.

mod ask;
mod domain;
mod proxy;
mod refuse;
mod ticket;

pub use ask::{Answer, AnswerFuture, Asker, Question};
pub use domain::{Decision, DomainError, DomainPolicy, Pattern, REGISTRIES, REGISTRIES_PRESET};
pub use proxy::{Asking, DEFAULT_ASK_TIMEOUT, LazyProxy, Lookup, Proxy, ProxyStats, system_lookup};
pub use refuse::{Blocked, Refusal};
pub use ticket::Owner;
