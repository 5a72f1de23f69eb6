//! What contributors register: sections, runtime-context sections and variable providers.

use std::fmt;
use std::sync::Arc;

use crate::scope::AssemblyScope;

/// A provider evaluated once per assembly; `None` means "registered but no value here", which
/// makes rendering a section that references it fail rather than print an empty string.
pub type VariableProvider = Arc<dyn Fn(&AssemblyScope) -> Option<String> + Send + Sync>;

/// Text that is either fixed or computed for each assembly (e.g. a plan-mode persona that
/// depends on the agent's state).
#[derive(Clone)]
pub enum SectionText {
    /// Fixed text.
    Static(String),
    /// Evaluated at every assembly with that assembly's scope.
    Dynamic(Arc<dyn Fn(&AssemblyScope) -> String + Send + Sync>),
}

impl SectionText {
    /// Text computed at each assembly.
    pub fn dynamic(f: impl Fn(&AssemblyScope) -> String + Send + Sync + 'static) -> Self {
        Self::Dynamic(Arc::new(f))
    }

    /// Resolves the text for one assembly.
    pub fn resolve(&self, scope: &AssemblyScope) -> String {
        match self {
            Self::Static(s) => s.clone(),
            Self::Dynamic(f) => f(scope),
        }
    }
}

impl From<&str> for SectionText {
    fn from(s: &str) -> Self {
        Self::Static(s.to_owned())
    }
}

impl From<String> for SectionText {
    fn from(s: String) -> Self {
        Self::Static(s)
    }
}

impl fmt::Debug for SectionText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Static(s) => f.debug_tuple("Static").field(s).finish(),
            Self::Dynamic(_) => f.write_str("Dynamic(..)"),
        }
    }
}

/// One contributed section of the system prompt.
///
/// Sections are merged by `name` (a scoped section shadows a global one of the same name for
/// that scope only) and rendered in ascending `order`. Convention: −100 is the harness
/// identity, 0 the deployment persona, 100–199 tool guidance.
#[derive(Clone, Debug)]
pub struct Section {
    /// Unique within one layer; the key for shadowing.
    pub name: String,
    /// Position in the prompt, ascending; ties keep merge order.
    pub order: i32,
    /// The (uninterpolated) text; may reference `{{variable}}`s.
    pub text: SectionText,
    /// This section is the whole system prompt: after assembly it becomes the only section
    /// (dedicated sub-agents, reviewers). More than one effective complete section is an error.
    pub complete: bool,
}

impl Section {
    /// An ordinary (non-complete) section.
    pub fn new(name: impl Into<String>, order: i32, text: impl Into<SectionText>) -> Self {
        Self {
            name: name.into(),
            order,
            text: text.into(),
            complete: false,
        }
    }

    /// The same section marked complete.
    pub fn complete(mut self) -> Self {
        self.complete = true;
        self
    }
}

/// One contribution to the dynamic runtime context: facts that change between steps (date,
/// open todo items, git state) and therefore travel as a user-role snapshot rather than in the
/// cache-stable system prompt.
#[derive(Clone, Debug)]
pub struct ContextSection {
    /// Unique within one layer; the key for shadowing.
    pub name: String,
    /// Position in the snapshot, ascending.
    pub order: i32,
    /// The context text (rendered literally; empty text contributes nothing).
    pub text: SectionText,
}

impl ContextSection {
    /// A runtime-context section.
    pub fn new(name: impl Into<String>, order: i32, text: impl Into<SectionText>) -> Self {
        Self {
            name: name.into(),
            order,
            text: text.into(),
        }
    }
}
