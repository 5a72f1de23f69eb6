//! A `kill -9` harness for durability tests (test-only: not part of the crate's API).
//!
//! "Nothing acknowledged is lost" can only be tested by really killing a process. The pattern:
//! a child process (usually the test binary re-executed with an environment variable, see
//! [`child_command`]) drives sessions through [`dsh_session::SessionStore`] and the JSONL plugin
//! and, after every successful flush, prints a [`FlushReport`] naming the last event the flush
//! covered and a fingerprint of its stored bytes. The parent reads the reports,
//! kills the child with `SIGKILL` at a chosen moment ([`run_and_kill`]), and then checks with
//! [`verify_survivors`] that every stored session loads, is balanced after repair, and still
//! holds every reported event byte for byte.
//!
//! Any driver can play the child: these tests use a synthetic turn generator; a test of the
//! real agent loop, whose flushes happen inside the loop, plugs [`report_durable_writes`] into
//! [`dsh_store_jsonl::JsonlOptions::on_durable`] so that every durable write is reported, whoever asked
//! for it.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use dsh_session::{Persistence, Session, SessionEvent, SessionId, StoredSession, check_balanced};

use dsh_store_jsonl::DurableObserver;

/// The prefix of a flush report line on the child's stdout.
pub const FLUSHED_MARKER: &str = "DSH-FLUSHED";

/// FNV-1a (64 bit) of an event's stored JSON line (without the newline): enough to tell that
/// the event read back after a crash is the one that was acknowledged.
pub fn fingerprint(event: &SessionEvent) -> u64 {
    let bytes = serde_json::to_vec(event).unwrap_or_default();
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A child's statement that a flush returned `Ok` and covered every event up to `seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlushReport {
    /// The session flushed.
    pub session: SessionId,
    /// The last event the flush covered.
    pub seq: u64,
    /// [`fingerprint`] of that event.
    pub fingerprint: u64,
}

impl FlushReport {
    /// The report for a flush that covered `last` (the session's last event at the call).
    pub fn of(session: &SessionId, last: &SessionEvent) -> Self {
        Self {
            session: session.clone(),
            seq: last.seq,
            fingerprint: fingerprint(last),
        }
    }

    /// The report line: `DSH-FLUSHED <session> <seq> <fingerprint hex>`. Session ids of the
    /// harness must not contain whitespace.
    pub fn line(&self) -> String {
        format!(
            "{FLUSHED_MARKER} {} {} {:016x}",
            self.session, self.seq, self.fingerprint
        )
    }

    /// Parses a report line; `None` for any other line (test-harness chatter).
    pub fn parse(line: &str) -> Option<Self> {
        let mut parts = line.trim_end().split(' ');
        if parts.next()? != FLUSHED_MARKER {
            return None;
        }
        let session = SessionId::new(parts.next()?);
        let seq = parts.next()?.parse().ok()?;
        let fingerprint = u64::from_str_radix(parts.next()?, 16).ok()?;
        parts.next().is_none().then_some(Self {
            session,
            seq,
            fingerprint,
        })
    }

    /// Prints the report as one line on stdout and flushes it, so the parent has it before
    /// anything after this call can happen.
    pub fn emit(&self) {
        let mut out = io::stdout().lock();
        // A child whose parent stopped reading has nothing useful to do with the error.
        let _ = writeln!(out, "{}", self.line());
        let _ = out.flush();
    }
}

/// A durability observer that emits a [`FlushReport`] for the last event of every successful
/// write (background batch or flush). It prints synchronously on the writer task, which is
/// fine for a test child and nothing else.
pub fn report_durable_writes() -> DurableObserver {
    Arc::new(|session: &Arc<Session>, len: u64| {
        if let Some(last) = len.checked_sub(1).and_then(|seq| session.event(seq)) {
            FlushReport::of(session.id(), &last).emit();
        }
    })
}

/// When to kill the child.
#[derive(Clone, Copy, Debug)]
pub struct KillPlan {
    /// Kill after this many flush reports were read.
    pub after_reports: usize,
    /// And after this much more time, so the kill lands anywhere between checkpoints.
    pub extra_delay: Duration,
    /// Give up (kill and fail) if the reports do not arrive within this long.
    pub deadline: Duration,
}

/// What a killed child reported.
#[derive(Debug)]
pub struct ChildRun {
    /// Every flush report the child printed before it died, in order.
    pub reports: Vec<FlushReport>,
    /// The child's stderr, for diagnostics.
    pub stderr: String,
}

/// A command that re-executes the current test binary to run exactly the `#[ignore]`d helper
/// test named `test` (which acts as the child when `env_var` is set), with `env_var=value`.
pub fn child_command(test: &str, env_var: &str, value: &str) -> io::Result<Command> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args([
        "--exact",
        test,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(env_var, value);
    Ok(cmd)
}

/// Runs `cmd`, reads its flush reports from stdout, kills it with `SIGKILL` as `plan` says,
/// and returns every report it printed before dying (including those still in the pipe).
/// Fails if the child exits by itself or the reports do not arrive before the deadline.
pub fn run_and_kill(mut cmd: Command, plan: &KillPlan) -> io::Result<ChildRun> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("child stdout is not piped"))?;
    let mut stderr = child
        .stderr
        .take()
        .ok_or_else(|| io::Error::other("child stderr is not piped"))?;
    let (tx, rx) = mpsc::channel::<FlushReport>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(report) = FlushReport::parse(&line)
                && tx.send(report).is_err()
            {
                break;
            }
        }
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });

    let started = Instant::now();
    let mut reports = Vec::new();
    let mut failure = None;
    while reports.len() < plan.after_reports {
        let left = plan.deadline.saturating_sub(started.elapsed());
        match rx.recv_timeout(left) {
            Ok(report) => reports.push(report),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                failure = Some("the child did not report in time");
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                failure = Some("the child exited before it was killed");
                break;
            }
        }
    }
    if failure.is_none() {
        // Choosing the kill moment, not synchronizing with anything.
        std::thread::sleep(plan.extra_delay);
    }
    // `Child::kill` sends SIGKILL on Unix.
    let _ = child.kill();
    child.wait()?;
    // Reports printed before the kill are still in the pipe: they count.
    let _ = reader.join();
    reports.extend(rx.try_iter());
    let stderr = errors.join().unwrap_or_default();
    match failure {
        Some(why) => Err(io::Error::other(format!("{why}; child stderr:\n{stderr}"))),
        None => Ok(ChildRun { reports, stderr }),
    }
}

/// Loads every stored session (which repairs it durably) and checks the crash invariants:
/// each session loads, is balanced ([`check_balanced`]), rebuilds into a valid [`Session`],
/// and still holds every reported event at its seq with the same fingerprint. Returns the
/// loaded sessions by id.
pub async fn verify_survivors(
    store: &dyn Persistence,
    reports: &[FlushReport],
) -> Result<BTreeMap<SessionId, StoredSession>, String> {
    let mut loaded = BTreeMap::new();
    for header in store.list().await.map_err(|e| format!("listing: {e}"))? {
        let stored = store
            .load(&header.id)
            .await
            .map_err(|e| format!("loading {}: {e}", header.id))?;
        let events: Vec<_> = stored.events.iter().cloned().map(Arc::new).collect();
        check_balanced(&events).map_err(|e| format!("session {} unbalanced: {e}", header.id))?;
        Session::new(stored.header.clone(), Some(stored.events.clone()))
            .map_err(|e| format!("session {} does not rebuild: {e}", header.id))?;
        loaded.insert(header.id.clone(), stored);
    }
    for r in reports {
        let Some(stored) = loaded.get(&r.session) else {
            return Err(format!(
                "session {} reported flushed at seq {} is not stored",
                r.session, r.seq
            ));
        };
        let Some(event) = stored.events.get(r.seq as usize) else {
            return Err(format!(
                "session {} lost flushed seq {} (it has {} events)",
                r.session,
                r.seq,
                stored.events.len()
            ));
        };
        if fingerprint(event) != r.fingerprint {
            return Err(format!(
                "session {} seq {} differs from the flushed event: {}",
                r.session,
                r.seq,
                serde_json::to_string(event).unwrap_or_default()
            ));
        }
    }
    Ok(loaded)
}

/// A small seeded generator (SplitMix64) so kill moments and workloads are reproducible from a
/// printed seed without a dependency.
#[derive(Clone, Debug)]
pub struct SeededRng(u64);

impl SeededRng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}
