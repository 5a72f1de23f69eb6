//! Test doubles for dsh.
//!
//! Test doubles sit only at documented seams (DESIGN §2): the [`ScriptedAdapter`] behind the
//! `Adapter` trait for loop tests, and the [`MockServer`] at the network edge for adapter and
//! binary tests. Both check, on every request, that the history they are sent is valid for a
//! real provider (every tool call answered exactly once), as Codex's test server does, so a
//! loop bug that would be rejected in production fails the test that caused it.
//!
//! Each module is self-contained so other harness pieces can be added beside them.
//!
//! A loop test scripts the model in process:
//!
//! ```no_run
//! # async fn demo() {
//! use std::sync::Arc;
//! use dsh_llm::Llm;
//! use dsh_testkit::{Script, ScriptedAdapter};
//!
//! let llm = Llm::new();
//! let model = Arc::new(ScriptedAdapter::with_scripts([
//!     Script::tool_call("call_1", "bash", r#"{"command":"ls"}"#),
//!     Script::text("done"),
//! ]));
//! model.register(&llm).unwrap();
//! // ... run the loop against `llm` with provider "scripted" ...
//! assert!(model.violations().is_empty());
//! # }
//! ```
//!
//! An adapter or binary test points a base URL (e.g. `DEEPSEEK_BASE_URL`) at a real server:
//!
//! ```no_run
//! use dsh_testkit::{MockResponse, MockServer};
//!
//! let server = MockServer::start();
//! server.push(MockResponse::text("Hello"));
//! let (held, hold) = MockResponse::text("never finishes").hold_after(2);
//! server.push(held);
//! // spawn `dsh` with DEEPSEEK_BASE_URL=server.url() ...
//! assert!(server.violations().is_empty());
//! # drop(hold);
//! ```

pub mod anthropic;
mod attachments;
mod binary;
mod bounded;
mod flipper;
mod gate;
mod mock_response;
mod mock_server;
mod origin;
mod outside;
mod reads;
pub mod responses;
mod script;
mod scripted;
pub mod sse;
mod tagged;
mod tree;
pub mod validity;

pub use attachments::{MemoryAttachments, TINY_PNG};
pub use binary::dsh_binary;
pub use bounded::{BOUND, bounded};
pub use flipper::{Flipper, flip_symlink};
pub use gate::{Gate, Hold};
pub use mock_response::{MockResponse, SseFrame};
pub use mock_server::{MockRequest, MockServer};
pub use origin::Origin;
pub use outside::outside_writable_roots;
pub use reads::split_reads;
pub use script::{Script, Step};
pub use scripted::{ScriptedAdapter, ScriptedRequest};
pub use tagged::Tag;
pub use tree::workspace_tree;
