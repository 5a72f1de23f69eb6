//! What the mock server answers to one request.

use serde_json::{Value, json};

use crate::gate::{Gate, Hold};
use crate::sse::{ChatStream, usage_deepseek};

/// One piece of an SSE body, written as its own HTTP chunk and flushed.
#[derive(Clone, Debug, PartialEq)]
pub enum SseFrame {
    /// `data: <payload>` followed by a blank line.
    Data(String),
    /// A `: <text>` comment line followed by a blank line (a keep-alive).
    Comment(String),
    /// `data: [DONE]`, the OpenAI stream terminator.
    Done,
    /// Bytes written verbatim: split frames, odd line endings, garbage.
    Raw(Vec<u8>),
}

impl SseFrame {
    /// A data frame carrying `value` as compact JSON.
    pub fn json(value: &Value) -> Self {
        Self::Data(value.to_string())
    }

    /// The frame's bytes on the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Self::Data(payload) => format!("data: {payload}\n\n").into_bytes(),
            Self::Comment(text) => format!(": {text}\n\n").into_bytes(),
            Self::Done => b"data: [DONE]\n\n".to_vec(),
            Self::Raw(bytes) => bytes.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Body {
    /// `200 text/event-stream`, chunked; each frame one chunk.
    Sse {
        frames: Vec<SseFrame>,
        /// `(n, gate)`: stop before frame `n` until the gate is released.
        holds: Vec<(usize, Gate)>,
        /// Close the connection after the frames without the chunked terminator.
        cut: bool,
    },
    /// A complete response with a body and `Content-Length`.
    Fixed { status: u16, body: String },
    /// Bytes written verbatim after the request (status line included), then close.
    Raw(Vec<u8>),
}

/// A scripted answer of the [`crate::MockServer`]: an SSE stream, an error, or raw bytes.
#[derive(Clone, Debug)]
pub struct MockResponse {
    pub(crate) body: Body,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) hold_headers: Option<Gate>,
    /// Keep the connection open after the bytes until this gate is released.
    pub(crate) hold_end: Option<Gate>,
}

impl MockResponse {
    fn with_body(body: Body) -> Self {
        Self {
            body,
            headers: Vec::new(),
            hold_headers: None,
            hold_end: None,
        }
    }

    /// A `200` event stream of `frames` (build them with [`ChatStream`]).
    pub fn sse(frames: impl IntoIterator<Item = SseFrame>) -> Self {
        Self::with_body(Body::Sse {
            frames: frames.into_iter().collect(),
            holds: Vec::new(),
            cut: false,
        })
    }

    /// A complete OpenAI-shaped text answer: role chunk, the text split into a few deltas,
    /// finish `stop`, a trailing usage chunk and `[DONE]`.
    pub fn text(text: &str) -> Self {
        Self::sse(
            ChatStream::new("mock-model")
                .role()
                .text(text)
                .finish("stop")
                .usage(10, text.chars().count() as u64)
                .done()
                .build(),
        )
    }

    /// A DeepSeek thinking-mode answer: an empty first reasoning chunk, `reasoning`, then
    /// `text`, finish `stop` with DeepSeek usage, `[DONE]`.
    pub fn reasoning_then_text(reasoning: &str, text: &str) -> Self {
        Self::sse(
            ChatStream::new("mock-model")
                .role_with_empty_reasoning()
                .reasoning(reasoning)
                .text(text)
                .finish_with_usage(
                    "stop",
                    usage_deepseek(10, (reasoning.len() + text.len()) as u64, 0, None),
                )
                .done()
                .build(),
        )
    }

    /// One tool call with its arguments split over several chunks, finish `tool_calls`.
    pub fn tool_call(id: &str, name: &str, arguments: &str) -> Self {
        Self::tool_calls([(id, name, arguments)])
    }

    /// Several tool calls in order (each split over several chunks), finish `tool_calls`.
    pub fn tool_calls<'a>(calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> Self {
        let mut stream = ChatStream::new("mock-model").role();
        for (i, (id, name, arguments)) in calls.into_iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            stream = stream.tool_call(index, id, name, arguments, 8);
        }
        Self::sse(stream.finish("tool_calls").usage(10, 10).done().build())
    }

    /// A non-2xx answer with `body` verbatim (`application/json`).
    pub fn error(status: u16, body: impl Into<String>) -> Self {
        Self::with_body(Body::Fixed {
            status,
            body: body.into(),
        })
    }

    /// A non-2xx answer with an OpenAI-shaped `{error: {message, type, code}}` body.
    pub fn error_json(status: u16, message: &str, kind: &str, code: Option<&str>) -> Self {
        let body = json!({"error": {"message": message, "type": kind, "code": code}});
        Self::error(status, body.to_string())
    }

    /// Bytes written verbatim as the whole response (status line included); the connection
    /// closes after them. For malformed HTTP.
    pub fn raw(bytes: impl Into<Vec<u8>>) -> Self {
        Self::with_body(Body::Raw(bytes.into()))
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Adds `Retry-After` (seconds, or an HTTP date).
    pub fn with_retry_after(self, value: &str) -> Self {
        self.with_header("retry-after", value)
    }

    /// Adds `x-request-id`.
    pub fn with_request_id(self, id: &str) -> Self {
        self.with_header("x-request-id", id)
    }

    /// Stops the stream after `n` frames until the returned hold is released (or forever).
    /// The server watches the socket meanwhile, so a client disconnect is observed.
    pub fn hold_after(mut self, n: usize) -> (Self, Hold) {
        let gate = Gate::new();
        if let Body::Sse { holds, .. } = &mut self.body {
            holds.push((n, gate.clone()));
        }
        (self, gate)
    }

    /// Withholds even the status line until the returned hold is released (or forever).
    pub fn hold_before_headers(mut self) -> (Self, Hold) {
        let gate = Gate::new();
        self.hold_headers = Some(gate.clone());
        (self, gate)
    }

    /// After every byte of the response (for an event stream: before the chunked terminator),
    /// keeps the connection open until the returned hold is released (or forever), watching
    /// the socket meanwhile so a client disconnect is observed. With a `raw` response whose
    /// `content-length` promises more than it sends, this is a body that never ends.
    pub fn hold_open(mut self) -> (Self, Hold) {
        let gate = Gate::new();
        self.hold_end = Some(gate.clone());
        (self, gate)
    }

    /// After the frames, drops the connection without the chunked terminator, as a network
    /// failure mid-stream looks to the client.
    pub fn cut_connection(mut self) -> Self {
        if let Body::Sse { cut, .. } = &mut self.body {
            *cut = true;
        }
        self
    }
}
