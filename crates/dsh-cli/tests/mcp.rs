#![allow(clippy::unwrap_used)]
//! MCP end to end: `dsh run` and `dsh mcp list` with `[mcp_servers.*]` running the real test
//! server process, the model at the mock server.

mod common;

use common::{World, stderr, stdout};
use dsh_testkit::MockResponse;

const SERVER: &str = env!("CARGO_BIN_EXE_dsh-cli-mcp-test-server");

/// Writes `$DSH_HOME/config.toml` with `tables` (TOML text).
fn configure(w: &World, tables: &str) {
    std::fs::write(w.home.path().join("config.toml"), tables).unwrap();
}

/// A `[mcp_servers.NAME]` table running the test server with `args`, calls allowed.
fn server_table(name: &str, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[mcp_servers.{name}]\ncommand = {SERVER:?}\nargs = [{}]\ndefault_tools_approval_mode = \"approve\"\n\n",
        args.join(", ")
    )
}

#[test]
fn dsh_run_calls_a_tool_of_a_configured_stdio_server() {
    let w = World::new();
    configure(&w, &server_table("t", &[]));
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "mcp__t__echo",
            r#"{"text":"from the server"}"#,
        ))
        .push(MockResponse::text("All done."));
    let out = w.output(&["run", "use the tool"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "All done.\n");
    let requests = w.server.requests();
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert!(offered.contains(&"mcp__t__echo"), "{offered:?}");
    let last = serde_json::to_string(requests[1].messages()).unwrap();
    assert!(last.contains("from the server"), "{last}");
    assert!(
        w.server.violations().is_empty(),
        "{:?}",
        w.server.violations()
    );
}

#[test]
fn a_server_gets_no_provider_key() {
    let w = World::new();
    configure(&w, &server_table("t", &[]));
    w.server
        .push(MockResponse::tool_call("call_1", "mcp__t__env", "{}"))
        .push(MockResponse::text("ok"));
    let out = w
        .dsh(&["run", "list the environment"])
        .env("SOME_SECRET_TOKEN", "s3cret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let result = serde_json::to_string(w.server.requests()[1].messages()).unwrap();
    assert!(result.contains("PATH"), "{result}");
    for secret in ["DEEPSEEK_API_KEY", "SOME_SECRET_TOKEN", "DSH_HOME"] {
        assert!(
            !result.contains(secret),
            "{secret} reached the server: {result}"
        );
    }
}

#[test]
fn an_mcp_tool_no_rule_allows_is_refused_by_a_headless_run_with_a_reason() {
    let w = World::new();
    configure(&w, &format!("[mcp_servers.t]\ncommand = {SERVER:?}\n"));
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "mcp__t__echo",
            r#"{"text":"x"}"#,
        ))
        .push(MockResponse::text("ok"));
    let out = w.output(&["run", "try"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let result = serde_json::to_string(w.server.requests()[1].messages()).unwrap();
    assert!(
        result.contains("MCP server `t`") && result.contains("never asks"),
        "{result}"
    );
}

#[test]
fn a_configured_server_runs_inside_the_sessions_sandbox() {
    let outside = dsh_testkit::outside_writable_roots(env!("CARGO_TARGET_TMPDIR"));
    let target = outside.path().join("out.txt");
    let args = serde_json::json!({"path": target, "text": "x"}).to_string();
    for (flags, writes) in [
        (&[][..], false),
        (&["--sandbox", "danger-full-access"][..], true),
    ] {
        let w = World::new();
        configure(&w, &server_table("t", &[]));
        w.server
            .push(MockResponse::tool_call(
                "call_1",
                "mcp__t__write_file",
                &args,
            ))
            .push(MockResponse::text("ok"));
        let mut argv = vec!["run"];
        argv.extend(flags);
        argv.push("write outside");
        let out = w.output(&argv);
        assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
        let result = serde_json::to_string(w.server.requests()[1].messages()).unwrap();
        assert_eq!(target.exists(), writes, "{flags:?}: {result}");
        if !writes {
            assert!(result.contains("Permission denied"), "{result}");
        }
        let _ = std::fs::remove_file(&target);
    }
}

#[test]
fn a_server_that_fails_to_start_is_reported_and_the_run_goes_on() {
    let w = World::new();
    configure(
        &w,
        "[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
    );
    w.server.push(MockResponse::text("fine without it"));
    let out = w.output(&["run", "anything"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "fine without it\n");
    let err = stderr(&out);
    assert!(
        err.contains("dsh: MCP server `broken`: cannot start `/nonexistent/mcp-server`"),
        "{err}"
    );
}

#[test]
fn killing_dsh_leaves_no_server_process() {
    // Found by a tag: the server runs in a PID namespace of its own, so the pids it could log
    // mean nothing here. Its `setsid` daemon is the hardest process to catch.
    let w = World::new();
    let tag = dsh_testkit::Tag::new();
    let daemon = format!("3600.{tag}");
    configure(&w, &server_table("t", &["--daemon", &daemon]));
    let (held, _hold) = MockResponse::text("never").hold_before_headers();
    w.server.push(held);
    let mut dsh = w.spawn(&["run", "wait"]);
    tag.wait_running(1, "the server's daemon");
    dsh.kill().unwrap(); // SIGKILL: no cleanup code of dsh runs.
    dsh.wait().unwrap();
    tag.wait_gone("the server's daemon outlived dsh");
}

#[test]
fn mcp_list_shows_each_server_its_state_and_tools() {
    let w = World::new();
    configure(
        &w,
        &format!(
            "{}[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n\n[mcp_servers.off]\ncommand = \"x\"\nenabled = false\n",
            server_table("good", &[])
        ),
    );
    let out = w.output(&["mcp", "list"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed server fails the listing"
    );
    let text = stdout(&out);
    assert!(
        text.contains("broken: FAILED: MCP server `broken`: cannot start"),
        "{text}"
    );
    assert!(
        text.contains("good: ready, 14 tool(s), 2 resource(s), 1 prompt(s)\n  mcp__good__echo\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "  resource test://greeting (text/plain)\n  resource test://dot (image/png)\n  \
             prompt /mcp__good__review <file> [focus]\n"
        ),
        "{text}"
    );
    assert!(text.contains("off: disabled"), "{text}");
}

#[test]
fn a_bad_server_table_is_reported_at_its_location() {
    let w = World::new();
    configure(&w, "[defaults]\n\n[mcp_servers.x]\nargs = []\n");
    let out = w.output(&["mcp", "list"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("config.toml:3:1: mcp_servers.x: missing `command`"),
        "{err}"
    );
}

#[test]
fn a_bearer_token_is_read_from_dshs_secrets_and_never_printed() {
    // `…_TOKEN` looks secret, so dsh moves it out of its environment at start-up: the token
    // must come from dsh's private copy. The mock is no MCP server, but it records the header.
    let w = World::new();
    configure(
        &w,
        &format!(
            "[mcp_servers.h]\nurl = \"{}/mcp\"\nbearer_token_env_var = \"DOCS_MCP_TOKEN\"\nstartup_timeout_sec = 5\n",
            w.server.url()
        ),
    );
    let out = w
        .dsh(&["mcp", "list"])
        .env("DOCS_MCP_TOKEN", "tok-123")
        .output()
        .unwrap();
    let sent: Vec<Option<String>> = w
        .server
        .requests()
        .iter()
        .map(|r| r.header("authorization").map(str::to_owned))
        .collect();
    assert!(
        sent.first()
            .is_some_and(|a| a.as_deref() == Some("Bearer tok-123")),
        "{sent:?}; stderr: {}",
        stderr(&out)
    );
    let shown = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!shown.contains("tok-123"), "{shown}");
}

#[test]
fn a_servers_progress_is_a_progress_line_of_stream_json_between_call_and_result() {
    let w = World::new();
    configure(&w, &server_table("t", &[]));
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "mcp__t__progress",
            r#"{"steps":2,"every_ms":50}"#,
        ))
        .push(MockResponse::text("ok"));
    let out = w.output(&["run", "--output-format", "stream-json", "go"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let position = |pred: &dyn Fn(&serde_json::Value) -> bool| lines.iter().position(pred);
    let progress: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["type"] == "progress").collect();
    assert_eq!(progress.len(), 2, "{lines:?}");
    assert_eq!(progress[1]["callId"], "call_1");
    assert_eq!(progress[1]["progress"], 2.0);
    assert_eq!(progress[1]["total"], 2.0);
    assert_eq!(progress[1]["message"], "step 2");
    assert!(
        progress[0]["sessionId"]
            .as_str()
            .unwrap()
            .starts_with("session-")
    );
    let call = position(&|l| l["event"]["type"] == "tool/call").unwrap();
    let first = position(&|l| l["type"] == "progress").unwrap();
    let result = position(&|l| l["event"]["type"] == "tool/result").unwrap();
    assert!(call < first && first < result, "{lines:?}");
}

#[test]
fn dsh_run_sends_an_mcp_prompt_command_as_the_servers_prompt() {
    let w = World::new();
    configure(&w, &server_table("t", &[]));
    w.server.push(MockResponse::text("Reviewed."));
    let out = w.output(&["run", "/mcp__t__review src/a.rs error handling"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let sent = serde_json::to_string(w.server.requests()[0].messages()).unwrap();
    assert!(
        sent.contains("Please review src/a.rs. Focus on error handling."),
        "{sent}"
    );
    assert!(!sent.contains("/mcp__t__review"), "{sent}");
    let missing = w.output(&["run", "/mcp__t__review"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("missing file (usage: /mcp__t__review <file> [focus])"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn mcp_add_and_remove_edit_config_toml_and_keep_its_comments() {
    let w = World::new();
    let path = w.home.path().join("config.toml");
    let written = "# mine\n[mcp_servers.keep] # stays\ncommand = \"x\"\nenabled = false\n";
    std::fs::write(&path, written).unwrap();
    let added = w.output(&["mcp", "add", "t", "--", SERVER, "--log", "/dev/null"]);
    assert_eq!(added.status.code(), Some(0), "stderr: {}", stderr(&added));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(written), "{text}");
    assert!(
        text.contains(&format!(
            "[mcp_servers.t]\ncommand = {SERVER:?}\nargs = [\"--log\", \"/dev/null\"]\n"
        )),
        "{text}"
    );
    let listed = w.output(&["mcp", "list"]);
    assert!(stdout(&listed).contains("t: ready"), "{}", stdout(&listed));
    let http = w.output(&["mcp", "add", "docs", "--url", "https://example.com/mcp"]);
    assert_eq!(http.status.code(), Some(0), "stderr: {}", stderr(&http));
    let neither = w.output(&["mcp", "add", "nothing"]);
    assert_eq!(neither.status.code(), Some(1));
    assert!(stderr(&neither).contains("say how to reach the server"));
    for name in ["t", "docs"] {
        let removed = w.output(&["mcp", "remove", name]);
        assert_eq!(
            removed.status.code(),
            Some(0),
            "stderr: {}",
            stderr(&removed)
        );
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), written);
    let missing = w.output(&["mcp", "remove", "t"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("no MCP server `t`"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn a_projects_mcp_json_starts_its_servers_only_once_trusted_as_it_is() {
    let w = World::new();
    let file = w.cwd.path().join(".mcp.json");
    let project = serde_json::json!({"mcpServers": {"proj": {"command": SERVER, "args": []}}});
    std::fs::write(&file, project.to_string()).unwrap();
    let before = w.output(&["mcp", "list"]);
    let text = stdout(&before);
    assert!(
        text.contains("configures MCP servers (proj) that were not started")
            && text.contains("dsh mcp trust")
            && !text.contains("proj: ready"),
        "{text}"
    );
    let trusted = w.output(&["mcp", "trust"]);
    assert_eq!(
        trusted.status.code(),
        Some(0),
        "stderr: {}",
        stderr(&trusted)
    );
    assert!(stdout(&trusted).contains("(proj)"), "{}", stdout(&trusted));
    let after = w.output(&["mcp", "list"]);
    assert!(stdout(&after).contains("proj: ready"), "{}", stdout(&after));
    // Changed after the trust: not started again until trusted again.
    std::fs::write(&file, format!("{project}\n")).unwrap();
    let changed = w.output(&["mcp", "list"]);
    assert!(
        !stdout(&changed).contains("proj: ready"),
        "{}",
        stdout(&changed)
    );
}
