//! What each slash command does: act at once, open a picker, or ask the runner for an
//! [`Effect`]. Commands that would change what a running turn works on (`/new`, `/resume`,
//! `/compact`, `/model ID`) wait for the turn to end, shown in the pending strip; the others
//! act at once. Adding a command is one arm in [`App::run_command`] (and a row in
//! [`crate::commands::COMMANDS`]).

use std::time::Instant;

use crate::app::{App, Busy, Effect, ModelPicker, Overlay, Picker};
use crate::commands::Command;
use crate::host::{ContextReport, ModelChoice};
use crate::status::group_thousands;

/// The approval policies `/mode` switches between (`default` goes back to the configured one).
const POLICIES: &[&str] = &["ask", "auto", "never", "default"];

impl App {
    /// Runs `command` now, or queues it until the turn (or the UI's own work) ends.
    pub(crate) fn command(&mut self, command: Command) -> Vec<Effect> {
        if (self.running() || self.busy.is_some()) && !command.runs_while_busy() {
            self.deferred.push(command);
            return Vec::new();
        }
        self.run_command(command)
    }

    /// The next waiting command, once nothing runs (the runner asks after every event).
    pub fn take_due(&mut self) -> Vec<Effect> {
        if self.running() || self.busy.is_some() || self.deferred.is_empty() {
            return Vec::new();
        }
        let command = self.deferred.remove(0);
        self.run_command(command)
    }

    fn run_command(&mut self, command: Command) -> Vec<Effect> {
        match command {
            Command::Exit => {
                self.exit = true;
                vec![Effect::Exit]
            }
            Command::Help => {
                self.overlay = Some(Overlay::Help(0));
                Vec::new()
            }
            Command::New => vec![Effect::New],
            Command::Resume(Some(reference)) => vec![Effect::Resume(reference)],
            Command::Resume(None) => {
                self.overlay = Some(Overlay::Picker(Picker::default()));
                vec![Effect::ListSessions]
            }
            Command::Compact(focus) => {
                if self.session.is_none() {
                    self.transcript.error("no session; try /new");
                    return Vec::new();
                }
                self.busy = Some(Busy {
                    what: "Compacting".into(),
                    since: Instant::now(),
                    compactions: self.transcript.compactions,
                });
                vec![Effect::Compact(focus)]
            }
            Command::Context => vec![Effect::Context],
            Command::Cost => {
                let text = crate::status::cost_report(&self.transcript.usage, &self.info);
                self.transcript.notice(text);
                Vec::new()
            }
            Command::Model(None) => {
                let mut entries = self.info.models.clone();
                // The one in use first, so Enter on an unfiltered picker changes nothing.
                entries.sort_by_key(|m| {
                    !(m.id == self.info.model && m.provider == self.info.provider)
                });
                self.overlay = Some(Overlay::Models(ModelPicker {
                    entries,
                    ..ModelPicker::default()
                }));
                Vec::new()
            }
            Command::Model(Some(arg)) => vec![Effect::SwitchModel(self.model_choice(&arg))],
            Command::Mode(None) => {
                self.transcript.notice(format!(
                    "mode: {}\n/mode ask|auto|never switches how much this session asks \
                     (/mode default goes back); the sandbox is set when dsh starts (--sandbox)",
                    self.info.mode
                ));
                Vec::new()
            }
            Command::Mode(Some(policy)) => {
                if !POLICIES.contains(&policy.as_str()) {
                    self.transcript.error(format!(
                        "unknown approval policy `{policy}`: use {}",
                        POLICIES.join(", ")
                    ));
                    return Vec::new();
                }
                let policy = (policy != "default").then_some(policy);
                vec![Effect::SetApproval(policy)]
            }
            Command::Export(path) => vec![Effect::Export(path)],
            Command::Plan(switch) => {
                let on = switch.target(self.planning());
                let then = match switch {
                    crate::commands::PlanSwitch::With(text) => Some(text),
                    _ => None,
                };
                vec![Effect::Plan { on, then }]
            }
            Command::Rewind(_) if self.running() || self.busy.is_some() => {
                self.transcript
                    .error("a turn is running: cancel it first (esc), then rewind");
                Vec::new()
            }
            Command::Rewind(Some(turn)) => {
                vec![Effect::Rewind(turn, crate::rewind::RewindScope::Both)]
            }
            Command::Rewind(None) => {
                self.overlay = Some(Overlay::Rewind(crate::rewind::RewindPicker::default()));
                vec![Effect::ListTurns]
            }
        }
    }

    /// What `/model ARG` names: `provider/model` of the catalogue, else a model of the
    /// session's provider, else of any provider, else (for the host to check) a model of the
    /// session's provider or a provider alone.
    fn model_choice(&self, arg: &str) -> ModelChoice {
        let models = &self.info.models;
        let found = models
            .iter()
            .find(|m| !m.provider.is_empty() && format!("{}/{}", m.provider, m.id) == arg)
            .or_else(|| {
                models
                    .iter()
                    .find(|m| m.id == arg && m.provider == self.info.provider)
            })
            .or_else(|| models.iter().find(|m| m.id == arg));
        if let Some(m) = found {
            return ModelChoice {
                provider: (!m.provider.is_empty()).then(|| m.provider.clone()),
                model: Some(m.id.clone()),
            };
        }
        if models.iter().any(|m| m.provider == arg) {
            return ModelChoice {
                provider: Some(arg.to_owned()),
                model: None,
            };
        }
        ModelChoice {
            provider: None,
            model: Some(arg.to_owned()),
        }
    }

    /// The compaction ended (or failed, or was stopped). What it did is in the log (its
    /// `compaction/end` shows as a notice, live and replayed alike); only a compaction that
    /// never started has something to add.
    pub fn compacted(&mut self, outcome: Result<String, String>) {
        let started = self.busy.take().map_or(0, |b| b.compactions);
        if let Err(error) = outcome
            && self.transcript.compactions == started
        {
            self.transcript.error(error);
        }
    }

    /// Shows `/context`'s answer.
    pub fn show_context(&mut self, report: &ContextReport) {
        let g = group_thousands;
        let mut text = match report.window.filter(|w| *w > 0) {
            Some(w) => format!(
                "context: ~{} of {} tokens ({}%){}",
                g(report.tokens),
                g(w),
                report.tokens * 100 / w,
                if report.measured { "" } else { " · estimated" }
            ),
            None => format!("context: ~{} tokens (window unknown)", g(report.tokens)),
        };
        for part in &report.parts {
            text.push_str(&format!("\n  {:<16} ~{}", part.label, g(part.tokens)));
        }
        if !report.largest.is_empty() {
            text.push_str("\nlargest items:");
            for part in &report.largest {
                text.push_str(&format!("\n  ~{:>7}  {}", g(part.tokens), part.label));
            }
        }
        self.transcript.notice(text);
    }
}
