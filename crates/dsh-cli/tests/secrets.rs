#![allow(clippy::unwrap_used)]
//! Secrets never reach what dsh starts: not through the commands' own environment, and not
//! through dsh's (`/proc/<dsh>/environ` shows the environment dsh was started with).

mod common;

use common::{PROBE, World, bash, stderr, stdout};
use dsh_testkit::MockResponse;

/// A provider key kept under a name that does not look secret, so only the config file says
/// it is one.
const KEY: &str = "sk-planted-provider-key-7f3a";
/// A secret-looking variable nobody configured.
const TOKEN: &str = "ghp-planted-token-91c2";

fn world_with_mock_provider() -> World {
    let w = World::new();
    std::fs::write(
        w.home.path().join("config.toml"),
        format!(
            "[providers.mock]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\n\
             models = [\"m\"]\napi_key_env = \"MOCK_AUTH\"\n",
            w.server.url()
        ),
    )
    .unwrap();
    w
}

/// `dsh run PROMPT` with both secrets planted, unconfined so a probe can walk up to dsh (a
/// confined command is in a PID namespace of its own and never sees dsh at all).
fn unconfined_run(w: &World, prompt: &str) -> std::process::Command {
    let mut command = w.dsh(&[
        "run",
        "--sandbox",
        "danger-full-access",
        "--provider",
        "mock",
        prompt,
    ]);
    command.env("MOCK_AUTH", KEY).env("GITHUB_TOKEN", TOKEN);
    command
}

#[test]
fn no_command_finds_a_secret_in_the_environment_of_dsh_or_its_ancestors() {
    let w = world_with_mock_provider();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash(PROBE)))
        .push(MockResponse::text("done"));
    let out = unconfined_run(&w, "probe the environment")
        // Logs at every level must stay clean too.
        .env("DSH_LOG", "trace")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "done\n");

    let requests = w.server.requests();
    assert_eq!(requests.len(), 2);
    // The key still works: it was read from dsh's private copy.
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let messages = requests[1].messages();
    let result = messages
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(result.contains("\nprobe reached dsh"), "{result}");
    assert!(
        result.contains("PATH="),
        "the probe read no environment: {result}"
    );
    for request in &requests {
        let body = request.body.to_string();
        assert!(!body.contains(KEY) && !body.contains(TOKEN), "{body}");
    }
    let files = w.session_files();
    assert_eq!(files.len(), 1);
    for file in files {
        let log = std::fs::read_to_string(&file).unwrap();
        assert!(log.contains("probe reached dsh"), "{log}");
        assert!(!log.contains(KEY) && !log.contains(TOKEN), "{log}");
    }
    assert!(!stdout(&out).contains(KEY) && !stderr(&out).contains(KEY));
    assert!(stderr(&out).contains("TRACE"), "trace logging was on");
}

#[test]
fn no_hook_finds_a_secret_in_the_environment_of_dsh_or_its_ancestors() {
    let w = world_with_mock_provider();
    let dump = w.cwd.path().join("hook-probe.txt");
    let hooks = serde_json::json!({"hooks": {"PreToolUse": [{"hooks": [{
        "type": "command",
        "command": format!("{{\n{PROBE}\n}} > '{}' 2>&1", dump.display()),
    }]}]}});
    // The user's own hooks (no trust needed), run unconfined so the probe reaches dsh.
    std::fs::write(w.home.path().join("hooks.json"), hooks.to_string()).unwrap();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("echo hi")))
        .push(MockResponse::text("done"));
    let out = unconfined_run(&w, "run something").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let seen = std::fs::read_to_string(&dump).unwrap();
    assert!(seen.contains("\nprobe reached dsh"), "{seen}");
    assert!(!seen.contains(KEY) && !seen.contains(TOKEN), "{seen}");
    for file in w.session_files() {
        let log = std::fs::read_to_string(&file).unwrap();
        assert!(log.contains("hook/result"), "{log}");
        assert!(!log.contains(KEY) && !log.contains(TOKEN), "{log}");
    }
}

#[test]
fn a_secrets_handoff_inherited_from_another_dsh_is_ignored() {
    // A hook or server started by one dsh may start another with the first one's handoff
    // variable; it names another process, so the second dsh takes its own secrets as usual.
    let w = world_with_mock_provider();
    w.server.push(MockResponse::text("fine"));
    let out = w
        .dsh(&["run", "--provider", "mock", "hello"])
        .env("MOCK_AUTH", KEY)
        .env("DSH_SECRETS_FD", "0,1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "fine\n");
    assert_eq!(
        w.server.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[test]
fn config_show_still_sees_a_key_that_left_the_environment() {
    let w = world_with_mock_provider();
    let out = w
        .dsh(&["config", "show"])
        .env("MOCK_AUTH", KEY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("# api key: set, redacted (env MOCK_AUTH)"),
        "{text}"
    );
    assert!(!text.contains(KEY), "{text}");
}
