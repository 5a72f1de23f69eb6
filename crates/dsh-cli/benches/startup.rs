//! Startup and whole-run figures of the `dsh` binary against the mock server.
//!
//! `cargo bench -p dsh-cli --bench startup` (an optimized build of `dsh`; `DSH_BENCH_BINARY=PATH`
//! measures another build instead, so two versions can be compared in one sitting). Prints:
//! - time from spawning `dsh run` to the first request the mock server receives (a one-step
//!   run, several samples, `DSH_BENCH_STARTUP_SAMPLES`; the goal is under 15 ms), against its
//!   floor (executing the binary to its exit plus one bare streamed request; the goal is at
//!   most 1.5×) and, with `DSH_BENCH_COMPARE=PATH`, another build's runs interleaved with
//!   these (issue 28: no more than 1 ms later than before the harness move);
//! - for a 20-step run (each step one `bash` call running `echo`, then a final answer): total
//!   wall time, user and system CPU time, and peak RSS (the goal is under 20 MB).
//!
//! - per-step overhead in one long session (1,000 steps; `DSH_BENCH_LONG_STEPS`): the time
//!   from an answer to the next request near step 10 and near the last step, less a direct
//!   spawn of the same command (the goal: the last no more than 1.2× the first);
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

use dsh_testkit::sse::ChatStream;
use dsh_testkit::{MockResponse, MockServer};
use nix::sys::resource::{UsageWho, getrusage};

const STEPS: usize = 20;
/// Steps of the long session (`DSH_BENCH_LONG_STEPS`; 0 skips it).
const LONG_STEPS: usize = 1000;

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
    run_binary(&binary(), server, home, cwd)
}

/// `bin run "benchmark task"` against the model server at `url`, in `cwd` with home `home`.
fn dsh_run(
    bin: &std::path::Path,
    url: &str,
    home: &std::path::Path,
    cwd: &std::path::Path,
) -> Command {
    let mut command = Command::new(bin);
    command
        .args(["run", "benchmark task"])
        .env("DSH_HOME", home)
        .env("HOME", home)
        .env("DEEPSEEK_BASE_URL", url)
        .env("DEEPSEEK_API_KEY", "bench")
        .env_remove("DSH_LOG")
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Waits for a `dsh run` and checks it succeeded.
fn finish(child: std::process::Child) {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "dsh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One `dsh run` of `bin` against `server`.
fn run_binary(
    bin: &std::path::Path,
    server: &MockServer,
    home: &std::path::Path,
    cwd: &std::path::Path,
) -> Sample {
    let before = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
    let seen = server.requests().len();
    let start = Instant::now();
    finish(dsh_run(bin, &server.url(), home, cwd).spawn().unwrap());
    let wall = start.elapsed();
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

/// The floor of start-up: executing the binary until it exits (`--version`: the loader, the
/// secrets check, argument parsing) plus one bare streamed request.
fn startup_floor(server: &MockServer) -> Duration {
    let start = Instant::now();
    let status = Command::new(binary())
        .arg("--version")
        // No secret in its environment: a bare exec, without the re-exec that drops them.
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    server.push(MockResponse::text("floor"));
    let body = serde_json::json!({"model": "deepseek-v4-flash", "stream": true,
        "messages": [{"role": "user", "content": "benchmark task"}]})
    .to_string();
    bare_request(server, &body);
    start.elapsed()
}

/// Step `i`'s command, spawned directly: `bash -c "echo step i"`.
fn step_command(cwd: &std::path::Path, i: usize) {
    let status = Command::new("bash")
        .args(["-c", &format!("echo step {i}")])
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .output()
        .unwrap()
        .status;
    assert!(status.success());
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
        step_command(cwd, i);
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

/// One request of the long run: when it had fully arrived, when its answer was written, and
/// dsh's CPU ticks when it arrived.
type Exchange = (Instant, Instant, Option<u64>);

/// A model server for the long run. It answers each request at once with one `bash` call (the
/// last with a final text), without parsing or checking the request body, and records when a
/// request had fully arrived and when its answer was written: the mock server's JSON parse and
/// provider-validity walk grow with the body, and would otherwise count as dsh's per-step
/// cost.
struct StepServer {
    addr: std::net::SocketAddr,
    /// `(request fully read, answer written, dsh's CPU ticks when the request arrived)` per
    /// request, in order.
    times: std::sync::Arc<std::sync::Mutex<Vec<Exchange>>>,
    /// The pid of the dsh under test, once spawned (0 before).
    pid: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

/// User plus system CPU time of process `pid` so far, in clock ticks (`/proc/PID/stat`).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

impl StepServer {
    fn start(steps: usize) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let times = std::sync::Arc::new(std::sync::Mutex::new(Vec::with_capacity(steps + 1)));
        let pid = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let recorded = times.clone();
        let dsh = pid.clone();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let mut stream = stream.unwrap();
                let arrived = read_http_request(&mut stream);
                let cpu = match dsh.load(std::sync::atomic::Ordering::SeqCst) {
                    0 => None,
                    pid => cpu_ticks(pid),
                };
                let answer = if n < steps {
                    let args = serde_json::json!({"command": format!("echo step {n}"),
                        "description": "print a step marker"})
                    .to_string();
                    sse_body(
                        ChatStream::new("mock")
                            .role()
                            .tool_call(0, &format!("call_{n}"), "bash", &args, 64)
                            .finish("tool_calls"),
                    )
                } else {
                    sse_body(ChatStream::new("mock").role().text("done").finish("stop"))
                };
                use std::io::Write as _;
                stream.write_all(&answer).unwrap();
                stream.flush().unwrap();
                recorded
                    .lock()
                    .unwrap()
                    .push((arrived, Instant::now(), cpu));
                let _ = stream.shutdown(std::net::Shutdown::Write);
            }
        });
        Self { addr, times, pid }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Reads one request (head, then a `content-length` body); returns when it had fully arrived.
fn read_http_request(stream: &mut std::net::TcpStream) -> Instant {
    use std::io::Read as _;
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut chunk = [0u8; 64 * 1024];
    let head_end = loop {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "client closed before a request head");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "client closed mid-body");
        buf.extend_from_slice(&chunk[..n]);
    }
    Instant::now()
}

/// A complete `200 text/event-stream` response holding `stream`'s frames.
fn sse_body(stream: ChatStream) -> Vec<u8> {
    let body: Vec<u8> = stream
        .done()
        .build()
        .iter()
        .flat_map(dsh_testkit::SseFrame::to_bytes)
        .collect();
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

/// Median of `xs` (sorted in place).
fn median(xs: &mut [Duration]) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// One session of `steps` steps: dsh's time between an answer and the next request (reading
/// the answer, logging, the command, the next request) near step 10 and near the last step,
/// and that time less the floor of a step (spawning the same `bash -c echo` directly).
fn long_session(home: &std::path::Path, cwd: &std::path::Path, steps: usize) {
    let server = StepServer::start(steps);
    let child = dsh_run(&binary(), &server.url(), home, cwd)
        .spawn()
        .unwrap();
    server
        .pid
        .store(child.id(), std::sync::atomic::Ordering::SeqCst);
    finish(child);
    let times = server.times.lock().unwrap().clone();
    assert_eq!(
        times.len(),
        steps + 1,
        "one request per step and a last one"
    );
    // Step k's gap: from its answer written to the next request fully read.
    let gaps: Vec<Duration> = times
        .windows(2)
        .map(|w| w[1].0.saturating_duration_since(w[0].1))
        .collect();
    let mut command = Vec::new();
    for i in 0..41 {
        let start = Instant::now();
        step_command(cwd, i);
        command.push(start.elapsed());
    }
    let command = median(&mut command);
    let window = 21;
    let early = median(&mut gaps[5..5 + window].to_vec());
    let late = median(&mut gaps[steps - window..].to_vec());
    // dsh's own CPU per step over the first and the last hundred steps (10 ms ticks, so
    // averaged over many steps); independent of how loaded the machine is.
    let span = 100.min(steps / 2);
    let cpu_per_step = |from: usize, to: usize| -> Option<f64> {
        let (a, b) = (times[from].2?, times[to].2?);
        // `/proc` counts in USER_HZ, 100 per second in Linux's ABI.
        Some((b - a) as f64 * 10.0 / (to - from) as f64)
    };
    let (cpu_early, cpu_late) = (cpu_per_step(1, 1 + span), cpu_per_step(steps - span, steps));
    let over = |d: Duration| d.saturating_sub(command);
    println!(
        "{steps}-step session, per step (answer -> next request, medians of {window}): \
         step ~10 {}  step ~{steps} {}  (bash -c echo alone {})",
        ms(early),
        ms(late),
        ms(command)
    );
    println!(
        "  overhead over the command: step ~10 {}  step ~{steps} {}  ratio {:.2}x",
        ms(over(early)),
        ms(over(late)),
        over(late).as_secs_f64() / over(early).as_secs_f64().max(1e-9)
    );
    if let (Some(a), Some(b)) = (cpu_early, cpu_late) {
        println!(
            "  dsh CPU per step: steps 1-{} {a:.2} ms  last {span} {b:.2} ms  ratio {:.2}x",
            1 + span,
            b / a.max(1e-9)
        );
    }
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

    let samples = std::env::var("DSH_BENCH_STARTUP_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(STARTUP_SAMPLES)
        .max(1);
    // `DSH_BENCH_COMPARE=PATH`: another build's runs interleaved with this one's, sample by
    // sample, so both see the same machine (issue 28's check: no more than 1 ms later).
    let other = std::env::var_os("DSH_BENCH_COMPARE").map(std::path::PathBuf::from);
    if let Some(other) = &other {
        server.push(MockResponse::text("warm"));
        run_binary(other, &server, home.path(), cwd.path());
    }
    let mut firsts = Vec::new();
    let mut others = Vec::new();
    let mut floors = Vec::new();
    for i in 0..samples {
        // Which build goes first alternates: a run's exit (its last writes and syncs) overlaps
        // the next one's start.
        let mut pair = [true, false];
        if i % 2 == 1 {
            pair.reverse();
        }
        for this in pair {
            match (this, &other) {
                (true, _) => {
                    server.push(MockResponse::text("ok"));
                    firsts.push(run_once(&server, home.path(), cwd.path()).first_request);
                }
                (false, Some(other)) => {
                    server.push(MockResponse::text("ok"));
                    others.push(run_binary(other, &server, home.path(), cwd.path()).first_request);
                }
                (false, None) => {}
            }
        }
        floors.push(startup_floor(&server));
    }
    let spread = |xs: &mut Vec<Duration>| {
        let median = self::median(xs);
        format!(
            "min {}  median {}  max {}",
            ms(xs[0]),
            ms(median),
            ms(xs[xs.len() - 1])
        )
    };
    println!(
        "start -> first request ({samples} one-step runs): {}",
        spread(&mut firsts)
    );
    if let Some(other) = &other {
        println!(
            "  {} interleaved: {}  (this build {:+.2} ms at the median)",
            other.display(),
            spread(&mut others),
            (median(&mut firsts).as_secs_f64() - median(&mut others).as_secs_f64()) * 1e3
        );
    }
    let floor = median(&mut floors);
    println!(
        "  floor (exec of the binary to its exit, `--version`, plus one bare streamed request): \
         {}  first request / floor {:.2}x",
        ms(floor),
        median(&mut firsts).as_secs_f64() / floor.as_secs_f64()
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

    let long_steps = std::env::var("DSH_BENCH_LONG_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LONG_STEPS);
    if long_steps > 0 {
        long_session(home.path(), cwd.path(), long_steps.max(2 * 11 + 5));
    }
}
