//! Serializing a request: options in, Messages API body out.

use dsh_llm::{
    ContentBlock, FailureCode, GenerateOptions, ImageRef, LlmFailure, Message, MessageSource,
    ModelInfo, Purpose, Role, image_base64,
};
use serde_json::{Map, Value, json};

use crate::config::{AnthropicConfig, FALLBACK_MAX_TOKENS};
use crate::translate::REPLAY_KEY;

/// The version of Anthropic's web search server tool dsh offers.
const WEB_SEARCH_TOOL: &str = "web_search_20250305";

/// Builds the JSON body for `options`. Refused before any I/O: images (not sent yet) and
/// efforts the model does not offer.
pub(crate) fn build_body(
    config: &AnthropicConfig,
    model: &ModelInfo,
    options: &GenerateOptions,
) -> Result<Vec<u8>, LlmFailure> {
    let max_tokens = options
        .config
        .max_tokens
        .or(model.default_max_tokens)
        .unwrap_or(FALLBACK_MAX_TOKENS);
    let budget = thinking_budget(model, options, max_tokens)?;
    let mut body = Map::new();
    body.insert("model".into(), json!(options.config.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    let cache = config.prompt_caching;
    if let Some(system) = options.system.as_deref().filter(|s| !s.is_empty()) {
        let mut block = json!({"type": "text", "text": system});
        if cache {
            // Tools come before the system prompt in the cached prefix, so this one
            // breakpoint covers both.
            block["cache_control"] = ephemeral();
        }
        body.insert("system".into(), json!([block]));
    }
    let mut tools: Vec<Value> = options
        .tools
        .iter()
        .map(
            |t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}),
        )
        .collect();
    if let Some(search) = &options.config.web_search {
        // Last, after the function tools, so turning it on leaves their cached prefix alone.
        let mut tool = json!({"type": WEB_SEARCH_TOOL, "name": "web_search"});
        if let Some(max) = search.max_uses {
            tool["max_uses"] = json!(max);
        }
        tools.push(tool);
    }
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    let mut messages = wire_messages(&options.config.provider, options, &options.messages)?;
    if cache && let Some(last) = messages.last_mut() {
        mark_last_block(last);
    }
    body.insert("messages".into(), Value::Array(messages));
    match budget {
        Some(tokens) => {
            // The API requires the default temperature while thinking.
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": tokens}),
            );
        }
        None => {
            if let Some(t) = options.config.temperature {
                body.insert("temperature".into(), json!(t));
            }
        }
    }
    if let Some(stop) = &options.config.stop {
        body.insert("stop_sequences".into(), json!(stop));
    }
    serde_json::to_vec(&Value::Object(body)).map_err(|e| {
        LlmFailure::new(
            FailureCode::InvalidRequest,
            format!("the request could not be serialized: {e}"),
        )
    })
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The thinking budget for the call's effort: `off`/none → no thinking; `low`, `medium`,
/// `high` → 2k, 8k, 16k tokens, always leaving room for an answer under `max_tokens` (a
/// budget the cap cannot hold turns thinking off rather than failing the request).
fn thinking_budget(
    model: &ModelInfo,
    options: &GenerateOptions,
    max_tokens: u32,
) -> Result<Option<u32>, LlmFailure> {
    let Some(effort) = options.config.reasoning_effort.as_deref() else {
        return Ok(None);
    };
    if let Some(reasoning) = &model.reasoning
        && !reasoning.offers(effort)
    {
        return Err(LlmFailure::new(
            FailureCode::UnsupportedReasoningEffort,
            format!(
                "model `{}` does not offer reasoning effort `{effort}`; it offers {}",
                model.id,
                reasoning.efforts.join(", ")
            ),
        ));
    }
    if options.purpose == Purpose::SessionTitle {
        return Ok(None);
    }
    let wanted = match effort {
        "low" => 2_048,
        "medium" => 8_192,
        "high" => 16_384,
        _ => return Ok(None),
    };
    // The API's minimum budget is 1,024 and the budget must stay below max_tokens.
    let budget = wanted.min(max_tokens.saturating_sub(1_024));
    Ok((budget >= 1_024).then_some(budget))
}

/// The conversation as Messages API turns: tool results ride in user turns, consecutive
/// turns of one role are merged (the API wants them alternating), empty texts are left out.
fn wire_messages(
    route: &str,
    options: &GenerateOptions,
    history: &[std::sync::Arc<Message>],
) -> Result<Vec<Value>, LlmFailure> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in history {
        let (role, blocks) = match message.role {
            Role::Assistant => ("assistant", assistant_blocks(route, message)?),
            Role::User | Role::System => ("user", user_blocks(options, message)?),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    Ok(out
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect())
}

/// An image block with its bytes inline (the Messages API's base64 source).
fn image_block(options: &GenerateOptions, image: &ImageRef) -> Result<Value, LlmFailure> {
    Ok(json!({
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": image.media_type,
            "data": image_base64(options, image)?,
        },
    }))
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn user_blocks(options: &GenerateOptions, message: &Message) -> Result<Vec<Value>, LlmFailure> {
    let mut blocks = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => blocks.extend(text_block(text)),
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => {
                let mut inner = Vec::new();
                for b in content {
                    match b {
                        ContentBlock::Text { text } => inner.extend(text_block(text)),
                        ContentBlock::Image { attachment } => {
                            inner.push(image_block(options, attachment)?);
                        }
                        _ => {}
                    }
                }
                let mut result =
                    json!({"type": "tool_result", "tool_use_id": tool_call_id.as_str()});
                if !inner.is_empty() {
                    result["content"] = Value::Array(inner);
                }
                if *is_error {
                    result["is_error"] = json!(true);
                }
                blocks.push(result);
            }
            ContentBlock::Image { attachment } => blocks.push(image_block(options, attachment)?),
            ContentBlock::Reasoning { .. } | ContentBlock::ToolCall { .. } => {}
        }
    }
    Ok(blocks)
}

/// An assistant turn: the blocks this route streamed that the API wants back verbatim
/// (signed thinking, its own web searches and their results) first, then text and tool calls. Reasoning from another provider has no valid signature here and is
/// left out; tool call ids are kept as they are, so results still pair with their calls.
fn assistant_blocks(route: &str, message: &Message) -> Result<Vec<Value>, LlmFailure> {
    let mut blocks = Vec::new();
    if let MessageSource::Model {
        provider,
        replay_state: Some(state),
        ..
    } = &message.source
        && provider == route
        && let Some(Value::Array(thinking)) = state.get(REPLAY_KEY)
    {
        blocks.extend(thinking.iter().cloned());
    }
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => blocks.extend(text_block(text)),
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => {
                // The API wants an object; arguments the model got wrong were already
                // answered with an error result, so an empty object stands in for them.
                let input = match serde_json::from_str::<Value>(arguments) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({}),
                };
                blocks.push(
                    json!({"type": "tool_use", "id": id.as_str(), "name": name, "input": input}),
                );
            }
            // A model does not write images into the conversation; nothing to send back.
            ContentBlock::Image { .. } => {}
            ContentBlock::Reasoning { .. } | ContentBlock::ToolResult { .. } => {}
        }
    }
    Ok(blocks)
}

/// Puts a cache breakpoint on the last block of `message`, so the whole conversation so far
/// is cached for the next step.
fn mark_last_block(message: &mut Value) {
    if let Some(Value::Array(content)) = message.get_mut("content")
        && let Some(last) = content.last_mut()
        && last.get("type").and_then(Value::as_str) != Some("thinking")
        && last.get("type").and_then(Value::as_str) != Some("redacted_thinking")
    {
        last["cache_control"] = ephemeral();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dsh_llm::{CallId, LlmCallConfig, ToolSchema};
    use dsh_llm_http::ApiKeySource;

    use super::*;

    fn options(messages: Vec<Message>) -> GenerateOptions {
        let mut o = GenerateOptions::new(LlmCallConfig {
            provider: "anthropic".into(),
            model: "claude-sonnet-4-5".into(),
            ..LlmCallConfig::default()
        });
        o.messages = messages.into_iter().map(Arc::new).collect();
        o.system = Some("be brief".into());
        o.tools = vec![ToolSchema {
            name: "bash".into(),
            description: "run".into(),
            parameters: json!({"type":"object"}),
            needs_vision: false,
        }];
        o
    }

    fn body(o: &GenerateOptions) -> Value {
        let config = AnthropicConfig::new("http://x", ApiKeySource::NotRequired);
        let model = config.model_info(&o.config.model);
        serde_json::from_slice(&build_body(&config, &model, o).unwrap()).unwrap()
    }

    fn assistant(content: Vec<ContentBlock>, provider: &str, state: Option<Value>) -> Message {
        let mut m = Message::assistant(content, provider, "m");
        if let MessageSource::Model { replay_state, .. } = &mut m.source {
            *replay_state = state;
        }
        m
    }

    #[test]
    fn tool_results_ride_in_user_turns_and_roles_alternate() {
        let b = body(&options(vec![
            Message::user_text("hi"),
            assistant(
                vec![ContentBlock::ToolCall {
                    id: CallId::new("toolu_1"),
                    name: "bash".into(),
                    arguments: r#"{"command":"ls"}"#.into(),
                }],
                "anthropic",
                None,
            ),
            Message::tool_result(
                CallId::new("toolu_1"),
                vec![ContentBlock::text("a.txt")],
                false,
            ),
            Message::user_text("steer"),
        ]));
        let messages = b["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["content"][0]["type"], "tool_use");
        assert_eq!(messages[1]["content"][0]["input"]["command"], "ls");
        assert_eq!(messages[2]["role"], "user");
        assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_1");
        assert_eq!(messages[2]["content"][1]["text"], "steer");
        assert_eq!(b["max_tokens"], 64_000);
        assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
    }

    #[test]
    fn cache_breakpoints_sit_on_the_system_prompt_and_the_newest_block() {
        let b = body(&options(vec![
            Message::user_text("a"),
            Message::user_text("b"),
        ]));
        assert_eq!(b["system"][0]["cache_control"]["type"], "ephemeral");
        let content = b["messages"][0]["content"].as_array().unwrap();
        assert!(content[0].get("cache_control").is_none());
        assert_eq!(content[1]["cache_control"]["type"], "ephemeral");
    }

    #[test]
    fn own_thinking_is_passed_back_and_another_providers_reasoning_is_dropped() {
        let thinking = json!({REPLAY_KEY: [{"type":"thinking","thinking":"t","signature":"s"}]});
        let b = body(&options(vec![
            Message::user_text("q"),
            assistant(
                vec![
                    ContentBlock::Reasoning { text: "t".into() },
                    ContentBlock::text("a1"),
                ],
                "anthropic",
                Some(thinking),
            ),
            Message::user_text("q2"),
            assistant(
                vec![
                    ContentBlock::Reasoning {
                        text: "deepseek thoughts".into(),
                    },
                    ContentBlock::text("a2"),
                ],
                "deepseek",
                Some(json!({"whatever": 1})),
            ),
            Message::user_text("q3"),
        ]));
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m[1]["content"][0]["signature"], "s");
        assert_eq!(m[1]["content"][1]["text"], "a1");
        assert_eq!(m[3]["content"].as_array().unwrap().len(), 1);
        assert_eq!(m[3]["content"][0]["text"], "a2");
    }

    #[test]
    fn the_provider_web_search_is_offered_after_the_function_tools_and_its_blocks_go_back() {
        let mut o = options(vec![Message::user_text("q")]);
        o.config.web_search = Some(dsh_llm::ProviderWebSearch { max_uses: Some(3) });
        let b = body(&o);
        assert_eq!(
            b["tools"],
            json!([
                {"name":"bash","description":"run","input_schema":{"type":"object"}},
                {"type":"web_search_20250305","name":"web_search","max_uses":3},
            ])
        );
        // Without it, the tools are exactly as before (the cached prefix does not change).
        let plain = body(&options(vec![Message::user_text("q")]));
        assert_eq!(plain["tools"].as_array().unwrap().len(), 1);

        let searched = json!({REPLAY_KEY: [
            {"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}},
            {"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},
        ]});
        let b = body(&options(vec![
            Message::user_text("q"),
            assistant(
                vec![
                    ContentBlock::Reasoning {
                        text: "web_search (run by the provider): x".into(),
                    },
                    ContentBlock::text("found"),
                ],
                "anthropic",
                Some(searched),
            ),
            Message::user_text("q2"),
        ]));
        let content = &b["messages"][1]["content"];
        assert_eq!(content[0]["type"], "server_tool_use");
        assert_eq!(content[1]["type"], "web_search_tool_result");
        assert_eq!(content[2]["text"], "found");
        assert_eq!(content.as_array().unwrap().len(), 3, "{content}");
    }

    #[test]
    fn effort_becomes_a_thinking_budget_without_temperature() {
        let mut o = options(vec![Message::user_text("q")]);
        o.config.reasoning_effort = Some("medium".into());
        o.config.temperature = Some(0.2);
        let b = body(&o);
        assert_eq!(b["thinking"]["budget_tokens"], 8_192);
        assert!(b.get("temperature").is_none());
        o.config.reasoning_effort = Some("extreme".into());
        let config = AnthropicConfig::new("http://x", ApiKeySource::NotRequired);
        let err = build_body(&config, &config.model_info("claude-sonnet-4-5"), &o).unwrap_err();
        assert_eq!(err.code, FailureCode::UnsupportedReasoningEffort);
    }

    #[test]
    fn images_go_as_base64_blocks_also_inside_tool_results() {
        use dsh_llm::Attachments as _;
        let store = Arc::new(dsh_testkit::MemoryAttachments::new());
        let image = store
            .put(dsh_testkit::TINY_PNG, "image/png", Some((2, 1)))
            .unwrap();
        let mut o = options(vec![
            Message::user(
                vec![
                    ContentBlock::text("what is this?"),
                    ContentBlock::Image {
                        attachment: image.clone(),
                    },
                ],
                MessageSource::User,
            ),
            assistant(
                vec![ContentBlock::ToolCall {
                    id: CallId::new("toolu_1"),
                    name: "read_image".into(),
                    arguments: "{}".into(),
                }],
                "anthropic",
                None,
            ),
            Message::user(
                vec![ContentBlock::ToolResult {
                    tool_call_id: CallId::new("toolu_1"),
                    content: vec![
                        ContentBlock::text("a.png"),
                        ContentBlock::Image { attachment: image },
                    ],
                    is_error: false,
                }],
                MessageSource::User,
            ),
        ]);
        o.attachments = Some(store);
        let b = body(&o);
        let asked = &b["messages"][0]["content"];
        assert_eq!(asked[1]["type"], "image");
        assert_eq!(asked[1]["source"]["type"], "base64");
        assert_eq!(asked[1]["source"]["media_type"], "image/png");
        let data = asked[1]["source"]["data"].as_str().unwrap();
        assert!(data.starts_with("iVBORw0KGgo"), "{data}");
        // Anthropic takes images inside a tool_result: no extra message.
        let result = &b["messages"][2]["content"][0];
        assert_eq!(result["type"], "tool_result");
        assert_eq!(
            result["content"][0],
            json!({"type": "text", "text": "a.png"})
        );
        assert_eq!(result["content"][1]["source"]["data"], data);
        assert_eq!(b["messages"].as_array().unwrap().len(), 3);
    }
}
