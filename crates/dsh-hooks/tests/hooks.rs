//! Hooks through the real loop: scripted model, real `bash` tool, real hook scripts run by the
//! local shell executor.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{AgentOptions, AgentRef, CreateAgentOptions};
use dsh_agent_loop::{Core, CoreConfig, mount_core};
use dsh_hooks::{
    HookSet, HookSource, HookTrust, HooksOptions, HooksPlugin, TrustAnswer, TrustQuestion,
    config::parse_file,
};
use dsh_kernel::Context;
use dsh_session::{
    EventKind, Message, SessionCreated, SessionMeta, TurnEndReason, check_balanced,
    relational_validator,
};
use dsh_shell::{LocalShellExecutor, ShellConfig, ShellExecutor};
use dsh_testkit::{Script, ScriptedAdapter};
use dsh_tools_builtin::BuiltinToolsPlugin;
use serde_json::Value;

/// Every wait in these tests is bounded, so a regression fails instead of hanging.
const BOUND: Duration = Duration::from_secs(30);

struct H {
    _ctx: Context,
    core: Core,
    model: Arc<ScriptedAdapter>,
    dir: tempfile::TempDir,
}

/// A harness whose hooks are `hooks_json` (a Claude Code hooks file) with `$DIR` replaced by
/// the workspace directory.
async fn harness(hooks_json: &str, scripts: Vec<Script>) -> H {
    let dir = tempfile::tempdir().unwrap();
    let json = hooks_json.replace("$DIR", &dir.path().display().to_string());
    let set = HookSet::new(parse_file(&dir.path().join("hooks.json"), &json).unwrap());
    harness_with(HookSource::Fixed(Arc::new(set)), dir, scripts).await
}

/// A harness with hooks from `source`, working in `dir`.
async fn harness_with(source: HookSource, dir: tempfile::TempDir, scripts: Vec<Script>) -> H {
    harness_trusting(source, dir, scripts, None).await
}

/// [`harness_with`] with a front end's decider about untrusted workspace hooks.
async fn harness_trusting(
    source: HookSource,
    dir: tempfile::TempDir,
    scripts: Vec<Script>,
    trust: Option<Arc<dyn HookTrust>>,
) -> H {
    let ctx = Context::new();
    let executor: Arc<dyn ShellExecutor> =
        Arc::new(LocalShellExecutor::new(ShellConfig::default()).unwrap());
    ctx.provide::<dyn ShellExecutor>(executor).unwrap();
    let core = mount_core(&ctx, CoreConfig::default()).await.unwrap();
    let model = Arc::new(ScriptedAdapter::with_scripts(scripts));
    std::mem::forget(model.register(&core.llm).unwrap());
    let _ = ctx
        .on::<SessionCreated>(|s| {
            s.add_validator(relational_validator());
        })
        .unwrap();
    std::mem::forget(ctx.plugin(BuiltinToolsPlugin).await.unwrap());
    std::mem::forget(
        ctx.plugin(HooksPlugin::new(HooksOptions {
            source,
            idle_notifications: false,
            trust,
        }))
        .await
        .unwrap(),
    );
    H {
        _ctx: ctx,
        core,
        model,
        dir,
    }
}

impl H {
    async fn agent(&self) -> AgentRef {
        let handle = self
            .core
            .registry
            .create(
                &self._ctx,
                CreateAgentOptions {
                    meta: SessionMeta {
                        cwd: Some(self.dir.path().to_path_buf()),
                        ..SessionMeta::default()
                    },
                    agent_options: AgentOptions::route(ScriptedAdapter::ROUTE, "scripted"),
                    ..CreateAgentOptions::default()
                },
            )
            .await
            .unwrap();
        let agent = handle.agent().clone();
        // The tests never tear agents down; the handle must not dispose on drop either.
        std::mem::forget(handle);
        agent
    }

    /// Sends `prompt` and waits (bounded) for the agent to settle.
    async fn run(&self, agent: &AgentRef, prompt: &str) {
        agent.followup(Message::user_text(prompt)).unwrap();
        tokio::time::timeout(BOUND, agent.when_idle())
            .await
            .expect("the agent settles");
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn last_turn_end(agent: &AgentRef) -> TurnEndReason {
    agent
        .session()
        .events()
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::TurnEnd(end) => Some(end.reason.clone()),
            _ => None,
        })
        .unwrap()
}

fn plugin_events(agent: &AgentRef, type_name: &str) -> Vec<Value> {
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Other { type_name: t, data } if t == type_name => Some(data.clone()),
            _ => None,
        })
        .collect()
}

fn assert_healthy(h: &H, agent: &AgentRef) {
    assert!(
        h.model.violations().is_empty(),
        "{:?}",
        h.model.violations()
    );
    agent.session().with_events(check_balanced).unwrap();
}

#[tokio::test]
async fn pre_tool_use_exit_two_blocks_bash_and_its_stderr_reaches_the_model() {
    let h = harness(
        r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command",
            "command":"echo 'no rm -rf here' >&2; exit 2"}]}]}}"#,
        vec![
            Script::tool_call(
                "c1",
                "bash",
                r#"{"command":"touch ran","description":"test"}"#,
            ),
            Script::text("ok"),
        ],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    assert!(!h.path("ran").exists(), "the blocked command never ran");
    let seen = h.model.request_texts(1).join("\n");
    assert!(seen.contains("no rm -rf here"), "{seen}");
    assert_eq!(plugin_events(&agent, "hook/invoked").len(), 1);
    let result = &plugin_events(&agent, "hook/result")[0];
    assert_eq!(result["exitCode"], 2);
    assert_eq!(result["outcome"]["decision"], "block");
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn permission_decision_deny_refuses_the_call_with_its_reason() {
    let h = harness(
        r#"{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[{"type":"command",
            "command":"echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"force push is not allowed\"}}'"}]}]}}"#,
        vec![
            Script::tool_call("c1", "bash", r#"{"command":"touch ran","description":"test"}"#),
            Script::text("ok"),
        ],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    assert!(!h.path("ran").exists());
    let seen = h.model.request_texts(1).join("\n");
    assert!(seen.contains("force push is not allowed"), "{seen}");
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn matcher_limits_hooks_to_their_tools() {
    let h = harness(
        r#"{"hooks":{"PreToolUse":[{"matcher":"Write|Edit","hooks":[{"type":"command",
            "command":"exit 2"}]}]}}"#,
        vec![
            Script::tool_call(
                "c1",
                "bash",
                r#"{"command":"touch ran","description":"test"}"#,
            ),
            Script::text("ok"),
        ],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    assert!(h.path("ran").exists(), "bash is not matched by Write|Edit");
    assert!(plugin_events(&agent, "hook/invoked").is_empty());
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn post_tool_use_receives_the_calls_input_and_output() {
    let h = harness(
        r#"{"hooks":{"PostToolUse":[{"matcher":"Bash","hooks":[{"type":"command",
            "command":"cat > $DIR/post.json"}]}]}}"#,
        vec![
            Script::tool_call(
                "c1",
                "bash",
                r#"{"command":"echo hello-from-bash","description":"test"}"#,
            ),
            Script::text("ok"),
        ],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(h.path("post.json")).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(input["tool_name"], "Bash");
    assert_eq!(input["dsh_tool_name"], "bash");
    assert_eq!(input["tool_input"]["command"], "echo hello-from-bash");
    assert!(
        input["tool_response"]["output"]
            .as_str()
            .unwrap()
            .contains("hello-from-bash"),
        "{input}"
    );
    assert_eq!(input["session_id"], agent.id().as_str());
    assert_eq!(input["cwd"], h.dir.path().display().to_string());
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn a_hook_reads_its_input_from_a_pipe_that_no_other_command_can_reach() {
    // The attack on file-based input: a background command rewrote the JSON in /tmp before
    // the hook read it. A pipe has no name to find.
    let h = harness(
        r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command",
            "command":"readlink /proc/self/fd/0 > $DIR/stdin.txt; cat > $DIR/pre.json"}]}]}}"#,
        vec![
            Script::tool_call(
                "c1",
                "bash",
                r#"{"command":"echo ok","description":"test"}"#,
            ),
            Script::text("ok"),
        ],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    let stdin = std::fs::read_to_string(h.path("stdin.txt")).unwrap();
    assert!(stdin.starts_with("pipe:"), "{stdin}");
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(h.path("pre.json")).unwrap()).unwrap();
    assert_eq!(input["tool_input"]["command"], "echo ok");
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn post_tool_use_block_turns_the_result_into_feedback() {
    let h = harness(
        r#"{"hooks":{"PostToolUse":[{"hooks":[{"type":"command",
            "command":"echo '{\"decision\":\"block\",\"reason\":\"run the formatter\"}'"}]}]}}"#,
        vec![
            Script::tool_call(
                "c1",
                "bash",
                r#"{"command":"echo done","description":"test"}"#,
            ),
            Script::text("ok"),
        ],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    let seen = h.model.request_texts(1).join("\n");
    assert!(seen.contains("run the formatter"), "{seen}");
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn stop_hook_forces_one_more_step_then_lets_the_turn_end() {
    let h = harness(
        r#"{"hooks":{"Stop":[{"hooks":[{"type":"command",
            "command":"if grep -q '\"stop_hook_active\":true'; then exit 0; fi; echo 'tests are not run yet' >&2; exit 2"}]}]}}"#,
        vec![Script::text("first answer"), Script::text("second answer")],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    assert_eq!(h.model.requests().len(), 2, "exactly one forced step");
    let seen = h.model.request_texts(1).join("\n");
    assert!(seen.contains("tests are not run yet"), "{seen}");
    assert_eq!(last_turn_end(&agent), TurnEndReason::Completed);
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn a_stop_hook_that_always_blocks_is_bounded() {
    let scripts = (0..6)
        .map(|i| Script::text(&format!("answer {i}")))
        .collect();
    let h = harness(
        r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"echo more >&2; exit 2"}]}]}}"#,
        scripts,
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    assert_eq!(
        h.model.requests().len(),
        1 + dsh_hooks::MAX_FORCED_CONTINUATIONS as usize
    );
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn a_hanging_hook_is_killed_at_its_timeout_and_the_turn_goes_on() {
    let h = harness(
        r#"{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"sleep 600","timeout":0.3}]}]}}"#,
        vec![
            Script::tool_call("c1", "bash", r#"{"command":"touch ran","description":"test"}"#),
            Script::text("ok"),
        ],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    assert!(h.path("ran").exists(), "a timed-out hook does not block");
    let result = &plugin_events(&agent, "hook/result")[0];
    assert_eq!(result["timedOut"], true);
    assert_eq!(last_turn_end(&agent), TurnEndReason::Completed);
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn user_prompt_submit_block_refuses_the_prompt_before_any_request() {
    let h = harness(
        r#"{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command",
            "command":"grep -q secret && { echo 'no secrets in prompts' >&2; exit 2; }; exit 0"}]}]}}"#,
        vec![Script::text("ok")],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "here is my secret").await;
    assert!(
        h.model.requests().is_empty(),
        "the prompt never reached the model"
    );
    assert_eq!(last_turn_end(&agent), TurnEndReason::Blocked);
    agent.session().with_events(check_balanced).unwrap();
}

#[tokio::test]
async fn prompt_and_session_start_context_join_the_request() {
    let h = harness(
        r#"{"hooks":{
            "SessionStart":[{"matcher":"startup","hooks":[{"type":"command","command":"echo 'branch: feature-x'"}]}],
            "UserPromptSubmit":[{"hooks":[{"type":"command",
              "command":"echo '{\"hookSpecificOutput\":{\"hookEventName\":\"UserPromptSubmit\",\"additionalContext\":\"ticket ABC-1\"}}'"}]}]}}"#,
        vec![Script::text("ok"), Script::text("ok again")],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "hello").await;
    let seen = h.model.request_texts(0).join("\n");
    assert!(seen.contains("branch: feature-x"), "{seen}");
    assert!(seen.contains("ticket ABC-1"), "{seen}");
    h.run(&agent, "again").await;
    let second = h.model.request_texts(1).join("\n");
    assert_eq!(
        second.matches("branch: feature-x").count(),
        1,
        "SessionStart runs once: {second}"
    );
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn broken_hooks_file_refuses_tool_calls_instead_of_skipping_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".dsh")).unwrap();
    std::fs::write(dir.path().join(".dsh/hooks.json"), "{ not json").unwrap();
    let home = tempfile::tempdir().unwrap();
    let source = HookSource::Files {
        dsh_home: home.path().to_path_buf(),
        claude_code: false,
    };
    let h = harness_with(
        source,
        dir,
        vec![
            Script::tool_call(
                "c1",
                "bash",
                r#"{"command":"touch ran","description":"test"}"#,
            ),
            Script::text("ok"),
        ],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "go").await;
    assert!(!h.path("ran").exists());
    let seen = h.model.request_texts(1).join("\n");
    assert!(seen.contains("hooks cannot be read"), "{seen}");
    assert_healthy(&h, &agent);
}

#[tokio::test]
async fn a_compaction_runs_pre_compact_and_the_next_step_gets_session_start_compact_context() {
    let h = harness(
        r#"{"hooks":{
            "PreCompact":[{"matcher":"manual","hooks":[{"type":"command","command":"cat > $DIR/pre.json"}]}],
            "SessionStart":[{"matcher":"compact","hooks":[{"type":"command","command":"echo 'context after compaction'"}]}]}}"#,
        vec![Script::text("first"), Script::text("second")],
    )
    .await;
    let agent = h.agent().await;
    h.run(&agent, "hello").await;
    // What dsh-compaction writes around a manual compaction (between turns). The hook is a
    // process of its own: its file is polled for, with a bound.
    let session = agent.session();
    session
        .append_plugin(
            "compaction/start",
            &serde_json::json!({"compactionId": "c1", "trigger": "manual", "tokensBefore": 10}),
        )
        .unwrap();
    let deadline = std::time::Instant::now() + BOUND;
    while !h.path("pre.json").exists() {
        assert!(std::time::Instant::now() < deadline, "PreCompact never ran");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    session
        .append_plugin("compaction/end", &serde_json::json!({"compactionId": "c1"}))
        .unwrap();
    h.run(&agent, "again").await;
    let seen = h.model.request_texts(1).join("\n");
    assert!(seen.contains("context after compaction"), "{seen}");
    let first = h.model.request_texts(0).join("\n");
    assert!(!first.contains("context after compaction"), "{first}");
    // The hook's input named its trigger; the file may still be being written, so wait for it.
    let deadline = std::time::Instant::now() + BOUND;
    let input: Value = loop {
        if let Ok(v) = serde_json::from_str(&std::fs::read_to_string(h.path("pre.json")).unwrap()) {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "PreCompact input incomplete"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(input["hook_event_name"], "PreCompact");
    assert_eq!(input["trigger"], "manual");
}

/// A front end that answers every trust question with `answer` and counts the questions.
#[derive(Debug)]
struct Answers {
    answer: TrustAnswer,
    asked: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl HookTrust for Answers {
    async fn decide(&self, question: &TrustQuestion<'_>) -> TrustAnswer {
        assert_eq!(question.files.len(), 1);
        assert!(
            question.commands[0].contains("ran"),
            "{:?}",
            question.commands
        );
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.answer
    }
}

#[tokio::test]
async fn untrusted_workspace_hooks_are_asked_about_once_and_trust_is_recorded_or_they_do_not_run() {
    for answer in [TrustAnswer::Trust, TrustAnswer::Skip] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".dsh")).unwrap();
        let hooks = format!(
            r#"{{"hooks":{{"PreToolUse":[{{"hooks":[{{"type":"command","command":"echo x >> {}/ran"}}]}}]}}}}"#,
            dir.path().display()
        );
        std::fs::write(dir.path().join(".dsh/hooks.json"), &hooks).unwrap();
        let home = tempfile::tempdir().unwrap();
        let source = HookSource::Files {
            dsh_home: home.path().to_path_buf(),
            claude_code: false,
        };
        let decider = Arc::new(Answers {
            answer,
            asked: Default::default(),
        });
        let call = r#"{"command":"true","description":"test"}"#;
        let h = harness_trusting(
            source,
            dir,
            vec![
                Script::tool_call("c1", "bash", call),
                Script::tool_call("c2", "bash", call),
                Script::text("ok"),
            ],
            Some(decider.clone()),
        )
        .await;
        let agent = h.agent().await;
        h.run(&agent, "go").await;
        assert_eq!(
            decider.asked.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "{answer:?}: asked once per workspace"
        );
        let ran = std::fs::read_to_string(h.path("ran")).unwrap_or_default();
        let record = dsh_fs::TrustRecord::new(home.path());
        let trust = record
            .check(&h.path(".dsh/hooks.json"), hooks.as_bytes())
            .unwrap();
        match answer {
            TrustAnswer::Trust => {
                assert_eq!(ran.lines().count(), 2, "{answer:?}");
                assert_eq!(trust, dsh_fs::Trust::Trusted);
            }
            _ => {
                assert_eq!(ran, "", "{answer:?}");
                assert_eq!(trust, dsh_fs::Trust::Unknown);
            }
        }
        assert_healthy(&h, &agent);
    }
}

#[tokio::test]
async fn a_hook_waits_for_the_work_holding_the_sessions_workspace_fence() {
    let h = harness(
        r#"{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command",
            "command":"touch hooked"}]}]}}"#,
        vec![Script::text("ok")],
    )
    .await;
    let fence = Arc::new(dsh_agent::WorkspaceFence::default());
    h._ctx
        .provide::<dsh_agent::WorkspaceFence>(fence.clone())
        .unwrap();
    let agent = h.agent().await;
    // The held work (a turn checkpoint, say): its gate is reached when a passer first waits
    // on it.
    let gate = dsh_testkit::Gate::new();
    let held = gate.clone();
    fence.hold(agent.session().id(), async move { held.pass().await });
    agent.followup(Message::user_text("hello")).unwrap();
    tokio::select! {
        () = h.model.wait_for_requests(1) => panic!("the hook ran past the held fence"),
        r = tokio::time::timeout(BOUND, gate.reached()) => r.expect("the hook waits at the fence"),
    }
    assert!(
        !h.path("hooked").exists(),
        "the hook ran before the held work was done"
    );
    gate.release();
    tokio::time::timeout(BOUND, agent.when_idle())
        .await
        .expect("the agent settles");
    assert!(
        h.path("hooked").exists(),
        "the hook ran once the work was done"
    );
    assert_eq!(last_turn_end(&agent), TurnEndReason::Completed);
}
