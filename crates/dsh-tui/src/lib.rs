//! `dsh-tui`: the full-screen terminal UI, a front end beside `dsh-acp`.
//!
//! It drives agents only through the [`dsh_agent::Agent`] interface (`followup`, `steer`,
//! `cancel`) and the `session/event` feed; its host ([`TuiHost`]: create, resume and list
//! sessions, settings) is [`HarnessHost`] over the session core, or another implementation in
//! tests and embedders. Everything on screen is built from log events,
//! never from what was typed, so a live transcript and a resumed one are the same.
//!
//! Module map: [`host`] (what the composition root provides), [`terminal`] (entering and always
//! restoring the terminal), [`transcript`] and [`cell`] (the app-owned, virtualized transcript),
//! [`markdown`], [`diff`], [`wrap`] and [`sanitize`] (turning text into styled rows),
//! [`composer`] (the input buffer), [`files`] (`@path` completion), [`commands`] (slash
//! commands; what each does is `dispatch.rs`), [`picker`] (the session and model pickers),
//! [`rewind`] (the `/rewind` picker), [`approval`] (inline approval cards), [`question`]
//! (question and plan cards), [`app`] (all UI state and key handling), [`view`] (drawing a
//! frame) and [`runner`] (the event loop).

pub mod app;
pub mod approval;
pub mod attach;
pub mod cell;
pub mod clipboard;
pub mod commands;
pub mod composer;
pub mod diff;
mod dispatch;
mod export;
pub mod files;
mod harness_host;
pub mod highlight;
pub mod host;
pub mod markdown;
pub mod picker;
pub mod question;
pub mod rewind;
pub mod runner;
pub mod sanitize;
pub mod status;
pub mod terminal;
pub mod transcript;
pub mod view;
pub mod wrap;

pub use approval::TuiApprover;
pub use harness_host::HarnessHost;
pub use host::{
    ContextPart, ContextReport, HostError, HostInfo, ModelChoice, ModelEntry, Prices, SessionEntry,
    TuiHost,
};
pub use question::TuiQuestioner;
pub use runner::{TuiError, TuiExit, run};
