//! `reasoning_effort`: how hard a reasoning model thinks, from the most specific setting that
//! applies to the selected route.
//!
//! Precedence, highest first: `--effort`, `DSH_EFFORT`, `[models."ID"]` of the selected model,
//! `[providers.NAME]` of the selected provider, `[defaults]`. Unset means the model's own
//! default. The value is not checked against a list here: the model's advertised efforts are
//! known to the adapter, which refuses an effort the model does not offer before any request.

use std::path::Path;

use anyhow::bail;
use serde::Deserialize;

use super::{Source, Sourced, located};

/// `[models."ID"]`: settings of one model, whichever provider serves it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileModel {
    pub(super) reasoning_effort: Option<toml::Spanned<String>>,
}

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
) -> anyhow::Result<Option<Sourced<String>>> {
    if let Some(flag) = inputs.flag {
        if flag.trim().is_empty() {
            bail!("--effort needs a level, e.g. `--effort low`");
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
            bail!(
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
