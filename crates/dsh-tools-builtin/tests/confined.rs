#![allow(clippy::unwrap_used)]
//! `write` under the guard: the file is opened beneath the writable root the guard allowed, so
//! a command that flips a directory symlink between the decision and the write cannot send the
//! write outside the roots (or into `.git`). `edit` opens its target through the same code
//! (and its version check alone already refuses a file swapped since it was read).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use common::world;
use dsh_guard::{ApprovalPolicy, Guard, Rules, SandboxMode, SandboxPolicy, install};
use dsh_testkit::Flipper;
use dsh_tools::{ApprovalOutcome, ApprovalRequest, Approver};
use serde_json::json;

fn guard(workspace: &Path, approval: ApprovalPolicy) -> Arc<Guard> {
    Arc::new(Guard {
        sandbox: SandboxPolicy::new(SandboxMode::WorkspaceWrite, workspace),
        approval,
        rules: Rules::default(),
    })
}

fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_calls_racing_a_symlink_flip_never_land_outside_or_in_git() {
    let w = world().await;
    let ws = tempfile::tempdir().unwrap();
    let outside = dsh_testkit::outside_writable_roots(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(ws.path().join("inside")).unwrap();
    std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
    let _guard = install(&w.ctx, guard(ws.path(), ApprovalPolicy::Never)).unwrap();
    let caller = w.caller_in("s", Some(ws.path()));
    let flipper = Flipper::start(
        &ws.path().join("dir"),
        vec![
            PathBuf::from("inside"),
            outside.path().to_path_buf(),
            PathBuf::from(".git/hooks"),
        ],
    );
    // At least 200 calls, and on until some landed and some were refused, bounded.
    let (mut landed, mut refused, mut calls) = (0usize, 0usize, 0usize);
    while calls < 200 || ((landed == 0 || refused == 0) && calls < 5_000) {
        let result = w
            .call(
                "write",
                json!({"file_path": format!("dir/f{calls}"), "content": "x"}),
                Some(&caller),
            )
            .await;
        if result.is_error {
            refused += 1;
        } else {
            landed += 1;
        }
        calls += 1;
    }
    flipper.stop();
    assert_eq!(count(outside.path()), 0, "a write landed outside the roots");
    assert_eq!(
        count(&ws.path().join(".git/hooks")),
        0,
        "a write landed in .git"
    );
    assert!(
        landed > 0 && refused > 0,
        "the race never went both ways ({landed} landed, {refused} refused)"
    );
    assert_eq!(count(&ws.path().join("inside")), landed);
}

struct Yes;

#[async_trait]
impl Approver for Yes {
    async fn request(&self, _: ApprovalRequest) -> ApprovalOutcome {
        ApprovalOutcome::AllowedOnce
    }
}

#[tokio::test]
async fn an_approved_write_outside_the_roots_lands_where_the_user_approved() {
    let w = world().await;
    let ws = tempfile::tempdir().unwrap();
    let outside = dsh_testkit::outside_writable_roots(env!("CARGO_TARGET_TMPDIR"));
    w.ctx.provide::<dyn Approver>(Arc::new(Yes)).unwrap();
    let _guard = install(&w.ctx, guard(ws.path(), ApprovalPolicy::Ask)).unwrap();
    let caller = w.caller_in("s", Some(ws.path()));
    let target = outside.path().join("approved.txt");
    let result = w
        .call(
            "write",
            json!({"file_path": target, "content": "ok"}),
            Some(&caller),
        )
        .await;
    assert!(!result.is_error, "{}", result.text());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "ok");
}
