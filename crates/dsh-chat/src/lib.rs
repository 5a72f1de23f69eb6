//! `dsh-chat`: the prompts of dsh's line chat (`dsh chat --plain`, or `dsh` without a
//! terminal UI).
//!
//! A line chat has one input, the line being typed. While the agent waits for an approval
//! ([`approve::TerminalApprover`]) or an answer to its question ([`question::TerminalQuestioner`])
//! the next line answers that instead of going to the agent. Both print through the chat's
//! [`Printer`] (which draws above the line editor) and serve only the session the chat shows:
//! a subagent's request is answered that nobody can be asked. The chat loop itself (the line
//! editor, signals, rendering) is the binary's.

use std::sync::Arc;

use parking_lot::Mutex;

pub mod approve;
pub mod question;

pub use approve::{Answer, TerminalApprover};
pub use question::TerminalQuestioner;

/// Prints a block of text above the line being edited (rustyline's external printer, or
/// stderr in tests).
pub type Printer = Arc<Mutex<Box<dyn FnMut(String) + Send>>>;
