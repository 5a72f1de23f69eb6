//! Sandbox overhead per command: sequential `true` commands through `LocalShellExecutor`,
//! with dsh-shell's own `/bin/sh` supervisor, and under the guard's supervisor in
//! danger-full-access (containment only), workspace-write and read-only. Prints p50/p95 per
//! command and the difference to danger-full-access (the goal: at most 2 ms).
//!
//! Wall time on a loaded machine mostly measures scheduling waits along the chain
//! dsh → supervisor → bash; the CPU time the commands' processes used (user + system, from
//! `/proc/self/stat`'s reaped-children fields, 10 ms ticks summed over every run) is the
//! load-independent cost, so both are printed.
//!
//! `cargo bench -p dsh-guard --bench overhead` (add `--profile dev` to skip a release build;
//! figures are then pessimistic). `DSH_BENCH_N` sets the number of commands (default 300).

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_guard::{GuardSupervision, SandboxMode, SandboxPolicy, SupervisorProgram};
use dsh_shell::{LocalShellExecutor, ShellConfig, ShellExecRequest, ShellExecutor};

fn executor(mode: Option<SandboxMode>) -> LocalShellExecutor {
    let exec = LocalShellExecutor::new(ShellConfig::default()).unwrap();
    match mode {
        None => exec,
        Some(mode) => {
            let program = SupervisorProgram {
                program: PathBuf::from(env!("CARGO_BIN_EXE_dsh-guard-supervisor")),
                args: Vec::new(),
            };
            let policy = SandboxPolicy::new(mode, std::env::temp_dir());
            exec.with_supervision(Arc::new(GuardSupervision::new(policy, program)))
        }
    }
}

async fn measure(exec: &LocalShellExecutor, n: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let spec = exec.resolve(ShellExecRequest::new("true")).unwrap();
        let start = Instant::now();
        let result = exec.run(spec).await.unwrap();
        times.push(start.elapsed());
        assert_eq!(result.exit_code, Some(0));
    }
    times.sort();
    times
}

/// CPU seconds used by reaped children (and their reaped descendants) so far.
fn children_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .collect();
    // After the command name: state is field 3, cutime 16 and cstime 17 (proc(5)).
    let ticks: f64 = fields[13].parse::<f64>().unwrap() + fields[14].parse::<f64>().unwrap();
    // USER_HZ is 100 on Linux.
    ticks / 100.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let n: usize = std::env::var("DSH_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let cases = [
            ("sh supervisor (no guard)", None),
            ("danger-full-access", Some(SandboxMode::DangerFullAccess)),
            ("workspace-write", Some(SandboxMode::WorkspaceWrite)),
            ("read-only", Some(SandboxMode::ReadOnly)),
        ];
        let mut baseline = None;
        println!("{n} sequential `true` per case");
        for (name, mode) in cases {
            let exec = executor(mode);
            // Warm up (page cache, the probe).
            let _ = measure(&exec, 10).await;
            let cpu_before = children_cpu();
            let times = measure(&exec, n).await;
            let cpu = (children_cpu() - cpu_before) * 1000.0 / n as f64;
            let p50 = times[times.len() / 2];
            let p95 = times[times.len() * 95 / 100];
            if mode == Some(SandboxMode::DangerFullAccess) {
                baseline = Some(p50);
            }
            let over = match (mode, baseline) {
                (Some(m), Some(base)) if m.confines() => {
                    format!(
                        "  (+{:.2} ms p50 over danger-full-access)",
                        ms(p50) - ms(base)
                    )
                }
                _ => String::new(),
            };
            println!(
                "{name:<26} p50 {:.2} ms  p95 {:.2} ms  cpu {cpu:.2} ms/command{over}",
                ms(p50),
                ms(p95)
            );
            exec.dispose().await;
        }
    });
}
