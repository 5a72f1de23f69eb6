//! The web UI in a real browser: headless Chromium against the real `dsh web` and the mock
//! model server. What a person does, as keystrokes and clicks: open the page with the token,
//! see the stored sessions, open one, start a session, send a prompt, approve the command it
//! asks for, see the tool card and the answer, stop a held answer. A second test prints the
//! figures of the performance goals (page ready with 1,000 sessions, a 500-turn transcript):
//! figures, never timed assertions.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use common::chromium::{Chromium, call, click, eval, screenshot, type_into, until};
use common::fixtures::write_session;
use common::*;
use dsh_testkit::{MockResponse, MockServer, bounded};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// How the browser gets to the page.
enum Entry {
    /// The printed URL, typed or pasted.
    Url,
    /// A link on another site (a page at `localhost` on another port; `127.0.0.1` is a
    /// different site) that moves on to the URL: a navigation another site starts, as a link
    /// in a chat or `dsh web`'s `file:` opener page is.
    OtherSite,
}

/// Serves `page` to every request on a port of `localhost`, until the test ends.
async fn serve_elsewhere(page: String) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let page = page.clone();
            tokio::spawn(async move {
                // One request per connection; its head is all that matters.
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://localhost:{port}/")
}

/// `dsh web` over the sessions in `home`, and Chromium on the URL it printed.
async fn open_page(
    server: &MockServer,
    home: tempfile::TempDir,
    entry: Entry,
) -> (Web, Chromium, chromiumoxide::Page) {
    let launch = Launch {
        home: Some(home),
        ..Launch::default()
    };
    let web = start_with(server, launch).await;
    let url = format!("http://{}/?token={TOKEN}", web.addr);
    let chromium = Chromium::launch().await;
    let page = match entry {
        Entry::Url => chromium.open(&url).await,
        Entry::OtherSite => {
            let link = serve_elsewhere(format!(
                "<!doctype html><meta http-equiv=refresh content=\"0;url={url}\">"
            ))
            .await;
            chromium.open(&link).await
        }
    };
    (web, chromium, page)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sees_the_stored_sessions_and_works_in_a_new_one_with_approvals_and_stop() {
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo hi-from-bash","description":"print a greeting"}"#,
        ))
        .push(MockResponse::text(
            "**Done**: the command printed `hi-from-bash`.\n\n```sh\necho hi-from-bash\n```",
        ));
    let (held, hold) =
        MockResponse::text("a long answer that the person stops halfway").hold_after(3);
    server.push(held);
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("workspace");
    let elsewhere = home.path().join("elsewhere");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let stored = write_session(
        home.path(),
        &workspace,
        "Explain the parser",
        2,
        now_ms() - 90_000,
    );
    write_session(
        home.path(),
        &elsewhere,
        "Fix the flaky test",
        1,
        now_ms() - 30_000,
    );
    let (web, chromium, page) = open_page(&server, home, Entry::OtherSite).await;

    // The stored sessions, newest first, grouped by directory.
    until(&page, "document.querySelectorAll('.session').length === 2").await;
    let sidebar = eval(&page, "document.querySelector('.sidebar').innerText").await;
    let sidebar = sidebar.as_str().unwrap();
    assert!(
        sidebar.find("Fix the flaky test").unwrap() < sidebar.find("Explain the parser").unwrap(),
        "{sidebar}"
    );
    assert!(
        sidebar.contains("elsewhere") && sidebar.contains("workspace"),
        "{sidebar}"
    );
    assert_eq!(
        eval(&page, "document.cookie").await.as_str(),
        Some(""),
        "the token cookie is HttpOnly: scripts cannot read it"
    );

    // Open a stored session: its transcript is replayed, Markdown and code highlighted.
    click(&page, &format!("[data-session='{stored}']")).await;
    until(
        &page,
        "document.querySelector('.transcript')?.innerText.includes('should be enough to go on')",
    )
    .await;
    until(&page, "document.querySelector('.msg.agent .code .tok-kw')").await;
    until(
        &page,
        "document.querySelector('.msg.user')?.innerText.includes('Explain the parser')",
    )
    .await;

    // A new session in a chosen directory.
    click(&page, "#new-session").await;
    until(&page, "document.querySelector('#new-cwd')").await;
    let cwd = serde_json::to_string(&web.workspace).unwrap();
    eval(
        &page,
        &format!(
            "(() => {{ const i = document.querySelector('#new-cwd'); i.value = {cwd}; \
             i.dispatchEvent(new Event('input', {{bubbles: true}})); return true; }})()"
        ),
    )
    .await;
    click(&page, "#create-session").await;
    until(&page, "document.querySelector('#prompt') && !document.querySelector('#prompt').disabled && !document.querySelector('#new-cwd')").await;
    until(&page, "document.querySelector('select[data-option=model]')").await;

    // A prompt whose command needs approval.
    type_into(&page, "#prompt", "print a greeting").await;
    click(&page, "#send").await;
    until(
        &page,
        "document.querySelector('.approval')?.innerText.includes('echo hi-from-bash')",
    )
    .await;
    screenshot(&page, "dsh-web-approval").await;
    click(&page, ".approval [data-option='allow-once']").await;
    until(
        &page,
        "document.querySelector(\".tool[data-status='completed']\")?.innerText.includes('hi-from-bash')",
    )
    .await;
    until(
        &page,
        "[...document.querySelectorAll('.msg.agent strong')].some(e => e.textContent === 'Done')",
    )
    .await;
    until(
        &page,
        "!document.querySelector('#stop') && document.querySelector('#send')",
    )
    .await;
    screenshot(&page, "dsh-web-session").await;

    // A held answer, stopped.
    type_into(&page, "#prompt", "write a long essay").await;
    click(&page, "#send").await;
    bounded(hold.reached()).await;
    until(
        &page,
        "document.querySelector('.transcript').innerText.includes('a long')",
    )
    .await;
    click(&page, "#stop").await;
    until(
        &page,
        "[...document.querySelectorAll('.note')].some(n => n.textContent.includes('Stopped'))",
    )
    .await;
    until(&page, "document.querySelector('#send')").await;

    // A narrow window: the sidebar folds into a menu.
    bounded(page.execute(SetDeviceMetricsOverrideParams::new(400, 760, 1.0, true)))
        .await
        .unwrap();
    until(
        &page,
        "document.querySelector('.sidebar').getBoundingClientRect().right <= 0",
    )
    .await;
    click(&page, ".bar .menu").await;
    until(
        &page,
        "document.querySelector('.sidebar').getBoundingClientRect().left >= 0",
    )
    .await;
    screenshot(&page, "dsh-web-narrow").await;

    let requests = server.requests();
    assert_eq!(
        requests.len(),
        3,
        "the stopped answer made no further request"
    );
    assert!(format!("{:?}", requests[1].messages()).contains("hi-from-bash"));
    assert!(server.violations().is_empty());
    chromium.close().await;
    assert_eq!(bounded(web.stop()).await, Some(143));
}

/// The performance goals, measured in the browser and printed: the page ready (sessions on
/// screen) with 1,000 stored sessions, and a 500-turn transcript loaded and scrolled to its
/// start without tasks over 50 ms. Not timed assertions: the machine's load decides the
/// numbers; the test checks that everything was shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figures_page_ready_with_1000_sessions_and_a_500_turn_transcript() {
    let server = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    let base = now_ms() - 10_000_000;
    let mut dirs = Vec::new();
    for d in 0..20 {
        let dir = home.path().join(format!("projects/project-{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        dirs.push(dir);
    }
    for n in 0..999u64 {
        let dir = &dirs[n as usize % dirs.len()];
        write_session(
            home.path(),
            dir,
            &format!("Task number {n}: tidy the module"),
            1,
            base + n * 1000,
        );
    }
    let long = write_session(
        home.path(),
        &dirs[0],
        "The long conversation",
        500,
        now_ms(),
    );
    let (web, chromium, page) = open_page(&server, home, Entry::Url).await;
    let first = until(&page, "window.__dsh && window.__dsh.ready").await;
    until(
        &page,
        "document.querySelector('.sessions')?.dataset.count === '1000'",
    )
    .await;
    // Again with the files in the browser's cache (revalidated by their ETags).
    bounded(page.reload()).await.unwrap();
    let reload = until(&page, "window.__dsh && window.__dsh.ready").await;
    let marks = eval(&page, "JSON.stringify(window.__dsh.marks)").await;
    println!(
        "figures: marks of the reload (ms since navigation): {}",
        marks.as_str().unwrap()
    );

    click(&page, &format!("[data-session='{long}']")).await;
    let started = std::time::Instant::now();
    until(&page, "document.querySelector('.transcript') && !document.querySelector('.transcript').innerText.includes('Loading the session')").await;
    let loaded = started.elapsed();
    let items = eval(
        &page,
        "Number(document.querySelector('.transcript').dataset.items)",
    )
    .await;
    // Scroll to the start, page by page, as a reader would: each time the top is reached,
    // older items are added above (waiting at most 20 s for each page).
    let scrolled = call(
        &page,
        "async () => {
            const scroller = document.querySelector('.scroll');
            const count = () => document.querySelector('.transcript').children.length;
            const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
            const start = performance.now();
            window.__dsh.marks.scrollStart = start;
            let pages = 0;
            while (document.querySelector('.older')) {
                const before = count();
                scroller.scrollTop = 0;
                const waited = performance.now();
                while (count() === before && performance.now() - waited < 20000) await frame();
                await frame();
                if (count() === before) return [performance.now() - start, pages, false];
                pages++;
            }
            return [performance.now() - start, pages, true];
        }",
    )
    .await;
    assert_eq!(
        scrolled[2],
        serde_json::Value::Bool(true),
        "stuck while scrolling: {scrolled}"
    );
    let marks = eval(&page, "JSON.stringify(window.__dsh.marks)").await;
    println!(
        "figures: marks (ms since the reload): {}",
        marks.as_str().unwrap()
    );
    let long_tasks = eval(&page, "JSON.stringify(window.__dsh.longTasks)").await;
    println!("figures: long tasks: {}", long_tasks.as_str().unwrap());
    let long_tasks: Vec<serde_json::Value> =
        serde_json::from_str(long_tasks.as_str().unwrap()).unwrap();
    let worst = long_tasks
        .iter()
        .filter_map(|t| t["duration"].as_f64())
        .fold(0.0, f64::max);
    println!(
        "figures: page ready with 1000 sessions: {:.0} ms (reload {:.0} ms); 500-turn \
         transcript: {} items, shown in {} ms, scrolled to its start in {:.0} ms ({} pages); \
         tasks over 50 ms after the reload: {} (longest {:.0} ms)",
        first.as_f64().unwrap(),
        reload.as_f64().unwrap(),
        items,
        loaded.as_millis(),
        scrolled[0].as_f64().unwrap(),
        scrolled[1],
        long_tasks.len(),
        worst
    );
    // 500 prompts, 500 answers, a card for every fourth turn's read.
    assert_eq!(
        items.as_u64(),
        Some(1125),
        "every turn is in the transcript"
    );
    chromium.close().await;
    assert_eq!(bounded(web.stop()).await, Some(143));
}
