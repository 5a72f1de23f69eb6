//! Session events → `session/update`s: the one translator used for live streaming and for
//! `session/load` replay, so a reloaded conversation looks the way it looked live.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ContentBlock as AcpBlock, ContentChunk, Cost, Diff, SessionUpdate, ToolCall as AcpToolCall,
    ToolCallContent, ToolCallId, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind as AcpKind, UsageUpdate,
};
use dsh_compaction::usage_report;
use dsh_kernel::ScopeTag;
use dsh_llm::ModelCatalog;
use dsh_session::{
    AssistantMessage, CallId, ContentBlock, EventKind, MessageSource, SessionEvent, StreamChunk,
    SurfaceOp, ToolCall, ToolResult,
};
use dsh_tools::{Tool, ToolCallResult, ToolKind, ToolPresentation, ToolRuntime, parse_arguments};
use serde_json::Value;

use crate::terminal::{TerminalCards, terminal_content};

/// Where an event comes from: the live feed streams raw deltas; a replay shows the committed
/// messages (so a failed attempt's discarded deltas never reappear) and the user's prompts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A committed event of the running agent.
    Live,
    /// A stored event shown again by `session/load`.
    Replay,
}

/// A call the client has seen a card for, kept until its result so the result can be
/// presented with the call's arguments.
struct PendingCall {
    name: String,
    args: Value,
}

/// The per-session translation state. Owned by the session's delivery task, so it needs no
/// lock.
pub(crate) struct Translator {
    tools: Arc<ToolRuntime>,
    tag: Option<ScopeTag>,
    cwd: Option<PathBuf>,
    calls: HashMap<CallId, PendingCall>,
    context_window: Option<u64>,
    /// Calls that ran in an editor terminal (live only; a replay shows their text).
    terminals: Option<Arc<TerminalCards>>,
    /// Prices of the models the session bills, when the front end knows them.
    catalog: Option<ModelCatalog>,
    /// What the session has cost so far in US dollars: every usage report seen, each at its
    /// own model's price; `None` once any report's price is unknown (a partial sum misleads).
    spent: Option<f64>,
}

fn text_block(text: impl Into<String>) -> AcpBlock {
    AcpBlock::from(text.into())
}

fn chunk(text: impl Into<String>) -> ContentChunk {
    ContentChunk::new(text_block(text))
}

fn kind_of(kind: ToolKind) -> AcpKind {
    match kind {
        ToolKind::Read => AcpKind::Read,
        ToolKind::Edit => AcpKind::Edit,
        ToolKind::Delete => AcpKind::Delete,
        ToolKind::Move => AcpKind::Move,
        ToolKind::Search => AcpKind::Search,
        ToolKind::Execute => AcpKind::Execute,
        ToolKind::Think => AcpKind::Think,
        ToolKind::Fetch => AcpKind::Fetch,
        ToolKind::Other => AcpKind::Other,
    }
}

/// A tool's own presentation; a panicking presenter falls back to the generic card.
fn presented(f: impl FnOnce() -> Option<ToolPresentation>) -> Option<ToolPresentation> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).ok().flatten()
}

/// A console block for terminal output.
fn console(output: &str, exit: Option<i32>) -> String {
    let mut text = format!("```console\n{}\n```", output.trim_end_matches('\n'));
    if let Some(code) = exit.filter(|c| *c != 0) {
        text.push_str(&format!("\nexit code {code}"));
    }
    text
}

/// The visible note for an `llm/retry` record.
fn retry_marker(data: &Value) -> String {
    let n = data.get("retry").and_then(Value::as_u64).unwrap_or(1);
    let of = data
        .get("maxRetries")
        .and_then(Value::as_u64)
        .map_or_else(String::new, |m| format!("/{m}"));
    let delay = data.get("delayMs").and_then(Value::as_u64).unwrap_or(0);
    let why = data
        .pointer("/failure/message")
        .and_then(Value::as_str)
        .unwrap_or("request failed");
    format!("\n[previous attempt discarded; retrying {n}{of} in {delay}ms: {why}]\n")
}

/// What a card shows: title, kind and content.
struct Card {
    title: String,
    kind: AcpKind,
    content: Vec<ToolCallContent>,
}

impl Translator {
    /// A translator resolving tool presenters through `tools` (global view until bound).
    pub(crate) fn new(tools: Arc<ToolRuntime>) -> Self {
        Self {
            tools,
            tag: None,
            cwd: None,
            calls: HashMap::new(),
            context_window: None,
            terminals: None,
            catalog: None,
            spent: Some(0.0),
        }
    }

    /// The same translator, adding the session's running cost (priced from `catalog`) to
    /// every usage update.
    pub(crate) fn with_prices(mut self, catalog: Option<ModelCatalog>) -> Self {
        self.catalog = catalog;
        self
    }

    /// The same translator, showing the editor terminal a call ran in on its result card.
    pub(crate) fn with_terminals(mut self, terminals: Arc<TerminalCards>) -> Self {
        self.terminals = Some(terminals);
        self
    }

    /// Binds the agent's routing tag (so its scoped tools present their own calls) and its
    /// working directory (so relative paths become locations the editor can open).
    pub(crate) fn bind(&mut self, tag: Option<ScopeTag>, cwd: Option<PathBuf>) {
        self.tag = tag;
        self.cwd = cwd;
    }

    /// A translator with the same binding and no pending calls, for a replay that must not
    /// disturb the live stream's state.
    pub(crate) fn fresh(&self) -> Self {
        let mut t = Translator::new(self.tools.clone());
        t.bind(self.tag.clone(), self.cwd.clone());
        t.context_window = self.context_window;
        t.catalog = self.catalog.clone();
        t
    }

    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(self.tag.as_ref(), name)
    }

    fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        match &self.cwd {
            Some(cwd) if p.is_relative() => cwd.join(p),
            _ => p.to_path_buf(),
        }
    }

    /// The updates one event produces, in order (usually zero or one).
    pub(crate) fn translate(&mut self, event: &SessionEvent, source: Source) -> Vec<SessionUpdate> {
        if let Some((model, usage)) = usage_report(event) {
            let price = self.catalog.as_ref().and_then(|c| c.facts(&model).price);
            self.spent = self.spent.zip(price).map(|(s, p)| s + p.cost(&usage));
        }
        match &event.kind {
            EventKind::RequestContext(c) => {
                self.context_window = c.context_window;
                Vec::new()
            }
            EventKind::AssistantChunk(c) if source == Source::Live => match &c.chunk {
                StreamChunk::TextDelta { text, .. } if !text.is_empty() => {
                    vec![SessionUpdate::AgentMessageChunk(chunk(text.clone()))]
                }
                StreamChunk::ReasoningDelta { text, .. } if !text.is_empty() => {
                    vec![SessionUpdate::AgentThoughtChunk(chunk(text.clone()))]
                }
                _ => Vec::new(),
            },
            EventKind::AssistantMessage(m) => self.assistant_message(m, source),
            EventKind::UserMessage(m) if source == Source::Replay => {
                if m.source != MessageSource::User {
                    return Vec::new();
                }
                m.content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .filter(|t| !t.is_empty())
                    .map(|t| SessionUpdate::UserMessageChunk(chunk(t)))
                    .collect()
            }
            EventKind::ToolCall(c) => vec![self.tool_call(c)],
            // The deltas of the failed attempt were already streamed: say they are void.
            EventKind::Other { type_name, data }
                if type_name == "llm/retry" && source == Source::Live =>
            {
                vec![SessionUpdate::AgentMessageChunk(chunk(retry_marker(data)))]
            }
            EventKind::Other { type_name, .. } if type_name == dsh_session::TodoWrite::TYPE => {
                crate::plan::plan_update(event).into_iter().collect()
            }
            // A replacement result (compaction) rewrites history; the card already settled.
            EventKind::ToolResult(r)
                if !matches!(event.surface_op, Some(SurfaceOp::Replace { .. })) =>
            {
                self.tool_result(r).into_iter().collect()
            }
            _ => Vec::new(),
        }
    }

    fn assistant_message(&mut self, m: &AssistantMessage, source: Source) -> Vec<SessionUpdate> {
        let mut out = Vec::new();
        if source == Source::Replay {
            for block in &m.message.content {
                match block {
                    ContentBlock::Text { text } if !text.is_empty() => {
                        out.push(SessionUpdate::AgentMessageChunk(chunk(text.clone())));
                    }
                    ContentBlock::Reasoning { text } if !text.is_empty() => {
                        out.push(SessionUpdate::AgentThoughtChunk(chunk(text.clone())));
                    }
                    _ => {}
                }
            }
        }
        if let (Some(usage), Some(size)) = (&m.usage, self.context_window) {
            // Cache hits are part of the context too (DeepSeek reports them apart from the
            // misses); the split rides along in `_meta` for clients that show cache savings.
            let cached = usage.cache_read_tokens.unwrap_or(0);
            let used = usage.input_tokens + cached + usage.output_tokens;
            let mut meta = serde_json::Map::new();
            meta.insert(
                "dsh".into(),
                serde_json::json!({
                    "inputTokens": usage.input_tokens,
                    "cachedInputTokens": cached,
                    "outputTokens": usage.output_tokens,
                }),
            );
            let mut update = UsageUpdate::new(used, size).meta(meta);
            if let Some(spent) = self.spent.filter(|_| self.catalog.is_some()) {
                update = update.cost(Cost::new(spent, "USD"));
            }
            out.push(SessionUpdate::UsageUpdate(update));
        }
        out
    }

    /// The diff a call proposes, when its tool presents the call as one: shown on the pending
    /// card and kept on the finished one.
    fn proposed_diff(&self, name: &str, args: &Value) -> Option<Diff> {
        match presented(|| self.tool(name)?.present_call(args))? {
            ToolPresentation::Diff {
                path,
                old_text,
                new_text,
            } => Some(Diff::new(self.resolve(&path), new_text).old_text(old_text)),
            _ => None,
        }
    }

    fn card(&self, name: &str, presentation: Option<ToolPresentation>) -> Card {
        match presentation {
            Some(ToolPresentation::Generic { title, kind }) => Card {
                title,
                kind: kind_of(kind),
                content: Vec::new(),
            },
            Some(ToolPresentation::Diff {
                path,
                old_text,
                new_text,
            }) => Card {
                title: match old_text {
                    Some(_) => format!("Edit {path}"),
                    None => format!("Write {path}"),
                },
                kind: AcpKind::Edit,
                content: vec![ToolCallContent::from(
                    Diff::new(self.resolve(&path), new_text).old_text(old_text),
                )],
            },
            Some(ToolPresentation::Terminal {
                command, output, ..
            }) => Card {
                title: command,
                kind: AcpKind::Execute,
                content: output
                    .map(|o| ToolCallContent::from(text_block(console(&o, None))))
                    .into_iter()
                    .collect(),
            },
            None => Card {
                title: name.to_owned(),
                kind: AcpKind::Other,
                content: Vec::new(),
            },
        }
    }

    /// The permission card's description of a call that is about to run.
    fn describe_call(&self, name: &str, args: &Value) -> ToolCallUpdateFields {
        let presentation = self
            .tool(name)
            .and_then(|t| presented(|| t.present_call(args)));
        let card = self.card(name, presentation);
        ToolCallUpdateFields::new()
            .title(card.title)
            .kind(card.kind)
            .name(name.to_owned())
            .status(ToolCallStatus::Pending)
            .raw_input(args.clone())
            .content((!card.content.is_empty()).then_some(card.content))
            .locations(self.locations(name, args))
    }

    /// The files a call declares it writes or reads, for the editor to follow.
    fn locations(&self, name: &str, args: &Value) -> Option<Vec<ToolCallLocation>> {
        let tool = self.tool(name)?;
        let effects = std::panic::catch_unwind(AssertUnwindSafe(|| tool.effects(args))).ok()?;
        let locations: Vec<ToolCallLocation> = effects
            .paths()
            .filter_map(|p| p.to_str())
            .map(|p| ToolCallLocation::new(self.resolve(p)))
            .collect();
        (!locations.is_empty()).then_some(locations)
    }

    fn tool_call(&mut self, c: &ToolCall) -> SessionUpdate {
        let args = parse_arguments(&c.arguments);
        let presentation = self
            .tool(&c.name)
            .and_then(|t| presented(|| t.present_call(&args)));
        let card = self.card(&c.name, presentation);
        let mut call = AcpToolCall::new(ToolCallId::new(c.call_id.as_str()), card.title)
            .name(c.name.clone())
            .kind(card.kind)
            // Announced before approval and dispatch; `in_progress` follows when the body
            // starts (the `tools/execute` listener of the session).
            .status(ToolCallStatus::Pending)
            .content(card.content)
            .raw_input(args.clone());
        if let Some(locations) = self.locations(&c.name, &args) {
            call = call.locations(locations);
        }
        self.calls.insert(
            c.call_id.clone(),
            PendingCall {
                name: c.name.clone(),
                args,
            },
        );
        SessionUpdate::ToolCall(call)
    }

    fn tool_result(&mut self, r: &ToolResult) -> Option<SessionUpdate> {
        let (call_id, content, is_error) = r.message.content.iter().find_map(|b| match b {
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => Some((tool_call_id.clone(), content.clone(), *is_error)),
            _ => None,
        })?;
        let call = self.calls.remove(&call_id);
        let terminal = self.terminals.as_ref().and_then(|t| t.take(&call_id));
        let result = ToolCallResult {
            content,
            is_error,
            error: r.error.clone(),
            meta: r.meta.clone(),
            ..ToolCallResult::default()
        };
        let text = result.text();
        let presentation = match &call {
            Some(call) if !is_error => self
                .tool(&call.name)
                .and_then(|t| presented(|| t.present_result(&call.args, &result))),
            _ => None,
        };
        let content = match (terminal, presentation) {
            // The card keeps the terminal the command ran in (released, still shown).
            (Some(terminal), _) => vec![terminal_content(terminal)],
            (None, presentation) => match presentation {
                Some(ToolPresentation::Diff {
                    path,
                    old_text,
                    new_text,
                }) => vec![ToolCallContent::from(
                    Diff::new(self.resolve(&path), new_text).old_text(old_text),
                )],
                Some(ToolPresentation::Terminal { output, exit, .. }) => {
                    let output = output.unwrap_or_else(|| text.clone());
                    vec![ToolCallContent::from(text_block(console(&output, exit)))]
                }
                _ => {
                    let diff = call
                        .as_ref()
                        .filter(|_| !is_error)
                        .and_then(|c| self.proposed_diff(&c.name, &c.args));
                    let mut content: Vec<ToolCallContent> =
                        diff.map(ToolCallContent::from).into_iter().collect();
                    if !text.is_empty() {
                        content.push(ToolCallContent::from(text_block(text.clone())));
                    }
                    content
                }
            },
        };
        let status = if is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            ToolCallId::new(call_id.as_str()),
            ToolCallUpdateFields::new()
                .status(status)
                .content(content)
                .raw_output(Value::String(text)),
        )))
    }
}

/// The card of a call that is about to run, for a permission question.
pub(crate) fn describe_call(
    tools: &Arc<ToolRuntime>,
    tag: Option<ScopeTag>,
    cwd: Option<PathBuf>,
    name: &str,
    args: &Value,
) -> ToolCallUpdateFields {
    let mut translator = Translator::new(tools.clone());
    translator.bind(tag, cwd);
    translator.describe_call(name, args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use dsh_kernel::Context;
    use dsh_session::{EventDraft, Message, Session, SessionHeader, SessionMeta};
    use dsh_tools::{ToolCallContext, ToolError, ToolOutput};

    fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
        args.get(key).and_then(Value::as_str)
    }

    /// A shell-like tool presenting its calls as terminal cards.
    struct Shell;

    #[async_trait]
    impl Tool for Shell {
        fn name(&self) -> &str {
            "sh"
        }
        fn description(&self) -> &str {
            "runs"
        }
        fn parameters(&self) -> Value {
            serde_json::json!({"type": "object"})
        }
        async fn execute(&self, _: Value, _: &ToolCallContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(""))
        }
        fn present_call(&self, args: &Value) -> Option<ToolPresentation> {
            Some(ToolPresentation::Terminal {
                command: str_arg(args, "cmd")?.to_owned(),
                output: None,
                exit: None,
            })
        }
        fn present_result(
            &self,
            args: &Value,
            result: &ToolCallResult,
        ) -> Option<ToolPresentation> {
            Some(ToolPresentation::Terminal {
                command: str_arg(args, "cmd")?.to_owned(),
                output: Some(result.text()),
                exit: Some(3),
            })
        }
    }

    /// A file tool presenting its calls the way the built-in `edit` and `write` do (a diff of
    /// what the arguments ask for) and declaring the file it writes.
    struct FileTool(&'static str);

    #[async_trait]
    impl Tool for FileTool {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "changes a file"
        }
        fn parameters(&self) -> Value {
            serde_json::json!({"type": "object"})
        }
        fn effects(&self, args: &Value) -> dsh_tools::ToolEffects {
            dsh_tools::ToolEffects::none().writes(str_arg(args, "file_path").unwrap_or(""))
        }
        async fn execute(&self, _: Value, _: &ToolCallContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(""))
        }
        fn present_call(&self, args: &Value) -> Option<ToolPresentation> {
            let path = str_arg(args, "file_path")?.to_owned();
            Some(match self.0 {
                "edit" => ToolPresentation::Diff {
                    path,
                    old_text: Some(str_arg(args, "old_string")?.to_owned()),
                    new_text: str_arg(args, "new_string")?.to_owned(),
                },
                _ => ToolPresentation::Diff {
                    path,
                    old_text: None,
                    new_text: str_arg(args, "content")?.to_owned(),
                },
            })
        }
    }

    /// Events as the loop logs them, with seqs assigned by a real session.
    fn logged(kinds: Vec<EventKind>) -> Vec<Arc<SessionEvent>> {
        let session = Session::new(
            SessionHeader::new("s".into(), 0, SessionMeta::default()),
            None,
        )
        .unwrap();
        session
            .append(EventKind::TurnStart(dsh_session::TurnStart { turn: 1 }))
            .unwrap();
        session
            .append(EventKind::StepStart(dsh_session::StepBoundary {
                turn: 1,
                step: 1,
            }))
            .unwrap();
        kinds
            .into_iter()
            .map(|k| session.append_draft(EventDraft::new(k)).unwrap())
            .collect()
    }

    fn call(id: &str, name: &str, args: Value) -> EventKind {
        EventKind::ToolCall(ToolCall {
            turn: 1,
            step: 1,
            call_id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
        })
    }

    fn result(id: &str, text: &str, is_error: bool) -> EventKind {
        EventKind::ToolResult(ToolResult {
            turn: 1,
            step: 1,
            message: Arc::new(Message::tool_result(
                id.into(),
                vec![ContentBlock::text(text)],
                is_error,
            )),
            error: None,
            meta: None,
        })
    }

    fn translator() -> Translator {
        let ctx = Context::new();
        let tools = ToolRuntime::new(&ctx);
        let _ = tools.register(&ctx, Arc::new(Shell)).unwrap();
        let _ = tools.register(&ctx, Arc::new(FileTool("edit"))).unwrap();
        let _ = tools.register(&ctx, Arc::new(FileTool("write"))).unwrap();
        let mut t = Translator::new(tools);
        t.bind(None, Some(PathBuf::from("/work/space")));
        t
    }

    fn translate_all(t: &mut Translator, kinds: Vec<EventKind>) -> Vec<SessionUpdate> {
        logged(kinds)
            .iter()
            .flat_map(|e| t.translate(e, Source::Live))
            .collect()
    }

    #[test]
    fn edit_calls_show_the_change_as_a_diff_at_the_workspace_path() {
        let mut t = translator();
        let updates = translate_all(
            &mut t,
            vec![
                call(
                    "c1",
                    "edit",
                    serde_json::json!({"file_path": "src/a.rs", "old_string": "x", "new_string": "y"}),
                ),
                result("c1", "Edited src/a.rs", false),
            ],
        );
        let SessionUpdate::ToolCall(card) = &updates[0] else {
            panic!("{updates:?}")
        };
        assert_eq!(card.kind, AcpKind::Edit);
        assert_eq!(card.title, "Edit src/a.rs");
        assert_eq!(
            card.locations[0].path,
            PathBuf::from("/work/space/src/a.rs")
        );
        let diff = Diff::new("/work/space/src/a.rs", "y").old_text("x".to_owned());
        assert_eq!(card.content, vec![ToolCallContent::from(diff.clone())]);
        let SessionUpdate::ToolCallUpdate(done) = &updates[1] else {
            panic!("{updates:?}")
        };
        assert_eq!(done.fields.status, Some(ToolCallStatus::Completed));
        assert_eq!(
            done.fields.content.as_ref().unwrap()[0],
            ToolCallContent::from(diff)
        );
    }

    #[test]
    fn write_calls_show_the_new_text_and_a_failure_shows_only_the_error() {
        let mut t = translator();
        let updates = translate_all(
            &mut t,
            vec![
                call(
                    "c1",
                    "write",
                    serde_json::json!({"file_path": "/abs/n.txt", "content": "hello"}),
                ),
                result("c1", "Error: not read first", true),
            ],
        );
        let SessionUpdate::ToolCall(card) = &updates[0] else {
            panic!("{updates:?}")
        };
        assert_eq!(
            card.content,
            vec![ToolCallContent::from(Diff::new("/abs/n.txt", "hello"))]
        );
        let SessionUpdate::ToolCallUpdate(done) = &updates[1] else {
            panic!("{updates:?}")
        };
        assert_eq!(done.fields.status, Some(ToolCallStatus::Failed));
        assert_eq!(
            done.fields.content.as_ref().unwrap(),
            &vec![ToolCallContent::from(text_block("Error: not read first"))]
        );
    }

    #[test]
    fn terminal_tools_title_the_card_with_the_command_and_fence_the_output() {
        let mut t = translator();
        let updates = translate_all(
            &mut t,
            vec![
                call("c1", "sh", serde_json::json!({"cmd": "make test"})),
                result("c1", "1 failed", false),
            ],
        );
        let SessionUpdate::ToolCall(card) = &updates[0] else {
            panic!("{updates:?}")
        };
        assert_eq!(
            (card.title.as_str(), card.kind),
            ("make test", AcpKind::Execute)
        );
        let SessionUpdate::ToolCallUpdate(done) = &updates[1] else {
            panic!("{updates:?}")
        };
        assert_eq!(
            done.fields.content.as_ref().unwrap(),
            &vec![ToolCallContent::from(text_block(
                "```console\n1 failed\n```\nexit code 3"
            ))]
        );
    }

    #[test]
    fn retries_are_announced_with_their_number_delay_and_cause() {
        let data = serde_json::json!({
            "retry": 2, "maxRetries": 5, "delayMs": 400,
            "failure": {"message": "overloaded", "code": "SERVER"}
        });
        assert_eq!(
            retry_marker(&data),
            "\n[previous attempt discarded; retrying 2/5 in 400ms: overloaded]\n"
        );
    }

    #[test]
    fn console_blocks_fence_output_and_name_a_failing_exit() {
        assert_eq!(console("hi\n", Some(0)), "```console\nhi\n```");
        assert_eq!(console("x", Some(2)), "```console\nx\n```\nexit code 2");
    }
}
