//! Serializing a request: options in, chat-completions body out.

use std::borrow::Cow;

use dsh_llm::{
    ContentBlock, FailureCode, GenerateOptions, ImageRef, LlmFailure, Message, MessageSource,
    ModelInfo, Purpose, Role, image_base64,
};
use serde::Serialize;

use crate::config::{OpenAiAdapterConfig, ProviderKind};

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop: Option<&'a [String]>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: Cow<'a, str>,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

/// A user message's content: a plain string when it is text only (so a text conversation's
/// bytes never change), parts when it carries images.
#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

/// The `data:` URL of an image block.
fn image_part<'a>(options: &GenerateOptions, image: &ImageRef) -> Result<Part<'a>, LlmFailure> {
    Ok(Part::ImageUrl {
        image_url: ImageUrl {
            url: format!(
                "data:{};base64,{}",
                image.media_type,
                image_base64(options, image)?
            ),
        },
    })
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCall<'a>,
}

#[derive(Serialize)]
struct WireCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// Builds the JSON body for `options`.
///
/// Everything that can be refused is refused here, before any I/O: images (not supported by
/// this adapter yet) and reasoning efforts the model does not offer.
pub(crate) fn build_body(
    config: &OpenAiAdapterConfig,
    model: &ModelInfo,
    options: &GenerateOptions,
) -> Result<Vec<u8>, LlmFailure> {
    let (thinking, reasoning_effort) = reasoning_params(config, model, options)?;
    let mut messages = Vec::with_capacity(options.messages.len() + 1);
    if let Some(system) = options.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(WireMessage::System {
            content: Cow::Borrowed(system),
        });
    }
    for message in &options.messages {
        serialize_message(config, options, message, &mut messages)?;
    }
    let body = Body {
        model: &options.config.model,
        messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        thinking,
        reasoning_effort,
        tools: options
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect(),
        temperature: options.config.temperature,
        max_tokens: options.config.max_tokens,
        stop: options.config.stop.as_deref(),
    };
    serde_json::to_vec(&body).map_err(|e| {
        LlmFailure::new(
            FailureCode::InvalidRequest,
            format!("the request could not be serialized: {e}"),
        )
    })
}

/// `thinking` and `reasoning_effort` for the request.
///
/// DeepSeek: a session title never thinks; effort `off` disables thinking; any other effort
/// enables it and is sent. OpenAI-compatible: no `thinking`; the effort is sent as is (`off`
/// means none). An effort the model does not advertise is `UNSUPPORTED_REASONING_EFFORT`.
fn reasoning_params<'a>(
    config: &OpenAiAdapterConfig,
    model: &'a ModelInfo,
    options: &'a GenerateOptions,
) -> Result<(Option<Thinking>, Option<&'a str>), LlmFailure> {
    let explicit = options.config.reasoning_effort.as_deref();
    let Some(reasoning) = &model.reasoning else {
        return match explicit {
            Some(effort) => Err(unsupported(model, effort, "it takes no reasoning effort")),
            None => Ok((None, None)),
        };
    };
    let effort = explicit.or(reasoning.default_effort.as_deref());
    if let Some(effort) = effort
        && !reasoning.offers(effort)
    {
        let offered = format!("it offers {}", reasoning.efforts.join(", "));
        return Err(unsupported(model, effort, &offered));
    }
    let disabled = Thinking { kind: "disabled" };
    let enabled = Thinking { kind: "enabled" };
    Ok(match (config.kind, options.purpose, effort) {
        (ProviderKind::Deepseek, Purpose::SessionTitle, _) => (Some(disabled), None),
        (ProviderKind::Deepseek, _, Some("off")) => (Some(disabled), None),
        (ProviderKind::Deepseek, _, Some(effort)) => (Some(enabled), Some(effort)),
        (ProviderKind::Deepseek, _, None) => (None, None),
        (ProviderKind::OpenAiCompatible, Purpose::SessionTitle, _) => (None, None),
        (ProviderKind::OpenAiCompatible, _, Some("off") | None) => (None, None),
        (ProviderKind::OpenAiCompatible, _, Some(effort)) => (None, Some(effort)),
    })
}

fn unsupported(model: &ModelInfo, effort: &str, offered: &str) -> LlmFailure {
    LlmFailure::new(
        FailureCode::UnsupportedReasoningEffort,
        format!(
            "model `{}` does not offer reasoning effort `{effort}`; {offered}",
            model.id
        ),
    )
}

/// Text blocks of `blocks` joined with `sep` (images are the caller's to place).
fn join_text<'a>(blocks: &'a [ContentBlock], sep: &str) -> Result<Cow<'a, str>, LlmFailure> {
    let mut texts = Vec::new();
    for block in blocks {
        if let ContentBlock::Text { text } = block {
            texts.push(text.as_str());
        }
    }
    Ok(match texts.as_slice() {
        [] => Cow::Borrowed(""),
        [one] => Cow::Borrowed(one),
        many => Cow::Owned(many.join(sep)),
    })
}

fn serialize_message<'a>(
    config: &OpenAiAdapterConfig,
    options: &GenerateOptions,
    message: &'a Message,
    out: &mut Vec<WireMessage<'a>>,
) -> Result<(), LlmFailure> {
    let target_route = options.config.provider.as_str();
    match message.role {
        Role::System => out.push(WireMessage::System {
            content: join_text(&message.content, "\n")?,
        }),
        Role::Assistant => {
            let content = join_text(&message.content, "")?;
            let reasoning: Vec<&str> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Reasoning { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            let reasoning = reasoning.concat();
            // DeepSeek requires reasoning back on tool-call turns, so it always gets it.
            // Other servers only get reasoning they produced themselves.
            let passback = match config.kind {
                ProviderKind::Deepseek => true,
                ProviderKind::OpenAiCompatible => matches!(
                    &message.source,
                    MessageSource::Model { provider, .. } if provider == target_route
                ),
            };
            let reasoning_content =
                (passback && !reasoning.is_empty()).then_some(Cow::Owned(reasoning));
            let tool_calls: Vec<WireToolCall<'a>> = message
                .tool_calls()
                .map(|(id, name, arguments)| WireToolCall {
                    id: id.as_str(),
                    kind: "function",
                    function: WireCall { name, arguments },
                })
                .collect();
            if content.is_empty() && reasoning_content.is_none() && tool_calls.is_empty() {
                // An empty assistant message is a completion anchor, not model input.
                return Ok(());
            }
            out.push(WireMessage::Assistant {
                content,
                reasoning_content,
                tool_calls,
            });
        }
        Role::User => {
            let has_results = message
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolResult { .. }));
            let has_images = message
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::Image { .. }));
            if has_images {
                let mut parts = Vec::new();
                for block in &message.content {
                    match block {
                        ContentBlock::Text { text } => parts.push(Part::Text {
                            text: Cow::Borrowed(text),
                        }),
                        ContentBlock::Image { attachment } => {
                            parts.push(image_part(options, attachment)?);
                        }
                        _ => {}
                    }
                }
                out.push(WireMessage::User {
                    content: UserContent::Parts(parts),
                });
            } else {
                let text = join_text(&message.content, "\n")?;
                if !text.is_empty() || !has_results {
                    out.push(WireMessage::User {
                        content: UserContent::Text(text),
                    });
                }
            }
            // A tool message holds text only, so the images a tool returned follow the
            // step's results in one user message, each after a line naming its call.
            let mut returned = Vec::new();
            for block in &message.content {
                if let ContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    ..
                } = block
                {
                    let images: Vec<&ImageRef> = content
                        .iter()
                        .filter_map(|c| match c {
                            ContentBlock::Image { attachment } => Some(attachment),
                            _ => None,
                        })
                        .collect();
                    let text = join_text(content, "\n")?;
                    let text = match (text.is_empty(), images.len()) {
                        (true, 0) => Cow::Borrowed("(no output)"),
                        (_, 0) => text,
                        (_, n) => Cow::Owned(format!(
                            "{text}{}[{n} image(s) follow in the next message]",
                            if text.is_empty() { "" } else { "\n" }
                        )),
                    };
                    out.push(WireMessage::Tool {
                        tool_call_id: tool_call_id.as_str(),
                        content: text,
                    });
                    if !images.is_empty() {
                        returned.push(Part::Text {
                            text: Cow::Owned(format!(
                                "Image(s) returned by tool call {tool_call_id}:"
                            )),
                        });
                        for image in images {
                            returned.push(image_part(options, image)?);
                        }
                    }
                }
            }
            if !returned.is_empty() {
                out.push(WireMessage::User {
                    content: UserContent::Parts(returned),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use dsh_llm::{CallId, LlmCallConfig, ToolSchema};
    use serde_json::{Value, json};

    use dsh_llm_http::ApiKeySource;

    fn deepseek() -> OpenAiAdapterConfig {
        OpenAiAdapterConfig::deepseek("http://x", ApiKeySource::NotRequired)
    }

    fn body(config: &OpenAiAdapterConfig, options: &GenerateOptions) -> Value {
        let model = config.model_info(&options.config.model);
        serde_json::from_slice(&build_body(config, &model, options).unwrap()).unwrap()
    }

    fn history() -> Vec<Arc<Message>> {
        let assistant = Message::assistant(
            vec![
                ContentBlock::Reasoning {
                    text: "think".into(),
                },
                ContentBlock::text("calling"),
                ContentBlock::ToolCall {
                    id: CallId::new("c1"),
                    name: "bash".into(),
                    arguments: r#"{"cmd":"ls"}"#.into(),
                },
            ],
            "deepseek",
            "deepseek-v4-flash",
        );
        vec![
            Arc::new(Message::user_text("hi")),
            Arc::new(assistant),
            Arc::new(Message::tool_result(CallId::new("c1"), vec![], false)),
        ]
    }

    #[test]
    fn deepseek_body_has_reference_keys_in_order_and_passes_reasoning_back() {
        let mut options = GenerateOptions::new(LlmCallConfig {
            max_tokens: Some(100),
            temperature: Some(0.5),
            stop: Some(vec!["END".into()]),
            ..LlmCallConfig::new("deepseek", "deepseek-v4-flash")
        });
        options.system = Some("be brief".into());
        options.messages = history();
        options.tools = vec![ToolSchema {
            name: "bash".into(),
            description: "run".into(),
            parameters: json!({"type": "object"}),
            needs_vision: false,
        }];
        let b = body(&deepseek(), &options);
        let keys: Vec<&str> = b.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "model",
                "messages",
                "stream",
                "stream_options",
                "thinking",
                "reasoning_effort",
                "tools",
                "temperature",
                "max_tokens",
                "stop"
            ]
        );
        assert_eq!(b["thinking"], json!({"type": "enabled"}));
        assert_eq!(b["reasoning_effort"], "high");
        assert_eq!(
            b["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "calling", "reasoning_content": "think",
                 "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "bash", "arguments": "{\"cmd\":\"ls\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "(no output)"},
            ])
        );
        assert_eq!(
            b["tools"],
            json!([{"type": "function", "function": {"name": "bash", "description": "run",
                                                      "parameters": {"type": "object"}}}])
        );
    }

    #[test]
    fn effort_off_disables_thinking_and_titles_never_think() {
        let config = deepseek();
        let mut options = GenerateOptions::new(LlmCallConfig {
            reasoning_effort: Some("off".into()),
            ..LlmCallConfig::new("deepseek", "deepseek-v4-pro")
        });
        let b = body(&config, &options);
        assert_eq!(b["thinking"], json!({"type": "disabled"}));
        assert!(b.get("reasoning_effort").is_none());
        options.config.reasoning_effort = Some("max".into());
        options.purpose = Purpose::SessionTitle;
        let b = body(&config, &options);
        assert_eq!(b["thinking"], json!({"type": "disabled"}));
        assert!(b.get("reasoning_effort").is_none());
        assert!(b.get("tools").is_none());
    }

    #[test]
    fn unadvertised_effort_and_images_fail_before_io() {
        let config = deepseek();
        let options = GenerateOptions::new(LlmCallConfig {
            reasoning_effort: Some("medium".into()),
            ..LlmCallConfig::new("deepseek", "deepseek-v4-pro")
        });
        let model = config.model_info("deepseek-v4-pro");
        let f = build_body(&config, &model, &options).err().unwrap();
        assert_eq!(f.code, FailureCode::UnsupportedReasoningEffort);
        let mut options = GenerateOptions::new(LlmCallConfig::new("deepseek", "deepseek-chat"));
        options.messages = vec![Arc::new(Message::user(
            vec![ContentBlock::Image {
                attachment: dsh_llm_image(),
            }],
            MessageSource::User,
        ))];
        let model = config.model_info("deepseek-chat");
        let f = build_body(&config, &model, &options).err().unwrap();
        assert_eq!(f.code, FailureCode::UnsupportedContent);
    }

    fn dsh_llm_image() -> dsh_llm::ImageRef {
        dsh_llm::ImageRef {
            attachment_id: "sha256:0".into(),
            media_type: "image/png".into(),
            bytes: 1,
            width: None,
            height: None,
        }
    }

    #[test]
    fn openai_compatible_sends_no_thinking_and_only_its_own_reasoning_back() {
        let config = OpenAiAdapterConfig::openai_compatible("http://x", ApiKeySource::NotRequired);
        let mut options = GenerateOptions::new(LlmCallConfig::new("openai-compatible", "llama"));
        options.messages = history();
        let b = body(&config, &options);
        assert!(b.get("thinking").is_none() && b.get("reasoning_effort").is_none());
        assert!(b["messages"][1].get("reasoning_content").is_none());
        let mut own = history();
        let mut m = Message::clone(&own[1]);
        m.source = MessageSource::Model {
            provider: "openai-compatible".into(),
            model: "llama".into(),
            replay_state: None,
        };
        own[1] = Arc::new(m);
        options.messages = own;
        let b = body(&config, &options);
        assert_eq!(b["messages"][1]["reasoning_content"], "think");
    }

    /// A user message with a picture, then a call whose result carries text and an image.
    fn with_images(store: &Arc<dsh_testkit::MemoryAttachments>) -> Vec<Arc<Message>> {
        use dsh_llm::Attachments as _;
        let image = store
            .put(dsh_testkit::TINY_PNG, "image/png", Some((2, 1)))
            .unwrap();
        let asked = Message::user(
            vec![
                ContentBlock::text("what is this?"),
                ContentBlock::Image {
                    attachment: image.clone(),
                },
            ],
            MessageSource::User,
        );
        let call = Message::assistant(
            vec![ContentBlock::ToolCall {
                id: CallId::new("c1"),
                name: "read_image".into(),
                arguments: r#"{"path":"a.png"}"#.into(),
            }],
            "openai-compatible",
            "vision-model",
        );
        let result = Message::user(
            vec![ContentBlock::ToolResult {
                tool_call_id: CallId::new("c1"),
                content: vec![
                    ContentBlock::text("a.png, 2×1"),
                    ContentBlock::Image { attachment: image },
                ],
                is_error: false,
            }],
            MessageSource::User,
        );
        vec![Arc::new(asked), Arc::new(call), Arc::new(result)]
    }

    #[test]
    fn images_go_as_data_urls_and_a_tools_images_follow_its_results() {
        let config = OpenAiAdapterConfig::openai_compatible("http://x", ApiKeySource::NotRequired);
        let store = Arc::new(dsh_testkit::MemoryAttachments::new());
        let mut options =
            GenerateOptions::new(LlmCallConfig::new("openai-compatible", "vision-model"));
        options.messages = with_images(&store);
        options.attachments = Some(store);
        let b = body(&config, &options);
        let messages = b["messages"].as_array().unwrap();
        let asked = &messages[0]["content"];
        assert_eq!(asked[0], json!({"type": "text", "text": "what is this?"}));
        assert_eq!(asked[1]["type"], "image_url");
        let url = asked[1]["image_url"]["url"].as_str().unwrap();
        assert!(
            url.starts_with("data:image/png;base64,iVBORw0KGgo"),
            "{url}"
        );
        // The tool message stays text (the format allows nothing else) and says images follow;
        // they come right after the step's results, in a user message naming the call.
        assert_eq!(messages[2]["role"], "tool");
        assert_eq!(
            messages[2]["content"],
            "a.png, 2×1\n[1 image(s) follow in the next message]"
        );
        assert_eq!(messages[3]["role"], "user");
        assert_eq!(
            messages[3]["content"][0]["text"],
            "Image(s) returned by tool call c1:"
        );
        assert_eq!(messages[3]["content"][1]["image_url"]["url"], url);
        assert_eq!(messages.len(), 4);
    }

    #[test]
    fn a_missing_image_fails_the_request_instead_of_dropping_the_image() {
        let config = OpenAiAdapterConfig::openai_compatible("http://x", ApiKeySource::NotRequired);
        let store = Arc::new(dsh_testkit::MemoryAttachments::new());
        let mut options =
            GenerateOptions::new(LlmCallConfig::new("openai-compatible", "vision-model"));
        options.messages = with_images(&store);
        // Another store: the image is not there.
        options.attachments = Some(Arc::new(dsh_testkit::MemoryAttachments::new()));
        let model = config.model_info("vision-model");
        let f = build_body(&config, &model, &options).err().unwrap();
        assert_eq!(f.code, FailureCode::UnsupportedContent);
        assert!(
            f.message.contains("missing from the attachment store"),
            "{}",
            f.message
        );
    }
}
