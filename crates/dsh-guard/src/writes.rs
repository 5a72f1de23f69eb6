//! The guard's side of dsh-tools' [`WriteScope`] seam: where a file tool's call may write,
//! from the same policy that decided the call (see [`crate::plugin`]).

use std::collections::HashSet;
use std::sync::Arc;

use dsh_session::{CallId, SessionId};
use dsh_tools::{ToolCallContext, ToolCaller, WritePlace, WriteRoot, WriteScope};
use parking_lot::Mutex;

use crate::approval::Guard;
use crate::mode::SandboxMode;

/// The calls the guard asked the user about and that are still running, by session and call
/// id (a model's call ids repeat across sessions). A call in this set that reaches its tool
/// was approved: the pipeline runs nothing the user refused.
#[derive(Debug, Default)]
pub(crate) struct AskedCalls(Mutex<HashSet<(Option<SessionId>, CallId)>>);

impl AskedCalls {
    fn key(caller: Option<&ToolCaller>, call: &CallId) -> (Option<SessionId>, CallId) {
        (caller.map(|c| c.agent_id.clone()), call.clone())
    }

    pub(crate) fn insert(&self, caller: Option<&ToolCaller>, call: &CallId) {
        self.0.lock().insert(Self::key(caller, call));
    }

    /// Forgets the call; whether it was there.
    pub(crate) fn remove(&self, caller: Option<&ToolCaller>, call: &CallId) -> bool {
        self.0.lock().remove(&Self::key(caller, call))
    }

    fn contains(&self, caller: Option<&ToolCaller>, call: &CallId) -> bool {
        self.0.lock().contains(&Self::key(caller, call))
    }
}

/// Where calls may write: beneath the caller's writable roots (never into `.git`, `.dsh` or
/// dsh's home), anywhere in `danger-full-access`, and beyond the roots for a call the user
/// approved.
pub(crate) struct GuardWrites {
    pub guard: Arc<Guard>,
    pub asked: Arc<AskedCalls>,
}

impl WriteScope for GuardWrites {
    fn place(&self, call: &ToolCallContext) -> WritePlace {
        let caller = call.caller();
        let policy = self
            .guard
            .sandbox
            .for_workspace(caller.and_then(|c| c.cwd.as_deref()));
        if policy.mode == SandboxMode::DangerFullAccess {
            return WritePlace::Anywhere;
        }
        let roots: Vec<WriteRoot> = policy
            .named_write_roots()
            .into_iter()
            .map(|(path, alias)| WriteRoot { path, alias })
            .collect();
        if self.asked.contains(caller, call.call_id()) {
            WritePlace::Approved { roots }
        } else {
            WritePlace::Beneath {
                roots,
                holes: policy.protected_paths(),
            }
        }
    }
}
