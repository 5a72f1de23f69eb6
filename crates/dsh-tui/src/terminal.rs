//! Entering full-screen mode and always leaving it.
//!
//! The modes are set in the order terminals need (raw mode, alternate screen, then keyboard
//! flags, which kitty keeps per screen, then bracketed paste and button-event mouse reporting,
//! never any-motion). [`restore`] undoes all of it and is idempotent, so the guard's drop, the
//! panic hook, a signal and the normal exit can all call it; each step ignores its own error,
//! so one failing write never leaves the others undone.

use std::io::{Write, stdout};
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::terminal::{disable_raw_mode, enable_raw_mode};

static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOKED: AtomicBool = AtomicBool::new(false);

/// Bytes that enter full-screen mode after raw mode is on.
fn enter_sequence(keyboard_protocol: bool) -> String {
    let mut s = String::from("\x1b[?1049h\x1b[H\x1b[2J");
    if keyboard_protocol {
        // Push "disambiguate escape codes" (Shift+Enter, Esc vs Alt) on the alternate screen.
        s.push_str("\x1b[>1u");
    }
    // Bracketed paste, focus events, button-event mouse tracking with SGR coordinates.
    s.push_str("\x1b[?2004h\x1b[?1004h\x1b[?1002h\x1b[?1006h");
    s
}

/// Bytes that leave full-screen mode, in reverse order of entering.
const RESTORE: &str =
    "\x1b[<u\x1b[?1006l\x1b[?1002l\x1b[?1004l\x1b[?2004l\x1b[0m\x1b[0 q\x1b[?25h\x1b[?1049l";

/// Holds the terminal in full-screen mode; dropping it restores the terminal.
#[derive(Debug)]
pub struct TerminalGuard(());

impl TerminalGuard {
    /// Enters full-screen mode (installing the panic hook first).
    pub fn enter(keyboard_protocol: bool) -> std::io::Result<Self> {
        install_panic_hook();
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = stdout();
        out.write_all(enter_sequence(keyboard_protocol).as_bytes())?;
        out.flush()?;
        Ok(Self(()))
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Leaves full-screen mode if it is on: modes off, cursor shown, main screen, cooked mode.
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = stdout();
    let _ = out.write_all(RESTORE.as_bytes());
    let _ = out.flush();
    let _ = disable_raw_mode();
}

/// A panic restores the terminal before the message is printed (so it is readable and the
/// shell is usable), then runs the previous hook.
fn install_panic_hook() {
    if HOOKED.swap(true, Ordering::SeqCst) {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restoring_undoes_every_mode_entering_set() {
        let enter = enter_sequence(true);
        for (on, off) in [
            ("\x1b[?1049h", "\x1b[?1049l"),
            ("\x1b[>1u", "\x1b[<u"),
            ("\x1b[?2004h", "\x1b[?2004l"),
            ("\x1b[?1004h", "\x1b[?1004l"),
            ("\x1b[?1002h", "\x1b[?1002l"),
            ("\x1b[?1006h", "\x1b[?1006l"),
        ] {
            assert!(enter.contains(on), "{on:?}");
            assert!(RESTORE.contains(off), "{off:?}");
        }
        assert!(
            !enter.contains("\x1b[?1003h"),
            "never any-motion mouse tracking"
        );
        // The alternate screen is left last, so the reset happens where the UI drew.
        assert!(RESTORE.ends_with("\x1b[?1049l"));
    }
}
