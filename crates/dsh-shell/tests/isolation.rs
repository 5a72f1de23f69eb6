//! Tests that need a second process: the owner of an executor dying by SIGKILL, and an
//! executor running in a process whose environment holds secrets.
//!
//! The second process is this test binary itself, re-executed to run only
//! `helper_process` (ignored in normal runs), which reads its job from `HELPER_MODE`.

// Helpers outside #[test] functions panic on failure like the tests do.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use dsh_shell::{ShellExecRequest, ShellExecutor};

const HELPER_MODE: &str = "DSH_SHELL_TEST_HELPER";
const HELPER_FIFO: &str = "DSH_SHELL_TEST_FIFO";

/// Kills the helper however the test ends, so a failing test leaves nothing behind.
struct Helper(Child);

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn helper(mode: &str, envs: &[(&str, &str)]) -> Helper {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_MODE, mode)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Helper(child)
}

#[tokio::test]
async fn sigkill_of_the_owner_kills_background_grandchildren() {
    let mut fifo = LineFifo::new();
    let mut owner = helper("owner", &[(HELPER_FIFO, fifo.path.to_str().unwrap())]);
    let pids = fifo.read_line().await;
    let (bash, sleep) = pids.split_once(' ').unwrap();
    let (bash, sleep) = (Proc::alive(Proc::pid(bash)), Proc::alive(Proc::pid(sleep)));

    // Nothing in the owner gets a chance to clean up.
    owner.0.kill().unwrap();
    owner.0.wait().unwrap();

    sleep
        .assert_gone("grandchild sleep of a SIGKILLed owner")
        .await;
    bash.assert_gone("bash of a SIGKILLed owner").await;
}

#[tokio::test]
async fn inherited_secrets_never_reach_commands() {
    let mut helper = helper(
        "env",
        &[
            ("MY_API_KEY", "k"),
            ("github_token", "t"),
            ("DB_PASSWORD", "p"),
            ("CLIENT_SECRET", "s"),
            ("DSH_FOO", "f"),
            ("DSH_SHELL_TEST_VISIBLE", "managed"),
            ("PLAIN_SETTING", "kept"),
        ],
    );
    // Read to the end so the helper can finish printing its test summary.
    let stdout: Vec<String> = BufReader::new(helper.0.stdout.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .collect();
    let env: Vec<&String> = stdout
        .iter()
        .skip_while(|line| *line != "--- env ---")
        .skip(1)
        .take_while(|line| *line != "--- end ---")
        .collect();
    assert!(helper.0.wait().unwrap().success());
    let names: Vec<&str> = env
        .iter()
        .filter_map(|line| line.split_once('='))
        .map(|(n, _)| n)
        .collect();
    assert!(names.contains(&"PLAIN_SETTING"), "{names:?}");
    assert!(
        names.contains(&"DSH_SESSION_ID"),
        "explicit variables pass: {names:?}"
    );
    for secret in [
        "MY_API_KEY",
        "github_token",
        "DB_PASSWORD",
        "CLIENT_SECRET",
        "DSH_FOO",
        "DSH_SHELL_TEST_VISIBLE",
    ] {
        assert!(!names.contains(&secret), "{secret} leaked: {names:?}");
    }
}

/// Not a test: the body of the helper process. Without `HELPER_MODE` (a plain `--ignored` run)
/// it does nothing.
#[test]
#[ignore = "helper process for the tests in this file"]
fn helper_process() {
    let Ok(mode) = std::env::var(HELPER_MODE) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let exec = executor();
        match mode.as_str() {
            "owner" => {
                let fifo = std::env::var(HELPER_FIFO).unwrap();
                let req = ShellExecRequest {
                    env: vec![("PID_FIFO".into(), fifo)],
                    ..ShellExecRequest::new(
                        r#"sleep 1000 & echo "$$ $!" > "$PID_FIFO"; wait; echo"#,
                    )
                };
                exec.start(spec(&exec, req)).await.unwrap();
                // Hold the executor until the test kills this process; the bound only keeps
                // an orphaned helper from lingering if the test itself died.
                tokio::time::sleep(Duration::from_secs(120)).await;
            }
            "env" => {
                let req = ShellExecRequest {
                    env: vec![("DSH_SESSION_ID".into(), "s1".into())],
                    ..ShellExecRequest::new("env")
                };
                let result = exec.run(spec(&exec, req)).await.unwrap();
                // Leading newline: libtest has already printed "test helper_process ... ".
                println!("\n--- env ---\n{}--- end ---", result.stdout.text);
            }
            other => panic!("unknown helper mode {other}"),
        }
    });
}
