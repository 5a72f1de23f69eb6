//! Mapping provider usage onto dsh's token accounting.

use dsh_llm::TokenUsage;

use crate::wire::WireUsage;

/// Maps a usage object.
///
/// Cache reads come from OpenAI's `prompt_tokens_details.cached_tokens`, else DeepSeek's
/// `prompt_cache_hit_tokens`; `input_tokens` is the uncached remainder of `prompt_tokens`
/// (DeepSeek's `prompt_cache_miss_tokens` equals it and is not read). No cache-write metric
/// exists on these APIs.
pub(crate) fn map_usage(u: &WireUsage) -> TokenUsage {
    let cache_read = u
        .prompt_tokens_details
        .as_ref()
        .and_then(|d| d.cached_tokens)
        .or(u.prompt_cache_hit_tokens);
    TokenUsage {
        input_tokens: u
            .prompt_tokens
            .unwrap_or(0)
            .saturating_sub(cache_read.unwrap_or(0)),
        output_tokens: u.completion_tokens.unwrap_or(0),
        cache_read_tokens: cache_read,
        cache_write_tokens: None,
        reasoning_tokens: u
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> TokenUsage {
        map_usage(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn openai_cached_tokens_take_precedence_over_deepseek_cache_hits() {
        let u = parse(
            r#"{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":30},
                "prompt_cache_hit_tokens":99,"completion_tokens_details":{"reasoning_tokens":7}}"#,
        );
        assert_eq!(
            u,
            TokenUsage {
                input_tokens: 70,
                output_tokens: 20,
                cache_read_tokens: Some(30),
                cache_write_tokens: None,
                reasoning_tokens: Some(7)
            }
        );
        let d = parse(
            r#"{"prompt_tokens":100,"completion_tokens":5,"prompt_cache_hit_tokens":60,"prompt_cache_miss_tokens":40}"#,
        );
        assert_eq!((d.input_tokens, d.cache_read_tokens), (40, Some(60)));
        let plain = parse(r#"{"prompt_tokens":3,"completion_tokens":4}"#);
        assert_eq!((plain.input_tokens, plain.cache_read_tokens), (3, None));
    }
}
