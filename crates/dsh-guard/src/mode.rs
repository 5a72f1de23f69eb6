//! Sandbox modes: how far the commands and file tools of a session may write.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How much a session's commands and file tools may change, enforced on the commands by
/// Landlock (see [`crate::landlock`]) and on `write`/`edit` by the approval policy.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No writes anywhere except the command's private temp directory.
    ReadOnly,
    /// Writes only under the workspace, the temp dirs and the configured writable roots.
    #[default]
    WorkspaceWrite,
    /// No confinement at all (containment of descendants still applies).
    DangerFullAccess,
}

impl SandboxMode {
    /// Every mode, narrowest first.
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    /// The spelling used by flags, config and the session log.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }

    /// True when commands run inside a Landlock domain (so Landlock must be available).
    pub fn confines(self) -> bool {
        self != SandboxMode::DangerFullAccess
    }

    /// The narrower of two modes: what a subagent gets when it asks for `requested` under a
    /// parent in `self`. A child can never widen its parent's mode.
    pub fn narrowed_to(self, requested: SandboxMode) -> SandboxMode {
        self.min(requested)
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox mode {0:?}: expected read-only, workspace-write or danger-full-access")]
pub struct UnknownMode(pub String);

impl FromStr for SandboxMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SandboxMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_their_own_spelling() {
        for mode in SandboxMode::ALL {
            assert_eq!(mode.as_str().parse::<SandboxMode>(), Ok(mode));
        }
        assert!("full".parse::<SandboxMode>().is_err());
    }

    #[test]
    fn a_child_never_widens_its_parents_mode() {
        let parent = SandboxMode::ReadOnly;
        for requested in SandboxMode::ALL {
            assert_eq!(parent.narrowed_to(requested), SandboxMode::ReadOnly);
        }
        assert_eq!(
            SandboxMode::WorkspaceWrite.narrowed_to(SandboxMode::DangerFullAccess),
            SandboxMode::WorkspaceWrite
        );
    }
}
