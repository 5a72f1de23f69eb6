//! Sandbox overhead per command, layer by layer: sequential `true` commands, from a bare
//! `bash -c true` spawn up to the guard's full sandbox.
//!
//! Rows (each adds one layer to the one above, unless said otherwise):
//! - `bash -c true`: `std::process::Command` spawning bash and waiting (the floor);
//! - `sh supervisor (no guard)`: dsh-shell's executor with its own `/bin/sh` group supervisor;
//! - `zygote, danger-full-access`: the guard's supervisor, forked by the zygote per command
//!   (containment: subreaper, own session, descriptors closed), no confinement;
//! - `+ landlock, seccomp, caps (no ns)`: workspace-write as on a kernel without namespaces;
//! - `+ mount and PID namespaces`: workspace-write as dsh runs it here;
//! - `read-only (ns)`: read-only mode (its private temp dir and `/dev/shm`).
//!
//! Beside them, `supervisor exec` spawns the supervisor binary itself (it exits at once): the
//! cost the zygote saves every command (dsh's release binary is larger still).
//!
//! Wall time on a loaded machine mostly measures scheduling waits along the chain dsh →
//! supervisor → bash; the CPU time the commands' processes used (user + system, 10 ms ticks
//! summed over every run: this process's reaped children, plus the zygote's own and its reaped
//! children's, since the zygote reaps the supervisors) is the load-independent cost, so both
//! are printed. The executor's own CPU (pipes, threads, the runtime) is not in it.
//!
//! `cargo bench -p dsh-guard --bench overhead` (add `--profile dev` to skip a release build;
//! figures are then pessimistic). `DSH_BENCH_N` sets the number of commands (default 300).

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_guard::{GuardSupervision, SandboxMode, SandboxPolicy, SupervisorProgram};
use dsh_shell::{LocalShellExecutor, ShellConfig, ShellExecRequest, ShellExecutor};

const SUPERVISOR: &str = env!("CARGO_BIN_EXE_dsh-guard-supervisor");

/// A guard-supervised executor in `mode`, with or without namespaces, and its supervision.
fn guarded(mode: SandboxMode, namespaces: bool) -> (LocalShellExecutor, Arc<GuardSupervision>) {
    let program = SupervisorProgram {
        program: PathBuf::from(SUPERVISOR),
        args: Vec::new(),
    };
    let mut policy = SandboxPolicy::new(mode, std::env::temp_dir());
    policy.namespaces = namespaces;
    let supervision = GuardSupervision::new(policy, program);
    if let Ok(found) = supervision.enforcement()
        && namespaces
        && found.namespaces == dsh_guard::Namespaces::None
    {
        println!("(namespaces unavailable here: {})", found.namespace_reason);
    }
    let supervision = Arc::new(supervision);
    let exec = LocalShellExecutor::new(ShellConfig::default())
        .unwrap()
        .with_supervision(supervision.clone());
    (exec, supervision)
}

async fn measure_executor(exec: &LocalShellExecutor, n: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let spec = exec.resolve(ShellExecRequest::new("true")).unwrap();
        let start = Instant::now();
        let result = exec.run(spec).await.unwrap();
        times.push(start.elapsed());
        assert_eq!(result.exit_code, Some(0), "{}", result.stderr.text);
    }
    times.sort();
    times
}

/// `program args` spawned and waited for, `n` times.
fn measure_spawn(program: &str, args: &[&str], n: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let _ = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        times.push(start.elapsed());
    }
    times.sort();
    times
}

/// CPU seconds used by this process's reaped children so far, plus (with a zygote) the
/// zygote's own and its reaped children's.
fn children_cpu(zygote: Option<u32>) -> f64 {
    let fields = |stat: &str| -> Vec<f64> {
        stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0.0))
            .collect()
    };
    // After the command name: state is field 3; utime 14, stime 15, cutime 16, cstime 17
    // (proc(5)), so indexes 11 to 14 here.
    let own = fields(&std::fs::read_to_string("/proc/self/stat").unwrap());
    let mut ticks = own[13] + own[14];
    if let Some(pid) = zygote
        && let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
    {
        let z = fields(&stat);
        ticks += z[11] + z[12] + z[13] + z[14];
    }
    // USER_HZ is 100 on Linux.
    ticks / 100.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One printed row: p50, p95, CPU per command, and p50 over the floor.
fn row(name: &str, times: &[Duration], cpu: Option<f64>, floor: Option<Duration>) {
    let p50 = times[times.len() / 2];
    let p95 = times[times.len() * 95 / 100];
    let cpu = cpu.map_or_else(|| "      -".to_owned(), |c| format!("{c:5.2} ms"));
    let over = floor.map_or_else(String::new, |f| {
        format!("  (+{:.2} ms p50 over bash -c true)", ms(p50) - ms(f))
    });
    println!(
        "{name:<38} p50 {:6.2} ms  p95 {:6.2} ms  cpu {cpu}/command{over}",
        ms(p50),
        ms(p95)
    );
}

fn main() {
    let n: usize = std::env::var("DSH_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    println!("{n} sequential `true` per case");
    let _ = measure_spawn("bash", &["-c", "true"], 10);
    let cpu_before = children_cpu(None);
    let bare = measure_spawn("bash", &["-c", "true"], n);
    let cpu = (children_cpu(None) - cpu_before) * 1000.0 / n as f64;
    row("bash -c true", &bare, Some(cpu), None);
    let floor = Some(bare[bare.len() / 2]);
    let exec_cost = measure_spawn(SUPERVISOR, &[], n);
    row(
        "supervisor exec (what the zygote saves)",
        &exec_cost,
        None,
        None,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let cases: [(&str, Option<(SandboxMode, bool)>); 5] = [
            ("sh supervisor (no guard)", None),
            (
                "zygote, danger-full-access",
                Some((SandboxMode::DangerFullAccess, true)),
            ),
            (
                "+ landlock, seccomp, caps (no ns)",
                Some((SandboxMode::WorkspaceWrite, false)),
            ),
            (
                "+ mount and PID namespaces",
                Some((SandboxMode::WorkspaceWrite, true)),
            ),
            ("read-only (ns)", Some((SandboxMode::ReadOnly, true))),
        ];
        for (name, setup) in cases {
            let (exec, supervision) = match setup {
                None => (
                    LocalShellExecutor::new(ShellConfig::default()).unwrap(),
                    None,
                ),
                Some((mode, namespaces)) => {
                    let (exec, supervision) = guarded(mode, namespaces);
                    (exec, Some(supervision))
                }
            };
            // Warm up (page cache, the zygote, its probe).
            let _ = measure_executor(&exec, 10).await;
            let zygote = supervision.as_ref().and_then(|s| s.zygote_pid());
            let cpu_before = children_cpu(zygote);
            let times = measure_executor(&exec, n).await;
            let cpu = (children_cpu(zygote) - cpu_before) * 1000.0 / n as f64;
            row(name, &times, Some(cpu), floor);
            exec.dispose().await;
        }
    });
}
