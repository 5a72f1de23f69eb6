//! The real `dsh` on a pseudo-terminal, its screen read through a `vt100` emulator.

use std::io::Write;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::World;

/// Bound on every wait, so a broken UI fails instead of hanging.
pub const DEADLINE: Duration = Duration::from_secs(60);
pub const ROWS: u16 = 30;
pub const COLS: u16 = 100;

pub struct Tui {
    pub child: Child,
    bytes: mpsc::Receiver<Vec<u8>>,
    pub master: std::fs::File,
    pub term: vt100::Parser,
    /// Everything written, for the main-screen text printed after exit.
    pub raw: Vec<u8>,
}

impl Tui {
    pub fn start(w: &World, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = w.dsh(args);
        cmd.env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let pty = super::spawn_on_pty(cmd, ROWS, COLS);
        Self {
            child: pty.child,
            bytes: pty.bytes,
            master: pty.master,
            term: vt100::Parser::new(ROWS, COLS, 0),
            raw: Vec::new(),
        }
    }

    pub fn screen(&self) -> String {
        self.term.screen().contents()
    }

    /// Feeds output to the emulator until `done` holds for the screen, answering the
    /// terminal queries a real terminal would.
    pub fn wait(&mut self, what: &str, done: impl Fn(&vt100::Screen) -> bool) {
        let start = Instant::now();
        while !done(self.term.screen()) {
            let left = DEADLINE.saturating_sub(start.elapsed());
            let Ok(chunk) = self.bytes.recv_timeout(left) else {
                panic!("{what} never happened; screen:\n{}", self.screen());
            };
            if chunk.windows(4).any(|w| w == b"\x1b[6n") {
                self.master.write_all(b"\x1b[1;1R").unwrap();
            }
            self.term.process(&chunk);
            self.raw.extend_from_slice(&chunk);
        }
    }

    pub fn wait_for(&mut self, text: &str) {
        let what = format!("`{text}` on screen");
        self.wait(&what, |s| s.contents().contains(text));
    }

    pub fn keys(&mut self, bytes: &str) {
        self.master.write_all(bytes.as_bytes()).unwrap();
    }

    pub fn type_line(&mut self, line: &str) {
        self.keys(line);
        self.keys("\r");
    }

    /// Waits for the process to end, reading what it prints until then; returns its status.
    pub fn exit_code(&mut self) -> Option<i32> {
        let start = Instant::now();
        loop {
            while let Ok(chunk) = self.bytes.try_recv() {
                self.term.process(&chunk);
                self.raw.extend_from_slice(&chunk);
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                // Whatever was written before exit is already in the pipe.
                while let Ok(chunk) = self.bytes.recv_timeout(Duration::from_millis(200)) {
                    self.term.process(&chunk);
                    self.raw.extend_from_slice(&chunk);
                }
                return status.code();
            }
            assert!(
                start.elapsed() < DEADLINE,
                "dsh did not exit; screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Asserts the terminal is back to normal: main screen, cursor shown, no paste or mouse
    /// modes left on.
    pub fn assert_restored(&self) {
        let s = self.term.screen();
        assert!(!s.alternate_screen(), "still on the alternate screen");
        assert!(!s.hide_cursor(), "cursor left hidden");
        assert!(!s.bracketed_paste(), "bracketed paste left on");
        assert_eq!(s.mouse_protocol_mode(), vt100::MouseProtocolMode::None);
    }

    pub fn ready(&mut self) {
        self.wait_for("ask anything");
    }
}
