//! `dsh acp` at scale (issue 30): one real `dsh acp` process, driven over its stdio by an ACP
//! client built from the `agent-client-protocol` crate and pointed at the mock
//! OpenAI-compatible server, holding many idle sessions. Figures are printed, never asserted:
//!
//! - creating `ACP_SCALE_SESSIONS` sessions (default 10,000) with `session/new`, one after the
//!   other, each answered before the next is sent (the latency-bound case), or with
//!   `ACP_SCALE_CONCURRENCY` requests in flight at a time: wall time, mean per session,
//!   p50/p99/max latency;
//! - the child's peak RSS (`VmHWM` from `/proc/PID/status`: the kernel's own high-water mark,
//!   so nothing between two samples is missed), its RSS now, RSS per session, and its thread
//!   count (`Threads`, sampled every 5 ms; the maximum seen is printed);
//! - then `ACP_SCALE_PROMPTS` (default 100) of those sessions prompted once, all at once (each
//!   a one-chunk text answer from the mock): wall time, peak RSS, threads;
//! - then stdin closed: time until the process has exited.
//!
//! Goals: 10,000 sessions in ≤ 10 s, peak RSS ≤ 200 MB, ≤ 32 threads; with 100 prompted,
//! ≤ 250 MB.
//!
//! Run with `cargo bench -p dsh-acp --bench acp_scale` (the bench profile's `dsh` is built when
//! absent); `DSH_BENCH_BINARY=PATH` measures another build, so two versions can be compared in
//! one sitting.

#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{NewSessionRequest, StopReason};
use common::child::{Launch, spawn_in};
use dsh_testkit::{MockResponse, MockServer};
use futures::StreamExt;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn binary() -> PathBuf {
    std::env::var_os("DSH_BENCH_BINARY")
        .map(Into::into)
        .unwrap_or_else(dsh_testkit::dsh_binary)
}

/// One field of `/proc/PID/status`, in its own unit (kB for memory).
fn status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// The most threads the child had at any sample since the last [`Threads::take`].
#[derive(Clone, Default)]
struct Threads(Arc<AtomicU64>);

impl Threads {
    fn watch(&self, pid: u32) {
        let max = self.0.clone();
        std::thread::spawn(move || {
            while let Some(n) = status_field(pid, "Threads") {
                max.fetch_max(n, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
    }

    fn take(&self) -> u64 {
        self.0.swap(0, Ordering::Relaxed)
    }
}

fn memory(pid: u32) -> (u64, u64) {
    (
        status_field(pid, "VmHWM").unwrap_or(0),
        status_field(pid, "VmRSS").unwrap_or(0),
    )
}

/// The child's user + system CPU time so far (`/proc/PID/stat`, in clock ticks of 10 ms):
/// unlike wall time, it does not depend on what else the machine is running.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of stat(5); here 0-based after the state field.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// The child's threads by name, e.g. `dsh-worker x2, tokio-runtime-worker x9`.
fn thread_names(pid: u32) -> String {
    let mut names = std::collections::BTreeMap::<String, usize>::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            *names.entry(name.trim().to_owned()).or_default() += 1;
        }
    }
    names
        .into_iter()
        .map(|(name, n)| format!("{name} x{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn run() {
    let sessions = env_usize("ACP_SCALE_SESSIONS", 10_000);
    let prompts = env_usize("ACP_SCALE_PROMPTS", 100).min(sessions);
    let concurrency = env_usize("ACP_SCALE_CONCURRENCY", 1).max(1);
    let bin = binary();
    println!("binary: {}", bin.display());
    let server = MockServer::start();
    for _ in 0..prompts {
        server.push(MockResponse::text("done"));
    }
    let launch = Launch {
        log: None,
        ..Launch::default()
    };
    let mut child = spawn_in(&bin, &server, tempfile::tempdir().unwrap(), launch).await;
    let pid = child.process.id().unwrap();
    let threads = Threads::default();
    threads.watch(pid);
    child.conn().initialize().await;
    let (_, rss_start) = memory(pid);
    println!(
        "started: rss {:.1} MB, threads {}",
        mb(rss_start),
        threads.take()
    );

    let conn = child.conn();
    let cpu_before = cpu(pid);
    let started = Instant::now();
    let created: Vec<(String, Duration)> = futures::stream::iter(0..sessions)
        .map(|_| {
            let request = conn
                .cx
                .send_request(NewSessionRequest::new(conn.cwd.clone()))
                .block_task();
            async move {
                let sent = Instant::now();
                let response = request.await.unwrap();
                (response.session_id.0.to_string(), sent.elapsed())
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let wall = started.elapsed();
    let cpu_used = cpu(pid).saturating_sub(cpu_before);
    let (ids, mut latencies): (Vec<String>, Vec<Duration>) = created.into_iter().unzip();
    let (hwm, rss) = memory(pid);
    latencies.sort();
    println!(
        "session/new x{sessions}, {concurrency} in flight: wall {:.2} s, mean {:.3} ms, p50 {:.3?}, p99 {:.3?}, max {:.3?}",
        wall.as_secs_f64(),
        wall.as_secs_f64() * 1000.0 / sessions as f64,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1],
    );
    println!(
        "  peak rss {:.1} MB, rss {:.1} MB ({:.1} KB per session), max threads {}",
        mb(hwm),
        mb(rss),
        (rss.saturating_sub(rss_start)) as f64 / sessions as f64,
        threads.take()
    );
    println!(
        "  cpu {:.2} s ({:.3} ms per session); threads now: {}",
        cpu_used.as_secs_f64(),
        cpu_used.as_secs_f64() * 1000.0 / sessions as f64,
        thread_names(pid)
    );

    let started = Instant::now();
    let answers: Vec<_> = ids[..prompts]
        .iter()
        .map(|id| child.conn().prompt(id, "say done"))
        .collect();
    for answer in answers {
        assert_eq!(
            answer.await.unwrap().unwrap().stop_reason,
            StopReason::EndTurn
        );
    }
    let wall = started.elapsed();
    let (hwm, rss) = memory(pid);
    println!(
        "prompt x{prompts} (concurrent): wall {:.2} s; peak rss {:.1} MB, rss {:.1} MB, max threads {}",
        wall.as_secs_f64(),
        mb(hwm),
        mb(rss),
        threads.take()
    );

    let (code, took) = child.close_stdin_and_wait(Duration::from_secs(120)).await;
    println!(
        "stdin closed: exit {code:?} after {:.2} s",
        took.as_secs_f64()
    );
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}
