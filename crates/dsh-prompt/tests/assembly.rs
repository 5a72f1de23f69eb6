//! System-prompt assembly invariants (INV-SP-1, INV-SP-2, INV-SCOPE-2) and scoped shadowing.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

use std::sync::Arc;

use dsh_kernel::{Context, ScopeTag};
use dsh_llm::ToolSchema;
use dsh_prompt::{
    AssemblyScope, ContextSection, IDENTITY_TEXT, PERSONA_SECTION, PromptAssemble, PromptError,
    Section, SectionText, SystemPrompt, SystemPromptConfig, SystemPromptPlugin, TOOL_ORDER_REST,
    ToolSchemaSource, render, render_context,
};
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::json;

/// A tool source whose tools are listed in registration order.
#[derive(Default)]
struct FakeTools {
    global: Mutex<Vec<String>>,
}

impl FakeTools {
    fn with(names: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            global: Mutex::new(names.iter().map(|s| (*s).to_owned()).collect()),
        })
    }
}

impl ToolSchemaSource for FakeTools {
    fn schemas(&self, _tag: Option<&ScopeTag>) -> Vec<ToolSchema> {
        self.global
            .lock()
            .iter()
            .map(|n| ToolSchema {
                name: n.clone(),
                description: format!("the {n} tool"),
                parameters: json!({"type": "object"}),
                needs_vision: false,
            })
            .collect()
    }

    fn known_names(&self) -> Vec<String> {
        self.global.lock().clone()
    }
}

fn prompt(ctx: &Context, config: SystemPromptConfig) -> Arc<SystemPrompt> {
    let sp = SystemPrompt::new(ctx, config).unwrap();
    ctx.provide::<SystemPrompt>(sp.clone()).unwrap();
    sp
}

fn tool_names(tools: &[ToolSchema]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

fn section_names(sp: &dsh_prompt::PromptAssembly) -> Vec<&str> {
    sp.sections.iter().map(|s| s.name.as_str()).collect()
}

#[tokio::test]
async fn tool_order_is_canonical_whatever_the_registration_order() {
    for registration in [
        ["zulu", "alpha", "mike"],
        ["alpha", "mike", "zulu"],
        ["mike", "zulu", "alpha"],
    ] {
        let ctx = Context::new();
        let sp = prompt(&ctx, SystemPromptConfig::default());
        // One source per tool, registered in this permutation's order.
        for name in registration {
            let _ = sp.tools(&ctx, FakeTools::with(&[name])).unwrap();
        }
        let a = sp.assemble(AssemblyScope::global()).await.unwrap();
        assert_eq!(tool_names(&a.tools), ["alpha", "mike", "zulu"]);
    }
}

#[tokio::test]
async fn configured_tool_order_lists_names_first_and_the_rest_lexicographically() {
    let ctx = Context::new();
    let config = SystemPromptConfig {
        tool_order: Some(vec!["zulu".into(), TOOL_ORDER_REST.into()]),
        ..SystemPromptConfig::default()
    };
    let sp = prompt(&ctx, config);
    let _ = sp
        .tools(&ctx, FakeTools::with(&["mike", "zulu", "alpha"]))
        .unwrap();
    let a = sp.assemble(AssemblyScope::global()).await.unwrap();
    assert_eq!(tool_names(&a.tools), ["zulu", "alpha", "mike"]);
    assert_eq!(a.tools[0].description, "the zulu tool");
}

#[tokio::test]
async fn tool_order_naming_an_unregistered_tool_fails_assembly() {
    let ctx = Context::new();
    let config = SystemPromptConfig {
        tool_order: Some(vec!["ghost".into(), TOOL_ORDER_REST.into()]),
        ..SystemPromptConfig::default()
    };
    let sp = prompt(&ctx, config);
    let _ = sp.tools(&ctx, FakeTools::with(&["alpha"])).unwrap();
    let err = sp.assemble(AssemblyScope::global()).await.unwrap_err();
    assert!(matches!(&err, PromptError::UnknownToolInOrder { names, .. } if names == &["ghost"]));
    assert_eq!(
        err.to_string(),
        "tool_order lists unregistered tool(s) `ghost`; known tools: alpha"
    );
}

#[tokio::test]
async fn malformed_configuration_and_compositions_fail_loudly() {
    let ctx = Context::new();
    let dup = SystemPromptConfig {
        tool_order: Some(vec!["a".into(), "a".into()]),
        ..SystemPromptConfig::default()
    };
    assert!(matches!(
        SystemPrompt::new(&ctx, dup),
        Err(PromptError::InvalidToolOrder { .. })
    ));

    let sp = prompt(&ctx, SystemPromptConfig::default());
    let _ = sp
        .section(&ctx, Section::new("one", 0, "1").complete())
        .unwrap();
    let _ = sp
        .section(&ctx, Section::new("two", 1, "2").complete())
        .unwrap();
    let err = sp.assemble(AssemblyScope::global()).await.unwrap_err();
    assert!(matches!(&err, PromptError::MultipleComplete { names } if names == &["one", "two"]));

    let ctx = Context::new();
    let sp = prompt(&ctx, SystemPromptConfig::default());
    let _ = sp.tools(&ctx, FakeTools::with(&["*"])).unwrap();
    assert!(matches!(
        sp.assemble(AssemblyScope::global()).await,
        Err(PromptError::ReservedToolName { .. })
    ));

    let ctx = Context::new();
    let sp = prompt(&ctx, SystemPromptConfig::default());
    let _ = sp.tools(&ctx, FakeTools::with(&["a"])).unwrap();
    let _ = sp.tools(&ctx, FakeTools::with(&["a"])).unwrap();
    assert!(matches!(
        sp.assemble(AssemblyScope::global()).await,
        Err(PromptError::DuplicateTool { .. })
    ));

    assert!(matches!(
        sp.variable(&ctx, "Bad-Name", Arc::new(|_| None)),
        Err(PromptError::InvalidVariableName { .. })
    ));
    let _ = sp.section(&ctx, Section::new("same", 0, "x")).unwrap();
    assert!(matches!(
        sp.section(&ctx, Section::new("same", 0, "y")),
        Err(PromptError::Duplicate {
            kind: "section",
            ..
        })
    ));
}

#[tokio::test]
async fn agent_section_shadows_the_global_one_only_for_that_agent_until_its_scope_ends() {
    let root = Context::new();
    let sp = prompt(&root, SystemPromptConfig::default());
    let _ = sp
        .section(&root, Section::new("persona", 0, "global persona"))
        .unwrap();
    let a_tag = ScopeTag::new("agent-a");
    let b_tag = ScopeTag::new("agent-b");
    let a = root.tagged_child("agent-a", a_tag.clone()).unwrap();
    // The same name in another layer is a shadow, not a duplicate.
    let _ = sp
        .section(&a, Section::new("persona", 0, "agent a persona"))
        .unwrap();

    let for_a = sp
        .assemble(AssemblyScope::for_tag(a_tag.clone()))
        .await
        .unwrap();
    let for_b = sp.assemble(AssemblyScope::for_tag(b_tag)).await.unwrap();
    let global = sp.assemble(AssemblyScope::global()).await.unwrap();
    assert_eq!(render(&for_a).unwrap(), "agent a persona");
    assert_eq!(render(&for_b).unwrap(), "global persona");
    assert_eq!(render(&global).unwrap(), "global persona");

    a.scope().dispose().await;
    let after = sp.assemble(AssemblyScope::for_tag(a_tag)).await.unwrap();
    assert_eq!(render(&after).unwrap(), "global persona");
    assert!(matches!(
        sp.section(&a, Section::new("late", 1, "x")),
        Err(PromptError::Kernel(_))
    ));
}

#[tokio::test]
async fn nearer_variables_win_along_the_scope_chain() {
    let root = Context::new();
    let sp = prompt(&root, SystemPromptConfig::default());
    let parent_tag = ScopeTag::new("parent");
    let child_tag = ScopeTag::child_of(&parent_tag, "child");
    let parent = root.tagged_child("parent", parent_tag.clone()).unwrap();
    let child = root.tagged_child("child", child_tag.clone()).unwrap();
    let _ = sp
        .variable(&root, "who", Arc::new(|_| Some("global".into())))
        .unwrap();
    let _ = sp
        .variable(&root, "cwd", Arc::new(|_| Some("/g".into())))
        .unwrap();
    let _ = sp
        .variable(&parent, "who", Arc::new(|_| Some("parent".into())))
        .unwrap();
    let _ = sp
        .variable(&child, "cwd", Arc::new(|_| Some("/child".into())))
        .unwrap();
    let _ = sp
        .section(&root, Section::new("s", 0, "{{who}} in {{cwd}}"))
        .unwrap();

    let child_view = sp
        .assemble(AssemblyScope::for_tag(child_tag))
        .await
        .unwrap();
    assert_eq!(render(&child_view).unwrap(), "parent in /child");
    let parent_view = sp
        .assemble(AssemblyScope::for_tag(parent_tag))
        .await
        .unwrap();
    assert_eq!(render(&parent_view).unwrap(), "parent in /g");
}

#[tokio::test]
async fn sections_render_in_ascending_order_and_dynamic_text_sees_the_scope() {
    let root = Context::new();
    let sp = prompt(&root, SystemPromptConfig::default());
    let tag = ScopeTag::new("agent");
    let _ = sp.section(&root, Section::new("late", 10, "late")).unwrap();
    let _ = sp
        .section(&root, Section::new("tie-1", 5, "tie one"))
        .unwrap();
    let _ = sp
        .section(&root, Section::new("early", -5, "early"))
        .unwrap();
    let _ = sp
        .section(&root, Section::new("tie-2", 5, "tie two"))
        .unwrap();
    let _ = sp
        .section(
            &root,
            Section::new(
                "who",
                20,
                SectionText::dynamic(|s| {
                    format!("scope={}", s.tag.as_ref().map_or("global", |t| t.label()))
                }),
            ),
        )
        .unwrap();
    let a = sp.assemble(AssemblyScope::for_tag(tag)).await.unwrap();
    assert_eq!(
        section_names(&a),
        ["early", "tie-1", "tie-2", "late", "who"]
    );
    assert_eq!(
        render(&a).unwrap(),
        "early\n\ntie one\n\ntie two\n\nlate\n\nscope=agent"
    );
}

#[tokio::test]
async fn a_registered_variable_without_a_value_fails_rendering_not_assembly() {
    let ctx = Context::new();
    let sp = prompt(&ctx, SystemPromptConfig::default());
    let _ = sp.variable(&ctx, "model", Arc::new(|_| None)).unwrap();
    let _ = sp
        .section(&ctx, Section::new("s", 0, "model: {{model}}"))
        .unwrap();
    let a = sp.assemble(AssemblyScope::global()).await.unwrap();
    assert_eq!(a.variables.get("model"), Some(&None));
    assert!(matches!(
        render(&a),
        Err(PromptError::MissingValue { section, name }) if section == "s" && name == "model"
    ));
}

#[tokio::test]
async fn waterfall_listener_can_rewrite_the_assembly_for_its_own_scope_only() {
    let root = Context::new();
    let sp = prompt(&root, SystemPromptConfig::default());
    let _ = sp.section(&root, Section::new("base", 0, "base")).unwrap();
    let _ = sp
        .tools(&root, FakeTools::with(&["alpha", "beta"]))
        .unwrap();
    let a_tag = ScopeTag::new("a");
    let a = root.tagged_child("a", a_tag.clone()).unwrap();
    let _ = a
        .on_waterfall::<PromptAssemble, _>(|assembly, next| {
            async move {
                let mut out = next.run(assembly).await?;
                out.sections[0].text.push_str(" (rewritten)");
                out.tools.retain(|t| t.name != "beta");
                Ok(out)
            }
            .boxed()
        })
        .unwrap();

    let for_a = sp.assemble(AssemblyScope::for_tag(a_tag)).await.unwrap();
    assert_eq!(render(&for_a).unwrap(), "base (rewritten)");
    assert_eq!(tool_names(&for_a.tools), ["alpha"]);
    let global = sp.assemble(AssemblyScope::global()).await.unwrap();
    assert_eq!(render(&global).unwrap(), "base");
    assert_eq!(tool_names(&global.tools), ["alpha", "beta"]);
}

#[tokio::test]
async fn a_failing_waterfall_listener_fails_assembly() {
    let ctx = Context::new();
    let sp = prompt(&ctx, SystemPromptConfig::default());
    let _ = ctx
        .on_waterfall::<PromptAssemble, _>(|_, _| async { Err("nope".into()) }.boxed())
        .unwrap();
    let err = sp.assemble(AssemblyScope::global()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "system-prompt/assemble listener failed: nope"
    );
}

#[tokio::test]
async fn a_complete_section_becomes_the_whole_prompt_even_after_listeners() {
    let root = Context::new();
    let sp = prompt(&root, SystemPromptConfig::default());
    let _ = sp
        .section(&root, Section::new("global", 0, "global"))
        .unwrap();
    let tag = ScopeTag::new("reviewer");
    let agent = root.tagged_child("reviewer", tag.clone()).unwrap();
    let _ = sp
        .section(&agent, Section::new("dedicated", 5, "only this").complete())
        .unwrap();
    let _ = agent
        .on_waterfall::<PromptAssemble, _>(|assembly, next| {
            async move {
                let mut out = next.run(assembly).await?;
                out.sections.clear();
                out.sections.push(dsh_prompt::AssembledSection {
                    name: "injected".into(),
                    text: "injected".into(),
                    complete: false,
                });
                Ok(out)
            }
            .boxed()
        })
        .unwrap();
    let a = sp.assemble(AssemblyScope::for_tag(tag)).await.unwrap();
    assert_eq!(render(&a).unwrap(), "only this");
    let g = sp.assemble(AssemblyScope::global()).await.unwrap();
    assert_eq!(render(&g).unwrap(), "global");
}

#[tokio::test]
async fn runtime_context_is_merged_ordered_and_suppressible_per_scope() {
    let root = Context::new();
    let sp = prompt(&root, SystemPromptConfig::default());
    let _ = sp
        .context(&root, ContextSection::new("git", 20, "branch main"))
        .unwrap();
    let _ = sp
        .context(&root, ContextSection::new("date", 10, "today"))
        .unwrap();
    let a_tag = ScopeTag::new("a");
    let b_tag = ScopeTag::new("b");
    let a = root.tagged_child("a", a_tag.clone()).unwrap();
    let b = root.tagged_child("b", b_tag.clone()).unwrap();
    let _ = sp
        .context(&b, ContextSection::new("git", 20, "branch feature"))
        .unwrap();

    let for_b = sp
        .assemble(AssemblyScope::for_tag(b_tag.clone()))
        .await
        .unwrap();
    assert_eq!(
        render_context(&for_b),
        "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\ntoday\n\nbranch feature"
    );

    let first = sp.suppress_runtime_context(&a).unwrap();
    let second = sp.suppress_runtime_context(&a).unwrap();
    let for_a = sp
        .assemble(AssemblyScope::for_tag(a_tag.clone()))
        .await
        .unwrap();
    assert!(for_a.contexts.is_empty());
    assert_eq!(render_context(&for_a), "");
    // Another agent keeps its context.
    let for_b = sp.assemble(AssemblyScope::for_tag(b_tag)).await.unwrap();
    assert_eq!(for_b.contexts.len(), 2);
    // Suppressors compose: context returns only when the last one is gone.
    first.dispose().await;
    let still = sp
        .assemble(AssemblyScope::for_tag(a_tag.clone()))
        .await
        .unwrap();
    assert!(still.contexts.is_empty());
    second.dispose().await;
    let back = sp.assemble(AssemblyScope::for_tag(a_tag)).await.unwrap();
    assert_eq!(back.contexts.len(), 2);
}

#[tokio::test]
async fn plugin_provides_identity_and_persona_and_unmounting_withdraws_them() {
    let root = Context::new();
    let handle = root
        .plugin(SystemPromptPlugin::new(SystemPromptConfig::default()))
        .await
        .unwrap();
    let sp = root.get::<SystemPrompt>().unwrap();
    let a = sp.assemble(AssemblyScope::global()).await.unwrap();
    // The empty persona is registered (so it can be shadowed) but rendered as nothing.
    assert_eq!(section_names(&a), ["harness:identity", PERSONA_SECTION]);
    assert_eq!(render(&a).unwrap(), IDENTITY_TEXT);

    let tag = ScopeTag::new("agent");
    let agent = root.tagged_child("agent", tag.clone()).unwrap();
    let _ = sp
        .section(&agent, Section::new(PERSONA_SECTION, 0, "You review code."))
        .unwrap();
    let a = sp.assemble(AssemblyScope::for_tag(tag)).await.unwrap();
    assert_eq!(
        render(&a).unwrap(),
        format!("{IDENTITY_TEXT}\n\nYou review code.")
    );

    handle.dispose().await;
    assert!(root.get::<SystemPrompt>().is_none());
    let a = sp.assemble(AssemblyScope::global()).await.unwrap();
    assert!(a.sections.is_empty());

    let root = Context::new();
    let _ = root
        .plugin(SystemPromptPlugin::new(SystemPromptConfig {
            include_identity: false,
            persona: "Be brief.".into(),
            tool_order: None,
        }))
        .await
        .unwrap();
    let sp = root.get::<SystemPrompt>().unwrap();
    let a = sp.assemble(AssemblyScope::global()).await.unwrap();
    assert_eq!(render(&a).unwrap(), "Be brief.");
}

#[tokio::test]
async fn a_panicking_provider_fails_assembly_instead_of_the_caller() {
    let ctx = Context::new();
    let sp = prompt(&ctx, SystemPromptConfig::default());
    let _ = sp
        .variable(&ctx, "boom", Arc::new(|_| panic!("provider exploded")))
        .unwrap();
    let err = sp.assemble(AssemblyScope::global()).await.unwrap_err();
    assert!(matches!(
        err,
        PromptError::ProviderPanicked {
            kind: "variable",
            ..
        }
    ));
}
