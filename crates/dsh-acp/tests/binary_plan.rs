#![allow(clippy::unwrap_used)]
//! Plan mode, skills and custom commands through the real `dsh acp` binary, driven by an ACP
//! client built from the `agent-client-protocol` crate and pointed at the mock model.

mod common;

use std::time::Duration;

use agent_client_protocol::v1::schema::{SessionUpdate, SetSessionModeRequest, StopReason};
use common::child::*;
use common::*;
use dsh_session::EventKind;
use dsh_testkit::{MockResponse, MockServer};
use serde_json::json;

const EXIT: Duration = Duration::from_secs(10);

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn an_approved_plan_leaves_plan_mode_and_the_agent_goes_on_to_change_the_workspace() {
    let bin = binary();
    let server = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("workspace");
    let target = workspace.join("made-by-the-plan.txt");
    server
        // Planning: a write attempt is refused, then the plan.
        .push(MockResponse::tool_call(
            "c1",
            "bash",
            &json!({"command": format!("touch {}", target.display()), "description": "try"})
                .to_string(),
        ))
        .push(MockResponse::tool_call(
            "c2",
            "exit_plan_mode",
            &json!({"plan": "# Plan\n1. Create the file."}).to_string(),
        ))
        // Approved: the same turn carries it out.
        .push(MockResponse::tool_call(
            "c3",
            "bash",
            &json!({"command": format!("touch {}", target.display()), "description": "do"})
                .to_string(),
        ))
        .push(MockResponse::text("created"));
    let mut child = spawn_in(&bin, &server, home, Launch::default()).await;
    let conn = child.conn();
    conn.initialize_with_forms().await;
    let id = conn.open().await;
    conn.cx
        .send_request(SetSessionModeRequest::new(id.clone(), "plan"))
        .block_task()
        .await
        .unwrap();
    *conn.elicit.lock() = Elicit::Accept(vec![("q1", dsh_plan::APPROVE)]);
    conn.set_answer(Answer::Select("allow-once"));
    assert_eq!(
        conn.prompt_now(&id, "make the file").await.unwrap(),
        StopReason::EndTurn
    );
    assert!(target.exists(), "the approved plan was carried out");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    // The planning attempt ran read-only: it could not create the file.
    let planning: Vec<String> = requests[1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(planning[0].contains("[exit code: 1]"), "{planning:?}");
    let updates = conn.received();
    let modes: Vec<String> = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.0.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(modes, ["plan", "default"]);
    // Only the command after the approval asked for permission; the plan was a form.
    assert!(conn.elicited.try_recv().is_ok());
    let asked: Vec<String> = std::iter::from_fn(|| conn.asked.try_recv().ok())
        .map(|a| a.tool_call.tool_call_id.0.to_string())
        .collect();
    assert_eq!(asked, ["c3"]);
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
    let files = child.session_files();
    let types: Vec<String> = files[0]
        .1
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Other { type_name, .. } if type_name.starts_with("plan/") => {
                Some(type_name.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        types,
        ["plan/mode", "plan/proposed", "plan/decided", "plan/mode"]
    );
}

#[tokio::test]
async fn custom_commands_and_skills_are_offered_and_a_command_prompt_is_sent_expanded() {
    let bin = binary();
    let server = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("workspace");
    write(
        &workspace.join(".dsh/commands/greet.md"),
        "---\ndescription: Greet someone\nargument-hint: NAME\n---\nSay hello to $1 warmly.\n",
    );
    write(
        &home.path().join("skills/tidy/SKILL.md"),
        "---\nname: tidy\ndescription: Tidy imports\n---\nSort them.\n",
    );
    server.push(MockResponse::text("Hello, Ana!"));
    let mut child = spawn_in(&bin, &server, home, Launch::default()).await;
    let conn = child.conn();
    let id = conn.session().await;
    let advertised = tokio::time::timeout(
        Duration::from_secs(30),
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
    assert!(
        names.contains(&"greet") && names.contains(&"tidy"),
        "{names:?}"
    );
    let greet = list
        .available_commands
        .iter()
        .find(|c| c.name == "greet")
        .unwrap();
    assert_eq!(greet.description, "Greet someone");
    assert_eq!(
        conn.prompt_now(&id, "/greet Ana").await.unwrap(),
        StopReason::EndTurn
    );
    let sent = serde_json::to_string(server.requests()[0].messages()).unwrap();
    assert!(sent.contains("Say hello to Ana warmly."), "{sent}");
    assert!(!sent.contains("/greet"), "{sent}");
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}
