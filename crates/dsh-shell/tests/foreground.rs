//! Foreground runs against real `bash` processes.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use dsh_shell::{ShellError, ShellExecRequest, ShellExecutor};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn stdout_and_stderr_are_captured_separately() {
    let exec = executor();
    let result = exec
        .run(command(&exec, "echo out; echo err >&2"))
        .await
        .unwrap();
    assert_eq!(result.stdout.text, "out\n");
    assert_eq!(result.stderr.text, "err\n");
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.signal, None);
    assert!(!result.timed_out && !result.aborted);
    assert!(!result.stdout.truncated && result.stdout.spill_path.is_none());
}

#[tokio::test]
async fn nonzero_exit_resolves_with_its_code() {
    let exec = executor();
    let result = exec
        .run(command(&exec, "echo partial; exit 3"))
        .await
        .unwrap();
    assert_eq!(result.exit_code, Some(3));
    assert_eq!(result.stdout.text, "partial\n");
}

#[tokio::test]
async fn self_signal_is_reported_as_the_signal() {
    let exec = executor();
    let result = exec.run(command(&exec, "kill -TERM $$")).await.unwrap();
    assert_eq!(result.exit_code, None);
    assert_eq!(result.signal.as_deref(), Some("SIGTERM"));
    assert!(
        !result.timed_out && !result.aborted,
        "a self-signal is neither a timeout nor an abort"
    );
}

#[tokio::test]
async fn stdin_is_empty() {
    let exec = executor();
    let result = exec.run(command(&exec, "cat; echo done")).await.unwrap();
    assert_eq!(result.stdout.text, "done\n");
}

#[tokio::test]
async fn command_runs_in_the_requested_workdir() {
    let exec = executor();
    let dir = tempfile::tempdir().unwrap();
    let req = ShellExecRequest {
        workdir: Some(dir.path().into()),
        ..ShellExecRequest::new("pwd -P")
    };
    let result = exec.run(spec(&exec, req)).await.unwrap();
    assert_eq!(
        result.stdout.text.trim_end(),
        dir.path().canonicalize().unwrap().to_str().unwrap()
    );
}

#[tokio::test]
async fn missing_workdir_is_an_error_naming_the_path() {
    let exec = executor();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let req = ShellExecRequest {
        workdir: Some(missing.clone()),
        ..ShellExecRequest::new("true")
    };
    let err = exec.run(spec(&exec, req)).await.unwrap_err();
    assert!(
        matches!(err, ShellError::BadWorkdir { ref path, .. } if *path == missing),
        "{err:?}"
    );
    assert!(err.to_string().contains(missing.to_str().unwrap()), "{err}");
}

#[tokio::test]
async fn file_as_workdir_is_an_error() {
    let exec = executor();
    let file = tempfile::NamedTempFile::new().unwrap();
    let req = ShellExecRequest {
        workdir: Some(file.path().into()),
        ..ShellExecRequest::new("true")
    };
    let err = exec.start(spec(&exec, req)).await.unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[tokio::test]
async fn zero_timeout_in_a_hand_built_spec_is_refused() {
    let exec = executor();
    let mut spec = command(&exec, "true");
    spec.timeout = Duration::ZERO;
    assert!(matches!(exec.run(spec).await, Err(ShellError::ZeroTimeout)));
}

#[tokio::test]
async fn pre_cancelled_token_is_refused_without_running_anything() {
    let exec = executor();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let token = CancellationToken::new();
    token.cancel();
    let req = ShellExecRequest {
        cancel: Some(token),
        workdir: Some(dir.path().into()),
        ..ShellExecRequest::new("touch ran")
    };
    let err = exec.run(spec(&exec, req.clone())).await.unwrap_err();
    assert!(matches!(err, ShellError::Cancelled), "{err:?}");
    let err = exec.start(spec(&exec, req)).await.unwrap_err();
    assert!(matches!(err, ShellError::Cancelled), "{err:?}");
    assert!(!marker.exists());
}

#[tokio::test]
async fn timeout_with_trapped_term_and_clean_exit_is_still_timed_out() {
    // A long grace: the command must end through its own trap, not through SIGKILL.
    let exec = executor_with(|c| c.grace = Duration::from_secs(30));
    let req = ShellExecRequest {
        timeout: Some(Duration::from_secs(1)),
        ..ShellExecRequest::new("trap 'echo trapped; exit 0' TERM; while :; do sleep 1; done")
    };
    let result = exec.run(spec(&exec, req)).await.unwrap();
    assert!(result.timed_out);
    assert!(!result.aborted, "timed_out and aborted are exclusive");
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.signal, None);
    assert_eq!(result.timeout, Duration::from_secs(1));
    assert_eq!(result.stdout.text, "trapped\n");
}

#[tokio::test]
async fn timeout_escalates_to_sigkill_when_term_is_ignored() {
    let exec = executor();
    // The ignored SIGTERM is inherited by `sleep`, so only the SIGKILL step can end the group.
    let req = ShellExecRequest {
        timeout: Some(Duration::from_secs(1)),
        ..ShellExecRequest::new("trap '' TERM; sleep 1000 & echo $!; wait")
    };
    let result = exec.run(spec(&exec, req)).await.unwrap();
    assert!(result.timed_out);
    assert_eq!(result.signal.as_deref(), Some("SIGKILL"));
    // `sleep` is a grandchild of the executor: only a group kill reaches it.
    Proc::observe(Proc::pid(&result.stdout.text))
        .assert_gone("TERM-ignoring sleep")
        .await;
}

#[tokio::test]
async fn timeout_kills_the_grandchild_with_its_group() {
    let exec = executor();
    let req = ShellExecRequest {
        timeout: Some(Duration::from_secs(1)),
        ..ShellExecRequest::new("sleep 1000 & echo $!; wait")
    };
    let result = exec.run(spec(&exec, req)).await.unwrap();
    assert!(result.timed_out && !result.aborted);
    assert_eq!(result.signal.as_deref(), Some("SIGTERM"));
    Proc::observe(Proc::pid(&result.stdout.text))
        .assert_gone("background sleep")
        .await;
}

#[tokio::test]
async fn cancel_kills_the_grandchild_with_its_group() {
    let exec = Arc::new(executor());
    let mut fifo = LineFifo::new();
    let token = CancellationToken::new();
    let req = ShellExecRequest {
        env: vec![fifo.env("PID_FIFO")],
        cancel: Some(token.clone()),
        ..ShellExecRequest::new(r#"sleep 1000 & echo $! > "$PID_FIFO"; wait"#)
    };
    let spec = spec(&*exec, req);
    let run = tokio::spawn({
        let exec = exec.clone();
        async move { exec.run(spec).await }
    });
    let sleep = Proc::alive(Proc::pid(&fifo.read_line().await));
    token.cancel();
    let result = run.await.unwrap().unwrap();
    assert!(result.aborted && !result.timed_out);
    assert_eq!(result.signal.as_deref(), Some("SIGTERM"));
    sleep.assert_gone("background sleep").await;
}

#[tokio::test]
async fn abandoned_run_stops_its_command() {
    let exec = Arc::new(executor());
    let mut fifo = LineFifo::new();
    let req = ShellExecRequest {
        env: vec![fifo.env("PID_FIFO")],
        ..ShellExecRequest::new(r#"sleep 1000 & echo $! > "$PID_FIFO"; wait"#)
    };
    let spec = spec(&*exec, req);
    let run = tokio::spawn({
        let exec = exec.clone();
        async move { exec.run(spec).await }
    });
    let sleep = Proc::alive(Proc::pid(&fifo.read_line().await));
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    sleep.assert_gone("sleep of an abandoned run").await;
    exec.dispose().await;
}

#[tokio::test]
async fn long_output_keeps_the_tail_and_spills_everything() {
    let exec = executor_with(|c| c.max_output_bytes = 1000);
    let result = exec
        .run(command(&exec, "seq 1 20000; echo small >&2"))
        .await
        .unwrap();
    let full = seq(20000);
    assert!(result.stdout.truncated);
    assert!(result.stdout.text.len() <= 1000);
    assert!(
        full.ends_with(&result.stdout.text),
        "the text is the stream's tail"
    );
    let spill = result
        .stdout
        .spill_path
        .expect("a truncated stream has a spill file");
    assert_eq!(
        std::fs::read_to_string(&spill).unwrap(),
        full,
        "the spill holds the whole stream"
    );
    assert_eq!(mode(&spill), 0o600);
    assert_eq!(mode(spill.parent().unwrap()), 0o700);
    assert!(!result.stderr.truncated && result.stderr.spill_path.is_none());
    assert_eq!(result.stderr.text, "small\n");
}

#[tokio::test]
async fn spill_is_dropped_when_the_stream_outgrows_the_cap() {
    let exec = executor_with(|c| {
        c.max_output_bytes = 1000;
        c.max_spill_bytes = 10_000;
    });
    // stdout (108 894 bytes) passes the spill cap; stderr (3 893 bytes) only the tail.
    let result = exec
        .run(command(&exec, "seq 1 20000; seq 1 1000 >&2"))
        .await
        .unwrap();
    assert!(result.stdout.truncated);
    assert_eq!(result.stdout.spill_path, None);
    assert!(seq(20000).ends_with(&result.stdout.text));
    let kept = result.stderr.spill_path.expect("stderr fits the cap");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), seq(1000));
    let left: Vec<_> = std::fs::read_dir(kept.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        left,
        vec![kept],
        "the dropped stdout spill file was removed"
    );
}

#[tokio::test]
async fn explicit_env_reaches_the_command_over_the_overlay() {
    let exec = executor();
    let req = ShellExecRequest {
        env: vec![
            ("DSH_SESSION_ID".into(), "s1".into()),
            ("PAGER".into(), "more".into()),
        ],
        ..ShellExecRequest::new(
            r#"printf '%s|%s|%s|%s|%s' "$DSH_SESSION_ID" "$NO_COLOR" "$TERM" "$PAGER" "$GIT_PAGER""#,
        )
    };
    let result = exec.run(spec(&exec, req)).await.unwrap();
    assert_eq!(result.stdout.text, "s1|1|dumb|more|cat");
}

#[tokio::test]
async fn command_env_carries_no_inherited_secrets() {
    let exec = executor();
    let req = ShellExecRequest {
        env: vec![("DSH_SESSION_ID".into(), "s1".into())],
        ..ShellExecRequest::new("env")
    };
    let result = exec.run(spec(&exec, req)).await.unwrap();
    for line in result.stdout.text.lines() {
        let name = line.split('=').next().unwrap();
        let upper = name.to_ascii_uppercase();
        assert!(
            !["KEY", "SECRET", "TOKEN", "PASSWORD"]
                .iter()
                .any(|m| upper.contains(m)),
            "{name} leaked"
        );
        assert!(
            !name.starts_with("DSH_") || name == "DSH_SESSION_ID",
            "{name} leaked"
        );
    }
}

#[tokio::test]
async fn jobs_left_behind_die_when_bash_exits() {
    let exec = executor();
    // `sleep` keeps the output pipes open; the result must not wait for it, and it must not
    // outlive the command.
    let result = exec
        .run(command(&exec, "sleep 1000 & echo $!"))
        .await
        .unwrap();
    assert_eq!(result.exit_code, Some(0));
    Proc::observe(Proc::pid(&result.stdout.text))
        .assert_gone("forgotten background job")
        .await;
}

#[tokio::test]
async fn result_arrives_while_an_escaped_process_holds_the_pipes() {
    let exec = executor();
    // `setsid` leaves the group, so it is beyond the group kill; the drain limit bounds the wait.
    let result = exec
        .run(command(&exec, "setsid sleep 1000 & echo $!"))
        .await
        .unwrap();
    assert_eq!(result.exit_code, Some(0));
    let escaped = Proc::pid(&result.stdout.text);
    // This test started it, so this test stops it.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(escaped),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

#[tokio::test]
async fn sigpipe_has_its_default_action_in_commands() {
    let exec = executor();
    let result = exec.run(command(&exec, "yes | head -n 1")).await.unwrap();
    assert_eq!(result.stdout.text, "y\n");
    assert_eq!(
        result.stderr.text, "",
        "`yes` must die of SIGPIPE, not report EPIPE"
    );
}

#[tokio::test]
async fn missing_bash_is_a_spawn_error() {
    let exec = executor();
    let dir = tempfile::tempdir().unwrap();
    // `bash` is looked up on the command's PATH.
    let req = ShellExecRequest {
        env: vec![("PATH".into(), dir.path().to_str().unwrap().into())],
        ..ShellExecRequest::new("true")
    };
    let err = exec.run(spec(&exec, req)).await.unwrap_err();
    assert!(matches!(err, ShellError::Spawn { .. }), "{err:?}");
    assert!(
        std::error::Error::source(&err).is_some(),
        "the io error is the source"
    );
    assert!(err.to_string().contains("bash"), "{err}");
}

#[tokio::test]
async fn hand_built_spec_with_an_enormous_timeout_runs_under_the_cap() {
    let exec = executor();
    let mut spec = command(&exec, "echo ok");
    spec.timeout = Duration::MAX;
    let result = exec.run(spec).await.unwrap();
    assert_eq!(result.stdout.text, "ok\n");
    assert_eq!(result.timeout, exec.config().max_timeout);
}

#[tokio::test]
async fn a_command_too_long_for_one_argument_is_an_invalid_command_saying_so() {
    let exec = executor();
    let long = format!(": {}", "x".repeat(200_000));
    let err = exec.run(command(&exec, &long)).await.unwrap_err();
    assert!(matches!(err, ShellError::InvalidCommand(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("invalid command: "), "{text}");
    assert!(text.contains("200002 bytes"), "{text}");
    // The same refusal for a background start, and nothing is left behind.
    let err = exec.start(command(&exec, &long)).await.unwrap_err();
    assert!(matches!(err, ShellError::InvalidCommand(_)), "{err:?}");
    assert!(exec.list().is_empty());
}

#[tokio::test]
async fn a_nul_byte_in_the_command_is_an_invalid_command_saying_so() {
    let exec = executor();
    let err = exec.run(command(&exec, "echo a\0b")).await.unwrap_err();
    assert!(matches!(err, ShellError::InvalidCommand(_)), "{err:?}");
    assert!(err.to_string().contains("NUL byte"), "{err}");
}

#[tokio::test]
async fn live_output_arrives_while_the_command_runs_and_the_result_is_unchanged() {
    let exec = executor();
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate.fifo");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (tx, mut chunks) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let req = ShellExecRequest {
        env: vec![("GATE".into(), gate.to_str().unwrap().into())],
        live: Some(dsh_shell::LiveOutput::new(move |chunk| {
            let _ = tx.send(chunk.to_vec());
        })),
        ..ShellExecRequest::new("echo first; echo warn >&2; read -r _ < \"$GATE\"; echo second")
    };
    let spec = spec(&exec, req);
    let run = tokio::spawn(async move { exec.run(spec).await });
    // Both lines written before the gate arrive while the command still waits on it.
    let mut seen = String::new();
    while !(seen.contains("first\n") && seen.contains("warn\n")) {
        let chunk = tokio::time::timeout(PATIENCE, chunks.recv())
            .await
            .expect("live output before the command ends")
            .unwrap();
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(
        !run.is_finished(),
        "the command is still waiting on its gate"
    );
    tokio::task::spawn_blocking(move || std::fs::write(gate, "go\n"))
        .await
        .unwrap()
        .unwrap();
    let result = tokio::time::timeout(PATIENCE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    while let Ok(chunk) = chunks.try_recv() {
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(result.stdout.text, "first\nsecond\n");
    assert_eq!(result.stderr.text, "warn\n");
    assert!(seen.ends_with("second\n"), "{seen:?}");
    assert_eq!(seen.len(), "first\nwarn\nsecond\n".len());
}
