//! The pickers: stored sessions (`/resume`) and the model catalogue (`/model`). Both filter
//! by a fuzzy subsequence as the person types and keep the selection inside what the filter
//! shows.

use crate::commands::subsequence;
use crate::host::{ModelEntry, SessionEntry};

/// The `/resume` picker.
#[derive(Clone, Debug, Default)]
pub struct Picker {
    /// Every stored session (`None` while loading).
    pub entries: Option<Vec<SessionEntry>>,
    /// The fuzzy filter typed so far.
    pub filter: String,
    /// The selected row among the filtered ones.
    pub selected: usize,
    /// Opened because `/resume ARG` named no session: if the filter keeps nothing once the
    /// listing arrives, this error is shown instead (and nothing else changes).
    pub unresolved: Option<String>,
}

impl Picker {
    /// The entries the filter keeps (first prompt and id).
    pub fn filtered(&self) -> Vec<&SessionEntry> {
        self.entries
            .iter()
            .flatten()
            .filter(|e| {
                let hay = format!(
                    "{} {}",
                    e.first_prompt.as_deref().unwrap_or(""),
                    e.id.as_str()
                );
                subsequence(&self.filter, &hay)
            })
            .collect()
    }
}

/// The `/model` picker.
#[derive(Clone, Debug, Default)]
pub struct ModelPicker {
    /// The catalogue.
    pub entries: Vec<ModelEntry>,
    /// The fuzzy filter typed so far.
    pub filter: String,
    /// The selected row among the filtered ones.
    pub selected: usize,
}

impl ModelPicker {
    /// The models the filter keeps (id and provider).
    pub fn filtered(&self) -> Vec<&ModelEntry> {
        self.entries
            .iter()
            .filter(|m| subsequence(&self.filter, &format!("{} {}", m.id, m.provider)))
            .collect()
    }
}
