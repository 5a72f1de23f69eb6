//! The compaction policy (spec/edges.md §6.2 defaults).

/// How and when to compact.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionConfig {
    /// Compact when the estimated next request exceeds this share of the window.
    pub threshold_ratio: f64,
    /// Keep this share of the window of the newest history verbatim.
    pub retain_ratio: f64,
    /// Tool results longer than this many characters are pruned before summarizing.
    pub prune_over_chars: usize,
    /// Characters of a pruned result kept from its start.
    pub prune_head_chars: usize,
    /// Characters of a pruned result kept from its end.
    pub prune_tail_chars: usize,
    /// Output ceiling of the summary call.
    pub summary_max_tokens: u32,
    /// Compactions (with retries) per step after a context-length error.
    pub max_overflow_retries: usize,
    /// Window assumed before any request logged one (a fresh or a foreign session).
    pub fallback_window: Option<u64>,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            threshold_ratio: 0.8,
            retain_ratio: 0.16,
            prune_over_chars: 8_192,
            prune_head_chars: 4_096,
            prune_tail_chars: 1_024,
            summary_max_tokens: 8_192,
            max_overflow_retries: 1,
            fallback_window: None,
        }
    }
}
