//! Who a request comes from. The proxy is one per process and serves every session's
//! commands, so each command is handed a credential of its own in its proxy URL
//! (`http://dsh:TOKEN@127.0.0.1:PORT`); clients send it back as `Proxy-Authorization: Basic`,
//! and the proxy finds the command's [`Owner`] by it: whose result a refusal is reported in,
//! and whose person is asked about a blocked host.
//!
//! A token is random (a command cannot guess another's) and stands for one tool call of one
//! session, so every command of a call shares it and the table grows by one small entry per
//! call that ran a confined command. A request without a known token is decided by the lists
//! alone: nobody is asked and nothing is reported but the proxy's counters.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::refuse::Blocked;

/// The session and tool call a command runs for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Owner {
    /// The session (the agent's id), when the caller knows it.
    pub session: Option<String>,
    /// The tool call (a `bash` call's id), when there is one: hooks and MCP servers run
    /// outside any call.
    pub call: Option<String>,
}

/// One owner's record: what was refused (until reported) and the hosts the person let
/// through for this call only ("allow once") or refused when asked.
#[derive(Debug, Default)]
pub(crate) struct Ticket {
    pub(crate) owner: Owner,
    blocked: Mutex<Vec<Blocked>>,
    allowed_once: Mutex<BTreeSet<String>>,
    refused: Mutex<BTreeMap<String, String>>,
}

/// The proxy's state is counters and sets that stay consistent whatever panicked while
/// holding them, so a poisoned lock is used as it is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Ticket {
    /// Keeps `blocked` for the owner's report, once per host and port until it is taken.
    pub(crate) fn record(&self, blocked: Blocked) {
        let mut list = lock(&self.blocked);
        if !list
            .iter()
            .any(|b| b.host() == blocked.host() && b.port == blocked.port)
        {
            list.push(blocked);
        }
    }

    pub(crate) fn allow_once(&self, host: &str) {
        lock(&self.allowed_once).insert(host.to_owned());
    }

    /// Remembers that asking about `host` for this call came to `note` (refused, or nobody
    /// answered): the call's later requests are refused without asking again.
    pub(crate) fn refuse(&self, host: &str, note: &str) {
        lock(&self.refused).insert(host.to_owned(), note.to_owned());
    }

    pub(crate) fn allowed_once(&self, host: &str) -> bool {
        lock(&self.allowed_once).contains(host)
    }

    pub(crate) fn refused(&self, host: &str) -> Option<String> {
        lock(&self.refused).get(host).cloned()
    }
}

/// Every owner's ticket, and the hosts each session's person allowed for the session.
#[derive(Debug, Default)]
pub(crate) struct Tickets {
    by_token: Mutex<HashMap<String, Arc<Ticket>>>,
    by_owner: Mutex<HashMap<Owner, String>>,
    session_hosts: Mutex<HashMap<String, BTreeSet<String>>>,
}

impl Tickets {
    /// `owner`'s token, made the first time it is asked for.
    pub(crate) fn token(&self, owner: &Owner) -> String {
        let mut by_owner = lock(&self.by_owner);
        if let Some(token) = by_owner.get(owner) {
            return token.clone();
        }
        let token = format!("{:032x}", rand::random::<u128>());
        by_owner.insert(owner.clone(), token.clone());
        lock(&self.by_token).insert(
            token.clone(),
            Arc::new(Ticket {
                owner: owner.clone(),
                ..Ticket::default()
            }),
        );
        token
    }

    pub(crate) fn by_token(&self, token: &str) -> Option<Arc<Ticket>> {
        lock(&self.by_token).get(token).cloned()
    }

    /// What was refused for `owner` since last asked, oldest first.
    pub(crate) fn take_blocked(&self, owner: &Owner) -> Vec<Blocked> {
        let token = lock(&self.by_owner).get(owner).cloned();
        token
            .and_then(|t| self.by_token(&t))
            .map(|ticket| std::mem::take(&mut *lock(&ticket.blocked)))
            .unwrap_or_default()
    }

    pub(crate) fn allow_for_session(&self, session: &str, host: &str) {
        lock(&self.session_hosts)
            .entry(session.to_owned())
            .or_default()
            .insert(host.to_owned());
    }

    pub(crate) fn session_allows(&self, session: &str, host: &str) -> bool {
        lock(&self.session_hosts)
            .get(session)
            .is_some_and(|hosts| hosts.contains(host))
    }
}
