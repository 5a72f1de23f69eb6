//! The durable event vocabulary.
//!
//! Every line of a session log is one [`SessionEvent`]: an envelope
//! `{type, seq, time, data, ignorable?, sourceEventSeqs?, surfaceOp?}` whose `type`/`data` pair is
//! an [`EventKind`]. Type names and field names are the reference implementation's, so a log
//! reads the same whichever implementation wrote it. Plugin-owned types (`llm/retry`,
//! `compaction/*`, ...) travel verbatim in [`EventKind::Other`].

use std::sync::Arc;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::ids::CallId;
use crate::message::Message;
use crate::stream::{LlmFailure, StreamChunk, TokenUsage};

/// Why a turn was cancelled. The first cause wins for a turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CancelCause {
    /// A person (or their front end) asked to stop.
    User,
    /// The owning parent agent was cancelled.
    Parent,
    /// A hook stopped the turn.
    Hook {
        /// The hook's stated reason.
        reason: String,
    },
    /// The agent is being torn down.
    Disposed,
    /// An aborted turn imported from a log that did not record a cause.
    Legacy,
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TurnEndReason {
    /// Nothing more was owed.
    Completed,
    /// The turn was cancelled.
    Aborted {
        /// The first cause the turn's cancellation carried.
        reason: CancelCause,
    },
    /// An `agent/pre-step` decision rejected a proposed step.
    Blocked,
    /// The turn failed.
    Error {
        /// What failed (`UNKNOWN` code for non-LLM failures).
        error: LlmFailure,
    },
    /// Some step hit the output-token ceiling.
    MaxTokens,
    /// Synthesized by crash repair for a turn that was open when the process died.
    Interrupted,
}

/// Which inbox list a message targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InboxTarget {
    /// Queued prompts; each opens its own turn.
    NextTurn,
    /// Steering and injected context, claimed at the next step boundary.
    NextStep,
}

/// Marker for a splice that a public mutation (cancel, remove, replace) made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpliceOutcome {
    /// The removed messages were cancelled, never run.
    Canceled,
}

/// `agent/inbox/spliced`: one durable mutation of an agent's inbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxSplice {
    /// The list mutated.
    pub target: InboxTarget,
    /// Position of the first removed/inserted message.
    pub start: u64,
    /// How many messages were removed (omitted when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_count: Option<u64>,
    /// Messages inserted at `start`.
    pub inserted: Vec<Arc<Message>>,
    /// Present when a public mutation removed messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SpliceOutcome>,
}

/// `turn/start` and the turn number it opens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStart {
    /// Turn number (continues across resume and fork).
    pub turn: u64,
}

/// `turn/end`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnEnd {
    /// The turn being closed.
    pub turn: u64,
    /// How it ended.
    pub reason: TurnEndReason,
}

/// `step/start` and `step/end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepBoundary {
    /// The enclosing turn.
    pub turn: u64,
    /// Step number, from 1 in each turn.
    pub step: u64,
}

/// `assistant/chunk`: one raw stream chunk, logged before it is assembled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssistantChunk {
    /// The enclosing turn.
    pub turn: u64,
    /// The enclosing step.
    pub step: u64,
    /// The chunk verbatim.
    pub chunk: StreamChunk,
}

/// `assistant/message`: the completion anchor of one successful provider call, or the
/// finalized visible prefix of a cancelled one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The enclosing turn.
    pub turn: u64,
    /// The enclosing step.
    pub step: u64,
    /// The assembled message (possibly empty).
    pub message: Arc<Message>,
    /// Token usage, when the provider reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// Present (true) when the stream was cancelled and this is its visible prefix.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// `tool/call`: a call is starting (logged before its body may run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The enclosing turn.
    pub turn: u64,
    /// The enclosing step.
    pub step: u64,
    /// The model's call id.
    pub call_id: CallId,
    /// Tool name.
    pub name: String,
    /// Raw argument text, verbatim.
    pub arguments: String,
}

/// The `{name, code}` facts of a failed tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolErrorInfo {
    /// Error class name (e.g. `AbortError`).
    pub name: String,
    /// Machine-readable code (e.g. `ABORTED_BEFORE_DISPATCH`).
    pub code: String,
}

/// `tool/result`: the result of one call, in model order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The enclosing turn.
    pub turn: u64,
    /// The enclosing step.
    pub step: u64,
    /// The tool-result message the model will see.
    pub message: Arc<Message>,
    /// Failure facts, when the call failed with a known code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolErrorInfo>,
    /// Tool-projected presentation data (never sent to the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// `session/rewind`: the conversation goes back to where it was just before turn `to_turn`
/// started. The log stays append-only: the rewound turns remain in it (a fork made earlier,
/// `dsh sessions show`, the turn's checkpoints), but the model's history
/// ([`crate::Session::derive_messages`]) is the surface as it stood at that turn's
/// `turn/start`, and new turns continue from there. Only valid between turns, and only for a
/// turn that is still part of the history (not rewound already).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rewind {
    /// The first turn taken out of the history.
    pub to_turn: u64,
}

/// Why a `request/header` snapshot was logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeaderReason {
    /// First request of a fresh conversation.
    Initial,
    /// First request of a new loop instance over an existing log.
    Resume,
    /// The non-history part of the request changed.
    Change,
}

/// The non-history envelope of a model request: call configuration, which of its fields the
/// adapter supplied, the system prompt and the tool schemas. Kept as JSON here so the session
/// does not depend on the LLM crate; `dsh-llm` owns the typed forms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestHeader {
    /// The `LlmCallConfig` (`provider`, `model`, `reasoningEffort?`, `maxTokens?`, ...).
    pub config: Value,
    /// `{reasoningEffort?: true, maxTokens?: true}`: fields materialized by the adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_defaults: Option<Value>,
    /// The rendered system prompt (omitted when empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Tool schemas in canonical order (omitted when empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
}

impl RequestHeader {
    /// The canonical form: adapter markers only when one is true, no empty system or tools.
    pub fn canonical(mut self) -> Self {
        let marked = self
            .adapter_defaults
            .as_ref()
            .and_then(Value::as_object)
            .is_some_and(|m| m.values().any(|v| v == &Value::Bool(true)));
        if !marked {
            self.adapter_defaults = None;
        }
        if self.system.as_deref().is_some_and(str::is_empty) {
            self.system = None;
        }
        if self.tools.as_ref().is_some_and(Vec::is_empty) {
            self.tools = None;
        }
        self
    }
}

/// `request/header`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestHeaderEvent {
    /// The canonical header snapshot.
    pub header: RequestHeader,
    /// Why it was logged.
    pub reason: HeaderReason,
}

/// `request/context`: the route and capacity requests are being made against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    /// Provider route.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// The model's context window, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

/// The type and payload of one durable event.
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind {
    /// `turn/start`
    TurnStart(TurnStart),
    /// `turn/end`
    TurnEnd(TurnEnd),
    /// `step/start`
    StepStart(StepBoundary),
    /// `step/end`
    StepEnd(StepBoundary),
    /// `user/message`: the message itself is the payload.
    UserMessage(Arc<Message>),
    /// `assistant/chunk`
    AssistantChunk(AssistantChunk),
    /// `assistant/message`
    AssistantMessage(AssistantMessage),
    /// `tool/call`
    ToolCall(ToolCall),
    /// `tool/result`
    ToolResult(ToolResult),
    /// `request/header`
    RequestHeader(RequestHeaderEvent),
    /// `request/context`
    RequestContext(RequestContext),
    /// `session/end-seed`: marks where a seeded (resumed or forked) prefix ends.
    SessionEndSeed,
    /// `agent/inbox/spliced`
    InboxSpliced(InboxSplice),
    /// `session/rewind`
    Rewind(Rewind),
    /// Any other (plugin-owned) type, carried verbatim.
    Other {
        /// The event type name.
        type_name: String,
        /// The payload.
        data: Value,
    },
}

/// Names of the core event types.
pub mod names {
    /// `turn/start`
    pub const TURN_START: &str = "turn/start";
    /// `turn/end`
    pub const TURN_END: &str = "turn/end";
    /// `step/start`
    pub const STEP_START: &str = "step/start";
    /// `step/end`
    pub const STEP_END: &str = "step/end";
    /// `user/message`
    pub const USER_MESSAGE: &str = "user/message";
    /// `assistant/chunk`
    pub const ASSISTANT_CHUNK: &str = "assistant/chunk";
    /// `assistant/message`
    pub const ASSISTANT_MESSAGE: &str = "assistant/message";
    /// `tool/call`
    pub const TOOL_CALL: &str = "tool/call";
    /// `tool/result`
    pub const TOOL_RESULT: &str = "tool/result";
    /// `request/header`
    pub const REQUEST_HEADER: &str = "request/header";
    /// `request/context`
    pub const REQUEST_CONTEXT: &str = "request/context";
    /// `session/end-seed`
    pub const SESSION_END_SEED: &str = "session/end-seed";
    /// `agent/inbox/spliced`
    pub const INBOX_SPLICED: &str = "agent/inbox/spliced";
    /// `session/rewind`
    pub const SESSION_REWIND: &str = "session/rewind";
}

/// Plugin-owned event types a reader accepts without the `ignorable` flag. A log carrying any
/// other unknown type without `ignorable: true` is refused, because silently dropping an event
/// the model's history may depend on would corrupt the conversation.
pub const KNOWN_PLUGIN_EVENT_TYPES: &[&str] = &[
    "llm/retry",
    "llm/retry-started",
    "todo/write",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "hook/invoked",
    "hook/result",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "network/blocked",
    "sandbox/mode",
    "plan/mode",
    "plan/proposed",
    "plan/decided",
    "session/title",
    "subagent/descriptor",
    "subagent/start",
    "subagent/end",
    "tool/code-dispatch-start",
    "tool/code-dispatch",
    "checkpoint/created",
    "checkpoint/restored",
    "session/rerooted",
];

/// The core type names, each read back as its typed [`EventKind`]: every reader understands
/// them, and a plugin-owned [`EventKind::Other`] may not use one.
pub const CORE_EVENT_TYPES: &[&str] = &[
    names::TURN_START,
    names::TURN_END,
    names::STEP_START,
    names::STEP_END,
    names::USER_MESSAGE,
    names::ASSISTANT_CHUNK,
    names::ASSISTANT_MESSAGE,
    names::TOOL_CALL,
    names::TOOL_RESULT,
    names::REQUEST_HEADER,
    names::REQUEST_CONTEXT,
    names::SESSION_END_SEED,
    names::INBOX_SPLICED,
    names::SESSION_REWIND,
];

/// Legacy vocabulary that must be rejected rather than misread.
pub const REJECTED_LEGACY_TYPES: &[&str] = &["request/header-delta"];

impl EventKind {
    /// The wire type name.
    pub fn type_name(&self) -> &str {
        use names::*;
        match self {
            Self::TurnStart(_) => TURN_START,
            Self::TurnEnd(_) => TURN_END,
            Self::StepStart(_) => STEP_START,
            Self::StepEnd(_) => STEP_END,
            Self::UserMessage(_) => USER_MESSAGE,
            Self::AssistantChunk(_) => ASSISTANT_CHUNK,
            Self::AssistantMessage(_) => ASSISTANT_MESSAGE,
            Self::ToolCall(_) => TOOL_CALL,
            Self::ToolResult(_) => TOOL_RESULT,
            Self::RequestHeader(_) => REQUEST_HEADER,
            Self::RequestContext(_) => REQUEST_CONTEXT,
            Self::SessionEndSeed => SESSION_END_SEED,
            Self::InboxSpliced(_) => INBOX_SPLICED,
            Self::Rewind(_) => SESSION_REWIND,
            Self::Other { type_name, .. } => type_name,
        }
    }

    /// Whether this type takes part in the model-visible surface (`user/message`,
    /// `assistant/message`, `tool/result`).
    pub fn is_surface(&self) -> bool {
        matches!(
            self,
            Self::UserMessage(_) | Self::AssistantMessage(_) | Self::ToolResult(_)
        )
    }

    /// The message this event shows the model when it is a surface node: a `user/message`,
    /// a non-empty `assistant/message` or a `tool/result` (an empty assistant message is a
    /// completion anchor the model never sees).
    pub fn surface_message(&self) -> Option<&Arc<Message>> {
        match self {
            Self::UserMessage(m) => Some(m),
            Self::AssistantMessage(a) if !a.message.is_empty() => Some(&a.message),
            Self::ToolResult(r) => Some(&r.message),
            _ => None,
        }
    }

    /// Whether the type is known to this version (core or a listed plugin type).
    pub fn is_known(&self) -> bool {
        match self {
            Self::Other { type_name, .. } => KNOWN_PLUGIN_EVENT_TYPES.contains(&type_name.as_str()),
            _ => true,
        }
    }

    /// A plugin-owned event.
    pub fn other(type_name: impl Into<String>, data: Value) -> Self {
        Self::Other {
            type_name: type_name.into(),
            data,
        }
    }

    fn serialize_data<S: SerializeMap>(&self, map: &mut S) -> Result<(), S::Error> {
        match self {
            Self::TurnStart(d) => map.serialize_entry("data", d),
            Self::TurnEnd(d) => map.serialize_entry("data", d),
            Self::StepStart(d) | Self::StepEnd(d) => map.serialize_entry("data", d),
            Self::UserMessage(d) => map.serialize_entry("data", d),
            Self::AssistantChunk(d) => map.serialize_entry("data", d),
            Self::AssistantMessage(d) => map.serialize_entry("data", d),
            Self::ToolCall(d) => map.serialize_entry("data", d),
            Self::ToolResult(d) => map.serialize_entry("data", d),
            Self::RequestHeader(d) => map.serialize_entry("data", d),
            Self::RequestContext(d) => map.serialize_entry("data", d),
            Self::SessionEndSeed => map.serialize_entry("data", &serde_json::Map::new()),
            Self::InboxSpliced(d) => map.serialize_entry("data", d),
            Self::Rewind(d) => map.serialize_entry("data", d),
            Self::Other { data, .. } => map.serialize_entry("data", data),
        }
    }

    /// Parses a payload given its type name.
    pub fn from_parts(type_name: &str, data: &str) -> Result<Self, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(data);
        let kind = Self::deserialize_payload(type_name, &mut de)?;
        de.end()?;
        Ok(kind)
    }

    /// Deserializes the payload of a `type_name` event straight from `d`: one pass, no
    /// intermediate value, for whichever type the name selects.
    pub fn deserialize_payload<'de, D: Deserializer<'de>>(
        type_name: &str,
        d: D,
    ) -> Result<Self, D::Error> {
        use names::*;
        Ok(match type_name {
            TURN_START => Self::TurnStart(Deserialize::deserialize(d)?),
            TURN_END => Self::TurnEnd(Deserialize::deserialize(d)?),
            STEP_START => Self::StepStart(Deserialize::deserialize(d)?),
            STEP_END => Self::StepEnd(Deserialize::deserialize(d)?),
            USER_MESSAGE => Self::UserMessage(Deserialize::deserialize(d)?),
            ASSISTANT_CHUNK => Self::AssistantChunk(Deserialize::deserialize(d)?),
            ASSISTANT_MESSAGE => Self::AssistantMessage(Deserialize::deserialize(d)?),
            TOOL_CALL => Self::ToolCall(Deserialize::deserialize(d)?),
            TOOL_RESULT => Self::ToolResult(Deserialize::deserialize(d)?),
            REQUEST_HEADER => Self::RequestHeader(Deserialize::deserialize(d)?),
            REQUEST_CONTEXT => Self::RequestContext(Deserialize::deserialize(d)?),
            SESSION_END_SEED => {
                let _: serde_json::Map<String, Value> = Deserialize::deserialize(d)?;
                Self::SessionEndSeed
            }
            INBOX_SPLICED => Self::InboxSpliced(Deserialize::deserialize(d)?),
            SESSION_REWIND => Self::Rewind(Deserialize::deserialize(d)?),
            other => Self::Other {
                type_name: other.to_owned(),
                data: Deserialize::deserialize(d)?,
            },
        })
    }
}

/// Deserializes an event payload once its type is known.
struct PayloadSeed<'a>(&'a str);

impl<'de> serde::de::DeserializeSeed<'de> for PayloadSeed<'_> {
    type Value = EventKind;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<EventKind, D::Error> {
        EventKind::deserialize_payload(self.0, d)
            .map_err(|e| D::Error::custom(format!("invalid `{}` payload: {e}", self.0)))
    }
}

/// How a surface event changes the model-visible surface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SurfaceOp {
    /// Adds a node at the end.
    Append,
    /// Replaces the inclusive surface span from node `start` to node `end` (both event seqs)
    /// with this node.
    Replace {
        /// Seq of the first shadowed node.
        start: u64,
        /// Seq of the last shadowed node.
        end: u64,
    },
}

impl Serialize for SurfaceOp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Append => s.serialize_str("append"),
            Self::Replace { start, end } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("op", "replace")?;
                m.serialize_entry("start", start)?;
                m.serialize_entry("end", end)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for SurfaceOp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Name(String),
            Replace { op: String, start: u64, end: u64 },
        }
        match Repr::deserialize(d)? {
            Repr::Name(n) if n == "append" => Ok(Self::Append),
            Repr::Replace { op, start, end } if op == "replace" => Ok(Self::Replace { start, end }),
            _ => Err(D::Error::custom("invalid surfaceOp")),
        }
    }
}

/// One durable event: the unit of the session log.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionEvent {
    /// Position in the log, contiguous from 0.
    pub seq: u64,
    /// Epoch milliseconds when it was appended.
    pub time: u64,
    /// Type and payload.
    pub kind: EventKind,
    /// A reader that does not know the type may skip it.
    pub ignorable: bool,
    /// Surface events: the events this one was derived from.
    pub source_event_seqs: Option<Vec<u64>>,
    /// Surface events: how this node changes the surface.
    pub surface_op: Option<SurfaceOp>,
}

impl Serialize for SessionEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.kind.type_name())?;
        m.serialize_entry("seq", &self.seq)?;
        m.serialize_entry("time", &self.time)?;
        self.kind.serialize_data(&mut m)?;
        if self.ignorable {
            m.serialize_entry("ignorable", &true)?;
        }
        if let Some(seqs) = &self.source_event_seqs {
            m.serialize_entry("sourceEventSeqs", seqs)?;
        }
        if let Some(op) = &self.surface_op {
            m.serialize_entry("surfaceOp", op)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for SessionEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EventVisitor)
    }
}

/// Reads an envelope in one pass when `type` precedes `data` (as every writer of ours emits
/// it); otherwise the payload is held raw until the type is known.
struct EventVisitor;

impl<'de> serde::de::Visitor<'de> for EventVisitor {
    type Value = SessionEvent;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a session event object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<SessionEvent, A::Error> {
        use serde::de::Error as _;
        let mut ty: Option<String> = None;
        let mut seq = None;
        let mut time = None;
        let mut kind = None;
        let mut raw: Option<Box<RawValue>> = None;
        let mut ignorable = false;
        let mut source_event_seqs = None;
        let mut surface_op = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "type" => ty = Some(map.next_value()?),
                "seq" => seq = Some(map.next_value()?),
                "time" => time = Some(map.next_value()?),
                "data" => match &ty {
                    Some(t) => kind = Some(map.next_value_seed(PayloadSeed(t))?),
                    None => raw = Some(map.next_value()?),
                },
                "ignorable" => ignorable = map.next_value()?,
                "sourceEventSeqs" => source_event_seqs = map.next_value()?,
                "surfaceOp" => surface_op = map.next_value()?,
                other => {
                    return Err(A::Error::unknown_field(
                        other,
                        &[
                            "type",
                            "seq",
                            "time",
                            "data",
                            "ignorable",
                            "sourceEventSeqs",
                            "surfaceOp",
                        ],
                    ));
                }
            }
        }
        let ty = ty.ok_or_else(|| A::Error::missing_field("type"))?;
        let kind = match (kind, raw) {
            (Some(kind), _) => kind,
            (None, Some(raw)) => EventKind::from_parts(&ty, raw.get())
                .map_err(|e| A::Error::custom(format!("invalid `{ty}` payload: {e}")))?,
            (None, None) => return Err(A::Error::missing_field("data")),
        };
        Ok(SessionEvent {
            seq: seq.ok_or_else(|| A::Error::missing_field("seq"))?,
            time: time.ok_or_else(|| A::Error::missing_field("time"))?,
            kind,
            ignorable,
            source_event_seqs,
            surface_op,
        })
    }
}

impl SessionEvent {
    /// The wire type name.
    pub fn type_name(&self) -> &str {
        self.kind.type_name()
    }

    /// The turn number this event names, for the turn-scoped types.
    pub fn turn(&self) -> Option<u64> {
        match &self.kind {
            EventKind::TurnStart(t) => Some(t.turn),
            EventKind::TurnEnd(t) => Some(t.turn),
            EventKind::StepStart(b) | EventKind::StepEnd(b) => Some(b.turn),
            EventKind::AssistantChunk(c) => Some(c.turn),
            EventKind::AssistantMessage(m) => Some(m.turn),
            EventKind::ToolCall(c) => Some(c.turn),
            EventKind::ToolResult(r) => Some(r.turn),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::MessageId;
    use crate::message::{ContentBlock, MessageSource, Role};
    use serde_json::json;

    fn round_trip(line: &str) {
        let ev: SessionEvent = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&ev).unwrap(), line);
    }

    #[test]
    fn core_events_round_trip_byte_for_byte() {
        round_trip(r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#);
        round_trip(
            r#"{"type":"turn/end","seq":3,"time":5,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}}"#,
        );
        round_trip(r#"{"type":"session/end-seed","seq":9,"time":1,"data":{}}"#);
        round_trip(
            r#"{"type":"tool/call","seq":4,"time":1,"data":{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{\"command\":\"ls\"}"}}"#,
        );
        round_trip(
            r#"{"type":"agent/inbox/spliced","seq":0,"time":1,"data":{"target":"next-step","start":0,"removedCount":2,"inserted":[],"outcome":"canceled"}}"#,
        );
        round_trip(
            r#"{"type":"llm/retry","seq":7,"time":1,"data":{"z":1,"a":[true,null]},"ignorable":true}"#,
        );
        round_trip(
            r#"{"type":"user/message","seq":2,"time":1,"data":{"id":"m","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        );
        round_trip(
            r#"{"type":"tool/result","seq":8,"time":1,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"x"}],"isError":true}],"source":{"kind":"tool","callId":"c1"}},"error":{"name":"AbortError","code":"ABORTED_BEFORE_DISPATCH"}},"sourceEventSeqs":[4],"surfaceOp":{"op":"replace","start":8,"end":8}}"#,
        );
    }

    #[test]
    fn envelopes_with_data_before_type_still_parse() {
        let ev: SessionEvent =
            serde_json::from_str(r#"{"data":{"turn":3},"seq":1,"time":2,"type":"turn/start"}"#)
                .unwrap();
        assert_eq!(ev.kind, EventKind::TurnStart(TurnStart { turn: 3 }));
        assert!(serde_json::from_str::<SessionEvent>(r#"{"seq":1,"time":2,"data":{}}"#).is_err());
        assert!(serde_json::from_str::<SessionEvent>(r#"{"type":"x","seq":1,"time":2}"#).is_err());
    }

    #[test]
    fn unknown_envelope_fields_and_bad_payloads_are_rejected_with_the_type_named() {
        let err = serde_json::from_str::<SessionEvent>(
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":"one"}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("turn/start"), "{err}");
        assert!(
            serde_json::from_str::<SessionEvent>(
                r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1},"bogus":1}"#
            )
            .is_err()
        );
    }

    #[test]
    fn canonical_header_drops_false_markers_and_empty_parts() {
        let h = RequestHeader {
            config: json!({"provider": "p", "model": "m"}),
            adapter_defaults: Some(json!({})),
            system: Some(String::new()),
            tools: Some(vec![]),
        }
        .canonical();
        assert_eq!(
            serde_json::to_value(&h).unwrap(),
            json!({"config": {"provider": "p", "model": "m"}})
        );
    }

    #[test]
    fn user_message_payload_is_the_message_itself() {
        let m = Arc::new(Message {
            id: MessageId::new("m"),
            role: Role::User,
            content: vec![ContentBlock::text("hi")],
            source: MessageSource::User,
        });
        let ev = SessionEvent {
            seq: 0,
            time: 0,
            kind: EventKind::UserMessage(m),
            ignorable: false,
            source_event_seqs: None,
            surface_op: Some(SurfaceOp::Append),
        };
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(v["data"]["content"][0]["text"], "hi");
    }
}
