//! Built-in command names: a custom command (or a skill offered as `/name`) may not take one.
//!
//! One list for every front end, so a prompt file that works in the chat also works in the
//! terminal UI and an editor, and none of them silently prefers its own built-in: the file is
//! refused with a message saying why. Each front end's tests check that its built-ins are here.

/// Every front end's built-in command names (the chat, the terminal UI, ACP, `dsh run`).
pub const RESERVED: &[&str] = &[
    "cancel", "clear", "compact", "context", "cost", "exit", "export", "help", "mode", "model",
    "new", "plan", "quit", "resume", "rewind", "sessions", "skills",
];

/// Whether `name` is a built-in command's.
pub fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}
