//! `session/prompt` admission and `session/cancel`.
//!
//! Admission is synchronous (text and resource links need no I/O), so it runs inside the
//! dispatch loop and a `session/cancel` can never land halfway through it: by the time the
//! next message is read, the prompt is either refused or queued in the agent's inbox. Only the
//! wait for settlement runs outside the loop.

use std::sync::Arc;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{ContentBlock as AcpBlock, ImageContent, PromptRequest};
use base64::Engine as _;
use dsh_agent::{AgentRef, CancelCause, CancelOptions, PromptImages, same_agent};
use dsh_session::{ContentBlock, Message, MessageSource, SessionId};

use crate::bridge::Bridge;
use crate::errors::{internal, invalid, unknown_session};
use crate::record::SessionRecord;
use crate::settle::Inflight;

/// Flattens a text-only prompt into the one text block the agent receives: adjacent text
/// concatenated, resource links rendered as `\n[resource_link name=<json> uri=<json>]\n`. Every
/// block is checked before anything is queued. What slash commands and titles read.
pub(crate) fn render(prompt: &[AcpBlock]) -> Result<String, Error> {
    let (_, text) = walk(prompt, |_, _| {
        Err(invalid("image prompts are not supported by this agent"))
    })?;
    Ok(text)
}

/// The message blocks of a prompt to `session`: its text flattened as [`render`] does, each
/// image block (base64 data) stored through the composition root's [`PromptImages`] in its
/// place. Refused with the model's name when the session's model reads no images.
fn content(
    bridge: &Bridge,
    session: &SessionId,
    prompt: &[AcpBlock],
) -> Result<Vec<ContentBlock>, Error> {
    let images = bridge.ctx.get::<dyn PromptImages>();
    let (blocks, _) = walk(prompt, |image, n| {
        let images = images
            .as_ref()
            .ok_or_else(|| invalid("image prompts are not supported by this agent"))?;
        let label = format!("image {n} ({})", image.mime_type);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(image.data.trim())
            .map_err(|e| invalid(format!("{label}: the data is not base64: {e}")))?;
        images
            .attach(session, &label, &bytes)
            .map_err(|e| invalid(e.to_string()))
    })?;
    Ok(blocks)
}

/// Walks a prompt: text and resource links gather into text blocks, `image(block, n)` (n from
/// 1) stands for each image; everything else is refused. Returns the blocks and all the text.
fn walk(
    prompt: &[AcpBlock],
    mut image: impl FnMut(&ImageContent, usize) -> Result<ContentBlock, Error>,
) -> Result<(Vec<ContentBlock>, String), Error> {
    let mut blocks = Vec::new();
    let mut all = String::new();
    let mut text = String::new();
    let mut images = 0;
    for block in prompt {
        match block {
            AcpBlock::Text(t) => text.push_str(&t.text),
            AcpBlock::ResourceLink(link) => {
                let name = serde_json::to_string(&link.name).map_err(Error::into_internal_error)?;
                let uri = serde_json::to_string(&link.uri).map_err(Error::into_internal_error)?;
                text.push_str(&format!("\n[resource_link name={name} uri={uri}]\n"));
            }
            AcpBlock::Image(i) => {
                images += 1;
                let block = image(i, images)?;
                if !text.is_empty() {
                    all.push_str(&text);
                    blocks.push(ContentBlock::text(std::mem::take(&mut text)));
                }
                blocks.push(block);
            }
            AcpBlock::Audio(_) => {
                return Err(invalid("audio prompts are not supported by this agent"));
            }
            AcpBlock::Resource(_) => {
                return Err(invalid(
                    "embedded resources are not supported by this agent; send a resource_link",
                ));
            }
            _ => return Err(invalid("unsupported prompt content block")),
        }
    }
    if !text.is_empty() {
        all.push_str(&text);
        blocks.push(ContentBlock::text(text));
    }
    if images == 0 && all.trim().is_empty() {
        return Err(invalid("empty prompt"));
    }
    Ok((blocks, all))
}

/// An admitted prompt: the record it belongs to and its slot, queued already or waiting for a
/// cancelled predecessor to settle.
pub(crate) struct Admitted {
    pub(crate) record: Arc<SessionRecord>,
    pub(crate) inflight: Arc<Inflight>,
    waiting: Option<Waiting>,
}

/// A prompt that took the slot from a cancelled one and queues once that one has settled.
struct Waiting {
    after: Arc<Inflight>,
    message: Message,
    title: Option<String>,
}

/// Validates the content, reserves the session's prompt slot and queues the prompt with
/// `followup` (as `expanded` when a custom command or skill stood for it). The message id is
/// recorded before the enqueue, because an idle agent claims the prompt (and reports the
/// claim) before `followup` returns. When the slot was held by a cancelled prompt (interrupt
/// and send), nothing is queued yet: [`Admitted::queue_when_ready`] does it once that prompt
/// has settled, so the new prompt never lands in the cancelled turn.
pub(crate) fn admit(
    bridge: &Bridge,
    request: &PromptRequest,
    expanded: Option<String>,
) -> Result<Admitted, Error> {
    if bridge.is_closed() {
        return Err(internal("bridge has been disposed"));
    }
    let id = SessionId::new(&*request.session_id.0);
    let record = bridge.record(&id).ok_or_else(|| {
        if bridge.watching.contains(&id) {
            crate::watch::read_only(&id)
        } else {
            unknown_session(&id)
        }
    })?;
    let blocks = match expanded {
        Some(text) => vec![ContentBlock::text(text)],
        None => content(bridge, &id, &request.prompt)?,
    };
    let title = render(&request.prompt).ok();
    let message = Message::user(blocks, MessageSource::User);
    let inflight = Inflight::new(message.id.clone());
    match record.state.reserve_slot(&inflight)? {
        None => {
            queue(bridge, &record, &inflight, message, title)?;
            Ok(Admitted {
                record,
                inflight,
                waiting: None,
            })
        }
        Some(after) => Ok(Admitted {
            record,
            inflight,
            waiting: Some(Waiting {
                after,
                message,
                title,
            }),
        }),
    }
}

impl Admitted {
    /// Queues a prompt that waited for a cancelled predecessor, once that one has settled;
    /// `false` when this prompt was cancelled (or its session closed) while it waited, so it
    /// never runs. A prompt queued at admission returns `true` at once.
    pub(crate) async fn queue_when_ready(&mut self, bridge: &Bridge) -> Result<bool, Error> {
        let Some(waiting) = self.waiting.take() else {
            return Ok(true);
        };
        let state = &self.record.state;
        tokio::select! {
            () = waiting.after.settled() => {}
            () = state.closed.cancelled() => {}
        }
        if self.inflight.is_cancelled() || state.closed.is_cancelled() {
            state.release_slot(&self.inflight);
            return Ok(false);
        }
        queue(
            bridge,
            &self.record,
            &self.inflight,
            waiting.message,
            waiting.title,
        )?;
        // A `session/cancel` between the check above and the enqueue fired the token before
        // its agent cancel, which may then have found nothing to remove: cancel again.
        if self.inflight.is_cancelled() {
            cancel_record(&self.record);
        }
        Ok(true)
    }
}

/// Queues `message` on the record's agent for the prompt holding `inflight`; the slot is
/// released when it cannot be queued.
fn queue(
    bridge: &Bridge,
    record: &SessionRecord,
    inflight: &Arc<Inflight>,
    message: Message,
    title: Option<String>,
) -> Result<(), Error> {
    let state = &record.state;
    // Looked at before the enqueue: an idle agent logs the prompt before `followup` returns.
    let prompted_before = crate::list::title_of(record.agent().session()).is_some();
    let agent = record.agent();
    let registered = bridge.registry.get(&state.id);
    let queued = if !registered.is_some_and(|live| same_agent(&live, agent)) {
        Err(internal(
            "prompt was not queued: the agent was disposed outside the bridge",
        ))
    } else {
        agent
            .followup(message)
            .map_err(|e| internal(format!("prompt was not queued: {e}")))
    };
    if let Err(e) = queued {
        state.release_slot(inflight);
        return Err(e);
    }
    if let Some(text) = title {
        state.title_from(&text, prompted_before);
    }
    Ok(())
}

/// `session/cancel`: the outstanding prompt (if any) will answer `cancelled`, and the agent's
/// queue-aware cancel clears its pending inbox and aborts the running turn, so a prompt that
/// was still queued never runs. Idle cancellation is harmless. Unknown sessions are ignored.
pub(crate) fn cancel(bridge: &Bridge, session: &SessionId) {
    let Some(record) = bridge.record(session) else {
        tracing::debug!(%session, "session/cancel for an unknown session ignored");
        return;
    };
    cancel_record(&record);
}

/// Cancels the record's outstanding prompt and its agent's work (cause `user`).
pub(crate) fn cancel_record(record: &SessionRecord) {
    if let Some(inflight) = record.state.inflight() {
        inflight.request_cancel();
    }
    let agent: &AgentRef = record.agent();
    agent.cancel(CancelCause::User, CancelOptions::default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{ResourceLink, TextContent};

    #[test]
    fn resource_links_render_as_json_quoted_markers_between_text() {
        let text = render(&[
            AcpBlock::Text(TextContent::new("look at")),
            AcpBlock::ResourceLink(ResourceLink::new("a \"b\".rs", "file:///x/a.rs")),
            AcpBlock::Text(TextContent::new("please")),
        ])
        .unwrap();
        assert_eq!(
            text,
            "look at\n[resource_link name=\"a \\\"b\\\".rs\" uri=\"file:///x/a.rs\"]\nplease"
        );
    }

    #[test]
    fn whitespace_only_prompts_are_invalid() {
        let e = render(&[AcpBlock::Text(TextContent::new("  \n"))]).unwrap_err();
        assert_eq!(e.message, "empty prompt");
        assert_eq!(e.code, agent_client_protocol::ErrorCode::INVALID_PARAMS);
    }
}
