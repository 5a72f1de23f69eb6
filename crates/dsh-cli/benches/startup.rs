//! Startup and whole-run figures of the `dsh` binary against the mock server.
//!
//! `cargo bench -p dsh-cli --bench startup` (an optimized build of `dsh`; `DSH_BENCH_BINARY=PATH`
//! measures another build instead, so two versions can be compared in one sitting). Prints:
//! - time from spawning `dsh run` to the first request the mock server receives (a one-step
//!   run, several samples; the goal is under 15 ms);
//! - for a 20-step run (each step one `bash` call running `echo`, then a final answer): total
//!   wall time, user and system CPU time, and peak RSS (the goal is under 20 MB).
//!
//! - the floor of that 20-step run: a bare client in this process making the same 21 streamed
//!   requests to the same mock server and spawning the same 20 `bash -c` itself, and dsh's
//!   wall time as a multiple of it (the goal is at most 1.5×).
//!
//! CPU time and peak memory come from `getrusage(RUSAGE_CHILDREN)` around each reaped child.
//! Peak RSS is the largest of dsh and the processes it waited for (its `bash` commands and
//! their supervisors, a few MB each), so it bounds dsh's own peak from above.

#![allow(missing_docs, clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_testkit::{MockResponse, MockServer};
use nix::sys::resource::{UsageWho, getrusage};

const STEPS: usize = 20;

/// The binary under test: this build's `dsh`, or `DSH_BENCH_BINARY` (another build, to compare
/// two versions in one run on the same machine state).
fn binary() -> std::path::PathBuf {
    std::env::var_os("DSH_BENCH_BINARY")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_dsh").into())
}
const STARTUP_SAMPLES: usize = 15;
const LOOP_SAMPLES: usize = 7;

struct Sample {
    first_request: Duration,
    wall: Duration,
    user: Duration,
    system: Duration,
}

fn tv(t: nix::sys::time::TimeVal) -> Duration {
    Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
}

fn run_once(server: &MockServer, home: &std::path::Path, cwd: &std::path::Path) -> Sample {
    let before = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
    let seen = server.requests().len();
    let start = Instant::now();
    let out = Command::new(binary())
        .args(["run", "benchmark task"])
        .env("DSH_HOME", home)
        .env("HOME", home)
        .env("DEEPSEEK_BASE_URL", server.url())
        .env("DEEPSEEK_API_KEY", "bench")
        .env_remove("DSH_LOG")
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let wall = start.elapsed();
    assert!(
        out.status.success(),
        "dsh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
    let first = &server.requests()[seen];
    Sample {
        first_request: first.received_at.saturating_duration_since(start),
        wall,
        user: tv(after.user_time()) - tv(before.user_time()),
        system: tv(after.system_time()) - tv(before.system_time()),
    }
}

/// One streamed request the way a bare client makes it: connect, POST, read to the end.
fn bare_request(server: &MockServer, body: &str) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(server.addr()).unwrap();
    stream.set_nodelay(true).unwrap();
    write!(
        stream,
        "POST /chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n\
         authorization: Bearer bench\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    assert!(answer.windows(6).any(|w| w == b"[DONE]"), "not a stream");
}

/// The floor of the `STEPS`-step run: the same requests and commands, no harness.
fn floor_once(server: &MockServer, cwd: &std::path::Path) -> Duration {
    push_steps(server);
    let body = serde_json::json!({"model": "deepseek-v4-flash", "stream": true,
        "messages": [{"role": "user", "content": "benchmark task"}]})
    .to_string();
    let start = Instant::now();
    for i in 0..STEPS {
        bare_request(server, &body);
        let status = Command::new("bash")
            .args(["-c", &format!("echo step {i}")])
            .current_dir(cwd)
            .stdout(Stdio::piped())
            .output()
            .unwrap()
            .status;
        assert!(status.success());
    }
    bare_request(server, &body);
    start.elapsed()
}

/// The answers of the `STEPS`-step run: one `bash` call per step, then a final text.
fn push_steps(server: &MockServer) {
    for i in 0..STEPS {
        let args = serde_json::json!({
            "command": format!("echo step {i}"),
            "description": "print a step marker",
        })
        .to_string();
        server.push(MockResponse::tool_call(&format!("call_{i}"), "bash", &args));
    }
    server.push(MockResponse::text("all steps done"));
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    // `cargo bench` passes harness flags such as `--bench`; there is nothing to filter.
    let server = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir(cwd.path().join(".git")).unwrap();

    // Warm the page cache and the binary once.
    server.push(MockResponse::text("warm"));
    run_once(&server, home.path(), cwd.path());

    let mut firsts = Vec::new();
    for _ in 0..STARTUP_SAMPLES {
        server.push(MockResponse::text("ok"));
        firsts.push(run_once(&server, home.path(), cwd.path()).first_request);
    }
    firsts.sort();
    println!(
        "start -> first request ({STARTUP_SAMPLES} one-step runs): min {}  median {}  max {}",
        ms(firsts[0]),
        ms(firsts[firsts.len() / 2]),
        ms(firsts[firsts.len() - 1])
    );

    // The run and its floor alternate, medians of `LOOP_SAMPLES` each, so both see the same
    // machine.
    let mut runs = Vec::new();
    let mut floors = Vec::new();
    for _ in 0..LOOP_SAMPLES {
        push_steps(&server);
        runs.push(run_once(&server, home.path(), cwd.path()));
        floors.push(floor_once(&server, cwd.path()));
    }
    runs.sort_by_key(|s| s.wall);
    floors.sort();
    let s = runs.swap_remove(runs.len() / 2);
    let floor = floors[floors.len() / 2];
    let peak = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap().max_rss();
    println!(
        "{STEPS}-step run: first request {}  wall {}  cpu user {}  sys {}  peak rss {:.1} MB",
        ms(s.first_request),
        ms(s.wall),
        ms(s.user),
        ms(s.system),
        peak as f64 / 1024.0
    );
    println!(
        "{STEPS}-step floor (bare client, same requests and commands): wall {}  dsh/floor {:.2}x  (medians of {LOOP_SAMPLES})",
        ms(floor),
        s.wall.as_secs_f64() / floor.as_secs_f64()
    );
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}
