//! Finding the processes a test started by a tag in their command line, not by the pid they
//! printed: a command in a PID namespace sees pids of its own, which mean nothing (or another
//! process) to the test.
//!
//! A [`Tag`] is a unique number written into a command line, e.g. as the fraction of a
//! `sleep` duration (`sleep 3600.000123456`), so every process carrying it can be found by
//! scanning `/proc/*/cmdline`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::BOUND;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A unique tag for the processes of one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag(String);

impl Tag {
    /// A tag no other test (in this or another process) uses: nine digits from this process's
    /// id, a counter and the clock.
    pub fn new() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let mixed = u64::from(std::process::id())
            .wrapping_mul(1_000_003)
            .wrapping_add(n.wrapping_mul(7919))
            .wrapping_add(u64::from(nanos));
        Self(format!("{:09}", mixed % 1_000_000_000))
    }

    /// `sleep <seconds>.<tag>`: a process that runs for about `seconds` and carries the tag.
    pub fn sleep(&self, seconds: u32) -> String {
        format!("sleep {seconds}.{}", self.0)
    }

    /// The pids of live (not zombie) processes whose command line contains the tag.
    pub fn running(&self) -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| {
                let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                let carries = cmdline
                    .split(|b| *b == 0)
                    .any(|arg| arg.windows(self.0.len()).any(|w| w == self.0.as_bytes()));
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
                (carries && !matches!(state, "Z" | "X")).then_some(pid)
            })
            .collect()
    }

    /// Waits (polling, at most [`BOUND`]) until `count` tagged processes run; panics with
    /// `what` otherwise.
    pub fn wait_running(&self, count: usize, what: &str) {
        let deadline = Instant::now() + BOUND;
        while self.running().len() < count {
            assert!(
                Instant::now() < deadline,
                "{what}: never saw {count} running"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits (polling, at most [`BOUND`]) until no tagged process runs; panics with `what`
    /// and the survivors otherwise.
    pub fn wait_gone(&self, what: &str) {
        let deadline = Instant::now() + BOUND;
        loop {
            let left = self.running();
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: still running: {left:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Default for Tag {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_sleep_is_found_while_it_runs_and_not_after() {
        let tag = Tag::new();
        // `sleep` itself, not `sh -c "exec sleep …"`: while sh execs, its cmdline briefly
        // reads empty, so a scan right after the first sighting could miss it.
        let duration = tag.sleep(60).replace("sleep ", "");
        let mut child = std::process::Command::new("sleep")
            .arg(duration)
            .spawn()
            .unwrap();
        tag.wait_running(1, "the tagged sleep");
        assert_eq!(tag.running(), vec![child.id() as i32]);
        child.kill().unwrap();
        child.wait().unwrap();
        tag.wait_gone("the killed sleep");
        assert_ne!(Tag::new(), Tag::new());
    }
}
