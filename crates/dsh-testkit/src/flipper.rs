//! A symlink that keeps changing its target on a thread of its own: the attack of a command
//! that turns a directory into a symlink between the guard's decision and a file tool's write.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

/// Replaces `link` with a symlink to `target` in one step (a rename over it), as an attacker
/// would: there is never a moment without a link.
pub fn flip_symlink(link: &Path, target: &Path) {
    let temp = link.with_extension("flip");
    let _ = std::fs::remove_file(&temp);
    if let Err(e) =
        std::os::unix::fs::symlink(target, &temp).and_then(|()| std::fs::rename(&temp, link))
    {
        panic!(
            "cannot point {} at {}: {e}",
            link.display(),
            target.display()
        );
    }
}

/// Flips a symlink round-robin through its targets until stopped.
#[derive(Debug)]
pub struct Flipper {
    stop: Arc<AtomicBool>,
    flips: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Flipper {
    /// Points `link` at the first target, then starts flipping through all of them; returns
    /// once the thread has flipped a full round, so the race is on.
    pub fn start(link: &Path, targets: Vec<PathBuf>) -> Flipper {
        assert!(!targets.is_empty(), "a flipper needs targets");
        flip_symlink(link, &targets[0]);
        let stop = Arc::new(AtomicBool::new(false));
        let flips = Arc::new(AtomicU64::new(0));
        let thread = std::thread::spawn({
            let (stop, flips, link) = (stop.clone(), flips.clone(), link.to_path_buf());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    let n = flips.load(Ordering::Relaxed);
                    flip_symlink(&link, &targets[(n as usize + 1) % targets.len()]);
                    flips.store(n + 1, Ordering::Relaxed);
                }
            }
        });
        let flipper = Flipper {
            stop,
            flips,
            thread: Some(thread),
        };
        while flipper.flips() < 2 {
            std::thread::yield_now();
        }
        flipper
    }

    /// How many times the link changed.
    pub fn flips(&self) -> u64 {
        self.flips.load(Ordering::Relaxed)
    }

    /// Stops flipping and waits for the thread (panicking if it failed).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            panic!("the flipper thread failed");
        }
    }
}

impl Drop for Flipper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
