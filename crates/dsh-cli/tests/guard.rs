#![allow(clippy::unwrap_used)]
//! The guard end to end: the real `dsh` binary (its commands supervised by `dsh __supervise`)
//! against the mock server.

mod common;

use common::{World, bash, origin_thread, stderr, stdout};
use dsh_session::EventKind;
use dsh_testkit::MockResponse;
use serde_json::{Value, json};

/// A directory outside every writable root (not under the workspace nor /tmp), standing in
/// for a folder under the user's real home.
fn outside() -> tempfile::TempDir {
    dsh_testkit::outside_writable_roots(env!("CARGO_TARGET_TMPDIR"))
}

fn decisions(w: &World, id: &str) -> Vec<Value> {
    w.load(id)
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Other { type_name, data } if type_name == "approval/decided" => {
                Some(data.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_run_whose_commands_write_outside_the_workspace_creates_nothing_records_it_and_exits_zero() {
    let w = World::new();
    let out_dir = outside();
    let target = out_dir.path().join("pwned.txt");
    let target_s = target.display().to_string();
    let escalate = json!({
        "command": format!("echo x > '{target_s}'"),
        "description": "write outside",
        "escalate": true,
        "justification": "the user wants it there",
    })
    .to_string();
    let write = json!({"file_path": target_s, "content": "x"}).to_string();
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            &bash(&format!("echo x > '{target_s}'; echo inside > in.txt")),
        ))
        .push(MockResponse::tool_call("call_2", "bash", &escalate))
        .push(MockResponse::tool_call("call_3", "write", &write))
        .push(MockResponse::text("Tried."));
    let out = w.output(&["run", "write", "outside"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "Tried.\n");
    assert!(!target.exists(), "the sandbox let a write outside through");
    assert!(
        w.cwd.path().join("in.txt").exists(),
        "a workspace write was blocked"
    );

    let requests = w.server.requests();
    let system = serde_json::to_string(&requests[0].messages()[0]).unwrap();
    let cwd = w.cwd.path().canonicalize().unwrap();
    assert!(
        system.contains(&format!(
            "they may write only under {}, /tmp",
            cwd.display()
        )),
        "{system}"
    );
    assert!(system.contains("escalation is unavailable"), "{system}");
    let seen = serde_json::to_string(requests[3].messages()).unwrap();
    assert!(seen.contains("[sandbox] write to"), "{seen}");
    assert!(seen.contains("Permission denied"), "{seen}");
    assert!(seen.contains("escalation is unavailable"), "{seen}");
    assert!(seen.contains("outside the writable roots"), "{seen}");

    let id = w.only_session_id();
    let logged = decisions(&w, &id);
    let verdicts: Vec<(&str, &str)> = logged
        .iter()
        .map(|d| (d["tool"].as_str().unwrap(), d["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [("bash", "allow"), ("bash", "deny"), ("write", "deny")]
    );
    assert_eq!(logged[1]["approval"], "never");
    assert_eq!(logged[1]["escalation"], "the user wants it there");

    let shown = w.output(&["sessions", "show", &id]);
    let shown = stdout(&shown);
    assert!(shown.contains("[guard] write: deny by mode"), "{shown}");
}

#[test]
fn danger_full_access_by_flag_lets_the_write_through_and_the_session_says_so() {
    let w = World::new();
    let out_dir = outside();
    let target = out_dir.path().join("allowed.txt");
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            &bash(&format!("echo x > '{}'", target.display())),
        ))
        .push(MockResponse::text("Done."));
    let out = w.output(&[
        "run",
        "--sandbox",
        "danger-full-access",
        "--approval",
        "auto",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(target.exists());
    let logged = decisions(&w, &w.only_session_id());
    assert_eq!(logged[0]["sandbox"], "danger-full-access");
    assert_eq!(logged[0]["approval"], "auto");
}

#[test]
fn a_setsid_daemon_dies_with_a_killed_dsh() {
    // Found by a tag: the command runs in a PID namespace, so a pid it printed means nothing
    // here.
    let w = World::new();
    let tag = dsh_testkit::Tag::new();
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            &bash(&format!("setsid {} & sleep 100", tag.sleep(3600))),
        ))
        .push(MockResponse::text("unreachable"));
    let mut dsh = w.spawn(&["run", "x"]);
    tag.wait_running(1, "the setsid daemon");
    dsh.kill().unwrap();
    dsh.wait().unwrap();
    tag.wait_gone("the setsid daemon outlived dsh");
}

#[test]
fn full_access_by_flag_on_a_headless_run_lets_commands_run_and_says_so_once() {
    // R16: without `--approval`, `dsh run --sandbox danger-full-access` would refuse every
    // command that is not plainly read-only (its default policy `never`).
    let w = World::new();
    let out_dir = outside();
    let target = out_dir.path().join("r16.txt");
    let write = bash(&format!("echo x > '{}'", target.display()));
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &write))
        .push(MockResponse::tool_call("call_2", "bash", &write))
        .push(MockResponse::text("Done."));
    let out = w.output(&["run", "--sandbox", "danger-full-access", "x"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(target.exists());
    let err = stderr(&out);
    assert_eq!(err.matches("approval auto").count(), 1, "{err}");
    let logged = decisions(&w, &w.only_session_id());
    assert!(logged.iter().all(|d| d["approval"] == "auto"), "{logged:?}");
}

#[test]
fn a_partial_sandbox_is_said_once_per_run_and_listed_by_config_show() {
    // Without namespaces (turned off here, as on a kernel or container that refuses them)
    // .git, .dsh and other processes' /proc stay reachable: dsh says so once, not per command.
    // DSH_HOME outside every writable root (the test's home is under /tmp, one of them):
    // without namespaces, a home inside one refuses every command instead.
    let w = World::new();
    let home = outside();
    std::fs::write(
        home.path().join("config.toml"),
        "[sandbox]\nnamespaces = false\n",
    )
    .unwrap();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("echo one")))
        .push(MockResponse::tool_call("call_2", "bash", &bash("echo two")))
        .push(MockResponse::text("Done."));
    let dsh = |args: &[&str]| {
        let mut cmd = w.dsh(args);
        cmd.env("DSH_HOME", home.path());
        cmd.output().unwrap()
    };
    let out = dsh(&["run", "x"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("the sandbox is partial on this machine")
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("no mount or PID namespace"), "{err}");
    assert!(!err.contains("SANDBOX_UNAVAILABLE"), "{err}");
    let show = dsh(&["config", "show"]);
    let text = stdout(&show);
    assert!(text.contains("namespaces: none (turned off"), "{text}");
    assert!(
        text.contains("#   not enforced: no mount or PID namespace"),
        "{text}"
    );
    // With namespaces (this machine has them) nothing is said.
    let w = World::new();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("echo one")))
        .push(MockResponse::text("Done."));
    let out = w.output(&["run", "x"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(!stderr(&out).contains("partial"), "{}", stderr(&out));
}

#[test]
fn config_show_names_the_sandbox_and_rules_with_their_sources() {
    let w = World::new();
    std::fs::write(
        w.home.path().join("config.toml"),
        "[sandbox]\nnetwork = false\n\n[permissions]\ndeny = [\"bash(rm -rf *)\"]\n",
    )
    .unwrap();
    let out = w.output(&["config", "show", "--sandbox", "read-only"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let line = |start: &str| {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no `{start}` in {text}"))
            .to_owned()
    };
    assert!(line("mode = \"read-only\"").ends_with("# flag --sandbox"));
    assert!(line("network = false").ends_with("# file"));
    assert!(line("deny += \"bash(rm -rf *)\"").contains("config.toml:5:"));
    assert!(text.contains("# landlock: available"), "{text}");
}

#[test]
fn a_bad_rule_is_named_at_its_file_line_and_column() {
    let w = World::new();
    std::fs::write(
        w.home.path().join("config.toml"),
        "[permissions]\nallow = [\"bash(ls *)\", \"bash(git\"]\n",
    )
    .unwrap();
    let out = w.output(&["config", "show"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("config.toml:2:33"), "{err}");
    assert!(err.contains("missing `)`"), "{err}");
}

#[test]
fn an_allowlist_config_sends_commands_through_dshs_proxy_and_nowhere_else() {
    let w = World::new();
    let port = origin_thread();
    // `localhost` is named exactly, so it may reach this machine; 127.0.0.2 is not listed.
    std::fs::write(
        w.home.path().join("config.toml"),
        "[sandbox]\nnetwork = \"allowlist\"\nallowed_domains = [\"localhost\"]\n",
    )
    .unwrap();
    let script = format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{port} && echo direct: connected) 2>&1 | sed 's/^.*: /direct: /'
         curl -sS http://localhost:{port}/ 2>&1
         curl -sS http://127.0.0.2:{port}/ 2>&1
         curl -sS https://blocked.test:{port}/ 2>&1"
    );
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash(&script)))
        .push(MockResponse::text("Done."));
    let out = w.output(&["run", "fetch"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let result = w.tool_results(1).join("\n");
    assert!(result.contains("direct: Permission denied"), "{result}");
    assert!(result.contains("hello from origin"), "{result}");
    assert!(
        result.contains(
            "[sandbox] network: blocked 127.0.0.2: 127.0.0.2 is not in `[sandbox] allowed_domains`"
        ),
        "{result}"
    );
    // Through CONNECT curl prints no body: the host is named by the line dsh appends, once
    // per host, and the session records it for the person.
    let line = format!(
        "[sandbox] network: blocked blocked.test:{port} (not in `[sandbox] allowed_domains`; \
         nobody is asked under the approval policy `never`)"
    );
    assert_eq!(result.matches(line.as_str()).count(), 1, "{result}");
    let id = w.only_session_id();
    let hosts: Vec<String> = w
        .load(&id)
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Other { type_name, data } if type_name == "network/blocked" => {
                Some(format!("{} {}", data["callId"], data["host"]))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        hosts,
        ["\"call_1\" \"127.0.0.2\"", "\"call_1\" \"blocked.test\""]
    );
    let shown = stdout(&w.output(&["sessions", "show", &id]));
    assert!(shown.contains(&line), "{shown}");
}
