//! Session modes: how much a bridge-owned session may do without asking.

use agent_client_protocol::v1::schema::{SessionMode, SessionModeId, SessionModeState};

use crate::options::ApprovalPolicy;

/// The modes a bridge session offers through `session/set_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Ask the client before every mutating tool call (`default`).
    Ask,
    /// Run every tool without asking (`auto`).
    Auto,
    /// Refuse every mutating tool call (`read-only`): the model is told why and nothing runs.
    ReadOnly,
    /// Plan mode (`plan`): the model explores read-only (commands confined read-only, changes
    /// refused by plan mode itself) and proposes a plan; approving it leaves the mode.
    Plan,
}

impl Mode {
    /// Every mode, in the order the client lists them.
    pub const ALL: [Mode; 4] = [Mode::Ask, Mode::Auto, Mode::ReadOnly, Mode::Plan];

    /// The wire id.
    pub fn id(self) -> &'static str {
        match self {
            Mode::Ask => "default",
            Mode::Auto => "auto",
            Mode::ReadOnly => "read-only",
            Mode::Plan => "plan",
        }
    }

    /// The mode with this wire id.
    pub fn from_id(id: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.id() == id)
    }

    /// The mode a new session starts in under `policy`.
    pub fn initial(policy: ApprovalPolicy) -> Mode {
        match policy {
            ApprovalPolicy::Never => Mode::Auto,
            ApprovalPolicy::MutatingTools => Mode::Ask,
        }
    }

    /// The guard's policy for a session in this mode, over the configured one: "auto" means
    /// the person stopped being asked in this thread, so the guard stops asking too (rules
    /// still apply). The other modes keep the configured policy; read-only is enforced by the
    /// bridge's own listener.
    pub(crate) fn approval_policy(self) -> Option<dsh_guard::ApprovalPolicy> {
        match self {
            Mode::Auto => Some(dsh_guard::ApprovalPolicy::Auto),
            Mode::Ask | Mode::ReadOnly | Mode::Plan => None,
        }
    }

    fn describe(self) -> SessionMode {
        let (name, description) = match self {
            Mode::Ask => (
                "Ask",
                "Ask before running commands or changing files (bash, write, edit)",
            ),
            Mode::Auto => ("Auto", "Run every tool without asking"),
            Mode::ReadOnly => (
                "Read only",
                "Refuse commands and file changes; reading and searching still work",
            ),
            Mode::Plan => (
                "Plan",
                "Explore read-only and propose a plan; nothing changes until you approve it",
            ),
        };
        SessionMode::new(self.id(), name).description(description.to_owned())
    }

    /// The `modes` block of `session/new` and `session/load` answers.
    pub(crate) fn state(current: Mode) -> SessionModeState {
        SessionModeState::new(
            SessionModeId::new(current.id()),
            Mode::ALL.into_iter().map(Mode::describe).collect(),
        )
    }
}
