#![allow(clippy::unwrap_used)]
//! The command surface outside `run`: help, the no-argument case without a terminal, and
//! `config show`.

mod common;

use common::{World, stderr, stdout};

#[test]
fn every_command_has_help() {
    let w = World::new();
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["chat", "--help"],
        &["acp", "--help"],
        &["sessions", "--help"],
        &["sessions", "list", "--help"],
        &["sessions", "show", "--help"],
        &["sessions", "fork", "--help"],
        &["sessions", "resume", "--help"],
        &["config", "--help"],
        &["config", "show", "--help"],
    ] {
        let out = w.output(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).contains("Usage: dsh"), "{args:?}");
    }
    assert!(w.server.requests().is_empty());
}

#[test]
fn no_arguments_without_a_terminal_prints_help_and_exits_2() {
    let w = World::new();
    let out = w.output(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("Usage: dsh"), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
}

#[test]
fn config_show_names_sources_and_redacts_keys() {
    let w = World::new();
    std::fs::write(
        w.home.path().join("config.toml"),
        "[defaults]\nmax_parallel_tool_calls = 4\n\n\
         [providers.ollama]\nkind = \"openai-compatible\"\n\
         base_url = \"http://127.0.0.1:11434/v1\"\nmodels = [\"qwen2.5-coder\"]\n",
    )
    .unwrap();
    let out = w
        .dsh(&["config", "show", "--model", "deepseek-v4-pro"])
        .env("DEEPSEEK_API_KEY", "sk-super-secret-123")
        .env("OPENAI_API_KEY", "sk-other-secret-456")
        .env("DSH_PROVIDER", "deepseek")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains("sk-super-secret-123"), "{text}");
    assert!(!text.contains("sk-other-secret-456"), "{text}");
    assert!(
        text.contains("set, redacted (env DEEPSEEK_API_KEY)"),
        "{text}"
    );
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no `{key}` line in\n{text}"))
            .to_owned()
    };
    assert!(line("provider = \"deepseek\"").ends_with("# env DSH_PROVIDER"));
    assert!(line("model = \"deepseek-v4-pro\"").ends_with("# flag --model"));
    assert!(line("max_parallel_tool_calls = 4").ends_with("# file"));
    assert!(text.contains("[providers.ollama]"), "{text}");
    assert!(text.contains("http://127.0.0.1:11434/v1"), "{text}");
    assert!(text.contains(&format!("base_url = \"{}\"", w.server.url())));
    assert!(text.contains("# env DEEPSEEK_BASE_URL"), "{text}");
}

#[test]
fn an_unknown_provider_lists_the_known_ones() {
    let w = World::new();
    let out = w.output(&["run", "--provider", "nope", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("unknown provider `nope`"), "{err}");
    assert!(err.contains("deepseek"), "{err}");
}

#[test]
fn a_local_provider_needs_no_key() {
    // `local` is an OpenAI-compatible server that takes no key; point it at the mock.
    let w = World::new();
    w.server
        .push(dsh_testkit::MockResponse::text("local answer"));
    let url = w.server.url();
    let out = w
        .bare(&[
            "run",
            "--provider",
            "local",
            "--base-url",
            &url,
            "--model",
            "qwen",
            "hi",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "local answer\n");
    let req = &w.server.requests()[0];
    assert_eq!(req.body["model"], "qwen");
    assert_eq!(req.header("authorization"), None);
}
