//! Loop errors.

/// Failures of the loop service itself (not of turns: those end up in `turn/end`).
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// Invalid configuration.
    #[error("invalid agent-loop config: {0}")]
    Config(String),
    /// A required service is missing from the context.
    #[error(transparent)]
    Kernel(#[from] dsh_kernel::KernelError),
    /// An agent-layer failure.
    #[error(transparent)]
    Agent(#[from] dsh_agent::AgentError),
}
