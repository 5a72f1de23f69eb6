//! Plan mode and questions on the real loop with the scripted model: what a planning session
//! refuses (read from declared effects), the review of a plan (approved: the turn goes on out
//! of plan mode; not approved: the model reads the feedback), a run with nobody to ask, the
//! durable events and resuming a planning session.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use dsh_agent::{AgentHandle, AgentOptions, CreateAgentOptions};
use dsh_agent_loop::{Core, CoreConfig, mount_core};
use dsh_guard::{SandboxMode, SessionPolicies};
use dsh_kernel::Context;
use dsh_plan::events::{DECIDED_EVENT, MODE_EVENT, PROPOSED_EVENT};
use dsh_plan::{PlanMode, PlanPlugin, Trigger};
use dsh_session::{ContentBlock, EventKind, Message, SessionEvent};
use dsh_testkit::{Script, ScriptedAdapter};
use dsh_tools::{
    QuestionOutcome, QuestionRequest, Questioner, Reply, Tool, ToolCallContext, ToolEffects,
    ToolError, ToolOutput,
};
use parking_lot::Mutex;
use serde_json::{Value, json};

struct H {
    ctx: Context,
    core: Core,
    adapter: Arc<ScriptedAdapter>,
    mode: Arc<PlanMode>,
}

/// The core, the scripted model, plan mode (with the guard's session policies when
/// `policies`) and the test tools.
async fn harness(policies: bool) -> H {
    let ctx = Context::new();
    if policies {
        ctx.provide(Arc::new(SessionPolicies::default())).unwrap();
    }
    let core = mount_core(
        &ctx,
        CoreConfig {
            retry: false,
            ..CoreConfig::default()
        },
    )
    .await
    .unwrap();
    let adapter = Arc::new(ScriptedAdapter::new());
    std::mem::forget(adapter.register(&core.llm).unwrap());
    std::mem::forget(ctx.plugin(PlanPlugin).await.unwrap());
    let mode = ctx.get::<PlanMode>().unwrap();
    H {
        ctx,
        core,
        adapter,
        mode,
    }
}

impl H {
    async fn agent(&self) -> AgentHandle {
        self.core
            .registry
            .create(
                &self.ctx,
                CreateAgentOptions {
                    agent_options: AgentOptions::route("scripted", "test-model"),
                    ..CreateAgentOptions::default()
                },
            )
            .await
            .unwrap()
    }

    fn tool(&self, tool: Arc<Probe>) {
        let _ = self.core.tools.register(&self.ctx, tool).unwrap();
    }
}

/// A tool declaring `effects`, counting its runs.
struct Probe {
    name: &'static str,
    effects: ToolEffects,
    runs: AtomicUsize,
}

impl Probe {
    fn new(name: &'static str, effects: ToolEffects) -> Arc<Probe> {
        Arc::new(Probe {
            name,
            effects,
            runs: AtomicUsize::new(0),
        })
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "probe"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn effects(&self, _args: &Value) -> ToolEffects {
        self.effects.clone()
    }
    async fn execute(
        &self,
        _args: Value,
        _call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("{} ran", self.name)))
    }
}

/// Answers every question with the next scripted outcome, recording what it was asked.
struct Person {
    answers: Mutex<Vec<QuestionOutcome>>,
    asked: Mutex<Vec<QuestionRequest>>,
}

impl Person {
    fn answering(answers: Vec<QuestionOutcome>) -> Arc<Person> {
        Arc::new(Person {
            answers: Mutex::new(answers),
            asked: Mutex::default(),
        })
    }
}

#[async_trait]
impl Questioner for Person {
    async fn ask(&self, request: QuestionRequest) -> QuestionOutcome {
        self.asked.lock().push(request);
        self.answers.lock().remove(0)
    }
}

/// The text of every tool result in `events`, in order.
fn results(events: &[Arc<SessionEvent>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => match &r.message.content[0] {
                ContentBlock::ToolResult { content, .. } => Some(
                    content
                        .iter()
                        .filter_map(ContentBlock::as_text)
                        .collect::<String>(),
                ),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The data of every plugin event of `kind`.
fn plugin_events(events: &[Arc<SessionEvent>], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Other { type_name, data } if type_name == kind => Some(data.clone()),
            _ => None,
        })
        .collect()
}

const PLAN: &str = "# Plan\n1. Add the cache.\n2. Test it.";

#[tokio::test]
async fn a_planning_session_refuses_writes_and_undeclared_tools_and_runs_what_only_reads() {
    let h = harness(true).await;
    let write = Probe::new("touch", ToolEffects::none().writes("src/a.rs"));
    let mystery = Probe::new("mcp__db__query", ToolEffects::undeclared());
    let read = Probe::new("look", ToolEffects::none().reads("src/a.rs"));
    for t in [&write, &mystery, &read] {
        h.tool(t.clone());
    }
    h.adapter
        .push(Script::tool_calls([
            ("c1", "touch", "{}"),
            ("c2", "mcp__db__query", "{}"),
            ("c3", "look", "{}"),
        ]))
        .push(Script::text("planned"));
    let handle = h.agent().await;
    let agent = handle.agent();
    assert!(h.mode.set(agent, true, Trigger::Start).unwrap());
    agent
        .followup(Message::user_text("plan the cache"))
        .unwrap();
    agent.when_idle().await;
    let events = agent.session().events();
    let texts = results(&events);
    assert!(
        texts[0].starts_with("Error: plan mode: `touch` would change src/a.rs"),
        "{texts:?}"
    );
    assert!(
        texts[1].contains("does not declare what it does"),
        "{texts:?}"
    );
    assert_eq!(texts[2], "look ran");
    assert_eq!((write.runs(), mystery.runs(), read.runs()), (0, 0, 1));
    // The model was told at its first step, as a notice.
    let first = h.adapter.request_texts(0).join("\n");
    assert!(first.contains("Plan mode is on"), "{first}");
    assert_eq!(
        plugin_events(&events, MODE_EVENT),
        [json!({"active": true, "by": "start"})]
    );
    // The guard's policies confine the session's commands read-only while it plans.
    let policies = h.ctx.get::<SessionPolicies>().unwrap();
    assert_eq!(policies.sandbox(agent.id()), Some(SandboxMode::ReadOnly));
    handle.dispose().await;
}

#[tokio::test]
async fn commands_are_refused_while_planning_when_nothing_confines_them() {
    // No guard supervision reads the narrowing here: a command would run unconfined.
    let h = harness(true).await;
    let bash = Probe::new("bash", ToolEffects::none().runs("ls"));
    h.tool(bash.clone());
    h.adapter
        .push(Script::tool_call("c1", "bash", "{}"))
        .push(Script::text("ok"));
    let handle = h.agent().await;
    let agent = handle.agent();
    h.mode.set(agent, true, Trigger::User).unwrap();
    agent.followup(Message::user_text("look around")).unwrap();
    agent.when_idle().await;
    let texts = results(&agent.session().events());
    assert!(
        texts[0].contains("cannot be confined to read-only"),
        "{texts:?}"
    );
    assert_eq!(bash.runs(), 0);
    handle.dispose().await;
}

#[tokio::test]
async fn an_approved_plan_leaves_plan_mode_and_the_same_turn_carries_it_out() {
    let h = harness(true).await;
    let person = Person::answering(vec![QuestionOutcome::Answered(vec![Reply::Chosen(
        dsh_plan::APPROVE.into(),
    )])]);
    h.ctx.provide::<dyn Questioner>(person.clone()).unwrap();
    let write = Probe::new("touch", ToolEffects::none().writes("src/a.rs"));
    h.tool(write.clone());
    let plan_args = json!({ "plan": PLAN }).to_string();
    h.adapter
        .push(Script::tool_call("c1", "exit_plan_mode", &plan_args))
        .push(Script::tool_call("c2", "touch", "{}"))
        .push(Script::text("done"));
    let handle = h.agent().await;
    let agent = handle.agent();
    h.mode.set(agent, true, Trigger::Start).unwrap();
    agent.followup(Message::user_text("add a cache")).unwrap();
    agent.when_idle().await;
    let events = agent.session().events();
    let texts = results(&events);
    assert!(
        texts[0].starts_with("The user approved the plan"),
        "{texts:?}"
    );
    assert_eq!(texts[1], "touch ran");
    assert_eq!(write.runs(), 1);
    assert!(!h.mode.is_active(agent.id()));
    assert_eq!(
        agent.session().last_turn(),
        1,
        "one turn: approve, then carry it out"
    );
    // The person saw the plan as a review.
    let asked = person.asked.lock().clone();
    assert_eq!(asked[0].questions[0].detail.as_deref(), Some(PLAN));
    assert_eq!(plugin_events(&events, PROPOSED_EVENT)[0]["plan"], PLAN);
    assert_eq!(
        plugin_events(&events, DECIDED_EVENT)[0]["decision"],
        "approved"
    );
    assert_eq!(
        plugin_events(&events, MODE_EVENT),
        [
            json!({"active": true, "by": "start"}),
            json!({"active": false, "by": "approval"})
        ]
    );
    let policies = h.ctx.get::<SessionPolicies>().unwrap();
    assert_eq!(
        policies.sandbox(agent.id()),
        None,
        "the narrowing is lifted"
    );
    handle.dispose().await;
}

#[tokio::test]
async fn a_rejected_plan_keeps_planning_and_the_model_reads_the_feedback() {
    let h = harness(true).await;
    let person = Person::answering(vec![QuestionOutcome::Answered(vec![Reply::Text(
        "use an LRU, not a map".into(),
    )])]);
    h.ctx.provide::<dyn Questioner>(person).unwrap();
    let plan_args = json!({ "plan": PLAN }).to_string();
    h.adapter
        .push(Script::tool_call("c1", "exit_plan_mode", &plan_args))
        .push(Script::text("revising"));
    let handle = h.agent().await;
    let agent = handle.agent();
    h.mode.set(agent, true, Trigger::Start).unwrap();
    agent.followup(Message::user_text("add a cache")).unwrap();
    agent.when_idle().await;
    let events = agent.session().events();
    let texts = results(&events);
    assert!(
        texts[0].starts_with("Error: the user did not approve the plan."),
        "{texts:?}"
    );
    assert!(texts[0].contains("use an LRU, not a map"), "{texts:?}");
    assert!(h.mode.is_active(agent.id()));
    // The model's next request carries the feedback.
    let second = h.adapter.request_texts(1).join("\n");
    assert!(second.contains("use an LRU, not a map"), "{second}");
    let decided = &plugin_events(&events, DECIDED_EVENT)[0];
    assert_eq!(decided["decision"], "rejected");
    assert_eq!(decided["feedback"], "use an LRU, not a map");
    handle.dispose().await;
}

#[tokio::test]
async fn with_nobody_to_ask_the_plan_ends_the_turn_as_its_answer_and_questions_fail_at_once() {
    let h = harness(true).await;
    let plan_args = json!({ "plan": PLAN }).to_string();
    let question = json!({"questions": [{"question": "Which?", "options": [
        {"label": "a"}, {"label": "b"}
    ]}]})
    .to_string();
    h.adapter
        .push(Script::tool_calls([
            ("c1", "ask_user_question", question.as_str()),
            ("c2", "exit_plan_mode", plan_args.as_str()),
        ]))
        .push(Script::text("never requested"));
    let handle = h.agent().await;
    let agent = handle.agent();
    h.mode.set(agent, true, Trigger::Start).unwrap();
    agent.followup(Message::user_text("plan it")).unwrap();
    dsh_testkit::bounded(agent.when_idle()).await;
    let events = agent.session().events();
    let texts = results(&events);
    assert!(
        texts[0].contains("no one can answer questions"),
        "{texts:?}"
    );
    assert!(
        texts[1].starts_with("No one can review the plan"),
        "{texts:?}"
    );
    assert_eq!(h.adapter.requests().len(), 1, "the plan concluded the turn");
    assert_eq!(dsh_plan::events::last_plan(&events).as_deref(), Some(PLAN));
    assert_eq!(
        plugin_events(&events, DECIDED_EVENT)[0]["decision"],
        "unreviewed"
    );
    assert!(h.mode.is_active(agent.id()), "still planning");
    handle.dispose().await;
}

#[tokio::test]
async fn a_question_is_answered_with_the_option_chosen_or_the_words_typed() {
    let h = harness(false).await;
    let person = Person::answering(vec![QuestionOutcome::Answered(vec![
        Reply::Chosen("Postgres".into()),
        Reply::Text("every night".into()),
    ])]);
    h.ctx.provide::<dyn Questioner>(person.clone()).unwrap();
    let question = json!({"questions": [
        {"question": "Which store?", "header": "Store", "options": [
            {"label": "SQLite"}, {"label": "Postgres", "description": "shared"}]},
        {"question": "How often?", "options": [{"label": "hourly"}, {"label": "daily"}]}
    ]})
    .to_string();
    h.adapter
        .push(Script::tool_call("c1", "ask_user_question", &question))
        .push(Script::text("ok"));
    let handle = h.agent().await;
    let agent = handle.agent();
    agent
        .followup(Message::user_text("set up backups"))
        .unwrap();
    agent.when_idle().await;
    let texts = results(&agent.session().events());
    assert_eq!(
        texts[0],
        "The user answered:\n1. Which store? → Postgres\n2. How often? → (in their own words) every night"
    );
    let asked = person.asked.lock().clone();
    assert_eq!(asked[0].questions[0].header.as_deref(), Some("Store"));
    assert_eq!(
        asked[0].questions[0].options[1].description.as_deref(),
        Some("shared")
    );
    handle.dispose().await;
}

#[tokio::test]
async fn exit_plan_mode_outside_plan_mode_says_so_and_changes_nothing() {
    let h = harness(true).await;
    let plan_args = json!({ "plan": PLAN }).to_string();
    h.adapter
        .push(Script::tool_call("c1", "exit_plan_mode", &plan_args))
        .push(Script::text("ok"));
    let handle = h.agent().await;
    let agent = handle.agent();
    agent.followup(Message::user_text("go")).unwrap();
    agent.when_idle().await;
    let events = agent.session().events();
    assert!(results(&events)[0].contains("not in plan mode"));
    assert!(plugin_events(&events, PROPOSED_EVENT).is_empty());
    handle.dispose().await;
}

#[tokio::test]
async fn a_resumed_session_takes_up_the_plan_mode_its_log_ends_in() {
    let h = harness(true).await;
    h.adapter.push(Script::text("explored"));
    let first = h.agent().await;
    h.mode.set(first.agent(), true, Trigger::Start).unwrap();
    first.agent().followup(Message::user_text("look")).unwrap();
    first.agent().when_idle().await;
    let seed: Vec<SessionEvent> = first
        .agent()
        .session()
        .events()
        .iter()
        .map(|e| (**e).clone())
        .collect();
    first.dispose().await;
    let policies = h.ctx.get::<SessionPolicies>().unwrap();
    let resumed = h
        .core
        .registry
        .create(
            &h.ctx,
            CreateAgentOptions {
                seed: Some(seed),
                agent_options: AgentOptions::route("scripted", "test-model"),
                ..CreateAgentOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(h.mode.is_active(resumed.agent().id()));
    assert_eq!(
        policies.sandbox(resumed.agent().id()),
        Some(SandboxMode::ReadOnly)
    );
    let id = resumed.agent().id().clone();
    resumed.dispose().await;
    assert!(!h.mode.is_active(&id), "a disposed session is forgotten");
    assert_eq!(policies.sandbox(&id), None);
}
