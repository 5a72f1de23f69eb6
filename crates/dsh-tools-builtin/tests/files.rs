//! `read`, `write` and `edit` on real files: output format, the per-session observation
//! policy, literal edits, encodings and path display.

#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;
use dsh_tools::{ExecutionMode, ToolCallResult, ToolCaller, ToolExec};
use dsh_tools_builtin::{EDIT_AMBIGUOUS, EDIT_NO_MATCH, FS_NOT_OBSERVED, FS_STALE_VERSION};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Fixture {
    w: World,
    dir: tempfile::TempDir,
    a: ToolCaller,
}

impl Fixture {
    async fn new() -> Self {
        let w = world().await;
        let dir = tempdir();
        let a = w.caller_in("session-a", Some(dir.path()));
        Self { w, dir, a }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    fn put(&self, name: &str, content: impl AsRef<[u8]>) {
        let path = self.path(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, content).unwrap();
    }

    fn get(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap()
    }

    async fn call_as(&self, caller: &ToolCaller, tool: &str, args: Value) -> ToolCallResult {
        self.w.call(tool, args, Some(caller)).await
    }

    async fn read(&self, file: &str) -> ToolCallResult {
        self.call_as(&self.a, "read", json!({"file_path": file}))
            .await
    }

    async fn write(&self, file: &str, content: &str) -> ToolCallResult {
        self.call_as(
            &self.a,
            "write",
            json!({"file_path": file, "content": content}),
        )
        .await
    }

    async fn edit(&self, file: &str, old: &str, new: &str) -> ToolCallResult {
        self.call_as(
            &self.a,
            "edit",
            json!({"file_path": file, "old_string": old, "new_string": new}),
        )
        .await
    }
}

fn ok(result: &ToolCallResult) -> String {
    assert!(!result.is_error, "unexpected error: {}", result.text());
    result.text()
}

fn refused(result: &ToolCallResult, code: &str) -> String {
    assert!(result.is_error, "expected {code}, got {}", result.text());
    assert_eq!(result.code(), Some(code), "{}", result.text());
    result.text()
}

/// Rewrites a file from outside the tools, with a different length so the change is visible
/// even on a file system with coarse timestamps.
fn change_externally(path: &Path) {
    let mut content = std::fs::read(path).unwrap();
    content.extend_from_slice(b"external change\n");
    std::fs::write(path, content).unwrap();
}

#[tokio::test]
async fn read_numbers_lines_and_ends_with_the_total() {
    let f = Fixture::new().await;
    f.put("a.txt", "alpha\nbeta\n");
    assert_eq!(
        ok(&f.read("a.txt").await),
        "<path>a.txt</path>\n<type>file</type>\n<content>\n1: alpha\n2: beta\n\n\
         (End of file - total 2 lines)\n</content>"
    );
}

#[tokio::test]
async fn read_pages_with_offset_and_limit() {
    let f = Fixture::new().await;
    f.put(
        "n.txt",
        (1..=10).map(|i| format!("l{i}\n")).collect::<String>(),
    );
    let text = ok(&f
        .call_as(
            &f.a,
            "read",
            json!({"file_path": "n.txt", "offset": 4, "limit": 3}),
        )
        .await);
    assert_eq!(
        text,
        "<path>n.txt</path>\n<type>file</type>\n<content>\n4: l4\n5: l5\n6: l6\n\n\
         (Showing lines 4-6 of 10. Use offset=7 to continue.)\n</content>"
    );
    let out_of_range = f
        .call_as(&f.a, "read", json!({"file_path": "n.txt", "offset": 11}))
        .await;
    assert!(out_of_range.is_error);
    assert_eq!(
        out_of_range.text(),
        "Error: offset 11 is out of range: n.txt has 10 lines"
    );
}

#[tokio::test]
async fn read_refuses_missing_files_directories_and_binary_files() {
    let f = Fixture::new().await;
    let missing = f.read("nope.txt").await;
    assert_eq!(missing.text(), "Error: file not found: nope.txt");
    std::fs::create_dir(f.path("dir")).unwrap();
    let dir = f.read("dir").await;
    assert!(dir.is_error);
    assert!(
        dir.text().contains("dir is not a regular file"),
        "{}",
        dir.text()
    );
    f.put("blob.bin", b"\x7fELF\x00\x01\x02 not text");
    let binary = f.read("blob.bin").await;
    assert!(binary.is_error);
    assert!(
        binary.text().contains("blob.bin is a binary file"),
        "{}",
        binary.text()
    );
}

#[tokio::test]
async fn non_utf8_text_is_shown_lossily() {
    let f = Fixture::new().await;
    f.put("latin1.txt", b"caf\xe9 au lait\nplain\n");
    let text = ok(&f.read("latin1.txt").await);
    assert!(
        text.contains("1: caf\u{fffd} au lait\n2: plain\n"),
        "{text}"
    );
}

#[tokio::test]
async fn long_lines_are_cut_with_a_marker() {
    let f = Fixture::new().await;
    f.put("wide.txt", format!("{}\nshort\n", "w".repeat(5000)));
    let text = ok(&f.read("wide.txt").await);
    assert!(
        text.contains(&format!(
            "1: {}... (line truncated to 2000 chars)\n2: short\n",
            "w".repeat(2000)
        )),
        "{text}"
    );
}

#[tokio::test]
async fn paths_outside_the_working_directory_are_shown_absolute() {
    let f = Fixture::new().await;
    let outside = tempdir();
    let file = outside.path().join("far.txt");
    std::fs::write(&file, "x\n").unwrap();
    let text = ok(&f.read(file.to_str().unwrap()).await);
    assert!(
        text.starts_with(&format!("<path>{}</path>", file.display())),
        "{text}"
    );
    // A relative path climbing out is shown absolute and normalized too.
    f.put("sub/inner.txt", "y\n");
    let climbing = format!(
        "sub/../../{}/far.txt",
        outside.path().file_name().unwrap().to_str().unwrap()
    );
    let text = ok(&f.read(&climbing).await);
    let expected = f
        .dir
        .path()
        .parent()
        .unwrap()
        .join(outside.path().file_name().unwrap());
    assert!(
        text.starts_with(&format!("<path>{}/far.txt</path>", expected.display())),
        "{text}"
    );
    // Inside stays relative, even when given absolute.
    let inner = f.path("sub/inner.txt");
    let text = ok(&f.read(inner.to_str().unwrap()).await);
    assert!(text.starts_with("<path>sub/inner.txt</path>"), "{text}");
}

#[tokio::test]
async fn write_over_an_unread_file_is_refused() {
    let f = Fixture::new().await;
    f.put("keep.txt", "precious\n");
    let text = refused(&f.write("keep.txt", "clobbered").await, FS_NOT_OBSERVED);
    assert_eq!(
        text,
        "Error: keep.txt has not been read in this session; read the file first, then retry"
    );
    assert_eq!(f.get("keep.txt"), b"precious\n");
}

#[tokio::test]
async fn edit_of_an_unread_file_is_refused() {
    let f = Fixture::new().await;
    f.put("keep.txt", "precious\n");
    refused(
        &f.edit("keep.txt", "precious", "gone").await,
        FS_NOT_OBSERVED,
    );
    assert_eq!(f.get("keep.txt"), b"precious\n");
}

#[tokio::test]
async fn a_change_after_the_read_makes_write_and_edit_stale() {
    let f = Fixture::new().await;
    f.put("s.txt", "one\n");
    ok(&f.read("s.txt").await);
    change_externally(&f.path("s.txt"));
    let text = refused(&f.write("s.txt", "mine").await, FS_STALE_VERSION);
    assert_eq!(
        text,
        "Error: s.txt changed since it was read; read it again, then retry"
    );
    refused(&f.edit("s.txt", "one", "two").await, FS_STALE_VERSION);
    assert_eq!(f.get("s.txt"), b"one\nexternal change\n");
    // Reading again brings the session up to date.
    ok(&f.read("s.txt").await);
    ok(&f.edit("s.txt", "one", "two").await);
    assert_eq!(f.get("s.txt"), b"two\nexternal change\n");
}

#[tokio::test]
async fn read_then_edit_works_and_the_session_may_keep_editing_its_own_result() {
    let f = Fixture::new().await;
    f.put("code.rs", "fn main() {\n    old();\n}\n");
    ok(&f.read("code.rs").await);
    assert_eq!(
        ok(&f.edit("code.rs", "old()", "new()").await),
        "Edited file code.rs: replaced 1 occurrence"
    );
    // The session wrote this version itself, so no re-read is needed for the next change.
    ok(&f.edit("code.rs", "new()", "newer()").await);
    ok(&f.write("code.rs", "fn main() {}\n").await);
    assert_eq!(f.get("code.rs"), b"fn main() {}\n");
}

#[tokio::test]
async fn creating_a_new_file_needs_no_read() {
    let f = Fixture::new().await;
    assert_eq!(
        ok(&f.write("new/dir/f.txt", "hello\n").await),
        "Created file new/dir/f.txt (6 bytes)"
    );
    assert_eq!(f.get("new/dir/f.txt"), b"hello\n");
    assert_eq!(
        ok(&f.write("new/dir/f.txt", "again\n").await),
        "Updated file new/dir/f.txt (6 bytes)"
    );
}

#[tokio::test]
async fn a_file_that_appears_after_a_read_found_nothing_is_stale() {
    let f = Fixture::new().await;
    assert!(f.read("later.txt").await.is_error);
    f.put("later.txt", "someone else\n");
    refused(&f.write("later.txt", "mine").await, FS_STALE_VERSION);
    assert_eq!(f.get("later.txt"), b"someone else\n");
}

#[tokio::test]
async fn one_session_s_read_does_not_license_another_session_s_write() {
    let f = Fixture::new().await;
    f.put("shared.txt", "v1\n");
    ok(&f.read("shared.txt").await);
    let b = f.w.caller_in("session-b", Some(f.dir.path()));
    let result = f
        .call_as(
            &b,
            "write",
            json!({"file_path": "shared.txt", "content": "b"}),
        )
        .await;
    refused(&result, FS_NOT_OBSERVED);
    // An agentless call is its own bucket too.
    let result =
        f.w.call(
            "edit",
            json!({"file_path": f.path("shared.txt"), "old_string": "v1", "new_string": "v2"}),
            None,
        )
        .await;
    refused(&result, FS_NOT_OBSERVED);
}

#[tokio::test]
async fn a_disposed_agent_s_reads_do_not_license_a_later_agent_with_its_id() {
    let f = Fixture::new().await;
    f.put("x.txt", "x\n");
    let (agent, detach) = f.w.detachable_agent("agent-x");
    let first = caller_of(&agent, Some(f.dir.path()));
    ok(&f
        .call_as(&first, "read", json!({"file_path": "x.txt"}))
        .await);
    detach.detach();
    let (again, _detach) = f.w.detachable_agent("agent-x");
    let second = caller_of(&again, Some(f.dir.path()));
    let result = f
        .call_as(
            &second,
            "edit",
            json!({"file_path": "x.txt", "old_string": "x", "new_string": "y"}),
        )
        .await;
    refused(&result, FS_NOT_OBSERVED);
}

#[tokio::test]
async fn edit_requires_a_unique_match_unless_replace_all() {
    let f = Fixture::new().await;
    f.put("dup.txt", "a = 1\na = 1\nb = 2\n");
    ok(&f.read("dup.txt").await);
    let text = refused(&f.edit("dup.txt", "a = 1", "a = 3").await, EDIT_AMBIGUOUS);
    assert!(
        text.contains("old_string matches 2 places in dup.txt"),
        "{text}"
    );
    let text = refused(&f.edit("dup.txt", "c = 9", "c = 0").await, EDIT_NO_MATCH);
    assert!(
        text.contains("old_string was not found in dup.txt"),
        "{text}"
    );
    assert_eq!(f.get("dup.txt"), b"a = 1\na = 1\nb = 2\n");
    let all = f
        .call_as(
            &f.a,
            "edit",
            json!({"file_path": "dup.txt", "old_string": "a = 1", "new_string": "a = 3",
                   "replace_all": true}),
        )
        .await;
    assert_eq!(ok(&all), "Edited file dup.txt: replaced 2 occurrences");
    assert_eq!(f.get("dup.txt"), b"a = 3\na = 3\nb = 2\n");
}

#[tokio::test]
async fn edit_arguments_are_validated() {
    let f = Fixture::new().await;
    f.put("v.txt", "v\n");
    ok(&f.read("v.txt").await);
    assert_eq!(
        f.edit("v.txt", "", "x").await.text(),
        "Error: invalid old_string: expected a non-empty string"
    );
    assert_eq!(
        f.edit("v.txt", "v", "v").await.text(),
        "Error: invalid new_string: it must differ from old_string"
    );
    assert_eq!(
        f.edit("gone.txt", "v", "w").await.text(),
        "Error: file not found: gone.txt (use write to create a file)"
    );
}

#[tokio::test]
async fn edit_is_literal_and_keeps_every_other_byte_of_a_non_utf8_file() {
    let f = Fixture::new().await;
    f.put("mixed.txt", b"caf\xe9 (x+y)*\r\nend\xff\n");
    ok(&f.read("mixed.txt").await);
    ok(&f.edit("mixed.txt", "(x+y)*", "z").await);
    assert_eq!(f.get("mixed.txt"), b"caf\xe9 z\r\nend\xff\n");
}

#[tokio::test]
async fn replacing_a_file_keeps_its_mode_and_leaves_no_temporary_file() {
    let f = Fixture::new().await;
    f.put("run.sh", "#!/bin/sh\necho old\n");
    std::fs::set_permissions(f.path("run.sh"), std::fs::Permissions::from_mode(0o751)).unwrap();
    ok(&f.read("run.sh").await);
    ok(&f.edit("run.sh", "old", "new").await);
    let mode = std::fs::metadata(f.path("run.sh"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o751);
    let names: Vec<String> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["run.sh"]);
}

#[tokio::test]
async fn a_file_whose_multibyte_name_nearly_fills_name_max_can_be_created_and_edited() {
    let f = Fixture::new().await;
    // 84 three-byte characters: 252 bytes, a valid name just under NAME_MAX (255).
    let name = "文".repeat(84);
    ok(&f.write(&name, "one\n").await);
    ok(&f.edit(&name, "one", "two").await);
    assert_eq!(f.get(&name), b"two\n");
}

#[tokio::test]
async fn writing_through_a_symlink_replaces_the_target_and_keeps_the_link() {
    let f = Fixture::new().await;
    f.put("real.txt", "real\n");
    std::os::unix::fs::symlink(f.path("real.txt"), f.path("link.txt")).unwrap();
    ok(&f.read("link.txt").await);
    ok(&f.write("link.txt", "through the link\n").await);
    assert!(
        std::fs::symlink_metadata(f.path("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(f.get("real.txt"), b"through the link\n");
}

#[tokio::test]
async fn read_glob_grep_and_bash_output_may_run_in_parallel_while_changes_are_exclusive() {
    let f = Fixture::new().await;
    let mode = |tool: &str, args: Value| {
        let exec = ToolExec::new(
            dsh_session::CallId::new("c"),
            tool,
            args.to_string(),
            Some(f.a.clone()),
            CancellationToken::new(),
        );
        f.w.runtime.execution_mode(&exec)
    };
    assert_eq!(
        mode("read", json!({"file_path": "a"})),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode("glob", json!({"pattern": "*"})),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode("grep", json!({"pattern": "x"})),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode("bash_output", json!({"task_id": "bash-1"})),
        ExecutionMode::Parallel
    );
    let bash = json!({"command": "ls", "description": "list"});
    assert_eq!(mode("bash", bash), ExecutionMode::Exclusive);
    assert_eq!(
        mode("write", json!({"file_path": "a", "content": ""})),
        ExecutionMode::Exclusive
    );
    assert_eq!(
        mode(
            "edit",
            json!({"file_path": "a", "old_string": "x", "new_string": "y"})
        ),
        ExecutionMode::Exclusive
    );
    assert_eq!(
        mode("bash_kill", json!({"task_id": "bash-1"})),
        ExecutionMode::Exclusive
    );
}
