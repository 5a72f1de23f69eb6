//! The web UI in Firefox: headless `firefox-esr` over WebDriver against the real `dsh web`
//! and the mock model server, through what a person does first: open the page with the token,
//! see the stored sessions, open one (Markdown and highlighting), start a session, send a
//! prompt, approve its command, see the tool card and the answer. The Chromium tests cover
//! the rest; this one shows the page is not Chromium-only.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::firefox::Firefox;
use common::fixtures::write_session;
use common::*;
use dsh_testkit::{MockResponse, MockServer, bounded};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_firefox_a_person_opens_a_stored_session_and_works_in_a_new_one_with_an_approval() {
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo hi-from-firefox","description":"print a greeting"}"#,
        ))
        .push(MockResponse::text("**Done** in Firefox."));
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let stored = write_session(
        home.path(),
        &workspace,
        "Explain the parser",
        2,
        now_ms() - 60_000,
    );
    let launch = Launch {
        home: Some(home),
        ..Launch::default()
    };
    let web = start_with(&server, launch).await;
    let firefox = Firefox::launch().await;
    firefox
        .open(&format!("http://{}/?token={TOKEN}", web.addr))
        .await;

    firefox
        .until("document.querySelectorAll('.session').length === 1")
        .await;
    assert_eq!(
        firefox.eval("document.cookie").await.as_str(),
        Some(""),
        "the token cookie is HttpOnly: scripts cannot read it"
    );
    firefox.click(&format!("[data-session='{stored}']")).await;
    firefox
        .until("document.querySelector('.transcript')?.innerText.includes('should be enough to go on')")
        .await;
    firefox
        .until("document.querySelector('.msg.agent .code .tok-kw')")
        .await;

    firefox.click("#new-session").await;
    firefox.until("document.querySelector('#new-cwd')").await;
    let cwd = serde_json::to_string(&web.workspace).unwrap();
    firefox
        .eval(&format!(
            "(() => {{ const i = document.querySelector('#new-cwd'); i.value = {cwd}; \
             i.dispatchEvent(new Event('input', {{bubbles: true}})); return true; }})()"
        ))
        .await;
    firefox.click("#create-session").await;
    firefox
        .until("document.querySelector('#prompt') && !document.querySelector('#prompt').disabled && !document.querySelector('#new-cwd')")
        .await;

    firefox.type_into("#prompt", "print a greeting").await;
    firefox.click("#send").await;
    firefox
        .until("document.querySelector('.approval')?.innerText.includes('echo hi-from-firefox')")
        .await;
    firefox.click(".approval [data-option='allow-once']").await;
    firefox
        .until("document.querySelector(\".tool[data-status='completed']\")?.innerText.includes('hi-from-firefox')")
        .await;
    firefox
        .until("[...document.querySelectorAll('.msg.agent strong')].some(e => e.textContent === 'Done')")
        .await;

    assert_eq!(server.requests().len(), 2);
    assert!(server.violations().is_empty());
    // Stopped while the page is still open, as a person stops it with the tab left open.
    assert_eq!(bounded(web.stop()).await, Some(143));
    firefox.close().await;
}
