//! The in-memory session: an append-only log with synchronous, ordered publication.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ThreadId;

use dsh_kernel::BoxError;
use parking_lot::{Mutex, RwLock};
use serde::Serialize;

use crate::error::SessionError;
use crate::event::{
    CORE_EVENT_TYPES, EventKind, REJECTED_LEGACY_TYPES, RequestContext, RequestHeader,
    SessionEvent, SurfaceOp,
};
use crate::header::{SessionHeader, now_ms};
use crate::ids::SessionId;
use crate::lossless;
use crate::message::{ContentBlock, Message, MessageSource, Role};
use crate::surface::Surface;

/// An event about to be appended; the session assigns `seq` and `time`.
#[derive(Clone, Debug, PartialEq)]
pub struct EventDraft {
    /// Type and payload.
    pub kind: EventKind,
    /// Readers that do not know the type may skip it.
    pub ignorable: bool,
    /// Surface events: the events this one derives from.
    pub source_event_seqs: Option<Vec<u64>>,
    /// Surface events: how the surface changes (defaults to append for surface types).
    pub surface_op: Option<SurfaceOp>,
}

impl EventDraft {
    /// A draft with the default envelope: surface types append, everything else carries no
    /// surface fields.
    pub fn new(kind: EventKind) -> Self {
        let surface_op = kind.is_surface().then_some(SurfaceOp::Append);
        Self {
            kind,
            ignorable: false,
            source_event_seqs: None,
            surface_op,
        }
    }

    /// Cites the events this surface event derives from.
    pub fn with_sources(mut self, seqs: Vec<u64>) -> Self {
        self.source_event_seqs = Some(seqs);
        self
    }

    /// Makes this surface event replace the span from node `start` to node `end`.
    pub fn replacing(mut self, start: u64, end: u64) -> Self {
        self.surface_op = Some(SurfaceOp::Replace { start, end });
        self
    }

    /// Marks the event as skippable by readers that do not know its type.
    pub fn ignorable(mut self) -> Self {
        self.ignorable = true;
        self
    }
}

impl From<EventKind> for EventDraft {
    fn from(kind: EventKind) -> Self {
        Self::new(kind)
    }
}

/// Observes every committed event of an attached session, synchronously and in order.
pub(crate) type PublishHook = Arc<dyn Fn(&Arc<SessionEvent>) + Send + Sync>;

/// Validates an event before it is committed; an error vetoes the append.
pub type Validator = Arc<dyn Fn(&Session, &SessionEvent) -> Result<(), BoxError> + Send + Sync>;

#[derive(Default)]
struct State {
    events: Vec<Arc<SessionEvent>>,
    surface: Surface,
    last_turn: u64,
    open_turn: Option<u64>,
    /// The directory of the latest `session/rerooted`, if any.
    rerooted: Option<std::path::PathBuf>,
}

/// An append-only session log.
///
/// Appends are validated (lossless JSON, envelope and surface rules) before the log changes, so
/// a refused append leaves the log exactly as it was. When the session is attached to a
/// [`crate::SessionStore`], each committed event is published to `session/event` listeners
/// synchronously, in append order, before `append` returns; an append made from inside such a
/// listener is refused ([`SessionError::Reentrant`]) instead of reordering the feed. Appends
/// from other threads wait for the publication in progress.
pub struct Session {
    header: SessionHeader,
    first_live_seq: u64,
    state: Mutex<State>,
    /// Held across commit and publication so the feed order equals the log order.
    pub_lock: Mutex<()>,
    publishing: Mutex<Option<ThreadId>>,
    hook: RwLock<Option<(u64, PublishHook)>>,
    deferred: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    validators: RwLock<Vec<(u64, Validator)>>,
    next_validator: AtomicU64,
}

impl Session {
    /// Builds a session from a header and an optional seed (a resumed log or a fork prefix).
    ///
    /// Every seed event is validated with the append rules and must have `seq` equal to its
    /// index. When a seed is supplied (even an empty one) and does not already end with
    /// `session/end-seed`, that marker is appended as the first live event, so the boundary
    /// between inherited and new history is durable.
    pub fn new(
        header: SessionHeader,
        seed: Option<Vec<SessionEvent>>,
    ) -> Result<Arc<Session>, SessionError> {
        let seeded = seed.is_some();
        let seed = seed.unwrap_or_default();
        let session = Session {
            header,
            first_live_seq: seed.len() as u64,
            state: Mutex::new(State::default()),
            pub_lock: Mutex::new(()),
            publishing: Mutex::new(None),
            hook: RwLock::new(None),
            deferred: Mutex::new(Vec::new()),
            validators: RwLock::new(Vec::new()),
            next_validator: AtomicU64::new(0),
        };
        {
            let mut state = session.state.lock();
            for (i, event) in seed.into_iter().enumerate() {
                if event.seq != i as u64 {
                    return Err(SessionError::InvalidEvent {
                        seq: i as u64,
                        type_name: event.type_name().to_owned(),
                        reason: format!("seed event has seq {}, expected {i}", event.seq),
                    });
                }
                validate(&state, &event).map_err(|reason| SessionError::InvalidEvent {
                    seq: event.seq,
                    type_name: event.type_name().to_owned(),
                    reason,
                })?;
                commit(&mut state, Arc::new(event));
            }
        }
        let needs_marker = seeded
            && !matches!(
                session.state.lock().events.last().map(|e| &e.kind),
                Some(EventKind::SessionEndSeed)
            );
        if needs_marker {
            session.append(EventKind::SessionEndSeed)?;
        }
        Ok(Arc::new(session))
    }

    /// The session id (equal to the id of the agent driving it).
    pub fn id(&self) -> &SessionId {
        &self.header.id
    }

    /// The immutable header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Where the session works now: the directory of its latest `session/rerooted`, else the
    /// one it started in (the header's). Commands, file tools and instruction files use this.
    pub fn cwd(&self) -> Option<std::path::PathBuf> {
        self.state
            .lock()
            .rerooted
            .clone()
            .or_else(|| self.header.cwd.clone())
    }

    /// Length of the seed this session was built from: events before it were inherited.
    pub fn first_live_seq(&self) -> u64 {
        self.first_live_seq
    }

    /// The next seq, i.e. the number of events in the log.
    pub fn len(&self) -> u64 {
        self.state.lock().events.len() as u64
    }

    /// Whether the log has no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the whole log.
    pub fn events(&self) -> Vec<Arc<SessionEvent>> {
        self.state.lock().events.clone()
    }

    /// A snapshot of the log from `seq` on.
    pub fn events_from(&self, seq: u64) -> Vec<Arc<SessionEvent>> {
        let state = self.state.lock();
        state
            .events
            .get(seq as usize..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    /// The event at `seq`.
    pub fn event(&self, seq: u64) -> Option<Arc<SessionEvent>> {
        self.state.lock().events.get(seq as usize).cloned()
    }

    /// Runs `f` over the log without copying it. `f` must not append to this session.
    pub fn with_events<R>(&self, f: impl FnOnce(&[Arc<SessionEvent>]) -> R) -> R {
        f(&self.state.lock().events)
    }

    /// The model history: the current surface projected to messages, empty assistant messages
    /// skipped. Maintained incrementally on append.
    pub fn derive_messages(&self) -> Vec<Arc<Message>> {
        self.state.lock().surface.derived.clone()
    }

    /// Seqs of the current surface nodes, in order.
    pub fn surface_nodes(&self) -> Vec<u64> {
        self.state.lock().surface.nodes.clone()
    }

    /// Incremented by every surface replacement.
    pub fn replace_generation(&self) -> u64 {
        self.state.lock().surface.generation
    }

    /// The latest `request/header` snapshot.
    pub fn request_header(&self) -> Option<Arc<RequestHeader>> {
        self.state.lock().surface.header.clone()
    }

    /// The latest `request/context`.
    pub fn request_context(&self) -> Option<RequestContext> {
        self.state.lock().surface.context.clone()
    }

    /// The highest turn number opened in the log (0 if none): new turns continue from it.
    pub fn last_turn(&self) -> u64 {
        self.state.lock().last_turn
    }

    /// The turns of the current history, oldest first: every turn opened, less those a
    /// `session/rewind` took out. These are the turns a rewind may go back to.
    pub fn history_turns(&self) -> Vec<u64> {
        self.state
            .lock()
            .surface
            .timeline
            .iter()
            .map(|m| m.turn)
            .collect()
    }

    /// The turn that is open at the end of the log, if any.
    pub fn open_turn(&self) -> Option<u64> {
        self.state.lock().open_turn
    }

    /// Appends an event with the default envelope.
    pub fn append(&self, kind: EventKind) -> Result<Arc<SessionEvent>, SessionError> {
        self.append_draft(EventDraft::new(kind))
    }

    /// Appends a plugin-owned event whose payload is any serializable value. Data that is not
    /// lossless JSON is refused before the log changes.
    pub fn append_plugin<T: Serialize + ?Sized>(
        &self,
        type_name: &str,
        data: &T,
    ) -> Result<Arc<SessionEvent>, SessionError> {
        let data = lossless::to_value(data).map_err(|reason| SessionError::NonJson {
            type_name: type_name.to_owned(),
            reason,
        })?;
        self.append(EventKind::other(type_name, data))
    }

    /// Appends an event. On success the event is committed and, if the session is attached,
    /// already delivered to every `session/event` listener.
    pub fn append_draft(&self, draft: EventDraft) -> Result<Arc<SessionEvent>, SessionError> {
        let me = std::thread::current().id();
        if *self.publishing.lock() == Some(me) {
            return Err(SessionError::Reentrant {
                id: self.id().clone(),
            });
        }
        // From here until the guard drops, appends from other threads wait (so the feed order is
        // the log order) and a nested append on this thread (from a validator or a listener) is
        // refused instead of deadlocking or reordering the feed.
        let _publishing = PublishingGuard::enter(self, me);
        let event = {
            let state = self.state.lock();
            let event = SessionEvent {
                seq: state.events.len() as u64,
                time: now_ms(),
                kind: draft.kind,
                ignorable: draft.ignorable,
                source_event_seqs: draft.source_event_seqs,
                surface_op: draft.surface_op,
            };
            if let Err(reason) = validate(&state, &event) {
                let type_name = event.type_name().to_owned();
                return Err(match reason.strip_prefix("non-JSON:") {
                    Some(reason) => SessionError::NonJson {
                        type_name,
                        reason: reason.trim().to_owned(),
                    },
                    None => SessionError::InvalidEvent {
                        seq: event.seq,
                        type_name,
                        reason,
                    },
                });
            }
            event
        };
        let validators: Vec<Validator> = self
            .validators
            .read()
            .iter()
            .map(|(_, v)| v.clone())
            .collect();
        for v in validators {
            v(self, &event).map_err(|source| SessionError::Vetoed {
                type_name: event.type_name().to_owned(),
                source,
            })?;
        }
        let event = Arc::new(event);
        commit(&mut self.state.lock(), event.clone());
        let hook = self.hook.read().as_ref().map(|(_, h)| h.clone());
        if let Some(hook) = hook {
            // The hook contains listener failures itself; a committed append never fails
            // because of an observer.
            hook(&event);
        }
        Ok(event)
    }

    /// Adds a pre-commit validator (used by invariant checkers and tests that need a veto).
    pub fn add_validator(&self, validator: Validator) -> u64 {
        let id = self.next_validator.fetch_add(1, Ordering::Relaxed);
        self.validators.write().push((id, validator));
        id
    }

    /// Removes a validator added with [`Session::add_validator`].
    pub fn remove_validator(&self, id: u64) {
        self.validators.write().retain(|(v, _)| *v != id);
    }

    /// Whether the calling thread is inside this session's publication.
    pub fn is_publishing_here(&self) -> bool {
        *self.publishing.lock() == Some(std::thread::current().id())
    }

    /// Runs `f` now, or — when called from inside this session's publication on this thread —
    /// right after the publication unwinds.
    pub(crate) fn after_publication(&self, f: Box<dyn FnOnce() + Send>) {
        if self.is_publishing_here() {
            self.deferred.lock().push(f);
        } else {
            f();
        }
    }

    pub(crate) fn attach(&self, token: u64, hook: PublishHook) -> Result<(), SessionError> {
        let mut slot = self.hook.write();
        if slot.is_some() {
            return Err(SessionError::AlreadyAttached {
                id: self.id().clone(),
            });
        }
        *slot = Some((token, hook));
        Ok(())
    }

    pub(crate) fn detach_hook(&self, token: u64) {
        let mut slot = self.hook.write();
        if slot.as_ref().is_some_and(|(t, _)| *t == token) {
            *slot = None;
        }
    }

    /// Whether the session is attached to a store.
    pub fn is_attached(&self) -> bool {
        self.hook.read().is_some()
    }
}

/// Marks this thread as publishing for the duration of one append, then runs whatever was
/// deferred until the publication unwound (e.g. a store detach requested by a listener).
struct PublishingGuard<'a> {
    session: &'a Session,
    order: Option<parking_lot::MutexGuard<'a, ()>>,
}

impl<'a> PublishingGuard<'a> {
    fn enter(session: &'a Session, me: ThreadId) -> Self {
        let order = session.pub_lock.lock();
        *session.publishing.lock() = Some(me);
        Self {
            session,
            order: Some(order),
        }
    }
}

impl Drop for PublishingGuard<'_> {
    fn drop(&mut self) {
        *self.session.publishing.lock() = None;
        // Release the order lock first: deferred work may append again.
        self.order.take();
        let deferred = std::mem::take(&mut *self.session.deferred.lock());
        for f in deferred {
            f();
        }
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", self.id())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

fn commit(state: &mut State, event: Arc<SessionEvent>) {
    match &event.kind {
        EventKind::TurnStart(t) => {
            state.last_turn = state.last_turn.max(t.turn);
            state.open_turn = Some(t.turn);
        }
        EventKind::TurnEnd(_) => state.open_turn = None,
        EventKind::Other { .. } => {
            if let Some(moved) = crate::session_rerooted::SessionRerooted::of(&event) {
                state.rerooted = Some(moved.cwd);
            }
        }
        _ => {}
    }
    state.events.push(event);
    // Borrow split: the surface reads the log it lives beside.
    let State {
        events, surface, ..
    } = state;
    if let Some(last) = events.last() {
        surface.apply(last, events);
    }
}

/// The append rules. Errors are human-readable reasons; a `non-JSON:` prefix marks lossless
/// failures.
fn validate(state: &State, event: &SessionEvent) -> Result<(), String> {
    let ty = event.type_name();
    if REJECTED_LEGACY_TYPES.contains(&ty) {
        return Err(format!(
            "`{ty}` is legacy vocabulary that this version refuses"
        ));
    }
    // Written under a core name, a plugin event would be read back as that core type: it
    // would fail to parse (making the whole log unreadable) or change meaning.
    if matches!(event.kind, EventKind::Other { .. }) && CORE_EVENT_TYPES.contains(&ty) {
        return Err(format!(
            "`{ty}` is a core event type; a plugin event cannot use its name"
        ));
    }
    check_values(&event.kind).map_err(|e| format!("non-JSON: {e}"))?;

    let surface = event.kind.is_surface();
    match (surface, &event.surface_op) {
        (true, None) => return Err("surface events must carry surfaceOp".into()),
        (false, Some(_)) => return Err("only surface events may carry surfaceOp".into()),
        (false, None) if event.source_event_seqs.is_some() => {
            return Err("only surface events may carry sourceEventSeqs".into());
        }
        _ => {}
    }
    if let Some(seqs) = &event.source_event_seqs {
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != seqs.len() {
            return Err("sourceEventSeqs must be unique".into());
        }
        if let Some(bad) = seqs.iter().find(|s| **s >= event.seq) {
            return Err(format!(
                "sourceEventSeqs cites {bad}, which is not an earlier event"
            ));
        }
        if seqs.is_empty() && !matches!(event.kind, EventKind::AssistantMessage(_)) {
            return Err("sourceEventSeqs may be empty only on assistant/message".into());
        }
    }
    if let Some(SurfaceOp::Replace { start, end }) = event.surface_op {
        validate_replace(state, event, start, end)?;
    }
    if let EventKind::Rewind(r) = &event.kind {
        if let Some(open) = state.open_turn {
            return Err(format!("a rewind cannot happen inside turn {open}"));
        }
        if state.surface.mark_of(r.to_turn).is_none() {
            return Err(format!(
                "turn {} is not part of the session's history (never started, or rewound \
                 already)",
                r.to_turn
            ));
        }
    }
    validate_shape(&event.kind)
}

fn validate_replace(
    state: &State,
    event: &SessionEvent,
    start: u64,
    end: u64,
) -> Result<(), String> {
    let surface = &state.surface;
    let (Some(i), Some(j)) = (surface.index_of(start), surface.index_of(end)) else {
        return Err(format!(
            "replace span {start}..{end} does not name current surface nodes"
        ));
    };
    if i > j {
        return Err(format!(
            "replace span starts at {start}, after its end {end}"
        ));
    }
    let shadowed = &surface.nodes[i..=j];
    let sources = event.source_event_seqs.as_deref().unwrap_or(&[]);
    if let Some(missing) = shadowed.iter().find(|s| !sources.contains(s)) {
        return Err(format!(
            "replacement must cite shadowed node {missing} in sourceEventSeqs"
        ));
    }
    if let EventKind::ToolResult(new) = &event.kind {
        let old = (shadowed.len() == 1)
            .then(|| state.events.get(shadowed[0] as usize))
            .flatten();
        let Some(EventKind::ToolResult(old)) = old.map(|e| &e.kind) else {
            return Err("a tool/result replacement must shadow exactly one tool/result".into());
        };
        if tool_result_call(&old.message) != tool_result_call(&new.message) {
            return Err("a tool/result replacement may change only the result content".into());
        }
    }
    Ok(())
}

fn tool_result_call(m: &Message) -> Option<&crate::ids::CallId> {
    m.content.iter().find_map(|b| match b {
        ContentBlock::ToolResult { tool_call_id, .. } => Some(tool_call_id),
        _ => None,
    })
}

fn check_values(kind: &EventKind) -> Result<(), String> {
    let check_message = |m: &Message| -> Result<(), String> {
        match &m.source {
            MessageSource::Plugin { extra, .. } => {
                // Extras are flattened beside the source's own fields; a duplicate key would
                // make the written event unreadable.
                if let Some(key) = ["kind", "plugin"]
                    .into_iter()
                    .find(|k| extra.contains_key(*k))
                {
                    return Err(format!(
                        "$.source.{key} is both a plugin source field and an extra field"
                    ));
                }
                for v in extra.values() {
                    lossless::check(v)?;
                }
            }
            MessageSource::Model {
                replay_state: Some(v),
                ..
            } => lossless::check(v)?,
            _ => {}
        }
        Ok(())
    };
    match kind {
        EventKind::Other { data, .. } => lossless::check(data),
        EventKind::UserMessage(m) => check_message(m),
        EventKind::AssistantMessage(a) => check_message(&a.message),
        EventKind::ToolResult(r) => {
            check_message(&r.message)?;
            r.meta.as_ref().map_or(Ok(()), lossless::check)
        }
        EventKind::RequestHeader(h) => {
            lossless::check(&h.header.config)?;
            if let Some(t) = &h.header.tools {
                t.iter().try_for_each(lossless::check)?;
            }
            Ok(())
        }
        EventKind::InboxSpliced(s) => s.inserted.iter().try_for_each(|m| check_message(m)),
        _ => Ok(()),
    }
}

fn validate_shape(kind: &EventKind) -> Result<(), String> {
    match kind {
        EventKind::UserMessage(m) => {
            if m.role != Role::User {
                return Err("user/message must carry a user-role message".into());
            }
            if matches!(m.source, MessageSource::Model { .. }) {
                return Err("user/message cannot have a model source".into());
            }
        }
        EventKind::AssistantMessage(a)
            if a.message.role != Role::Assistant
                || !matches!(a.message.source, MessageSource::Model { .. }) =>
        {
            return Err(
                "assistant/message must carry an assistant message with a model source".into(),
            );
        }
        EventKind::ToolResult(r) => {
            let m = &r.message;
            let ok = m.role == Role::User
                && m.content.len() == 1
                && match (&m.source, tool_result_call(m)) {
                    (MessageSource::Tool { call_id }, Some(id)) => call_id == id,
                    _ => false,
                };
            if !ok {
                return Err(
                    "tool/result must carry one tool-result block whose toolCallId equals its source callId"
                        .into(),
                );
            }
        }
        EventKind::RequestHeader(h) => {
            let non_empty = |k: &str| {
                h.header
                    .config
                    .get(k)
                    .and_then(|v| v.as_str())
                    .is_some_and(|s| !s.is_empty())
            };
            if !non_empty("provider") || !non_empty("model") {
                return Err(
                    "request/header config must carry a non-empty provider and model".into(),
                );
            }
        }
        EventKind::InboxSpliced(s) => {
            for m in &s.inserted {
                if m.role != Role::User {
                    return Err("inbox messages must be user-role messages".into());
                }
            }
        }
        _ => {}
    }
    Ok(())
}
