//! Plan mode over ACP: the session mode `plan`, `/plan`, and following plan mode when it
//! changes on the agent's side (an approved plan leaves it).
//!
//! The bridge's mode and the session's plan mode are kept one: choosing `plan` turns plan
//! mode on through [`PlanMode`] (durable, and what the guard enforces), choosing another mode
//! while planning turns it off, and every `plan/mode` event (whoever caused it) moves the
//! bridge's mode with it ([`SessionState::follow_plan`](crate::record::SessionState)), so the
//! editor's mode picker always shows what is in force.

use agent_client_protocol::Error;
use dsh_plan::{PlanMode, Trigger};

use crate::bridge::Bridge;
use crate::errors::{internal, invalid};
use crate::modes::Mode;
use crate::record::SessionRecord;

/// Switches `record`'s session to `mode`, turning plan mode on or off when it enters or
/// leaves `plan`.
pub(crate) fn choose_mode(
    bridge: &Bridge,
    record: &SessionRecord,
    mode: Mode,
) -> Result<(), Error> {
    let current = record.state.mode();
    if mode == Mode::Plan || current == Mode::Plan {
        let plan = bridge
            .ctx
            .get::<PlanMode>()
            .ok_or_else(|| invalid("plan mode is not available in this agent"))?;
        if mode != Mode::Plan {
            // Leaving plan mode for `mode`: the `plan/mode` event returns there.
            record.state.return_after_plan(mode);
        }
        let by = if record.agent().session().last_turn() == 0 {
            Trigger::Start
        } else {
            Trigger::User
        };
        plan.set(record.agent(), mode == Mode::Plan, by)
            .map_err(|e| internal(e.to_string()))?;
    }
    record.state.switch_mode(mode);
    Ok(())
}

/// `/plan [on|off]`: switches plan mode (bare `/plan` toggles).
pub(crate) fn command(
    bridge: &Bridge,
    record: &SessionRecord,
    args: &str,
) -> Result<String, Error> {
    let on = record.state.mode() == Mode::Plan;
    let target = match args {
        "" => !on,
        "on" => true,
        "off" => false,
        other => return Err(invalid(format!("unknown argument: {other} (on, off)"))),
    };
    let mode = if target {
        Mode::Plan
    } else if on {
        Mode::Ask
    } else {
        record.state.mode()
    };
    choose_mode(bridge, record, mode)?;
    Ok(if target {
        "plan mode on: the agent explores read-only and proposes a plan for your approval"
            .to_owned()
    } else {
        "plan mode off".to_owned()
    })
}
