//! OpenAI-compatible chat-completions adapter (work in progress).
