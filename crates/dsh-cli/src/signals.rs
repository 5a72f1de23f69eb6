//! SIGINT and SIGTERM: the first one asks for a graceful stop, the next one ends the process.
//!
//! Installing the handlers replaces the default "die at once" behaviour, so a Ctrl-C can cancel
//! the running turn and still leave a balanced, flushed session file. A person who presses
//! Ctrl-C again (or a supervisor that sends a second SIGTERM) gets an immediate exit: a stuck
//! drain must never hold the terminal hostage.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// The installed handlers.
#[derive(Clone, Debug)]
pub struct Signals {
    first: watch::Receiver<Option<Stop>>,
    immediate: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers (needs a tokio runtime).
    pub fn install() -> std::io::Result<Self> {
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let (tx, first) = watch::channel(None);
        let immediate = Arc::new(AtomicBool::new(false));
        let exit_now = immediate.clone();
        tokio::spawn(async move {
            loop {
                let stop = tokio::select! {
                    Some(()) = int.recv() => Stop::Interrupt,
                    Some(()) = term.recv() => Stop::Terminate,
                    else => return,
                };
                if exit_now.swap(true, Ordering::SeqCst) {
                    // A second signal, or the first one while shutting down: leave now. The
                    // shell's supervisors kill whatever commands are still running when this
                    // process goes away.
                    std::process::exit(stop.exit_code());
                }
                tx.send_replace(Some(stop));
            }
        });
        Ok(Self { first, immediate })
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

    /// From now on any signal exits at once (the work is done; only teardown is left).
    pub fn exit_on_next(&self) {
        self.immediate.store(true, Ordering::SeqCst);
    }
}
