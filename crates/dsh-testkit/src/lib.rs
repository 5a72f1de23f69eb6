//! Test doubles for dsh.
//!
//! Test doubles sit only at documented seams (DESIGN §2): the [`ScriptedAdapter`] behind the
//! `Adapter` trait for loop tests, and the [`MockServer`] at the network edge for adapter and
//! binary tests. Both check, on every request, that the history they are sent is valid for a
//! real provider (every tool call answered exactly once), as Codex's test server does, so a
//! loop bug that would be rejected in production fails the test that caused it.
//!
//! Each module is self-contained so other harness pieces can be added beside them.

mod gate;
mod mock_response;
mod mock_server;
mod script;
mod scripted;
pub mod sse;
pub mod validity;

pub use gate::{Gate, Hold};
pub use mock_response::{MockResponse, SseFrame};
pub use mock_server::{MockRequest, MockServer};
pub use script::{Script, Step};
pub use scripted::{ScriptedAdapter, ScriptedRequest};
