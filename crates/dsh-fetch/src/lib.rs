//! The model's web access: `web_fetch` and `web_search`.
//!
//! Without these a model reaches the web through `curl` in `bash`: the whole page's HTML floods
//! its context, and the fetch runs inside the command sandbox where the network may be off.
//! Here dsh itself fetches, on the model's behalf, with bounds a person would set:
//!
//! - [`WebFetchTool`]: one `GET` of an `http(s)` URL, redirects followed a few hops and
//!   re-checked at every hop, the body capped in bytes and time, HTML turned into Markdown,
//!   other text kept as it is, binary refused with its type. It declares the host it reaches
//!   ([`dsh_tools::ToolEffects::reaches`]), so the guard refuses it with the network off,
//!   applies `web_fetch(domain:…)` rules, and asks before it reaches this machine or a private
//!   network; a name that only *resolves* to such an address is refused at connection time
//!   ([`resolve`]), so DNS cannot smuggle a private target past that question. No cookies, no
//!   credentials, never the provider's key.
//! - [`WebSearchTool`]: a query against the configured search API ([`SearchConfig`]: Brave,
//!   Exa or a self-hosted SearXNG), offered only when one is configured.
//!
//! [`WebPlugin`] registers both.

mod body;
mod config;
mod fetch;
mod limits;
mod plugin;
pub mod resolve;
mod search;

pub use config::{SearchConfig, SearchProvider};
pub use fetch::{WebFetchArgs, WebFetchTool};
pub use limits::FetchLimits;
pub use plugin::WebPlugin;
pub use search::{WebSearchArgs, WebSearchTool};
