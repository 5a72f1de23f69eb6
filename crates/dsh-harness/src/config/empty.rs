//! An empty model name is a configuration error, reported where it is written.
//!
//! `model = ""` used to pass `dsh config show` and then fail the run with an internal message
//! about the agent's options; it is refused when the file is read, at `file:line:column`, and
//! `--model ""` is refused as a usage error.

use std::path::Path;

use super::{FileConfig, Overrides, located};
use crate::error::{ConfigError, config_bail};

/// Fails on an empty `defaults.model` or an empty entry of a provider's `models`.
pub(super) fn refuse_empty_models(
    path: &Path,
    text: &str,
    file: &FileConfig,
) -> Result<(), ConfigError> {
    if let Some(model) = &file.defaults.model
        && model.get_ref().trim().is_empty()
    {
        config_bail!(
            "invalid config file {}: defaults.model is empty; name a model, or remove the line \
             to use the provider's default model",
            located(path, text, model.span().start)
        );
    }
    for (name, provider) in &file.providers {
        for model in provider.models.iter().flatten() {
            if model.get_ref().trim().is_empty() {
                config_bail!(
                    "invalid config file {}: providers.{name}.models has an empty model name",
                    located(path, text, model.span().start)
                );
            }
        }
    }
    Ok(())
}

/// Fails on `--model ""`.
pub(super) fn refuse_empty_flag(flags: &Overrides) -> Result<(), ConfigError> {
    if flags.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        config_bail!("--model is empty; name a model, or leave the flag out");
    }
    Ok(())
}
