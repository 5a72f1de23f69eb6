//! `reasoning_effort`: how hard a reasoning model thinks, from the most specific setting that
//! applies to the selected route.
//!
//! Precedence, highest first: `--effort`, `DSH_EFFORT`, `[models."ID"]` of the selected model,
//! `[providers.NAME]` of the selected provider, `[defaults]`. Unset means the model's own
//! default. The value is not checked against a list here: the model's advertised efforts are
//! known to the adapter, which refuses an effort the model does not offer before any request.

use std::path::Path;

use super::{Source, Sourced, located};
use crate::error::{ConfigError, config_bail};

/// The candidates, most specific file level first; `None` where a level sets nothing.
pub(super) struct EffortInputs<'a> {
    pub flag: Option<&'a str>,
    pub env: Option<String>,
    pub model: Option<&'a toml::Spanned<String>>,
    pub provider: Option<&'a toml::Spanned<String>>,
    pub defaults: Option<&'a toml::Spanned<String>>,
}

/// The effective effort, or `None` for the model's own default. A blank value in the file is
/// an error at its line and column; a blank flag or variable is a usage mistake named as such.
pub(super) fn resolve(
    inputs: EffortInputs<'_>,
    path: &Path,
    text: &str,
) -> Result<Option<Sourced<String>>, ConfigError> {
    if let Some(flag) = inputs.flag {
        if flag.trim().is_empty() {
            config_bail!("--effort needs a level, e.g. `--effort low`");
        }
        return Ok(Some(Sourced::new(
            flag.trim().to_owned(),
            Source::Flag("--effort"),
        )));
    }
    if let Some(env) = inputs.env {
        return Ok(Some(Sourced::new(
            env.trim().to_owned(),
            Source::Env("DSH_EFFORT"),
        )));
    }
    for spanned in [inputs.model, inputs.provider, inputs.defaults]
        .into_iter()
        .flatten()
    {
        if spanned.get_ref().trim().is_empty() {
            config_bail!(
                "invalid config file {}: reasoning_effort must not be empty (leave it out for \
                 the model's default)",
                located(path, text, spanned.span().start)
            );
        }
    }
    Ok([inputs.model, inputs.provider, inputs.defaults]
        .into_iter()
        .flatten()
        .next()
        .map(|s| Sourced::new(s.get_ref().trim().to_owned(), Source::File)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::{Overrides, Settings, Source};

    fn resolve(config: &str, env: &[(&str, &str)], flag: Option<&str>) -> Settings {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        let home_path = home.path().to_str().unwrap().to_owned();
        let vars: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let lookup = move |k: &str| {
            if k == "DSH_HOME" {
                return Some(home_path.clone());
            }
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        };
        let flags = Overrides {
            effort: flag.map(str::to_owned),
            ..Overrides::default()
        };
        Settings::resolve(&lookup, &flags).unwrap()
    }

    #[test]
    fn the_most_specific_file_level_wins_and_flags_and_env_beat_the_file() {
        let file = "[defaults]\nreasoning_effort = \"low\"\n\
                    [providers.deepseek]\nreasoning_effort = \"high\"\n\
                    [models.\"deepseek-v4-flash\"]\nreasoning_effort = \"max\"\n\
                    [models.\"other\"]\nreasoning_effort = \"off\"\n";
        let s = resolve(file, &[], None);
        let effort = s.reasoning_effort.unwrap();
        assert_eq!(
            (effort.value.as_str(), effort.source),
            ("max", Source::File)
        );
        let s = resolve(
            "[defaults]\nreasoning_effort = \"low\"\n[providers.openai]\nreasoning_effort = \"high\"\n",
            &[],
            None,
        );
        assert_eq!(
            s.reasoning_effort.unwrap().value,
            "low",
            "another provider's level"
        );
        let s = resolve(file, &[("DSH_EFFORT", "off")], None);
        assert_eq!(
            s.reasoning_effort.unwrap().source,
            Source::Env("DSH_EFFORT")
        );
        let s = resolve(file, &[("DSH_EFFORT", "off")], Some("low"));
        let effort = s.reasoning_effort.unwrap();
        assert_eq!(
            (effort.value.as_str(), effort.source),
            ("low", Source::Flag("--effort"))
        );
        assert!(resolve("", &[], None).reasoning_effort.is_none());
    }
}
