//! Whose prompt is being assembled.

use dsh_kernel::ScopeTag;
use tokio_util::sync::CancellationToken;

/// The subject of one assembly: which scope's contributions and listeners take part, and the
/// cancellation of the turn that asked for it.
///
/// Assembly is per scope because an agent may shadow global sections, add its own variables
/// and tools, or suppress runtime context; `tag: None` assembles the global view only.
#[derive(Clone, Debug, Default)]
pub struct AssemblyScope {
    /// The scope (normally an agent's tag) whose layers and listeners participate.
    pub tag: Option<ScopeTag>,
    /// The requesting turn's cancellation, for providers that do slow work. It controls only
    /// this assembly and must not be retained for later turns.
    pub cancel: Option<CancellationToken>,
}

impl AssemblyScope {
    /// The global view: no scoped contribution participates.
    pub fn global() -> Self {
        Self::default()
    }

    /// The view of one scope (global layers plus the tag's chain).
    pub fn for_tag(tag: ScopeTag) -> Self {
        Self {
            tag: Some(tag),
            cancel: None,
        }
    }

    /// The same scope with a cancellation token attached.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = Some(cancel);
        self
    }
}
