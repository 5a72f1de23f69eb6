#![allow(clippy::unwrap_used)]
//! The `dsh` binary on the PostgreSQL session store: runs, resume, listing, fork, `--follow`,
//! import/export and the store's secrets, against a throwaway PostgreSQL cluster (one per test
//! binary, a fresh database per test) and the mock provider.

#[allow(dead_code)] // The cluster module serves the store's own tests too.
#[path = "../../dsh-store-postgres/tests/common/cluster.rs"]
mod cluster;
mod common;

use std::io::BufRead as _;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{PROBE, World, bash, block_on, json_lines, session_id_of, stderr, stdout};
use dsh_testkit::MockResponse;

/// Bounds every wait on another process.
const WAIT: Duration = Duration::from_secs(60);

/// A world whose sessions go to a fresh database, and that database's url.
fn pg_world() -> (World, String) {
    let (db, _) = block_on(cluster::fresh_db());
    (World::new(), cluster::cluster().url(&db))
}

/// `dsh run --output-format stream-json PROMPT` against `url`; returns the session id.
fn run(w: &World, url: &str, extra: &[&str], prompt: &str) -> String {
    let mut args = vec!["run", "--output-format", "stream-json"];
    args.extend_from_slice(extra);
    args.push(prompt);
    let out = w.dsh(&args).env("DSH_STORE_URL", url).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    session_id_of(&json_lines(&out))
}

fn sessions(w: &World, url: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["sessions"];
    all.extend_from_slice(args);
    w.bare(&all).env("DSH_STORE_URL", url).output().unwrap()
}

#[test]
fn run_resume_continue_list_show_and_fork_use_the_postgres_store_and_write_no_files() {
    let (w, url) = pg_world();
    w.server.push(MockResponse::text("The first answer."));
    let id = run(&w, &url, &[], "first prompt");
    w.server.push(MockResponse::text("The second answer."));
    let prefix = &id[..id.len() - 4];
    assert_eq!(run(&w, &url, &["--resume", prefix], "second prompt"), id);
    w.server.push(MockResponse::text("The third answer."));
    assert_eq!(run(&w, &url, &["-c"], "third prompt"), id);
    // The resumed runs sent the whole conversation: it came back from the database.
    let third = w.server.requests().pop().unwrap();
    let history = serde_json::to_string(third.messages()).unwrap();
    assert!(
        history.contains("The first answer.") && history.contains("The second answer."),
        "{history}"
    );
    assert!(w.session_files().is_empty(), "{:?}", w.session_files());

    let list = sessions(&w, &url, &["list"]);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    let row = stdout(&list)
        .lines()
        .find(|l| l.starts_with(&id))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{}", stdout(&list)));
    assert!(row.contains("first prompt"), "{row}");
    assert_eq!(
        row.split_whitespace().nth(3),
        Some("3"),
        "three turns: {row}"
    );

    let show = sessions(&w, &url, &["show", prefix]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let text = stdout(&show);
    assert!(text.contains(&format!("session {id}")), "{text}");
    assert!(text.contains("store   the PostgreSQL database"), "{text}");
    assert!(text.contains("The third answer."), "{text}");

    let fork = sessions(&w, &url, &["fork", &id]);
    assert_eq!(fork.status.code(), Some(0), "{}", stderr(&fork));
    let child = stdout(&fork).trim().to_owned();
    let show = sessions(&w, &url, &["show", &child]);
    assert!(
        stdout(&show).contains(&format!("forked from {id}")),
        "{}",
        stdout(&show)
    );
}

/// The follower's stdout, line by line, on a channel (so every wait on it is bounded).
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// `dsh sessions show --follow ID` running, and its stdout's lines.
fn follow(w: &World, url: &str, id: &str) -> (Child, mpsc::Receiver<String>) {
    let mut follower = w
        .bare(&["sessions", "show", "--follow", id])
        .env("DSH_STORE_URL", url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut follower);
    (follower, lines)
}

/// The first line holding `needle`.
fn wait_for(lines: &mpsc::Receiver<String>, needle: &str) -> String {
    loop {
        match lines.recv_timeout(WAIT) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("the follower never printed `{needle}`: {e}"),
        }
    }
}

#[test]
fn show_follow_streams_the_events_another_process_commits() {
    let (w, url) = pg_world();
    w.server
        .push(MockResponse::text("Answer before following."));
    let id = run(&w, &url, &[], "first prompt");
    let (mut follower, lines) = follow(&w, &url, &id);
    wait_for(&lines, "Answer before following.");
    // Another process appends a turn with a tool call while the follower runs.
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            &bash("echo tool-ran"),
        ))
        .push(MockResponse::text("Answer while followed."));
    run(&w, &url, &["--resume", &id], "a followed prompt");
    wait_for(&lines, "a followed prompt");
    wait_for(&lines, "Answer while followed.");
    assert!(
        follower.try_wait().unwrap().is_none(),
        "the follower keeps following"
    );
    follower.kill().unwrap();
    follower.wait().unwrap();
}

#[test]
fn show_follow_reconnects_after_a_server_restart_and_goes_on() {
    // A cluster of its own: the restart must not disturb the other tests.
    let own = cluster::start();
    let (db, _) = block_on(cluster::fresh_db_on(&own));
    let url = own.url(&db);
    let w = World::new();
    w.server.push(MockResponse::text("Before the restart."));
    let id = run(&w, &url, &[], "first prompt");
    let (mut follower, lines) = follow(&w, &url, &id);
    wait_for(&lines, "Before the restart.");
    own.restart();
    w.server.push(MockResponse::text("After the restart."));
    run(&w, &url, &["--resume", &id], "second prompt");
    wait_for(&lines, "After the restart.");
    follower.kill().unwrap();
    let out = follower.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reconnecting"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn show_follow_on_the_jsonl_store_says_it_needs_postgres() {
    let w = World::new();
    let out = w
        .bare(&["sessions", "show", "--follow", "session-x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("needs the PostgreSQL session store"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_jsonl_session_imported_and_exported_back_is_byte_identical() {
    let (w, url) = pg_world();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("echo one")))
        .push(MockResponse::text("A file session."));
    // Stored as a JSONL file: no store url.
    let out = w.output(&["run", "--output-format", "stream-json", "make a file"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = session_id_of(&json_lines(&out));
    let file = w.session_files().pop().unwrap();
    let original = std::fs::read(&file).unwrap();

    let import = sessions(&w, &url, &["import", &id]);
    assert_eq!(import.status.code(), Some(0), "{}", stderr(&import));
    assert!(stdout(&import).contains(&format!("{id} imported from")));
    let list = sessions(&w, &url, &["list"]);
    assert!(stdout(&list).contains(&id), "{}", stdout(&list));

    let exported = w.cwd.path().join("exported.jsonl");
    let export = sessions(&w, &url, &["export", &id, "-o", exported.to_str().unwrap()]);
    assert_eq!(export.status.code(), Some(0), "{}", stderr(&export));
    assert_eq!(std::fs::read(&exported).unwrap(), original);
    let to_stdout = sessions(&w, &url, &["export", &id, "-o", "-"]);
    assert_eq!(to_stdout.stdout, original);

    // Exporting to the JSONL store's own place never replaces the file that is there.
    let clobber = sessions(&w, &url, &["export", &id]);
    assert_eq!(clobber.status.code(), Some(1), "{}", stdout(&clobber));
    assert_eq!(std::fs::read(&file).unwrap(), original);
    // Once it is gone, the export puts it back where the JSONL store finds it.
    std::fs::remove_file(&file).unwrap();
    let export = sessions(&w, &url, &["export", &id]);
    assert_eq!(export.status.code(), Some(0), "{}", stderr(&export));
    assert_eq!(stdout(&export).trim(), file.display().to_string());
    assert_eq!(std::fs::read(&file).unwrap(), original);

    // An id already in the database is refused, not duplicated.
    let again = sessions(&w, &url, &["import", file.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1), "{}", stdout(&again));
}

#[test]
fn the_store_url_and_password_never_reach_commands_or_dshs_environment() {
    let (w, url) = pg_world();
    // The cluster trusts local connections, so the planted password is carried but unused.
    let with_password = url.replace("postgres@", "postgres:planted-url-password@");
    std::fs::write(
        w.home.path().join("config.toml"),
        "[store]\nkind = \"postgres\"\npassword_env = \"DB_PASS_VAR\"\n",
    )
    .unwrap();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash(PROBE)))
        .push(MockResponse::text("probed"));
    let out = w
        .dsh(&["run", "--output-format", "stream-json", "probe"])
        .env("DSH_STORE_URL", &with_password)
        .env("DB_PASS_VAR", "planted-db-password")
        .env("DSH_LOG", "trace")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result = serde_json::to_string(w.server.requests()[1].messages()).unwrap();
    assert!(result.contains("probe reached dsh"), "{result}");
    let shown = w
        .bare(&["config", "show"])
        .env("DSH_STORE_URL", &with_password)
        .env("DB_PASS_VAR", "planted-db-password")
        .output()
        .unwrap();
    assert!(
        stdout(&shown).contains("# sessions: PostgreSQL postgres@127.0.0.1:"),
        "{}",
        stdout(&shown)
    );
    for text in [result, stdout(&out), stderr(&out), stdout(&shown)] {
        assert!(!text.contains("planted"), "{text}");
    }
}

#[test]
fn a_missing_store_password_variable_is_named() {
    let (w, url) = pg_world();
    std::fs::write(
        w.home.path().join("config.toml"),
        format!("[store]\nkind = \"postgres\"\nurl = \"{url}\"\npassword_env = \"DSH_TEST_UNSET_DB_PASS\"\n"),
    )
    .unwrap();
    let out = w.bare(&["sessions", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("DSH_TEST_UNSET_DB_PASS"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_unreachable_database_fails_the_run_before_the_provider_is_asked() {
    let w = World::new();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = w
        .dsh(&["run", "hello"])
        .env(
            "DSH_STORE_URL",
            format!("postgres://postgres:pw-secret@127.0.0.1:{port}/none"),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cannot store sessions in the PostgreSQL database"),
        "{err}"
    );
    assert!(!err.contains("pw-secret"), "{err}");
    assert!(w.server.requests().is_empty());
}

/// `sessions list --cwd/--origin` on either store (`url`: PostgreSQL, else the files).
fn list_filters_select_by_directory_and_origin(w: &World, url: Option<&str>) {
    let with_store = |mut cmd: std::process::Command| {
        if let Some(url) = url {
            cmd.env("DSH_STORE_URL", url);
        }
        cmd
    };
    let other = w.cwd.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let mut ids = Vec::new();
    for dir in [w.cwd.path(), other.as_path()] {
        w.server.push(MockResponse::text("ok"));
        let out = with_store(w.dsh(&[
            "--cwd",
            dir.to_str().unwrap(),
            "run",
            "--output-format",
            "stream-json",
            "hello",
        ]))
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        ids.push(session_id_of(&json_lines(&out)));
    }
    let list = |args: &[&str]| {
        let mut all = vec!["sessions", "list"];
        all.extend_from_slice(args);
        let out = with_store(w.bare(&all)).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
    };
    let here = list(&["--cwd", other.to_str().unwrap()]);
    assert!(here.contains(&ids[1]) && !here.contains(&ids[0]), "{here}");
    let top = list(&["--origin", "top"]);
    assert!(top.contains(&ids[0]) && top.contains(&ids[1]), "{top}");
    let subagents = list(&["--origin", "subagent"]);
    assert!(subagents.starts_with("no sessions in"), "{subagents}");
}

#[test]
fn list_filters_by_directory_and_origin_on_postgres() {
    let (w, url) = pg_world();
    list_filters_select_by_directory_and_origin(&w, Some(&url));
}

#[test]
fn list_filters_by_directory_and_origin_on_jsonl_files() {
    list_filters_select_by_directory_and_origin(&World::new(), None);
}

#[test]
fn a_second_dsh_resuming_a_session_live_in_another_gets_the_writer_error() {
    let (w, url) = pg_world();
    let release = w.cwd.path().join("release");
    // The first run's tool call holds its session live until the test releases it.
    let hold = format!(
        "timeout 60 sh -c 'while [ ! -e {} ]; do sleep 0.05; done'",
        release.display()
    );
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash(&hold)))
        .push(MockResponse::text("released"));
    let mut first = w
        .dsh(&["run", "--output-format", "stream-json", "hold it"])
        .env("DSH_STORE_URL", &url)
        .spawn()
        .unwrap();
    let lines = lines_of(&mut first);
    let call: serde_json::Value = serde_json::from_str(&wait_for(&lines, "\"tool/call\"")).unwrap();
    let id = call["sessionId"].as_str().unwrap().to_owned();

    let second = w
        .dsh(&["run", "--resume", &id, "me too"])
        .env("DSH_STORE_URL", &url)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1), "{}", stdout(&second));
    assert!(
        stderr(&second).contains("in use by another writer"),
        "{}",
        stderr(&second)
    );

    std::fs::write(&release, "").unwrap();
    wait_for(&lines, "released");
    assert_eq!(first.wait().unwrap().code(), Some(0));
}

#[test]
fn import_all_moves_every_file_session_once_and_skips_those_already_stored() {
    let (w, url) = pg_world();
    let mut ids = Vec::new();
    for prompt in ["first", "second"] {
        w.server.push(MockResponse::text("ok"));
        let out = w.output(&["run", "--output-format", "stream-json", prompt]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        ids.push(session_id_of(&json_lines(&out)));
    }
    let one = sessions(&w, &url, &["import", &ids[0]]);
    assert_eq!(one.status.code(), Some(0), "{}", stderr(&one));
    let all = sessions(&w, &url, &["import", "--all"]);
    assert_eq!(all.status.code(), Some(0), "{}", stderr(&all));
    let text = stdout(&all);
    assert!(
        text.contains(&format!("{} skipped: already in the database", ids[0])),
        "{text}"
    );
    assert!(text.contains(&format!("{} imported", ids[1])), "{text}");
    let list = stdout(&sessions(&w, &url, &["list"]));
    assert!(list.contains(&ids[0]) && list.contains(&ids[1]), "{list}");
}
