//! The answer to a refused request: HTTP 403 with a body that names the host and the config
//! key to change, so the command's output tells the model (and the person) what happened.

use crate::domain::Decision;

/// Why the proxy refused a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// In `denied_domains`.
    #[error("{host} is denied by `[sandbox] denied_domains` (entry {entry:?})")]
    Denied {
        /// The host asked for.
        host: String,
        /// The entry that matched.
        entry: String,
    },
    /// Not in `allowed_domains`.
    #[error("{host} is not in `[sandbox] allowed_domains`")]
    NotListed {
        /// The host asked for.
        host: String,
    },
    /// Resolves to (or is) a private, loopback or link-local address and was not allowed by
    /// its exact name.
    #[error(
        "{host} resolves to {address}, which is this machine or a private network; only a \
         name listed exactly in `[sandbox] allowed_domains` (no wildcard) may reach one"
    )]
    Private {
        /// The host asked for.
        host: String,
        /// The private address.
        address: std::net::IpAddr,
    },
}

impl Refusal {
    /// The refusal for a decision that did not allow `host`, if it did not.
    pub fn of(host: &str, decision: &Decision) -> Option<Refusal> {
        match decision {
            Decision::Allowed { .. } => None,
            Decision::Denied(entry) => Some(Refusal::Denied {
                host: host.to_owned(),
                entry: entry.clone(),
            }),
            Decision::NotListed => Some(Refusal::NotListed {
                host: host.to_owned(),
            }),
        }
    }

    /// The host refused.
    pub fn host(&self) -> &str {
        match self {
            Refusal::Denied { host, .. }
            | Refusal::NotListed { host }
            | Refusal::Private { host, .. } => host,
        }
    }

    /// Why, without the host: the part of a [`Blocked`] line after the host.
    pub fn reason(&self) -> String {
        match self {
            Refusal::Denied { entry, .. } => {
                format!("denied by `[sandbox] denied_domains` (entry {entry:?})")
            }
            Refusal::NotListed { .. } => "not in `[sandbox] allowed_domains`".to_owned(),
            Refusal::Private { address, .. } => format!(
                "resolves to {address}, this machine or a private network; only an exact \
                 `[sandbox] allowed_domains` entry may reach one"
            ),
        }
    }

    /// Whether a person may be asked to let it through: not a host the user denied by name.
    pub fn askable(&self) -> bool {
        !matches!(self, Refusal::Denied { .. })
    }

    /// The whole HTTP response: 403, `x-proxy-error: blocked-by-allowlist` (Codex's header,
    /// so tools that know it recognise it), and a one-line body.
    pub(crate) fn response(&self, note: Option<&str>) -> Vec<u8> {
        let note = note.map(|n| format!("; {n}")).unwrap_or_default();
        let body = format!("[sandbox] network: blocked {}: {self}{note}\n", self.host());
        format!(
            "HTTP/1.1 403 Forbidden\r\nx-proxy-error: blocked-by-allowlist\r\n\
             content-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }
}

/// One refused request as the command that made it is told: the host and port it asked for,
/// why, and what the person answered when asked. Its display is the line appended to the
/// command's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The port asked for (443 for most `CONNECT`s).
    pub port: u16,
    /// Why.
    pub refusal: Refusal,
    /// What came of asking, when a person was asked or could not be (`the user refused it`).
    pub note: Option<String>,
}

impl Blocked {
    /// The host refused.
    pub fn host(&self) -> &str {
        self.refusal.host()
    }
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[sandbox] network: blocked {}:{} ({}",
            self.host(),
            self.port,
            self.refusal.reason()
        )?;
        if let Some(note) = &self.note {
            write!(f, "; {note}")?;
        }
        f.write_str(")")
    }
}
