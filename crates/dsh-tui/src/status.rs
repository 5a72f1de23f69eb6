//! The status line (always) and the status indicator (while a turn runs).

use std::time::Instant;

use crate::host::{HostInfo, Prices};
use crate::transcript::{Activity, Usage};
use crate::wrap::str_width;

const SPINNER: &[char] = &['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// The prices of the model in use, when the catalogue has them.
fn prices(info: &HostInfo) -> Option<Prices> {
    info.models
        .iter()
        .find(|m| m.id == info.model)
        .and_then(|m| m.prices)
}

/// Dollars spent, from token totals and prices.
pub fn cost(usage: &Usage, prices: Prices) -> f64 {
    (usage.input as f64 * prices.input
        + usage.cache_read as f64 * prices.cache_read
        + usage.output as f64 * prices.output)
        / 1_000_000.0
}

/// `182k`, `1.2M`, `950`.
pub fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{}k", n / 1_000),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// The fields of the status line, most important first (narrow terminals drop from the end).
/// `planning`: the session is in plan mode, shown before the sandbox mode it narrows.
pub fn fields(info: &HostInfo, usage: &Usage, planning: bool) -> Vec<String> {
    let mut out = vec![info.model.clone()];
    if planning {
        out.push("plan mode".to_owned());
    }
    out.push(info.mode.clone());
    let window = usage.context_window.or_else(|| {
        info.models
            .iter()
            .find(|m| m.id == info.model)
            .and_then(|m| m.context_window)
    });
    if let Some(window) = window.filter(|w| *w > 0) {
        out.push(format!("ctx {}%", usage.last_input * 100 / window));
    }
    let total = usage.input + usage.cache_read + usage.output;
    out.push(format!("{} tok", tokens(total)));
    if let Some(p) = prices(info) {
        out.push(format!("${:.2}", cost(usage, p)));
    }
    if let Some(share) = (usage.cache_read * 100).checked_div(usage.input + usage.cache_read) {
        out.push(format!("cache {share}%"));
    }
    out
}

/// The status line at `width` columns: fields joined with ` · `, dropping the last ones that
/// do not fit.
pub fn line(info: &HostInfo, usage: &Usage, planning: bool, width: usize) -> String {
    let mut fields = fields(info, usage, planning);
    loop {
        let text = fields.join(" · ");
        if str_width(&text) < width || fields.len() <= 1 {
            return text;
        }
        fields.pop();
    }
}

/// The running indicator: spinner, phase, elapsed time, cancel hint.
pub fn indicator(
    activity: &Activity,
    waiting: Option<&str>,
    started: Option<Instant>,
    now: Instant,
) -> String {
    let elapsed = started.map_or(0, |s| now.saturating_duration_since(s).as_millis());
    let frame = SPINNER[(elapsed / 100) as usize % SPINNER.len()];
    let phase = if let Some(waiting) = waiting {
        waiting.to_owned()
    } else if let Some(retry) = &activity.retry {
        retry.clone()
    } else if let Some(tool) = &activity.tool {
        format!("Running {tool}")
    } else {
        "Thinking".to_owned()
    };
    format!("{frame} {phase} · {}s · esc to cancel", elapsed / 1000)
}

/// `/cost`: the session's tokens and cost.
pub fn cost_report(usage: &Usage, info: &HostInfo) -> String {
    let mut text = format!(
        "tokens: {} input ({} cached) · {} output",
        usage.input + usage.cache_read,
        usage.cache_read,
        usage.output
    );
    match prices(info) {
        Some(p) => text.push_str(&format!(" · ${:.4}", cost(usage, p))),
        None => text.push_str(" · cost unknown (no prices for this model)"),
    }
    text
}
/// `1234567` as `1,234,567`: counts people read at a glance (pasted characters, tokens in
/// the chat's and `dsh run`'s usage line).
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
