//! SIGINT and SIGTERM: the first one asks for a graceful stop, the next one ends the process.
//!
//! Installing the handlers replaces the default "die at once" behaviour, so a Ctrl-C can cancel
//! the running turn and still leave a balanced, flushed session file. A person who presses
//! Ctrl-C again (or a supervisor that sends a second SIGTERM) gets an immediate exit: a stuck
//! drain must never hold the terminal hostage.
//!
//! Until a front end is ready to stop gracefully (the harness started, the session opened),
//! a signal ends the process at once with its exit status: nothing was acknowledged yet, and a
//! start-up waiting on a slow source (a stalled MCP server, a lock) must never outlive Ctrl-C.
//! The handlers run on a task of their own, so a start-up step that blocks a worker cannot
//! hold them up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Which signal arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Stop {
    /// The conventional exit status: 128 + the signal number.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Interrupt => 130,
            Self::Terminate => 143,
        }
    }
}

/// What a signal does now.
const AT_ONCE: u8 = 0;
const GRACEFUL: u8 = 1;
const INTERACTIVE: u8 = 2;

/// The installed handlers.
#[derive(Clone, Debug)]
pub struct Signals {
    first: watch::Receiver<Option<Stop>>,
    mode: Arc<AtomicU8>,
}

impl Signals {
    /// Installs the handlers (needs a tokio runtime). Until [`Signals::graceful`] or
    /// [`Signals::interactive`], a signal exits at once.
    pub fn install() -> std::io::Result<Self> {
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let (tx, first) = watch::channel(None);
        let mode = Arc::new(AtomicU8::new(AT_ONCE));
        let now = mode.clone();
        tokio::spawn(async move {
            loop {
                let stop = tokio::select! {
                    Some(()) = int.recv() => Stop::Interrupt,
                    Some(()) = term.recv() => Stop::Terminate,
                    else => return,
                };
                match now.swap(AT_ONCE, Ordering::SeqCst) {
                    // The chat and the UI handle Ctrl-C themselves (it cancels the turn).
                    INTERACTIVE if stop == Stop::Interrupt => {
                        now.store(INTERACTIVE, Ordering::SeqCst)
                    }
                    GRACEFUL => {
                        tx.send_replace(Some(stop));
                    }
                    // Start-up, a second signal, or the first one while shutting down: leave
                    // now. The shell's supervisors kill whatever commands are still running
                    // when this process goes away.
                    _ => std::process::exit(stop.exit_code()),
                }
            }
        });
        Ok(Self { first, mode })
    }

    /// From now on the first signal asks for a graceful stop ([`Signals::first`]); the next
    /// one exits.
    pub fn graceful(&self) {
        self.mode.store(GRACEFUL, Ordering::SeqCst);
    }

    /// From now on Ctrl-C belongs to the interactive front end (which cancels the turn with
    /// it); SIGTERM still exits at once.
    pub fn interactive(&self) {
        self.mode.store(INTERACTIVE, Ordering::SeqCst);
    }

    /// Resolves with the first signal.
    pub async fn first(&mut self) -> Stop {
        loop {
            if let Some(stop) = *self.first.borrow_and_update() {
                return stop;
            }
            if self.first.changed().await.is_err() {
                // The watcher is gone; nothing will ever arrive.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The first signal, if one arrived (a server that stopped because of it exits with its
    /// status, not 0).
    pub fn received(&self) -> Option<Stop> {
        *self.first.borrow()
    }

    /// From now on any signal exits at once (the work is done; only teardown is left).
    pub fn exit_on_next(&self) {
        self.mode.store(AT_ONCE, Ordering::SeqCst);
    }
}
