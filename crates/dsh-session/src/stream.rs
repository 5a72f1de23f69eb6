//! The model stream vocabulary.
//!
//! These types live beside the session log because the log records them verbatim
//! (`assistant/chunk`, usage on `assistant/message`, failures in `turn/end`); `dsh-llm`
//! re-exports them as its public vocabulary.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::ids::CallId;
use crate::message::ContentBlock;

/// Kind of a content block being streamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockType {
    /// Visible text.
    Text,
    /// Reasoning text.
    Reasoning,
    /// A tool call.
    ToolCall,
    /// An image.
    Image,
}

/// One token-level event of a model response.
///
/// Conventions every adapter follows: usage precedes finish, nothing follows finish, tool
/// arguments stay raw strings, and every outcome ends with exactly one `Finish`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum StreamChunk {
    /// A block opens at `index`.
    #[serde(rename_all = "camelCase")]
    BlockStart {
        /// Block position in the message.
        index: u32,
        /// What the block will be.
        block_type: BlockType,
    },
    /// More visible text for the block at `index`.
    TextDelta {
        /// Block position.
        index: u32,
        /// Text fragment.
        text: String,
    },
    /// More reasoning text for the block at `index`.
    ReasoningDelta {
        /// Block position.
        index: u32,
        /// Reasoning fragment.
        text: String,
    },
    /// More of a tool call for the block at `index`.
    #[serde(rename_all = "camelCase")]
    ToolCallDelta {
        /// Block position.
        index: u32,
        /// The call id (may be empty until the provider sends it).
        id: CallId,
        /// Tool name, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Raw argument text fragment.
        arguments_delta: String,
    },
    /// The block at `index` is complete; `block` is authoritative.
    BlockEnd {
        /// Block position.
        index: u32,
        /// The finished block.
        block: ContentBlock,
    },
    /// Token accounting for the response.
    Usage {
        /// The usage figures.
        usage: TokenUsage,
    },
    /// The response ended.
    #[serde(rename_all = "camelCase")]
    Finish {
        /// Why it ended.
        reason: FinishReason,
        /// Provider-specific replay state for the assembled message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replay_state: Option<Value>,
    },
}

/// Why a model response ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FinishReason {
    /// Natural end of the answer.
    Stop,
    /// The model wants tool results.
    ToolCalls,
    /// The output-token ceiling was hit; partial tool calls are never dispatched.
    MaxTokens,
    /// The request failed.
    Error {
        /// What went wrong.
        failure: LlmFailure,
    },
    /// The request was cancelled.
    Aborted {
        /// Details of the cancellation.
        failure: LlmFailure,
    },
}

impl FinishReason {
    /// The failure carried by `Error` and `Aborted`.
    pub fn failure(&self) -> Option<&LlmFailure> {
        match self {
            Self::Error { failure } | Self::Aborted { failure } => Some(failure),
            _ => None,
        }
    }
}

/// Token accounting of one response.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Input tokens not served from the provider's prompt cache.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Input tokens served from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Output tokens spent on reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// A normalized, serializable description of a failed model request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmFailure {
    /// Human-readable description. Never contains credentials.
    pub message: String,
    /// Normalized failure code.
    pub code: FailureCode,
    /// HTTP status, when the provider answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The provider's `Retry-After`, in milliseconds, when positive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_retry_after_ms: Option<u64>,
    /// The provider's request id, for support tickets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl LlmFailure {
    /// A failure with just a code and a message.
    pub fn new(code: FailureCode, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code,
            status: None,
            provider_retry_after_ms: None,
            request_id: None,
        }
    }
}

impl fmt::Display for LlmFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for LlmFailure {}

macro_rules! failure_codes {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal,)*) => {
        /// Normalized failure codes. On the wire they are upper-case strings; codes this
        /// version does not know (for example an upper-cased provider finish reason such as
        /// `CONTENT_FILTER`) round-trip through `Other`.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum FailureCode {
            $($(#[$doc])* $variant,)*
            /// A non-2xx HTTP status without a more specific mapping (`HTTP_<n>`).
            Http(u16),
            /// Any other code, verbatim.
            Other(String),
        }

        impl FailureCode {
            /// The wire spelling.
            pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
                match self {
                    $(Self::$variant => std::borrow::Cow::Borrowed($wire),)*
                    Self::Http(n) => std::borrow::Cow::Owned(format!("HTTP_{n}")),
                    Self::Other(s) => std::borrow::Cow::Borrowed(s),
                }
            }
        }

        impl FromStr for FailureCode {
            type Err = std::convert::Infallible;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok(match s {
                    $($wire => Self::$variant,)*
                    other => match other.strip_prefix("HTTP_").and_then(|n| n.parse().ok()) {
                        Some(n) => Self::Http(n),
                        None => Self::Other(other.to_owned()),
                    },
                })
            }
        }
    };
}

failure_codes! {
    /// No adapter serves the provider route.
    NoAdapter = "NO_ADAPTER",
    /// Two adapters claimed one provider route.
    DuplicateAdapter = "DUPLICATE_ADAPTER",
    /// The provider rejected the credentials (401/403).
    Auth = "AUTH",
    /// The account is out of quota or credit.
    Quota = "QUOTA",
    /// Too many requests (429).
    RateLimit = "RATE_LIMIT",
    /// The request does not fit the model's context window.
    ContextWindowExceeded = "CONTEXT_WINDOW_EXCEEDED",
    /// The provider rejected the request as malformed.
    InvalidRequest = "INVALID_REQUEST",
    /// The provider failed (5xx).
    Server = "SERVER",
    /// The network failed before a response arrived.
    Transport = "TRANSPORT",
    /// No bytes arrived within the idle timeout.
    Timeout = "TIMEOUT",
    /// The caller cancelled the request.
    Aborted = "ABORTED",
    /// The stream ended without its terminator.
    StreamClosed = "STREAM_CLOSED",
    /// The provider sent something that is not the expected JSON.
    MalformedResponse = "MALFORMED_RESPONSE",
    /// The provider finished without producing anything.
    EmptyResponse = "EMPTY_RESPONSE",
    /// No credential is configured for the route.
    MissingCredential = "MISSING_CREDENTIAL",
    /// The configured credential is malformed.
    InvalidCredential = "INVALID_CREDENTIAL",
    /// The request carries content the model cannot take (e.g. images).
    UnsupportedContent = "UNSUPPORTED_CONTENT",
    /// The requested reasoning effort is not offered by the model.
    UnsupportedReasoningEffort = "UNSUPPORTED_REASONING_EFFORT",
    /// A prepared call was used with a different configuration.
    InvalidPreparedCall = "INVALID_PREPARED_CALL",
    /// A failure that is not an LLM failure (turn-level).
    Unknown = "UNKNOWN",
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl Serialize for FailureCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        // Infallible.
        Ok(s.parse().unwrap_or(FailureCode::Unknown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn failure_codes_round_trip_including_unknown_ones() {
        for wire in ["RATE_LIMIT", "HTTP_418", "CONTENT_FILTER", "UNKNOWN"] {
            let code: FailureCode = serde_json::from_value(json!(wire)).unwrap();
            assert_eq!(serde_json::to_value(&code).unwrap(), json!(wire));
        }
        assert_eq!(
            "HTTP_418".parse::<FailureCode>().unwrap(),
            FailureCode::Http(418)
        );
    }

    #[test]
    fn chunk_json_uses_reference_names() {
        let c = StreamChunk::ToolCallDelta {
            index: 1,
            id: CallId::new("c"),
            name: Some("bash".into()),
            arguments_delta: "{".into(),
        };
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"type": "tool-call-delta", "index": 1, "id": "c", "name": "bash", "argumentsDelta": "{"})
        );
        let f = StreamChunk::Finish {
            reason: FinishReason::Error {
                failure: LlmFailure::new(FailureCode::Server, "boom"),
            },
            replay_state: None,
        };
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"type": "finish", "reason": {"kind": "error", "failure": {"message": "boom", "code": "SERVER"}}})
        );
    }
}
