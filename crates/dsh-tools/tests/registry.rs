//! The scoped registry: shadowing, scope lifetime, scoped listeners, classification
//! (INV-TOOL-1, INV-SCOPE-2, INV-SCOPE-3) and the prompt integration (INV-SP-1).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::{Recorder, agent, entries, exec, fn_tool, log, push, runtime};
use dsh_kernel::Context;
use dsh_prompt::{AssemblyScope, SystemPrompt, SystemPromptConfig, SystemPromptPlugin};
use dsh_tools::{
    ExecutionMode, Tool, ToolCallContext, ToolError, ToolOutput, ToolRuntime, ToolsChange,
    ToolsError, ToolsPlugin, ToolsPreExecute, ToolsResult,
};
use serde_json::{Value, json};

fn names(schemas: &[dsh_llm::ToolSchema]) -> Vec<String> {
    let mut n: Vec<String> = schemas.iter().map(|s| s.name.clone()).collect();
    n.sort();
    n
}

#[tokio::test]
async fn an_agent_registration_shadows_the_global_tool_only_for_that_agent_until_its_scope_ends() {
    let (root, rt) = runtime();
    let out = log();
    let _ = rt.register(&root, Recorder::new("read", &out)).unwrap();
    let a = agent(&root, "a");
    let b = agent(&root, "b");
    let _ = rt
        .register(
            &a.ctx,
            fn_tool("read", |_, _| Ok(ToolOutput::text("a's own read"))),
        )
        .unwrap();
    let _ = rt
        .register(&a.ctx, fn_tool("a_only", |_, _| Ok(ToolOutput::text("x"))))
        .unwrap();

    assert_eq!(
        rt.run(&exec("read", "{}", Some(&a))).await.text(),
        "a's own read"
    );
    assert_eq!(
        rt.run(&exec("read", "{}", Some(&b))).await.text(),
        "read ok"
    );
    assert_eq!(rt.run(&exec("read", "{}", None)).await.text(), "read ok");
    assert_eq!(
        rt.run(&exec("a_only", "{}", Some(&b))).await.text(),
        "Error: unknown tool `a_only`"
    );
    assert_eq!(names(&rt.schemas(a.tag())), ["a_only", "read"]);
    assert_eq!(names(&rt.schemas(b.tag())), ["read"]);

    a.ctx.scope().dispose().await;
    assert_eq!(
        rt.run(&exec("read", "{}", Some(&a))).await.text(),
        "read ok"
    );
    assert_eq!(names(&rt.schemas(a.tag())), ["read"]);
    assert!(matches!(
        rt.register(&a.ctx, Recorder::new("late", &out)),
        Err(ToolsError::Kernel(_))
    ));
}

#[tokio::test]
async fn a_duplicate_in_one_layer_is_an_error_and_names_are_validated() {
    let (root, rt) = runtime();
    let out = log();
    let _ = rt.register(&root, Recorder::new("t", &out)).unwrap();
    assert!(matches!(
        rt.register(&root, Recorder::new("t", &out)),
        Err(ToolsError::DuplicateTool { name }) if name == "t"
    ));
    for bad in ["", "two words", dsh_prompt::TOOL_ORDER_REST] {
        assert!(matches!(
            rt.register(&root, Recorder::new(bad, &out)),
            Err(ToolsError::InvalidName { .. })
        ));
    }
    // Removing a registration early makes the name free again.
    let reg = rt.register(&root, Recorder::new("u", &out)).unwrap();
    reg.dispose().await;
    let _ = rt.register(&root, Recorder::new("u", &out)).unwrap();
}

#[tokio::test]
async fn registry_changes_are_announced_to_every_listener() {
    let (root, rt) = runtime();
    let out = log();
    let a = agent(&root, "a");
    let l = out.clone();
    // A scoped listener hears changes of every layer through `on_global`.
    let _ = a
        .ctx
        .on_global::<ToolsChange>(move |c| {
            push(
                &l,
                format!(
                    "{}:{}:{}",
                    if c.registered { "+" } else { "-" },
                    c.name,
                    c.tag.as_ref().map_or("global", |t| t.label())
                ),
            );
        })
        .unwrap();
    let reg = rt.register(&root, Recorder::new("g", &out)).unwrap();
    let _ = rt.register(&a.ctx, Recorder::new("s", &out)).unwrap();
    reg.dispose().await;
    a.ctx.scope().dispose().await;
    // Scope teardown is LIFO: the tool registered after the listener goes first, so the
    // listener still hears its removal.
    assert_eq!(
        entries(&out),
        ["+:g:global", "+:s:a", "-:g:global", "-:s:a"]
    );
    // The agent's own listener went with its scope; a root listener hears the rest.
    let l = out.clone();
    let _ = root
        .on::<ToolsChange>(move |c| push(&l, format!("root:{}", c.name)))
        .unwrap();
    let b = agent(&root, "b");
    let reg = rt.register(&b.ctx, Recorder::new("x", &out)).unwrap();
    reg.dispose().await;
    assert_eq!(&entries(&out)[4..], ["root:x", "root:x"]);
}

#[tokio::test]
async fn scoped_listeners_only_see_their_own_agents_calls() {
    let (root, rt) = runtime();
    let out = log();
    let _ = rt.register(&root, Recorder::new("t", &out)).unwrap();
    let a = agent(&root, "a");
    let b = agent(&root, "b");
    let l = out.clone();
    let _ = a
        .ctx
        .on_waterfall::<ToolsPreExecute, _>(move |exec, next| {
            push(&l, format!("a-pre:{}", exec.call_id));
            next.run(exec)
        })
        .unwrap();
    let l = out.clone();
    let _ = a
        .ctx
        .on::<ToolsResult>(move |n| push(&l, format!("a-result:{}", n.exec.call_id)))
        .unwrap();
    let l = out.clone();
    let _ = root
        .on::<ToolsResult>(move |n| push(&l, format!("root-result:{}", n.exec.call_id)))
        .unwrap();

    let _ = rt
        .run(&common::exec_id("from-a", "t", "{}", Some(&a)))
        .await;
    let _ = rt
        .run(&common::exec_id("from-b", "t", "{}", Some(&b)))
        .await;
    let _ = rt.run(&common::exec_id("direct", "t", "{}", None)).await;
    assert_eq!(
        entries(&out),
        [
            "a-pre:from-a",
            "body:t:from-a",
            "a-result:from-a",
            "root-result:from-a",
            "body:t:from-b",
            "root-result:from-b",
            "body:t:direct",
            "root-result:direct",
        ]
    );
}

struct Classifier;

#[async_trait]
impl Tool for Classifier {
    fn name(&self) -> &str {
        "classify"
    }
    fn description(&self) -> &str {
        "parallel only when asked"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_concurrency_safe(&self, args: &Value) -> bool {
        match args.get("mode").and_then(Value::as_str) {
            Some("parallel") => true,
            Some("panic") => panic!("classifier exploded"),
            _ => false,
        }
    }
    async fn execute(&self, _: Value, _: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

#[tokio::test]
async fn only_a_visible_tool_saying_true_is_parallel() {
    let (root, rt) = runtime();
    let a = agent(&root, "a");
    let b = agent(&root, "b");
    let _ = rt.register(&a.ctx, Arc::new(Classifier)).unwrap();
    let mode = |args: &str, who| rt.execution_mode(&exec("classify", args, who));
    assert_eq!(
        mode(r#"{"mode":"parallel"}"#, Some(&a)),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode(r#"{"mode":"serial"}"#, Some(&a)),
        ExecutionMode::Exclusive
    );
    assert_eq!(mode("{}", Some(&a)), ExecutionMode::Exclusive);
    assert_eq!(
        mode(r#"{"mode":"panic"}"#, Some(&a)),
        ExecutionMode::Exclusive
    );
    // Hidden from b, unknown globally: exclusive.
    assert_eq!(
        mode(r#"{"mode":"parallel"}"#, Some(&b)),
        ExecutionMode::Exclusive
    );
    assert_eq!(
        mode(r#"{"mode":"parallel"}"#, None),
        ExecutionMode::Exclusive
    );
    // Tools that do not declare a classifier are exclusive.
    let out = log();
    let _ = rt
        .register(&root, fn_tool("plain", |_, _| Ok(ToolOutput::text(""))))
        .unwrap();
    assert_eq!(
        rt.execution_mode(&exec("plain", "{}", None)),
        ExecutionMode::Exclusive
    );
    let _ = rt.register(&root, Recorder::new("rec", &out)).unwrap();
    assert_eq!(
        rt.execution_mode(&exec("rec", r#"{"safe":true}"#, None)),
        ExecutionMode::Parallel
    );
}

async fn prompt_runtime() -> (Context, Arc<SystemPrompt>, Arc<ToolRuntime>) {
    let root = Context::new();
    let _ = root
        .plugin(SystemPromptPlugin::new(SystemPromptConfig {
            tool_order: Some(vec!["zulu".into(), dsh_prompt::TOOL_ORDER_REST.into()]),
            ..SystemPromptConfig::default()
        }))
        .await
        .unwrap();
    let _ = root.plugin(ToolsPlugin).await.unwrap();
    let sp = root.get::<SystemPrompt>().unwrap();
    let rt = root.get::<ToolRuntime>().unwrap();
    (root, sp, rt)
}

#[tokio::test]
async fn the_prompt_lists_each_agents_visible_tools_in_canonical_order() {
    let (root, sp, rt) = prompt_runtime().await;
    let out = log();
    let a = agent(&root, "a");
    // zulu exists only in agent a's layer; it is still a known name for tool_order.
    let _ = rt.register(&a.ctx, Recorder::new("zulu", &out)).unwrap();
    for name in ["mike", "alpha"] {
        let _ = rt.register(&root, Recorder::new(name, &out)).unwrap();
    }
    let tag = a.tag().cloned().unwrap();
    let for_a = sp.assemble(AssemblyScope::for_tag(tag)).await.unwrap();
    let order: Vec<&str> = for_a.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(order, ["zulu", "alpha", "mike"]);
    assert_eq!(for_a.tools[0].parameters, json!({"type": "object"}));
    let global = sp.assemble(AssemblyScope::global()).await.unwrap();
    let order: Vec<&str> = global.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(order, ["alpha", "mike"]);

    // Once the only layer holding zulu is gone, the configured order names an unknown tool.
    a.ctx.scope().dispose().await;
    assert!(matches!(
        sp.assemble(AssemblyScope::global()).await,
        Err(dsh_prompt::PromptError::UnknownToolInOrder { .. })
    ));
}
