//! Workspace hooks need the user's trust (DESIGN R15).
//!
//! A workspace's hooks files (`.dsh/hooks.json`, Claude Code's `.claude/settings*.json`) are
//! code from the repository: a freshly cloned one, or one a sandboxed command just wrote. They
//! run as the session's commands run only after the user trusted that exact content (recorded
//! with its hash in `$DSH_HOME`, see [`dsh_fs::TrustRecord`]); hooks in `$DSH_HOME` are the
//! user's own. For untrusted ones the front end decides once per workspace, through a
//! [`HookTrust`]: the chat, the UI and an editor ask the person (trusting records the content);
//! without one (`dsh run`) they run sandboxed (`workspace-write` at most, whatever the
//! session's mode), said once on stderr.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use dsh_fs::TrustRecord;
use dsh_kernel::Context;
use dsh_session::Session;
use parking_lot::Mutex;

use crate::config::{HookSet, UntrustedFile};
use crate::runner::HookSite;

/// What happens to a workspace's untrusted hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrustAnswer {
    /// The user trusts them: recorded, and they run like the user's own.
    Trust,
    /// They run, sandboxed (`workspace-write` at most) whatever the session's mode.
    Confine,
    /// They do not run.
    Skip,
}

/// The question a front end answers once per workspace.
pub struct TrustQuestion<'a> {
    /// The session the hooks would run for (a front end routes the question to it).
    pub session: &'a Arc<Session>,
    /// That session's agent context.
    pub ctx: &'a Context,
    /// The workspace.
    pub workspace: &'a Path,
    /// The untrusted files, as read.
    pub files: &'a [UntrustedFile],
    /// Their commands, for showing.
    pub commands: Vec<&'a str>,
}

/// A front end's way of deciding about untrusted workspace hooks.
#[async_trait]
pub trait HookTrust: Send + Sync + fmt::Debug {
    /// Decides (asking the person where one can be asked).
    async fn decide(&self, question: &TrustQuestion<'_>) -> TrustAnswer;
}

/// The trust side of the hooks plugin: the record, the front end's decider, and the answer
/// given per workspace in this process.
#[derive(Debug, Default)]
pub struct TrustGate {
    record: Option<TrustRecord>,
    decider: Option<Arc<dyn HookTrust>>,
    decided: Mutex<HashMap<PathBuf, TrustAnswer>>,
    /// One question at a time: two events of one workspace must not ask twice.
    asking: tokio::sync::Mutex<()>,
}

impl TrustGate {
    /// A gate recording trust in `record`, deciding with `decider` (none: confine).
    pub fn new(record: Option<TrustRecord>, decider: Option<Arc<dyn HookTrust>>) -> Self {
        Self {
            record,
            decider,
            ..Self::default()
        }
    }

    /// What to do with the untrusted hooks of `set` at `site`: asked (or decided) once per
    /// workspace, then remembered.
    pub(crate) async fn answer(&self, site: &HookSite, set: &HookSet) -> TrustAnswer {
        if let Some(answer) = self.decided.lock().get(&site.cwd) {
            return *answer;
        }
        let _one = self.asking.lock().await;
        if let Some(answer) = self.decided.lock().get(&site.cwd) {
            return *answer;
        }
        let answer = match &self.decider {
            Some(decider) => {
                let question = TrustQuestion {
                    session: &site.session,
                    ctx: &site.ctx,
                    workspace: &site.cwd,
                    files: &set.untrusted,
                    commands: set
                        .all()
                        .iter()
                        .filter(|h| !h.trusted)
                        .map(|h| h.command.as_str())
                        .collect(),
                };
                decider.decide(&question).await
            }
            None => TrustAnswer::Confine,
        };
        let files: Vec<String> = set
            .untrusted
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        match answer {
            TrustAnswer::Trust => {
                for file in &set.untrusted {
                    let recorded = self
                        .record
                        .as_ref()
                        .map(|r| r.trust(&file.path, &file.content));
                    if let Some(Err(error)) = recorded {
                        tracing::warn!(
                            "could not record trust in {}: {error}; it holds for this session only",
                            file.path.display()
                        );
                    }
                }
            }
            TrustAnswer::Confine => eprintln!(
                "dsh: the hooks of {} are not trusted: they run sandboxed (workspace-write at \
                 most). Trust them with `dsh hooks trust` in {}.",
                files.join(", "),
                site.cwd.display()
            ),
            TrustAnswer::Skip => eprintln!(
                "dsh: the hooks of {} are not trusted and do not run in this session.",
                files.join(", ")
            ),
        }
        self.decided.lock().insert(site.cwd.clone(), answer);
        answer
    }
}
