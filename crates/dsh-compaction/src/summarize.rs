//! The summary call: the conversation's own prefix, byte for byte, plus one instruction.
//!
//! The request carries the latest logged system prompt, tool schemas and call configuration
//! and the very messages the loop sent for the summarized range, so the provider's prefix cache
//! serves all of it; only the instruction message and the answer are new tokens. Only the
//! answer's text is kept (reasoning and tool calls are dropped).

use std::sync::Arc;

use dsh_llm::{
    BlockAssembler, ContentBlock, FailureCode, FinishReason, GenerateOptions, Llm, LlmCallConfig,
    Message, Purpose, Role, SessionId, StreamChunk, TokenUsage, ToolSchema,
};
use dsh_session::RequestHeader;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::error::CompactionError;

/// The instruction appended after the replayed prefix.
pub fn instruction(focus: Option<&str>) -> String {
    let mut text = String::from(
        "Stop here and write a checkpoint of this conversation so far, so that the work can \
         continue from it alone. Do not call tools. Answer in Markdown with exactly these \
         sections:\n\
         ## Request and intent\n## Key concepts\n## Files and code\n## Errors and fixes\n\
         ## Pending work\n## Current work\n## Next step\n## Critical context\n\
         Be specific: keep paths, identifiers, commands, numbers and decisions verbatim. If the \
         conversation starts from an earlier compacted summary, merge it in; drop what no longer \
         matters.",
    );
    if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        text.push_str("\n\nFocus the summary on: ");
        text.push_str(focus);
    }
    text
}

/// What the summary call returned.
pub struct Summary {
    /// The answer's text.
    pub text: String,
    /// Its usage, when reported.
    pub usage: Option<TokenUsage>,
    /// Route used.
    pub provider: String,
    /// Model used.
    pub model: String,
}

/// Builds the summary request for `prefix` under `header` (the latest logged envelope).
pub fn request(
    header: &RequestHeader,
    fallback: &LlmCallConfig,
    prefix: Vec<Arc<Message>>,
    focus: Option<&str>,
    max_tokens: u32,
    session_id: SessionId,
    cancel: CancellationToken,
) -> GenerateOptions {
    let mut config: LlmCallConfig =
        serde_json::from_value(header.config.clone()).unwrap_or_else(|_| fallback.clone());
    config.max_tokens = Some(max_tokens);
    let mut options = GenerateOptions::new(config);
    options.system = header.system.clone();
    options.tools = header
        .tools
        .iter()
        .flatten()
        .filter_map(|t| serde_json::from_value::<ToolSchema>(t.clone()).ok())
        .collect();
    let mut messages = prefix;
    messages.push(Arc::new(Message::plugin_text(
        crate::events::PLUGIN,
        instruction(focus),
    )));
    options.messages = alternate_roles(messages);
    options.session_id = Some(session_id);
    options.purpose = Purpose::Compaction;
    options.cancel = cancel;
    options
}

/// The request projection the loop applies to a derived history (strict chat templates want
/// roles to alternate): each run of consecutive plain user messages merges into one (tool
/// results stay apart) and empty assistant anchors are left out. Applied here too so the
/// summary request's messages are the very ones the loop sent for the same prefix.
pub fn alternate_roles(history: Vec<Arc<Message>>) -> Vec<Arc<Message>> {
    let plain_user = |m: &Message| {
        m.role == Role::User
            && !m
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
    };
    let mut out: Vec<Arc<Message>> = Vec::with_capacity(history.len());
    for message in history {
        if message.role == Role::Assistant && message.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(prev) if plain_user(prev) && plain_user(&message) => {
                Arc::make_mut(prev)
                    .content
                    .extend(message.content.iter().cloned());
            }
            _ => out.push(message),
        }
    }
    out
}

/// Runs the summary call; cancellation wins over any answer.
pub async fn call(llm: &Llm, options: GenerateOptions) -> Result<Summary, CompactionError> {
    let cancel = options.cancel.clone();
    let provider = options.config.provider.clone();
    let model = options.config.model.clone();
    let prepared = match llm.prepare_call(options.config.clone(), &cancel).await {
        Ok(p) => Some(p),
        Err(e) if e.failure.code == FailureCode::NoAdapter => None,
        Err(e) => return Err(CompactionError::Llm(e.failure)),
    };
    let mut options = options;
    if let Some(p) = &prepared {
        options.config = p.config.clone();
    }
    let mut stream = match prepared {
        Some(p) => p.stream(options),
        None => llm.stream(options),
    };
    let mut assembler = BlockAssembler::new();
    loop {
        let chunk = cancel.run_until_cancelled(stream.next()).await;
        match chunk {
            None => return Err(CompactionError::Cancelled),
            Some(None) => break,
            Some(Some(chunk)) => {
                let last = matches!(chunk, StreamChunk::Finish { .. });
                assembler.push(&chunk);
                if last {
                    break;
                }
            }
        }
    }
    drop(stream);
    if cancel.is_cancelled() {
        return Err(CompactionError::Cancelled);
    }
    match assembler.finish() {
        FinishReason::Error { failure } => return Err(CompactionError::Llm(failure)),
        FinishReason::Aborted { .. } => return Err(CompactionError::Cancelled),
        _ => {}
    }
    let usage = assembler.usage().cloned();
    let text = assembler.message(&provider, &model).text();
    if text.trim().is_empty() {
        return Err(CompactionError::Rejected(
            "the model returned no summary text".into(),
        ));
    }
    Ok(Summary {
        text,
        usage,
        provider,
        model,
    })
}
