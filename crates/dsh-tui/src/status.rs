//! The status line (always) and the status indicator (while a turn runs).

use std::time::Instant;

use crate::host::{HostInfo, Prices};
use crate::transcript::{Activity, Tokens, Usage};
use crate::wrap::str_width;

const SPINNER: &[char] = &['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Dollars `tokens` cost at `prices`.
pub fn cost(tokens: &Tokens, prices: Prices) -> f64 {
    (tokens.input as f64 * prices.input
        + tokens.cache_read as f64 * prices.cache_read
        + tokens.output as f64 * prices.output)
        / 1_000_000.0
}

/// What the session cost: every model's tokens at its own prices; `None` when a model that
/// was billed has no known prices (a partial sum would mislead).
pub fn session_cost(usage: &Usage, info: &HostInfo) -> Option<f64> {
    usage
        .by_model
        .iter()
        .map(|(model, tokens)| {
            let prices = info.model_entry(None, model).and_then(|m| m.prices);
            // A model that billed nothing costs nothing, priced or not.
            if *tokens == Tokens::default() {
                return Some(0.0);
            }
            prices.map(|p| cost(tokens, p))
        })
        .sum::<Option<f64>>()
        // An empty sum is -0.0; nobody wants to read `$-0.00`.
        .map(|c| c + 0.0)
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
pub fn fields(info: &HostInfo, usage: &Usage) -> Vec<String> {
    let mut out = vec![info.model.clone(), info.mode.clone()];
    let window = usage.context_window.or_else(|| {
        info.model_entry(Some(&info.provider), &info.model)
            .and_then(|m| m.context_window)
    });
    if let Some(window) = window.filter(|w| *w > 0) {
        out.push(format!("ctx {}%", usage.last_input * 100 / window));
    }
    let total = usage.input + usage.cache_read + usage.output;
    out.push(format!("{} tok", tokens(total)));
    if let Some(c) = session_cost(usage, info) {
        out.push(format!("${c:.2}"));
    }
    if let Some(share) = (usage.cache_read * 100).checked_div(usage.input + usage.cache_read) {
        out.push(format!("cache {share}%"));
    }
    out
}

/// The status line at `width` columns: fields joined with ` · `, dropping the last ones that
/// do not fit.
pub fn line(info: &HostInfo, usage: &Usage, width: usize) -> String {
    let mut fields = fields(info, usage);
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
    waiting: bool,
    started: Option<Instant>,
    now: Instant,
) -> String {
    let elapsed = started.map_or(0, |s| now.saturating_duration_since(s).as_millis());
    let frame = SPINNER[(elapsed / 100) as usize % SPINNER.len()];
    let phase = if waiting {
        "Waiting for approval".to_owned()
    } else if let Some(retry) = &activity.retry {
        retry.clone()
    } else if let Some(tool) = &activity.tool {
        format!("Running {tool}")
    } else {
        "Thinking".to_owned()
    };
    format!("{frame} {phase} · {}s · esc to cancel", elapsed / 1000)
}

/// The indicator while the UI's own work runs (`⠙ Compacting · 3s · esc to stop`).
pub fn busy_indicator(busy: &crate::app::Busy, now: Instant) -> String {
    let elapsed = now.saturating_duration_since(busy.since).as_millis();
    let frame = SPINNER[(elapsed / 100) as usize % SPINNER.len()];
    format!("{frame} {} · {}s · esc to stop", busy.what, elapsed / 1000)
}

/// `/cost`: the session's tokens and cost, per model when more than one was billed.
pub fn cost_report(usage: &Usage, info: &HostInfo) -> String {
    let g = group_thousands;
    let mut text = format!(
        "{} requests · {} input tokens ({} cached) · {} output tokens",
        usage.requests,
        g(usage.input + usage.cache_read),
        g(usage.cache_read),
        g(usage.output)
    );
    match session_cost(usage, info) {
        Some(c) => text.push_str(&format!(" · ${c:.4}")),
        None => text.push_str(" · cost unknown (no prices for a model this session used)"),
    }
    if usage.by_model.len() > 1 {
        for (model, t) in &usage.by_model {
            let priced = info
                .model_entry(None, model)
                .and_then(|m| m.prices)
                .map_or("no prices".to_owned(), |p| format!("${:.4}", cost(t, p)));
            text.push_str(&format!(
                "\n  {model}: {} in · {} out · {priced}",
                g(t.input + t.cache_read),
                g(t.output)
            ));
        }
    }
    text
}

pub use dsh_harness::usage::group_thousands;
