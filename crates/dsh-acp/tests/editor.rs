#![allow(clippy::unwrap_used)]
//! The editor's own capabilities over the real `dsh acp` binary: a test client that offers its
//! files and terminals (`common::editor`) and checks that `read`, `write` and `bash` use them,
//! and that a client offering nothing still gets the local tools.

mod common;

use std::time::Duration;

use agent_client_protocol::v1::schema::{
    NewSessionRequest, SessionConfigKind, SessionConfigOptionCategory, SessionConfigSelectOptions,
    SessionUpdate, SetSessionConfigOptionRequest, StopReason, ToolCallContent,
};
use common::child::*;
use common::{Conn, agent_text};
use dsh_testkit::{MockResponse, MockServer};

const EXIT: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(20);

/// Sends `prompt` and asserts, within a bound, that its turn ends normally.
async fn ends_turn(conn: &Conn, id: &str, prompt: &str) {
    let stop = dsh_testkit::bounded(conn.prompt_now(id, prompt))
        .await
        .unwrap();
    assert_eq!(stop, StopReason::EndTurn, "{prompt}");
}

/// Initializes as an editor that offers its files and terminals, and opens a session.
async fn editor_session(conn: &Conn) -> String {
    conn.initialize_as_editor().await;
    conn.open().await
}

/// `name` in the workspace holds `disk` on disk and `buffer` unsaved in the editor.
fn unsaved(conn: &Conn, name: &str, disk: &str, buffer: &str) -> std::path::PathBuf {
    let file = conn.cwd.join(name);
    std::fs::write(&file, disk).unwrap();
    conn.editor
        .buffers
        .lock()
        .insert(file.clone(), buffer.to_owned());
    file
}

/// Everything the model was sent in request `n` (0-based), as JSON text.
fn sent(server: &MockServer, n: usize) -> String {
    serde_json::to_string(server.requests()[n].messages()).unwrap()
}

#[tokio::test]
async fn read_returns_the_editors_unsaved_buffer_and_the_card_locates_the_file() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "read",
            r#"{"file_path":"notes.txt"}"#,
        ))
        .push(MockResponse::text("read it"));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let file = unsaved(
        conn,
        "notes.txt",
        "saved on disk\n",
        "unsaved in the editor\n",
    );
    let id = editor_session(conn).await;
    ends_turn(conn, &id, "read").await;
    let result = sent(&server, 1);
    assert!(result.contains("unsaved in the editor"), "{result}");
    assert!(!result.contains("saved on disk"), "{result}");
    assert_eq!(
        conn.editor.log.lock().clone(),
        [format!("read {}", file.display())]
    );
    let card = conn
        .received()
        .into_iter()
        .find_map(|n| match n.update {
            SessionUpdate::ToolCall(c) => Some(c),
            _ => None,
        })
        .unwrap();
    assert_eq!(card.locations[0].path, file);
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn write_arrives_in_the_editor_as_fs_write_text_file() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "write",
            r#"{"file_path":"new.txt","content":"hello editor"}"#,
        ))
        .push(MockResponse::text("written"));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let id = editor_session(conn).await;
    ends_turn(conn, &id, "write").await;
    let file = conn.cwd.join("new.txt");
    assert_eq!(
        conn.editor.writes.lock().clone(),
        [(file.clone(), "hello editor".to_owned())]
    );
    // The editor holds the change (this one does not save): dsh wrote nothing itself.
    assert!(!file.exists());
    assert!(sent(&server, 1).contains("Created file new.txt"));
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn edit_changes_the_editors_unsaved_text_and_writes_it_back_through_the_editor() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "read",
            r#"{"file_path":"lib.rs"}"#,
        ))
        .push(MockResponse::tool_call(
            "call_2",
            "edit",
            r#"{"file_path":"lib.rs","old_string":"unsaved","new_string":"edited"}"#,
        ))
        .push(MockResponse::text("edited"));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let file = unsaved(conn, "lib.rs", "fn saved() {}\n", "fn unsaved() {}\n");
    let id = editor_session(conn).await;
    ends_turn(conn, &id, "edit").await;
    assert_eq!(
        conn.editor.writes.lock().clone(),
        [(file.clone(), "fn edited() {}\n".to_owned())]
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "fn saved() {}\n");
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn bash_creates_waits_for_reads_and_releases_an_editor_terminal_shown_on_the_card() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo from-terminal key=${DEEPSEEK_API_KEY:-none}; exit 3","description":"print a word"}"#,
        ))
        .push(MockResponse::text("ran"));
    let mut child = spawn_unconfined(&bin, &server).await;
    let conn = child.conn();
    conn.initialize_as_editor().await;
    // The editor started dsh with its environment, secrets included: the command sees none.
    conn.editor
        .inherited
        .lock()
        .push(("DEEPSEEK_API_KEY".to_owned(), "editor-secret".to_owned()));
    let id = conn.open().await;
    ends_turn(conn, &id, "run").await;
    assert_eq!(conn.editor.steps(), ["create", "wait", "output", "release"]);
    let result = sent(&server, 1);
    assert!(result.contains("from-terminal key=none"), "{result}");
    assert!(result.contains("[exit code: 3]"), "{result}");
    let embedded = conn
        .received()
        .iter()
        .filter(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) => u
                .fields
                .content
                .as_ref()
                .is_some_and(|c| matches!(&c[..], [ToolCallContent::Terminal(t)] if &*t.terminal_id.0 == "term-1")),
            _ => false,
        })
        .count();
    assert_eq!(
        embedded, 2,
        "the card embeds the terminal while it runs and after"
    );
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn cancel_kills_and_releases_the_editor_terminal() {
    let bin = binary();
    let server = MockServer::start();
    server.push(MockResponse::tool_call(
        "call_1",
        "bash",
        r#"{"command":"sleep 60","description":"wait a minute"}"#,
    ));
    let mut child = spawn_unconfined(&bin, &server).await;
    let conn = child.conn();
    let id = editor_session(conn).await;
    let created = conn.editor.created.notified();
    let prompt = conn.prompt(&id, "wait");
    tokio::time::timeout(WAIT, created).await.unwrap();
    let released = conn.editor.released.notified();
    conn.cancel(&id);
    let stop = tokio::time::timeout(WAIT, prompt).await.unwrap().unwrap();
    assert_eq!(stop.unwrap().stop_reason, StopReason::Cancelled);
    tokio::time::timeout(WAIT, released).await.unwrap();
    // Whether the cancel lands before or after `wait_for_exit` was sent depends on timing;
    // what must hold is create, then kill, then release.
    let steps = conn.editor.steps();
    assert_eq!(steps[0], "create", "{steps:?}");
    assert!(steps.contains(&"kill".to_owned()), "{steps:?}");
    assert_eq!(steps.last().unwrap(), "release");
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn a_terminal_command_past_its_timeout_is_killed_and_reported_timed_out() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo started; sleep 60","description":"hang","timeout_ms":300}"#,
        ))
        .push(MockResponse::text("gave up"));
    let mut child = spawn_unconfined(&bin, &server).await;
    let conn = child.conn();
    let id = editor_session(conn).await;
    ends_turn(conn, &id, "hang").await;
    assert_eq!(
        conn.editor.steps(),
        ["create", "wait", "kill", "output", "release"]
    );
    let result = sent(&server, 1);
    assert!(result.contains("started"), "{result}");
    assert!(result.contains("timed out after 300ms"), "{result}");
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn a_client_without_the_capabilities_gets_the_local_tools() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_calls([
            ("call_1", "read", r#"{"file_path":"notes.txt"}"#),
            (
                "call_2",
                "bash",
                r#"{"command":"echo from-local","description":"print a word"}"#,
            ),
        ]))
        .push(MockResponse::text("done"));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    unsaved(
        conn,
        "notes.txt",
        "saved on disk\n",
        "unsaved in the editor\n",
    );
    let id = conn.session().await;
    ends_turn(conn, &id, "go").await;
    let result = sent(&server, 1);
    assert!(result.contains("saved on disk"), "{result}");
    assert!(result.contains("from-local"), "{result}");
    assert!(conn.editor.log.lock().is_empty());
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

/// The current value of the `model` select among `options`, and the values it offers.
fn model_select(
    options: &[agent_client_protocol::v1::schema::SessionConfigOption],
) -> (String, Vec<String>) {
    let model = options.iter().find(|o| &*o.id.0 == "model").unwrap();
    let SessionConfigKind::Select(select) = &model.kind else {
        panic!("{model:?}")
    };
    let SessionConfigSelectOptions::Ungrouped(offered) = &select.options else {
        panic!("{select:?}")
    };
    (
        select.current_value.0.to_string(),
        offered.iter().map(|o| o.value.0.to_string()).collect(),
    )
}

/// Opens a session and reads its `model` select (category `model`): the session id, the
/// model in use and another one it offers.
async fn session_with_models(conn: &Conn) -> (String, String, String) {
    conn.initialize().await;
    let opened = conn
        .cx
        .send_request(NewSessionRequest::new(conn.cwd.clone()))
        .block_task()
        .await
        .unwrap();
    let options = opened.config_options.unwrap();
    let model = options.iter().find(|o| &*o.id.0 == "model").unwrap();
    assert_eq!(model.category, Some(SessionConfigOptionCategory::Model));
    let (current, offered) = model_select(&options);
    let other = offered.into_iter().find(|m| *m != current).unwrap();
    (opened.session_id.0.to_string(), current, other)
}

#[tokio::test]
async fn the_model_is_chosen_from_the_catalog_and_used_from_the_next_request_on() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::text("one"))
        .push(MockResponse::text("two"));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let (id, _, other) = session_with_models(conn).await;
    conn.prompt_now(&id, "first").await.unwrap();
    let chosen = conn
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            id.clone(),
            "model",
            other.as_str(),
        ))
        .block_task()
        .await
        .unwrap();
    assert!(format!("{:?}", chosen.config_options).contains(&other));
    conn.prompt_now(&id, "second").await.unwrap();
    let models: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(models[1], other);
    assert_ne!(models[0], models[1]);
    // A model the session does not offer is refused.
    let e = conn
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            id.clone(),
            "model",
            "no-such-model",
        ))
        .block_task()
        .await
        .unwrap_err();
    assert!(e.message.contains("unknown model"), "{}", e.message);
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn a_chosen_model_is_durable_in_the_session_even_with_no_request_after_it() {
    let bin = binary();
    let server = MockServer::start();
    server.push(MockResponse::text("one"));
    let mut first = spawn(&bin, &server).await;
    let conn = first.conn();
    let (id, _, other) = session_with_models(conn).await;
    ends_turn(conn, &id, "first").await;
    conn.cx
        .send_request(SetSessionConfigOptionRequest::new(
            id.clone(),
            "model",
            other.as_str(),
        ))
        .block_task()
        .await
        .unwrap();
    // No request after the choice; the process goes away.
    assert_eq!(first.close_stdin_and_wait(EXIT).await.0, Some(0));
    let Child { home, .. } = first;
    server.push(MockResponse::text("two"));
    let mut second = spawn_in(&bin, &server, home, Launch::default()).await;
    let conn = second.conn();
    conn.initialize().await;
    let loaded = conn
        .cx
        .send_request(agent_client_protocol::v1::schema::LoadSessionRequest::new(
            id.clone(),
            conn.cwd.clone(),
        ))
        .block_task()
        .await
        .unwrap();
    let (current, _) = model_select(&loaded.config_options.unwrap());
    assert_eq!(
        current, other,
        "the loaded session offers its chosen model as current"
    );
    ends_turn(conn, &id, "second").await;
    let models: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(models.len(), 2);
    assert_eq!(
        models[1], other,
        "the request after the restart uses the choice"
    );
    assert_eq!(second.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn slash_commands_are_advertised_and_run_without_a_model_request() {
    let bin = binary();
    let server = MockServer::start();
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let id = conn.session().await;
    let advertised = tokio::time::timeout(
        WAIT,
        conn.wait_update(&id, |u| {
            matches!(u, SessionUpdate::AvailableCommandsUpdate(_))
        }),
    )
    .await
    .unwrap();
    let SessionUpdate::AvailableCommandsUpdate(list) = advertised else {
        unreachable!()
    };
    let names: Vec<&str> = list
        .available_commands
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["mode", "model", "compact", "rewind"]);
    ends_turn(conn, &id, "/mode read-only").await;
    let updates = conn.received();
    assert!(updates.iter().any(|n| matches!(&n.update,
        SessionUpdate::CurrentModeUpdate(m) if &*m.current_mode_id.0 == "read-only")));
    assert_eq!(agent_text(&updates), "mode: read-only");
    assert!(
        server.requests().is_empty(),
        "no model request for a command"
    );
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn the_first_prompt_titles_the_session_once() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::text("a"))
        .push(MockResponse::text("b"));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let id = conn.session().await;
    conn.prompt_now(&id, "fix the\nparser bug").await.unwrap();
    conn.prompt_now(&id, "and the lexer").await.unwrap();
    let titles: Vec<String> = conn
        .received()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::SessionInfoUpdate(info) => info.title.value().cloned(),
            _ => None,
        })
        .collect();
    assert_eq!(titles, ["fix the parser bug"]);
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn a_confining_sandbox_keeps_bash_out_of_the_editors_terminals() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo ran-locally","description":"print a word"}"#,
        ))
        .push(MockResponse::text("done"));
    // The default mode (workspace-write) confines commands; an editor terminal could not be.
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let id = editor_session(conn).await;
    ends_turn(conn, &id, "run").await;
    assert!(sent(&server, 1).contains("ran-locally"));
    assert!(
        conn.editor.steps().is_empty(),
        "no terminal was created: {:?}",
        conn.editor.steps()
    );
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn compact_over_acp_summarizes_through_the_provider_and_usage_carries_the_cost() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::text("noted"))
        .push(MockResponse::text("ok"))
        .push(MockResponse::text("S"));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let id = conn.session().await;
    let long = format!("remember: {}", "1234567890 ".repeat(300));
    for prompt in [long.as_str(), "thanks", "/compact the numbers"] {
        let stop = tokio::time::timeout(Duration::from_secs(60), conn.prompt_now(&id, prompt))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stop, StopReason::EndTurn, "{prompt:.20}");
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "two turns and one summary call");
    let summary = requests[2].body.to_string();
    assert!(summary.contains("the numbers"), "the focus is sent");
    let updates = conn.received();
    assert!(
        agent_text(&updates).contains("Compacted: about"),
        "{}",
        agent_text(&updates)
    );
    // The built-in DeepSeek prices make every usage update carry the running cost.
    let costs: Vec<f64> = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::UsageUpdate(u) => Some(u.cost.as_ref().unwrap().amount),
            _ => None,
        })
        .collect();
    assert_eq!(costs.len(), 2);
    assert!(costs[0] > 0.0 && costs[1] > costs[0], "{costs:?}");
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}
