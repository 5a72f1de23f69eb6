//! OpenAI's Responses API: request body and event translation.
//!
//! The Responses API serves OpenAI's reasoning models best: reasoning items (with their
//! encrypted content, since dsh asks for `store: false`) are passed back across the steps of a
//! tool loop, so the model does not reason from scratch after every tool result.

use std::collections::{HashMap, VecDeque};

use dsh_llm::{
    BlockType, CallId, ContentBlock, FailureCode, FinishReason, GenerateOptions, ImageRef,
    LlmFailure, Message, MessageSource, ModelInfo, Purpose, Role, StreamChunk, TokenUsage,
    image_base64,
};
use dsh_llm_http::{WireTranslator, classify_failure};
use serde_json::{Map, Value, json};

/// The key under which reasoning items travel in an assistant message's replay state.
pub(crate) const REPLAY_KEY: &str = "responsesReasoning";

/// Builds the JSON body of a streamed `POST /responses`.
pub(crate) fn build_body(
    model: &ModelInfo,
    options: &GenerateOptions,
) -> Result<Vec<u8>, LlmFailure> {
    let mut body = Map::new();
    body.insert("model".into(), json!(options.config.model));
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if let Some(system) = options.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("instructions".into(), json!(system));
    }
    let mut input = Vec::new();
    for message in &options.messages {
        items(options, message, &mut input)?;
    }
    body.insert("input".into(), Value::Array(input));
    if !options.tools.is_empty() {
        let tools: Vec<Value> = options
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                    "parameters": t.parameters})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(effort) = options.config.reasoning_effort.as_deref()
        && options.purpose != Purpose::SessionTitle
    {
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
        if effort != "off" {
            body.insert(
                "reasoning".into(),
                json!({"effort": effort, "summary": "auto"}),
            );
        }
    }
    if let Some(max) = options.config.max_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(t) = options.config.temperature {
        body.insert("temperature".into(), json!(t));
    }
    serde_json::to_vec(&Value::Object(body)).map_err(|e| {
        LlmFailure::new(
            FailureCode::InvalidRequest,
            format!("the request could not be serialized: {e}"),
        )
    })
}

/// An `input_image` part carrying the image as a `data:` URL.
fn input_image(options: &GenerateOptions, image: &ImageRef) -> Result<Value, LlmFailure> {
    Ok(json!({
        "type": "input_image",
        "image_url": format!("data:{};base64,{}", image.media_type, image_base64(options, image)?),
    }))
}

/// One message as input items: this route's own reasoning items (from the replay state)
/// first, then an assistant's text and its `function_call`s, or a user's `function_call_output`s
/// and then its text, the order in which they happened.
fn items(
    options: &GenerateOptions,
    message: &Message,
    out: &mut Vec<Value>,
) -> Result<(), LlmFailure> {
    let route = options.config.provider.as_str();
    let (role, part) = match message.role {
        Role::Assistant => ("assistant", "output_text"),
        Role::User => ("user", "input_text"),
        Role::System => ("system", "input_text"),
    };
    if let MessageSource::Model {
        provider,
        replay_state: Some(state),
        ..
    } = &message.source
        && provider == route
        && let Some(Value::Array(reasoning)) = state.get(REPLAY_KEY)
    {
        out.extend(reasoning.iter().cloned());
    }
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    // A function_call_output holds text only: images a tool returned follow the outputs in a
    // user message, each after a line naming its call.
    let mut returned = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text } if !text.is_empty() => {
                texts.push(json!({"type": part, "text": text}));
            }
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => calls.push(json!({"type": "function_call", "call_id": id.as_str(),
                "name": name, "arguments": arguments})),
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                ..
            } => {
                let mut text = String::new();
                let mut images = Vec::new();
                for b in content {
                    match b {
                        ContentBlock::Text { text: t } => text.push_str(t),
                        ContentBlock::Image { attachment } => {
                            images.push(input_image(options, attachment)?);
                        }
                        _ => {}
                    }
                }
                if !images.is_empty() {
                    text.push_str(&format!(
                        "{}[{} image(s) follow in the next message]",
                        if text.is_empty() { "" } else { "\n" },
                        images.len()
                    ));
                    returned.push(json!({"type": "input_text",
                        "text": format!("Image(s) returned by tool call {tool_call_id}:")}));
                    returned.extend(images);
                }
                calls.push(json!({"type": "function_call_output",
                    "call_id": tool_call_id.as_str(), "output": text}));
            }
            ContentBlock::Image { attachment } if message.role != Role::Assistant => {
                texts.push(input_image(options, attachment)?);
            }
            _ => {}
        }
    }
    let text =
        (!texts.is_empty()).then(|| json!({"type": "message", "role": role, "content": texts}));
    if message.role == Role::Assistant {
        out.extend(text);
        out.extend(calls);
    } else {
        out.extend(calls);
        if !returned.is_empty() {
            out.push(json!({"type": "message", "role": "user", "content": returned}));
        }
        out.extend(text);
    }
    Ok(())
}

/// Turns Responses API events into [`StreamChunk`]s. Output items become blocks in order
/// (`message` → text, `function_call` → tool call, `reasoning` → reasoning from its summary);
/// reasoning items are kept whole for the finish's replay state.
#[derive(Debug, Default)]
pub struct ResponsesTranslator {
    /// Output index → dsh block and what it has accumulated.
    open: HashMap<u64, (u32, Acc)>,
    next: u32,
    reasoning: Vec<Value>,
    calls: bool,
    done: bool,
}

#[derive(Debug)]
enum Acc {
    Text(String),
    Reasoning(String),
    Call {
        id: String,
        name: String,
        args: String,
    },
}

impl ResponsesTranslator {
    /// A translator for a fresh response.
    pub fn new() -> Self {
        Self::default()
    }

    fn open(&mut self, at: u64, acc: Acc, kind: BlockType, out: &mut VecDeque<StreamChunk>) -> u32 {
        let index = self.next;
        self.next += 1;
        out.push_back(StreamChunk::BlockStart {
            index,
            block_type: kind,
        });
        self.open.insert(at, (index, acc));
        index
    }

    fn close(&mut self, at: u64, out: &mut VecDeque<StreamChunk>) {
        let Some((index, acc)) = self.open.remove(&at) else {
            return;
        };
        let block = match acc {
            Acc::Text(text) => ContentBlock::Text { text },
            Acc::Reasoning(text) => ContentBlock::Reasoning { text },
            Acc::Call { id, name, args } => ContentBlock::ToolCall {
                id: CallId::new(id),
                name,
                arguments: if args.is_empty() { "{}".into() } else { args },
            },
        };
        out.push_back(StreamChunk::BlockEnd { index, block });
    }

    fn finish(&mut self, response: &Value, out: &mut VecDeque<StreamChunk>) {
        let mut open: Vec<u64> = self.open.keys().copied().collect();
        open.sort_unstable();
        for at in open {
            self.close(at, out);
        }
        let usage = &response["usage"];
        let cached = usage["input_tokens_details"]["cached_tokens"].as_u64();
        out.push_back(StreamChunk::Usage {
            usage: TokenUsage {
                input_tokens: usage["input_tokens"]
                    .as_u64()
                    .unwrap_or(0)
                    .saturating_sub(cached.unwrap_or(0)),
                output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
                cache_read_tokens: cached,
                cache_write_tokens: None,
                reasoning_tokens: usage["output_tokens_details"]["reasoning_tokens"].as_u64(),
            },
        });
        let incomplete = response["incomplete_details"]["reason"].as_str();
        let reason = if incomplete == Some("max_output_tokens") {
            FinishReason::MaxTokens
        } else if self.calls {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        let replay_state =
            (!self.reasoning.is_empty()).then(|| json!({ REPLAY_KEY: self.reasoning.clone() }));
        out.push_back(StreamChunk::Finish {
            reason,
            replay_state,
        });
        self.done = true;
    }
}

fn failure(error: &Value) -> LlmFailure {
    let code = error["code"].as_str().unwrap_or("");
    let message = error["message"].as_str().unwrap_or("the response failed");
    let mut f = LlmFailure::new(
        classify_failure(None, &format!("{code} {message}")),
        format!("openai: {message}"),
    );
    if code == "rate_limit_exceeded" {
        f.code = FailureCode::RateLimit;
    }
    f
}

impl WireTranslator for ResponsesTranslator {
    fn on_event(
        &mut self,
        data: &str,
        out: &mut VecDeque<StreamChunk>,
    ) -> Result<bool, LlmFailure> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let event: Value = serde_json::from_str(data).map_err(|e| {
            LlmFailure::new(
                FailureCode::MalformedResponse,
                format!("the provider sent an event that is not JSON: {e}"),
            )
        })?;
        let at = event["output_index"].as_u64().unwrap_or(0);
        match event["type"].as_str().unwrap_or("") {
            "response.output_item.added" => {
                let item = &event["item"];
                match item["type"].as_str() {
                    Some("message") => {
                        self.open(at, Acc::Text(String::new()), BlockType::Text, out);
                    }
                    Some("reasoning") => {
                        self.open(at, Acc::Reasoning(String::new()), BlockType::Reasoning, out);
                    }
                    Some("function_call") => {
                        let id = item["call_id"].as_str().unwrap_or_default().to_owned();
                        let name = item["name"].as_str().unwrap_or_default().to_owned();
                        self.calls = true;
                        let index = self.open(
                            at,
                            Acc::Call {
                                id: id.clone(),
                                name: name.clone(),
                                args: String::new(),
                            },
                            BlockType::ToolCall,
                            out,
                        );
                        out.push_back(StreamChunk::ToolCallDelta {
                            index,
                            id: CallId::new(id),
                            name: Some(name),
                            arguments_delta: String::new(),
                        });
                    }
                    _ => {}
                }
            }
            "response.output_text.delta" => {
                if let (Some((index, Acc::Text(acc))), Some(delta)) =
                    (self.open.get_mut(&at), event["delta"].as_str())
                {
                    acc.push_str(delta);
                    out.push_back(StreamChunk::TextDelta {
                        index: *index,
                        text: delta.to_owned(),
                    });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let (Some((index, Acc::Reasoning(acc))), Some(delta)) =
                    (self.open.get_mut(&at), event["delta"].as_str())
                {
                    acc.push_str(delta);
                    out.push_back(StreamChunk::ReasoningDelta {
                        index: *index,
                        text: delta.to_owned(),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                if let (Some((index, Acc::Call { id, args, .. })), Some(delta)) =
                    (self.open.get_mut(&at), event["delta"].as_str())
                {
                    args.push_str(delta);
                    out.push_back(StreamChunk::ToolCallDelta {
                        index: *index,
                        id: CallId::new(id.clone()),
                        name: None,
                        arguments_delta: delta.to_owned(),
                    });
                }
            }
            "response.output_item.done" => {
                let item = &event["item"];
                if item["type"].as_str() == Some("reasoning") {
                    // Passed back as is: id, summary and encrypted content.
                    self.reasoning.push(item.clone());
                }
                self.close(at, out);
            }
            "response.completed" | "response.incomplete" => {
                self.finish(&event["response"], out);
                return Ok(true);
            }
            "response.failed" => return Err(failure(&event["response"]["error"])),
            "error" => return Err(failure(&event)),
            _ => {}
        }
        Ok(false)
    }

    fn ended_early(&self) -> LlmFailure {
        LlmFailure::new(
            FailureCode::StreamClosed,
            "the provider closed the stream before response.completed",
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dsh_llm::LlmCallConfig;

    use super::*;

    fn translate(events: &[Value]) -> Vec<StreamChunk> {
        let mut t = ResponsesTranslator::new();
        let mut out = VecDeque::new();
        for e in events {
            t.on_event(&e.to_string(), &mut out).unwrap();
        }
        out.into()
    }

    #[test]
    fn reasoning_items_are_kept_and_calls_finish_tool_calls() {
        let out = translate(&[
            json!({"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1"}}),
            json!({"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"plan"}),
            json!({"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_1","encrypted_content":"ENC","summary":[]}}),
            json!({"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_1","name":"bash"}}),
            json!({"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"command\":\"ls\"}"}),
            json!({"type":"response.output_item.done","output_index":1,"item":{"type":"function_call"}}),
            json!({"type":"response.completed","response":{"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":80},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":12}}}}),
        ]);
        assert!(out.contains(&StreamChunk::BlockEnd {
            index: 1,
            block: ContentBlock::ToolCall {
                id: CallId::new("call_1"),
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into()
            }
        }));
        assert!(out.contains(&StreamChunk::Usage {
            usage: TokenUsage {
                input_tokens: 20,
                output_tokens: 20,
                cache_read_tokens: Some(80),
                cache_write_tokens: None,
                reasoning_tokens: Some(12),
            }
        }));
        match out.last() {
            Some(StreamChunk::Finish {
                reason,
                replay_state: Some(state),
            }) => {
                assert_eq!(reason, &FinishReason::ToolCalls);
                assert_eq!(state[REPLAY_KEY][0]["encrypted_content"], "ENC");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn context_length_failure_is_the_context_window_error() {
        let mut t = ResponsesTranslator::new();
        let err = t
            .on_event(
                &json!({"type":"response.failed","response":{"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window"}}}).to_string(),
                &mut VecDeque::new(),
            )
            .unwrap_err();
        assert_eq!(err.code, FailureCode::ContextWindowExceeded);
    }

    #[test]
    fn history_becomes_items_with_own_reasoning_passed_back_and_store_false() {
        let mut assistant = Message::assistant(
            vec![
                ContentBlock::Reasoning {
                    text: "plan".into(),
                },
                ContentBlock::ToolCall {
                    id: CallId::new("call_1"),
                    name: "bash".into(),
                    arguments: "{}".into(),
                },
            ],
            "openai",
            "o4-mini",
        );
        if let MessageSource::Model { replay_state, .. } = &mut assistant.source {
            *replay_state = Some(
                json!({REPLAY_KEY: [{"type":"reasoning","id":"rs_1","encrypted_content":"ENC"}]}),
            );
        }
        let mut o = GenerateOptions::new(LlmCallConfig::new("openai", "o4-mini"));
        o.messages = vec![
            Arc::new(Message::user_text("go")),
            Arc::new(assistant),
            Arc::new(Message::tool_result(
                CallId::new("call_1"),
                vec![ContentBlock::text("out")],
                false,
            )),
        ];
        o.config.reasoning_effort = Some("low".into());
        let body: Value =
            serde_json::from_slice(&build_body(&ModelInfo::new("o4-mini"), &o).unwrap()).unwrap();
        assert_eq!(body["store"], false);
        assert_eq!(body["reasoning"]["effort"], "low");
        let input = body["input"].as_array().unwrap();
        let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message",
                "reasoning",
                "function_call",
                "function_call_output"
            ]
        );
        assert_eq!(input[1]["encrypted_content"], "ENC");
        assert_eq!(input[3]["output"], "out");
    }

    #[test]
    fn images_go_as_input_image_parts_and_a_tools_follow_its_outputs() {
        use dsh_llm::Attachments as _;
        let store = Arc::new(dsh_testkit::MemoryAttachments::new());
        let image = store
            .put(dsh_testkit::TINY_PNG, "image/png", Some((2, 1)))
            .unwrap();
        let mut options = GenerateOptions::new(LlmCallConfig::new("openai", "gpt-5"));
        options.messages = vec![
            Arc::new(Message::user(
                vec![
                    ContentBlock::text("what is this?"),
                    ContentBlock::Image {
                        attachment: image.clone(),
                    },
                ],
                MessageSource::User,
            )),
            Arc::new(Message::assistant(
                vec![ContentBlock::ToolCall {
                    id: CallId::new("call_1"),
                    name: "read_image".into(),
                    arguments: "{}".into(),
                }],
                "openai",
                "gpt-5",
            )),
            Arc::new(Message::user(
                vec![ContentBlock::ToolResult {
                    tool_call_id: CallId::new("call_1"),
                    content: vec![ContentBlock::Image { attachment: image }],
                    is_error: false,
                }],
                MessageSource::User,
            )),
        ];
        options.attachments = Some(store);
        let model = dsh_llm::ModelInfo::new("gpt-5");
        let body: Value = serde_json::from_slice(&build_body(&model, &options).unwrap()).unwrap();
        let input = body["input"].as_array().unwrap();
        let asked = &input[0]["content"];
        assert_eq!(asked[1]["type"], "input_image");
        let url = asked[1]["image_url"].as_str().unwrap();
        assert!(
            url.starts_with("data:image/png;base64,iVBORw0KGgo"),
            "{url}"
        );
        assert_eq!(input[2]["type"], "function_call_output");
        assert_eq!(
            input[2]["output"],
            "[1 image(s) follow in the next message]"
        );
        assert_eq!(input[3]["role"], "user");
        assert_eq!(
            input[3]["content"][0]["text"],
            "Image(s) returned by tool call call_1:"
        );
        assert_eq!(input[3]["content"][1]["image_url"], url);
    }
}
