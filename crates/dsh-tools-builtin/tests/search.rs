//! `glob` and `grep` over a fixture tree: ignore files, deterministic order, caps, errors
//! and cancellation.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;
use dsh_session::CallId;
use dsh_tools::{TOOL_ABORTED, ToolCallContext, ToolCallResult, ToolCaller};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn put(root: &Path, name: &str, content: impl AsRef<[u8]>) {
    let path = root.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// A small project with ignored, hidden, VCS and binary files.
fn project() -> tempfile::TempDir {
    let dir = tempdir();
    let root = dir.path();
    put(root, ".gitignore", "ignored.txt\nbuild/\n*.log\n");
    put(
        root,
        "src/main.rs",
        "fn main() {\n    println!(\"hello\");\n}\n",
    );
    put(root, "src/lib.rs", "pub fn hello() {}\n");
    put(root, "src/nested/deep.rs", "// hello deep\n");
    put(root, "ignored.txt", "hello ignored\n");
    put(root, "build/out.rs", "hello build\n");
    put(root, "debug.log", "hello log\n");
    put(root, ".hidden/h.rs", "hello hidden\n");
    put(root, ".git/config", "hello git\n");
    put(root, ".git/hooks/x.rs", "hello git hook\n");
    put(root, "README.md", "Hello readme\n");
    put(root, "bin.dat", b"hello\0binary\n");
    dir
}

async fn search(w: &World, caller: &ToolCaller, tool: &str, args: Value) -> ToolCallResult {
    w.call(tool, args, Some(caller)).await
}

async fn text(w: &World, caller: &ToolCaller, tool: &str, args: Value) -> String {
    let result = search(w, caller, tool, args).await;
    assert!(!result.is_error, "unexpected error: {}", result.text());
    result.text()
}

#[tokio::test]
async fn glob_honours_gitignore_skips_vcs_dirs_and_sorts_by_path() {
    let w = world().await;
    let dir = project();
    let a = w.caller_in("session-a", Some(dir.path()));
    assert_eq!(
        text(&w, &a, "glob", json!({"pattern": "*.rs"})).await,
        ".hidden/h.rs\nsrc/lib.rs\nsrc/main.rs\nsrc/nested/deep.rs"
    );
    assert_eq!(
        text(&w, &a, "glob", json!({"pattern": "src/*.rs"})).await,
        "src/lib.rs\nsrc/main.rs"
    );
    assert_eq!(
        text(&w, &a, "glob", json!({"pattern": "**/*.rs", "path": "src"})).await,
        "src/lib.rs\nsrc/main.rs\nsrc/nested/deep.rs"
    );
    assert_eq!(
        text(&w, &a, "glob", json!({"pattern": "*"})).await,
        ".gitignore\n.hidden/h.rs\nREADME.md\nbin.dat\nsrc/lib.rs\nsrc/main.rs\nsrc/nested/deep.rs"
    );
    assert_eq!(
        text(&w, &a, "glob", json!({"pattern": "*.py"})).await,
        "No files found"
    );
}

#[tokio::test]
async fn grep_honours_gitignore_skips_binaries_and_sorts_by_path_and_line() {
    let w = world().await;
    let dir = project();
    let a = w.caller_in("session-a", Some(dir.path()));
    assert_eq!(
        text(&w, &a, "grep", json!({"pattern": "hello"})).await,
        ".hidden/h.rs:1: hello hidden\n\
         src/lib.rs:1: pub fn hello() {}\n\
         src/main.rs:2:     println!(\"hello\");\n\
         src/nested/deep.rs:1: // hello deep"
    );
    assert_eq!(
        text(
            &w,
            &a,
            "grep",
            json!({"pattern": "(?i)^hello", "include": "*.md"})
        )
        .await,
        "README.md:1: Hello readme"
    );
    assert_eq!(
        text(
            &w,
            &a,
            "grep",
            json!({"pattern": "hello", "path": "src/nested"})
        )
        .await,
        "src/nested/deep.rs:1: // hello deep"
    );
    assert_eq!(
        text(
            &w,
            &a,
            "grep",
            json!({"pattern": "fn", "path": "src/main.rs"})
        )
        .await,
        "src/main.rs:1: fn main() {"
    );
    assert_eq!(
        text(&w, &a, "grep", json!({"pattern": "nowhere to be found"})).await,
        "No matches found"
    );
}

#[tokio::test]
async fn invalid_patterns_and_missing_paths_are_error_results() {
    let w = world().await;
    let dir = project();
    let a = w.caller_in("session-a", Some(dir.path()));
    let bad_glob = search(&w, &a, "glob", json!({"pattern": "a["})).await;
    assert!(bad_glob.is_error);
    assert!(
        bad_glob
            .text()
            .starts_with("Error: invalid glob pattern \"a[\""),
        "{}",
        bad_glob.text()
    );
    let bad_regex = search(&w, &a, "grep", json!({"pattern": "(unclosed"})).await;
    assert!(bad_regex.is_error);
    assert!(
        bad_regex
            .text()
            .starts_with("Error: invalid regex \"(unclosed\""),
        "{}",
        bad_regex.text()
    );
    let bad_include = search(&w, &a, "grep", json!({"pattern": "x", "include": "{a"})).await;
    assert!(bad_include.is_error);
    assert!(
        bad_include.text().contains("invalid include glob"),
        "{}",
        bad_include.text()
    );
    let missing = search(&w, &a, "glob", json!({"pattern": "*", "path": "nope"})).await;
    assert_eq!(missing.text(), "Error: path not found: nope");
    let missing = search(&w, &a, "grep", json!({"pattern": "x", "path": "nope"})).await;
    assert_eq!(missing.text(), "Error: path not found: nope");
}

#[tokio::test]
async fn glob_caps_at_5000_paths_keeping_the_first_in_path_order() {
    let w = world().await;
    let dir = tempdir();
    for i in (0..5_020).rev() {
        put(dir.path(), &format!("f{i:04}.txt"), "");
    }
    let a = w.caller_in("session-a", Some(dir.path()));
    let out = text(&w, &a, "glob", json!({"pattern": "*.txt"})).await;
    let (paths, note) = out.split_once("\n\n").unwrap();
    let expected: Vec<String> = (0..5_000).map(|i| format!("f{i:04}.txt")).collect();
    assert_eq!(paths, expected.join("\n"));
    assert_eq!(
        note,
        "(Results are truncated: showing the first 5000 paths. Use a more specific pattern or \
         path.)"
    );
}

#[tokio::test]
async fn grep_caps_at_5000_matches_and_cuts_long_lines() {
    let w = world().await;
    let dir = tempdir();
    let lines: String = (1..=5_050).map(|i| format!("match {i}\n")).collect();
    put(dir.path(), "many.txt", lines);
    put(
        dir.path(),
        "wide.txt",
        format!("match {}\n", "w".repeat(3000)),
    );
    let a = w.caller_in("session-a", Some(dir.path()));
    let out = text(&w, &a, "grep", json!({"pattern": "match"})).await;
    let (matches, note) = out.split_once("\n\n").unwrap();
    let expected: Vec<String> = (1..=5_000)
        .map(|i| format!("many.txt:{i}: match {i}"))
        .collect();
    assert_eq!(matches, expected.join("\n"));
    assert_eq!(
        note,
        "(Results are truncated: showing the first 5000 matches. Use a more specific pattern, \
         path or include.)"
    );
    let wide = text(
        &w,
        &a,
        "grep",
        json!({"pattern": "match w", "include": "wide.txt"}),
    )
    .await;
    assert_eq!(
        wide,
        format!("wide.txt:1: match {}... (line truncated)", "w".repeat(1994))
    );
}

#[tokio::test]
async fn searches_outside_the_working_directory_show_absolute_paths() {
    let w = world().await;
    let cwd = tempdir();
    let other = project();
    let a = w.caller_in("session-a", Some(cwd.path()));
    let src = other.path().join("src");
    let out = text(
        &w,
        &a,
        "grep",
        json!({"pattern": "pub fn", "path": src.to_str().unwrap()}),
    )
    .await;
    assert_eq!(
        out,
        format!("{}/lib.rs:1: pub fn hello() {{}}", src.display())
    );
    let out = text(
        &w,
        &a,
        "glob",
        json!({"pattern": "lib.rs", "path": src.to_str().unwrap()}),
    )
    .await;
    assert_eq!(out, format!("{}/lib.rs", src.display()));
}

#[tokio::test]
async fn a_cancelled_search_stops_and_is_aborted() {
    let w = world().await;
    let dir = project();
    let a = w.caller_in("session-a", Some(dir.path()));
    let cancel = CancellationToken::new();
    cancel.cancel();
    for (tool, args) in [
        ("grep", json!({"pattern": "hello"})),
        ("glob", json!({"pattern": "*"})),
    ] {
        let call = ToolCallContext::new(
            CallId::new("c"),
            tool,
            "{}",
            Some(a.clone()),
            cancel.clone(),
        );
        let err = w
            .runtime
            .get(None, tool)
            .unwrap()
            .execute(args, &call)
            .await
            .unwrap_err();
        assert_eq!(err.code.as_deref(), Some(TOOL_ABORTED), "{tool}: {err}");
    }
}
