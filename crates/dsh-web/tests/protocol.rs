//! ACP over WebSocket without a browser, against the real `dsh web` and the mock model server:
//! the door (token, Host, Origin), a prompt round trip through the `agent-client-protocol`
//! crate's own client, and what the hub adds for browsers (tabs sharing a session, the first
//! answer to a question winning, deny reasons and steering reaching the model, sessions
//! outliving their tab and released when nobody watches).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use common::*;
use dsh_testkit::{MockResponse, MockServer, bounded};
use serde_json::{Value, json};

#[tokio::test]
async fn every_request_and_upgrade_without_the_token_is_refused_401() {
    let server = MockServer::start();
    let web = start(&server).await;
    let host = web.host();
    let page = web.get("/", &[("Host", &host)]).await;
    assert_eq!(page.status, 401);
    assert_eq!(page.header("www-authenticate"), Some("Bearer"));
    for path in ["/app.js", "/health", "/acp"] {
        assert_eq!(
            web.get(path, &[("Host", &host)]).await.status,
            401,
            "{path}"
        );
    }
    let wrong = web
        .get(
            "/",
            &[("Host", &host), ("Authorization", "Bearer not-the-token")],
        )
        .await;
    assert_eq!(wrong.status, 401);
    let origin = web.origin();
    assert_eq!(web.socket(&[("origin", &origin)]).await.err(), Some(401));
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(
        web.get("/health", &[("Host", &host), ("Authorization", &bearer)])
            .await
            .status,
        200
    );
    // A program authenticates its socket with the bearer token.
    assert!(web.socket(&[("authorization", &bearer)]).await.is_ok());
    assert!(
        !web.log().contains(TOKEN),
        "the token never reaches the log"
    );
    assert_eq!(bounded(web.stop()).await, Some(143));
}

#[tokio::test]
async fn opening_the_page_with_the_token_sets_a_strict_httponly_cookie_and_moves_on_without_the_token()
 {
    let server = MockServer::start();
    let web = start(&server).await;
    let host = web.host();
    let opened = web
        .get(&format!("/?token={TOKEN}"), &[("Host", &host)])
        .await;
    // A page of ours moves on (a navigation this origin starts sends the Strict cookie; a
    // redirect of a navigation another site started would not).
    assert_eq!(opened.status, 200);
    let body = String::from_utf8_lossy(&opened.body).into_owned();
    assert!(
        body.contains("http-equiv=refresh content=\"0;url=/\""),
        "{body}"
    );
    assert!(!body.contains(TOKEN), "{body}");
    assert_eq!(opened.header("cache-control"), Some("no-store"));
    let cookie = opened.header("set-cookie").unwrap();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split(';').next().unwrap();
    let page = web.get("/", &[("Host", &host), ("Cookie", pair)]).await;
    assert_eq!(page.status, 200);
    assert!(String::from_utf8_lossy(&page.body).contains("app.js"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    assert!(page.header("content-security-policy").is_some());
    assert!(
        page.header("access-control-allow-origin").is_none(),
        "no CORS"
    );
    let guess = web.get("/?token=guess", &[("Host", &host)]).await;
    assert_eq!(guess.status, 401);
    assert!(guess.header("set-cookie").is_none());
    assert_eq!(bounded(web.stop()).await, Some(143));
}

#[tokio::test]
async fn a_host_header_naming_another_address_is_refused_403_even_with_the_token() {
    let server = MockServer::start();
    let web = start(&server).await;
    let bearer = format!("Bearer {TOKEN}");
    let port = web.addr.port();
    for host in [
        format!("rebound.attacker.example:{port}"),
        format!("127.0.0.1:{}", port + 1),
        "127.0.0.1".to_owned(),
    ] {
        let answer = web
            .get("/", &[("Host", &host), ("Authorization", &bearer)])
            .await;
        assert_eq!(answer.status, 403, "{host}");
    }
    let localhost = format!("localhost:{port}");
    let ok = web
        .get("/", &[("Host", &localhost), ("Authorization", &bearer)])
        .await;
    assert_eq!(ok.status, 200, "a loopback name of the same server is fine");
    assert_eq!(bounded(web.stop()).await, Some(143));
}

#[tokio::test]
async fn a_websocket_from_another_origin_is_refused_403_even_with_the_token() {
    let server = MockServer::start();
    let web = start(&server).await;
    let cookie = format!("dsh_web_{}={TOKEN}", web.addr.port());
    let bearer = format!("Bearer {TOKEN}");
    for origin in [
        "http://evil.example".to_owned(),
        "null".to_owned(),
        format!("https://{}", web.addr),
    ] {
        assert_eq!(
            web.socket(&[("cookie", &cookie), ("origin", &origin)])
                .await
                .err(),
            Some(403),
            "{origin}"
        );
        assert_eq!(
            web.socket(&[("authorization", &bearer), ("origin", &origin)])
                .await
                .err(),
            Some(403),
            "{origin}"
        );
    }
    let own = web.origin();
    assert!(
        web.socket(&[("cookie", &cookie), ("origin", &own)])
            .await
            .is_ok()
    );
    assert_eq!(bounded(web.stop()).await, Some(143));
}

/// A program drives dsh with an ordinary ACP client library: the `agent-client-protocol`
/// crate, its frames carried one per WebSocket message.
#[tokio::test]
async fn an_acp_client_library_runs_a_prompt_round_trip_over_the_websocket() {
    use agent_client_protocol::schema::ProtocolVersion;
    use agent_client_protocol::v1::schema::{
        ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, SessionNotification,
        SessionUpdate, StopReason, TextContent,
    };
    use agent_client_protocol::{Client, Lines};
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

    let server = MockServer::start();
    server.push(MockResponse::text("hello from the model"));
    let web = start(&server).await;
    let mut request = format!("ws://{}/acp", web.addr)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (ws, _) = bounded(tokio_tungstenite::connect_async(request))
        .await
        .unwrap();
    let (sink, stream) = ws.split();
    let outgoing = sink
        .with(|frame: String| async move {
            Ok::<_, tokio_tungstenite::tungstenite::Error>(Message::Text(frame.into()))
        })
        .sink_map_err(std::io::Error::other);
    let incoming = stream.filter_map(|message| async move {
        match message {
            Ok(Message::Text(text)) => Some(Ok(text.to_string())),
            Ok(_) => None,
            Err(e) => Some(Err(std::io::Error::other(e))),
        }
    });
    let (updates_tx, mut updates) = tokio::sync::mpsc::unbounded_channel();
    let cwd = web.workspace.clone();
    let client = Client
        .v1()
        .name("test-client")
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                let _ = updates_tx.send(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(Lines::new(outgoing, incoming), async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let session = cx
                .send_request(NewSessionRequest::new(cwd))
                .block_task()
                .await?;
            let answer = cx
                .send_request(PromptRequest::new(
                    session.session_id,
                    vec![ContentBlock::Text(TextContent::new("say hello"))],
                ))
                .block_task()
                .await?;
            Ok(answer.stop_reason)
        });
    let stop = bounded(client).await.unwrap();
    assert_eq!(stop, StopReason::EndTurn);
    let mut text = String::new();
    while let Ok(n) = updates.try_recv() {
        if let SessionUpdate::AgentMessageChunk(chunk) = n.update
            && let ContentBlock::Text(t) = chunk.content
        {
            text.push_str(&t.text);
        }
    }
    assert_eq!(text, "hello from the model");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(format!("{:?}", requests[0].messages()).contains("say hello"));
    assert!(server.violations().is_empty());
    assert_eq!(bounded(web.stop()).await, Some(143));
}

/// Opens a session on `rpc` in the server's workspace; its id.
async fn new_session(rpc: &mut Rpc, web: &Web) -> String {
    let opened = rpc
        .request(
            "session/new",
            json!({"cwd": web.workspace, "mcpServers": []}),
        )
        .await
        .unwrap();
    opened["sessionId"].as_str().unwrap().to_owned()
}

fn is_question(frame: &Value) -> bool {
    frame["method"] == "session/request_permission"
}

#[tokio::test]
async fn two_tabs_share_a_session_and_the_first_answer_to_a_question_wins() {
    let server = MockServer::start();
    server
        .push(MockResponse::text("first answer"))
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo shared","description":"print"}"#,
        ))
        .push(MockResponse::text("done"));
    let web = start(&server).await;
    let mut a = web.page_socket().await;
    let id = new_session(&mut a, &web).await;
    a.request("session/prompt", prompt(&id, "hello"))
        .await
        .unwrap();
    // A second tab opens the same session: it sees what was said so far.
    let mut b = web.page_socket().await;
    let loaded = b
        .request(
            "session/load",
            json!({"sessionId": id, "cwd": web.workspace, "mcpServers": []}),
        )
        .await
        .unwrap();
    assert!(loaded["modes"]["currentModeId"].is_string(), "{loaded}");
    let history: Vec<Value> = b.inbox.drain(..).collect();
    assert_eq!(agent_text(&history), "first answer");
    assert!(
        history.iter().any(|f| is_update(f, "user_message_chunk")
            && f["params"]["update"]["content"]["text"] == "hello"),
        "the other tab's prompt is in the thread: {history:?}"
    );
    // A prompt from the first tab: both see the question; the second answers.
    let prompt_id = a.start("session/prompt", prompt(&id, "run it")).await;
    let (asked_a, _) = a.until(is_question).await;
    let (asked_b, before) = b.until(is_question).await;
    assert!(
        before.iter().any(|f| is_update(f, "user_message_chunk")),
        "the second tab sees the first tab's prompt live"
    );
    assert_eq!(asked_a["id"], asked_b["id"]);
    b.send(json!({"jsonrpc": "2.0", "id": asked_b["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}))
        .await;
    // The first tab is told to withdraw its card.
    let (withdrawn, _) = a.until(|f| f["method"] == "$/cancel_request").await;
    assert_eq!(withdrawn["params"]["requestId"], asked_a["id"]);
    // A late answer from the first tab changes nothing.
    a.send(json!({"jsonrpc": "2.0", "id": asked_a["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "reject-once"}}}))
        .await;
    let (answer, seen) = a
        .until(|f| f["id"] == json!(prompt_id) && f.get("method").is_none())
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&seen), "done");
    let (_, seen_b) = b
        .until(|f| {
            is_update(f, "agent_message_chunk")
                && f["params"]["update"]["content"]["text"] == "done"
        })
        .await;
    assert!(
        seen_b
            .iter()
            .any(|f| is_update(f, "tool_call_update")
                && f["params"]["update"]["status"] == "completed"),
        "the second tab sees the card complete"
    );
    let requests = server.requests();
    assert!(
        format!("{:?}", requests[2].messages()).contains("shared"),
        "the command ran: its output went back to the model"
    );
    assert!(server.violations().is_empty());
    assert_eq!(bounded(web.stop()).await, Some(143));
}

#[tokio::test]
async fn a_deny_reason_reaches_the_model_with_the_denial() {
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"rm -rf build","description":"clean"}"#,
        ))
        .push(MockResponse::text("understood"));
    let web = start(&server).await;
    let mut tab = web.page_socket().await;
    let id = new_session(&mut tab, &web).await;
    let prompt_id = tab.start("session/prompt", prompt(&id, "clean up")).await;
    let (asked, _) = tab.until(is_question).await;
    tab.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {
        "outcome": {"outcome": "selected", "optionId": "reject-once"},
        "_meta": {"dsh": {"reason": "keep the build directory"}}
    }}))
    .await;
    let (answer, _) = tab
        .until(|f| f["id"] == json!(prompt_id) && f.get("method").is_none())
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let second = format!("{:?}", server.requests()[1].messages());
    assert!(second.contains("rejected"), "{second}");
    assert!(second.contains("keep the build directory"), "{second}");
    assert!(server.violations().is_empty());
    assert_eq!(bounded(web.stop()).await, Some(143));
}

#[tokio::test]
async fn a_steer_joins_the_running_turn_and_is_refused_when_nothing_runs() {
    let server = MockServer::start();
    let (held, hold) = MockResponse::tool_call("call_1", "read", r#"{"file_path":"notes.txt"}"#)
        .hold_before_headers();
    server.push(held).push(MockResponse::text("steered answer"));
    let web = start(&server).await;
    std::fs::write(web.workspace.join("notes.txt"), "some notes\n").unwrap();
    let mut tab = web.page_socket().await;
    let id = new_session(&mut tab, &web).await;
    let refused = tab
        .request("_dsh/steer", prompt(&id, "too early"))
        .await
        .unwrap_err();
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("send the message as a prompt"),
        "{refused}"
    );
    let prompt_id = tab
        .start("session/prompt", prompt(&id, "read the notes"))
        .await;
    // The model request is in flight (held): steer now.
    bounded(hold.reached()).await;
    tab.request("_dsh/steer", prompt(&id, "also mention the weather"))
        .await
        .unwrap();
    hold.release();
    let (answer, _) = tab
        .until(|f| f["id"] == json!(prompt_id) && f.get("method").is_none())
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one turn: the steer joined it");
    assert!(format!("{:?}", requests[1].messages()).contains("also mention the weather"));
    assert!(server.violations().is_empty());
    assert_eq!(bounded(web.stop()).await, Some(143));
}

#[tokio::test]
async fn a_session_outlives_its_tab_while_it_works_and_is_released_once_nobody_watches() {
    let server = MockServer::start();
    let (held, hold) = MockResponse::text("finished while nobody watched").hold_after(3);
    server.push(held);
    let web = start(&server).await;
    let mut first = web.page_socket().await;
    let id = new_session(&mut first, &web).await;
    first.start("session/prompt", prompt(&id, "work")).await;
    first.until(|f| is_update(f, "agent_message_chunk")).await;
    first.close().await;
    // The turn goes on; a new tab joins it mid-answer and sees it end.
    let mut second = web.page_socket().await;
    second
        .request(
            "session/load",
            json!({"sessionId": id, "cwd": web.workspace, "mcpServers": []}),
        )
        .await
        .unwrap();
    hold.release();
    let (_, seen) = second.until(|f| is_update(f, "usage_update")).await;
    let mut all: Vec<Value> = seen;
    all.extend(second.inbox.drain(..));
    assert_eq!(agent_text(&all), "finished while nobody watched");
    // Nobody watches and nothing runs: the session is closed and its file free again.
    second.close().await;
    let file = web.session_file(&id);
    bounded(async {
        loop {
            let f = std::fs::File::open(&file).unwrap();
            if nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(server.violations().is_empty());
    assert_eq!(bounded(web.stop()).await, Some(143));
}

#[tokio::test]
async fn a_signal_answers_the_running_prompt_cancelled_and_leaves_the_session_balanced() {
    let server = MockServer::start();
    let (held, _hold) = MockResponse::text("never finishes, nobody waits").hold_after(3);
    server.push(held);
    let web = start(&server).await;
    let mut tab = web.page_socket().await;
    let id = new_session(&mut tab, &web).await;
    let prompt_id = tab.start("session/prompt", prompt(&id, "work")).await;
    tab.until(|f| is_update(f, "agent_message_chunk")).await;
    let pid = nix::unistd::Pid::from_raw(web.process.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let (answer, _) = tab
        .until(|f| f["id"] == json!(prompt_id) && f.get("method").is_none())
        .await;
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    let file = web.session_file(&id);
    let mut web = web;
    let status = bounded(web.process.wait()).await.unwrap();
    assert_eq!(status.code(), Some(143));
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains("\"turn/end\""), "the turn was closed: {text}");
}
