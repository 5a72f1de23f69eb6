//! `[models."ID"]` in `config.toml`: the user's model facts (context window, output ceiling,
//! prices, whether it reads images) over the built-in catalog, and how `dsh config show` prints the selected model's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use dsh_llm::catalog::{FactsOrigin, ModelPrice};
use dsh_llm::{ModelCatalog, ModelOverride};
use serde::Deserialize;

use super::located;
use crate::error::{ConfigError, config_bail};

/// One `[models."ID"]` table: the model's facts over the catalog, and its reasoning effort
/// (the most specific level of `reasoning_effort`, see `config::effort`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileModel {
    context_window: Option<u64>,
    max_output_tokens: Option<u32>,
    price: Option<ModelPrice>,
    vision: Option<bool>,
    pub(super) reasoning_effort: Option<toml::Spanned<String>>,
}

impl FileModel {
    fn facts(&self) -> ModelOverride {
        ModelOverride {
            context_window: self.context_window,
            max_output_tokens: self.max_output_tokens,
            price: self.price,
            vision: self.vision,
        }
    }
}

/// The `[models."ID"]` tables as read, with where each starts for error messages.
pub(super) type FileModels = BTreeMap<String, toml::Spanned<FileModel>>;

/// The catalog the configuration describes: the built-in rows with every `[models."ID"]`
/// override. A zero window or ceiling, or a negative or non-finite price, is refused at the
/// table's `file:line:column`.
pub(super) fn catalog(
    models: &FileModels,
    path: &Path,
    text: &str,
) -> Result<ModelCatalog, ConfigError> {
    let mut catalog = ModelCatalog::builtin();
    for (id, table) in models {
        let at = || located(path, text, table.span().start);
        let facts = table.get_ref().facts();
        if facts.context_window == Some(0) {
            config_bail!(
                "invalid config file {}: models.\"{id}\".context_window must be positive",
                at()
            );
        }
        if facts.max_output_tokens == Some(0) {
            config_bail!(
                "invalid config file {}: models.\"{id}\".max_output_tokens must be positive",
                at()
            );
        }
        if let Some(p) = &facts.price
            && [p.input, p.cached_input, p.output]
                .iter()
                .any(|v| !v.is_finite() || *v < 0.0)
        {
            config_bail!(
                "invalid config file {}: models.\"{id}\".price: prices are US dollars per \
                 million tokens and must be zero or more",
                at()
            );
        }
        // A table that only sets `reasoning_effort` describes no facts.
        if facts != ModelOverride::default() {
            catalog = catalog.with_override(id.clone(), facts);
        }
    }
    Ok(catalog)
}

/// The warning for a model nobody described, or `None` when its window is known.
pub fn unknown_model_warning(catalog: &ModelCatalog, model: &str) -> Option<String> {
    let facts = catalog.facts(model);
    (facts.origin == FactsOrigin::Assumed).then(|| {
        format!(
            "model `{model}` has no known context window; assuming {} tokens (compaction \
             starts at 80% of it) and {} output tokens per request; set [models.\"{model}\"] \
             context_window and max_output_tokens in config.toml",
            facts.context_window, facts.max_output_tokens
        )
    })
}

/// The `[models."ID"]` section `dsh config show` prints for the selected model.
pub(super) fn render(catalog: &ModelCatalog, model: &str) -> String {
    let facts = catalog.facts(model);
    let source = match facts.origin {
        FactsOrigin::Builtin => "built-in catalog",
        FactsOrigin::Configured => "file",
        FactsOrigin::Assumed => "ASSUMED: unknown model, conservative default",
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "[models.{}]  # selected model",
        super::toml_string(model)
    );
    let _ = writeln!(
        out,
        "{:<48} # {source}",
        format!("context_window = {}", facts.context_window)
    );
    let _ = writeln!(
        out,
        "{:<48} # sent as max_tokens unless [defaults] max_tokens is set",
        format!("max_output_tokens = {}", facts.max_output_tokens)
    );
    match facts.price {
        Some(p) => {
            let _ = writeln!(
                out,
                "price = {{ input = {}, cached_input = {}, output = {} }}  # USD per 1M tokens",
                p.input, p.cached_input, p.output
            );
        }
        None => {
            let _ = writeln!(out, "# price unknown: cost is not shown");
        }
    }
    let _ = writeln!(
        out,
        "{:<48} # {}",
        format!("vision = {}", facts.vision),
        if facts.vision {
            "reads images: read_image is offered, prompts may carry images"
        } else {
            "text only: read_image is not offered, images are described in words"
        }
    );
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use crate::config::{ConfigError, Settings};

    fn resolve(config: &str) -> Result<Settings, ConfigError> {
        crate::config::resolve_file_for_test(config)
    }

    #[test]
    fn a_models_table_overrides_the_catalog_and_config_show_lists_the_selected_facts() {
        let s = resolve(
            "[defaults]\nmodel = \"qwen2.5-coder\"\nprovider = \"local\"\n\n\
             [models.\"qwen2.5-coder\"]\ncontext_window = 32768\nmax_output_tokens = 8192\n\
             price = { input = 0.27, cached_input = 0.07, output = 1.10 }\n\n\
             [models.\"deepseek-v4-flash\"]\ncontext_window = 24000\n",
        )
        .unwrap();
        let qwen = s.catalog.facts("qwen2.5-coder");
        assert_eq!(qwen.context_window, 32_768);
        assert_eq!(qwen.price.unwrap().cached_input, 0.07);
        assert_eq!(s.catalog.facts("deepseek-v4-flash").context_window, 24_000);
        assert!(super::unknown_model_warning(&s.catalog, "qwen2.5-coder").is_none());
        let shown = s.render(&|_| None);
        assert!(
            shown.contains("[models.\"qwen2.5-coder\"]  # selected model"),
            "{shown}"
        );
        assert!(shown.contains("context_window = 32768"), "{shown}");
        assert!(shown.contains("cached_input = 0.07"), "{shown}");
    }

    #[test]
    fn an_unknown_model_gets_one_warning_and_the_conservative_facts() {
        let s = resolve("[defaults]\nprovider = \"local\"\nmodel = \"mystery\"\n").unwrap();
        let warning = super::unknown_model_warning(&s.catalog, "mystery").unwrap();
        assert!(warning.contains("[models.\"mystery\"]"), "{warning}");
        assert!(s.render(&|_| None).contains("ASSUMED"));
    }

    #[test]
    fn bad_model_facts_are_refused_at_their_line() {
        let err = resolve("[models.\"m\"]\ncontext_window = 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("config.toml:1:"), "{err}");
        assert!(err.contains("context_window must be positive"), "{err}");
        let err = resolve("\n[models.\"m\"]\nwindow = 5\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("config.toml:3:"), "{err}");
        assert!(err.contains("window"), "{err}");
        let err = resolve("[models.\"m\"]\nprice = { input = -1, cached_input = 0, output = 0 }\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("must be zero or more"), "{err}");
    }
}
