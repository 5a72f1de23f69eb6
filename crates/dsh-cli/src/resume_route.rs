//! A resumed session keeps its own route.
//!
//! The settings' provider is a default for *new* sessions. A conversation held with a local
//! model must not be sent to DeepSeek on resume (a privacy leak) or fail for want of its key,
//! so `dsh run --resume ID` and `dsh chat --resume ID` select the provider and model the
//! session last used (its latest `request/context`, else its latest `request/header`) unless
//! `--provider`/`--model` name others, in which case dsh says so on stderr.

use anyhow::Context as _;
use dsh_session::{EventKind, SessionEvent, SessionId};

use crate::config::{Overrides, Settings};

/// The provider route and model a stored session last used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    /// Provider route name.
    pub(crate) provider: String,
    /// Model id.
    pub(crate) model: String,
}

/// The route recorded in `events`: the latest `request/context`, else the latest
/// `request/header`'s configuration.
pub(crate) fn route_of(events: &[SessionEvent]) -> Option<Route> {
    events.iter().rev().find_map(|e| match &e.kind {
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
pub(crate) async fn stored_route(settings: &Settings, id: &str) -> Option<Route> {
    let store = crate::store::Store::open(settings).ok()?;
    let stored = store.read(&SessionId::new(id)).await.ok()?;
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

/// The settings for a command that may resume session `resume`: those for its own route (see
/// the module docs), or the usual ones for a new session.
pub(crate) fn settings(flags: &Overrides, resume: Option<&str>) -> anyhow::Result<Settings> {
    let settings = Settings::load(flags)?;
    let Some(id) = resume else {
        return Ok(settings);
    };
    let route = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(stored_route(&settings, id)),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the session's route");
            None
        }
    };
    let Some(route) = route else {
        return Ok(settings);
    };
    let (resumed, notice) = resume_flags(flags, &route);
    if let Some(notice) = notice {
        eprintln!("dsh: {id}: {notice}");
    }
    Settings::load(&resumed).with_context(|| {
        format!(
            "session {id} used provider `{}` with model `{}`; name a configured one with \
             --provider/--model",
            route.provider, route.model
        )
    })
}

/// For `/resume` inside a running chat, whose harness serves one route: a notice when the
/// session used another one (restarting with `dsh chat --resume ID` uses the session's own).
pub(crate) async fn mid_chat_notice(settings: &Settings, id: &str) -> Option<String> {
    let route = stored_route(settings, id).await?;
    let current = Route {
        provider: settings.provider.value.clone(),
        model: settings.model.value.clone(),
    };
    (route != current).then(|| {
        format!(
            "session {id} used provider `{}` with model `{}`; this chat continues it with `{}` \
             and `{}` (run `dsh chat --resume {id}` to keep its own)",
            route.provider, route.model, current.provider, current.model
        )
    })
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

    #[test]
    fn flags_naming_the_sessions_own_route_say_nothing() {
        let (_, notice) =
            resume_flags(&flags(Some("local"), Some("qwen")), &route("local", "qwen"));
        assert_eq!(notice, None);
    }
}
