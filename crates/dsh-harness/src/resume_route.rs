//! A resumed session keeps its own route.
//!
//! The settings' provider is a default for *new* sessions. A conversation held with a local
//! model must not be sent to DeepSeek on resume (a privacy leak) or fail for want of its key,
//! so every front end that resumes a session (`dsh run --resume`, the chat's and the terminal
//! UI's `/resume`, an editor's `session/load`) selects the provider and model the session last
//! used (its latest `request/context`, else its latest `request/header`) or was last told to
//! use (a `route/switched` later than both: a person's `/model`, an editor's model select, with
//! no request since) unless the person named others (`--provider`/`--model`), in which case
//! the front end is told so.

use dsh_session::{EventKind, RouteSwitched, SessionEvent, SessionId};

use crate::config::Overrides;
use crate::store::Store;

/// The provider route and model a stored session last used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Provider route name.
    pub provider: String,
    /// Model id.
    pub model: String,
}

/// The route recorded in `events`: the latest of a `request/context`, a `request/header`'s
/// configuration and a person's switch (`route/switched`).
pub(crate) fn route_of(events: &[SessionEvent]) -> Option<Route> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Other { .. } => RouteSwitched::of(e).map(|c| Route {
            provider: c.provider,
            model: c.model,
        }),
        EventKind::RequestContext(c) => Some(Route {
            provider: c.provider.clone(),
            model: c.model.clone(),
        }),
        EventKind::RequestHeader(h) => {
            let field = |name: &str| h.header.config.get(name)?.as_str().map(str::to_owned);
            Some(Route {
                provider: field("provider")?,
                model: field("model")?,
            })
        }
        _ => None,
    })
}

/// Reads the route of stored session `id` without repairing or locking it. `None` when the
/// session cannot be read (resuming it reports why) or never sent a request.
pub(crate) async fn stored_route(store: &Store, id: &SessionId) -> Option<Route> {
    let stored = store.read(id).await.ok()?;
    route_of(&stored.events)
}

/// The flags that resume `stored` as the user asked: the session's route unless a flag names
/// another provider or model. The second value is the notice to print when flags changed it.
pub(crate) fn resume_flags(flags: &Overrides, stored: &Route) -> (Overrides, Option<String>) {
    let provider = flags
        .provider
        .clone()
        .unwrap_or_else(|| stored.provider.clone());
    let model = match &flags.model {
        Some(model) => Some(model.clone()),
        // Another provider's models are its own; its default applies.
        None if provider == stored.provider => Some(stored.model.clone()),
        None => None,
    };
    let changed = provider != stored.provider || model.as_ref() != Some(&stored.model);
    let notice = changed.then(|| {
        format!(
            "session used provider `{}` with model `{}`; resuming with {}",
            stored.provider,
            stored.model,
            match &model {
                Some(model) =>
                    format!("provider `{provider}` and model `{model}` as the flags say"),
                None => format!("provider `{provider}` and its default model as the flags say"),
            }
        )
    });
    let resumed = Overrides {
        provider: Some(provider),
        model,
        base_url: flags.base_url.clone(),
        ..flags.clone()
    };
    (resumed, notice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(p: &str, m: &str) -> Route {
        Route {
            provider: p.into(),
            model: m.into(),
        }
    }

    fn flags(p: Option<&str>, m: Option<&str>) -> Overrides {
        Overrides {
            provider: p.map(Into::into),
            model: m.map(Into::into),
            ..Overrides::default()
        }
    }

    #[test]
    fn without_flags_the_sessions_own_route_is_kept_silently() {
        let (o, notice) = resume_flags(&flags(None, None), &route("local", "qwen"));
        assert_eq!(o.provider.as_deref(), Some("local"));
        assert_eq!(o.model.as_deref(), Some("qwen"));
        assert_eq!(notice, None);
    }

    #[test]
    fn a_flag_naming_another_route_wins_and_is_announced() {
        let (o, notice) = resume_flags(&flags(Some("deepseek"), None), &route("local", "qwen"));
        assert_eq!(o.provider.as_deref(), Some("deepseek"));
        assert_eq!(o.model, None, "the new provider's default model");
        assert!(notice.unwrap().contains("`local`"));
        let (o, notice) = resume_flags(&flags(None, Some("big")), &route("local", "qwen"));
        assert_eq!(o.provider.as_deref(), Some("local"));
        assert_eq!(o.model.as_deref(), Some("big"));
        assert!(notice.is_some());
    }

    fn event(kind: EventKind) -> SessionEvent {
        SessionEvent {
            seq: 0,
            time: 0,
            kind,
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        }
    }

    fn context(p: &str, m: &str) -> SessionEvent {
        event(EventKind::RequestContext(dsh_session::RequestContext {
            provider: p.into(),
            model: m.into(),
            context_window: None,
        }))
    }

    fn switched(p: &str, m: &str) -> SessionEvent {
        let switch = RouteSwitched {
            provider: p.into(),
            model: m.into(),
        };
        event(switch.draft().kind)
    }

    #[test]
    fn a_persons_switch_is_the_route_until_a_later_request_says_otherwise() {
        let mut events = vec![context("deepseek", "v4"), switched("local", "qwen")];
        assert_eq!(route_of(&events), Some(route("local", "qwen")));
        events.push(context("local", "qwen-big"));
        assert_eq!(route_of(&events), Some(route("local", "qwen-big")));
        assert_eq!(
            route_of(&[switched("local", "qwen")]),
            Some(route("local", "qwen")),
            "a switch before any request is the route too"
        );
    }

    #[test]
    fn flags_naming_the_sessions_own_route_say_nothing() {
        let (_, notice) =
            resume_flags(&flags(Some("local"), Some("qwen")), &route("local", "qwen"));
        assert_eq!(notice, None);
    }
}
