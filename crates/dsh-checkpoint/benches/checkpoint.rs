//! Checkpoint cost on a 10,000-file workspace: the first checkpoint (every file hashed), one
//! with nothing changed, one with 10 files changed, and the first one of a new process (stat
//! cache read from disk). Prints medians; goals: nothing changed ≤ 20 ms, 10 changed ≤ 50 ms.
//!
//! `cargo bench -p dsh-checkpoint --bench checkpoint`

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use dsh_checkpoint::{CheckpointConfig, Checkpoints};

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;
const ROUNDS: usize = 30;

fn workspace(root: &Path) {
    for d in 0..DIRS {
        let dir = root.join(format!("src/module{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let body = format!("// file {d}/{f}\n{}", "let x = 1;\n".repeat(80));
            std::fs::write(dir.join(format!("file{f:03}.rs")), body).unwrap();
        }
    }
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
}

/// CPU time (user + system, every thread) this process used so far: unlike wall time it does
/// not grow with the load other processes put on a shared machine.
fn cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_SELF).unwrap();
    let tv =
        |t: nix::sys::time::TimeVal| Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000);
    tv(u.user_time()) + tv(u.system_time())
}

/// Wall and CPU time of `f`.
async fn timed<F: std::future::Future>(f: F) -> (Duration, Duration) {
    let (t, c) = (Instant::now(), cpu());
    f.await;
    (t.elapsed(), cpu() - c)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    workspace(work.path());
    let config = CheckpointConfig::new(home.path().join("checkpoints"));
    let service = Checkpoints::new(config.clone(), None, None);
    rt.block_on(async {
        let t = Instant::now();
        service.snapshot(work.path()).await.unwrap();
        println!(
            "first checkpoint ({} files, every file hashed): {}",
            DIRS * FILES_PER_DIR,
            ms(t.elapsed())
        );
        // The stat cache trusts a file only once its last change is RACY_WINDOW old.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        service.snapshot(work.path()).await.unwrap();

        let (mut unchanged, mut unchanged_cpu) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (wall, cpu) = timed(async { service.snapshot(work.path()).await.unwrap() }).await;
            unchanged.push(wall);
            unchanged_cpu.push(cpu);
        }
        println!(
            "nothing changed: median {} wall, {} CPU (goal ≤ 20 ms)",
            ms(median(unchanged)),
            ms(median(unchanged_cpu))
        );

        let fresh = Checkpoints::new(config.clone(), None, None);
        let t = Instant::now();
        fresh.snapshot(work.path()).await.unwrap();
        println!(
            "nothing changed, new process (cache read from disk): {}",
            ms(t.elapsed())
        );

        let (mut changed, mut changed_cpu) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            for i in 0..10 {
                let path = work.path().join(format!(
                    "src/module{:03}/file{:03}.rs",
                    (round * 10 + i) % DIRS,
                    i
                ));
                std::fs::write(path, format!("changed in round {round}\n")).unwrap();
            }
            let (wall, cpu) = timed(async { service.snapshot(work.path()).await.unwrap() }).await;
            changed.push(wall);
            changed_cpu.push(cpu);
        }
        println!(
            "10 files changed: median {} wall, {} CPU (goal ≤ 50 ms)",
            ms(median(changed)),
            ms(median(changed_cpu))
        );
        println!(
            "load average during the run: {}",
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
    });
}
