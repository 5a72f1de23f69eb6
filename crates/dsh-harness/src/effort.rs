//! Sending the configured reasoning effort (`--effort`, `reasoning_effort`) with every model
//! request of a dsh agent.
//!
//! The effort goes into the call configuration through the `agent/request` waterfall, so it is
//! an explicit choice in the request header the session logs (not an adapter default), and the
//! LLM runtime checks it against the model's advertised efforts before any request: asking
//! DeepSeek for `medium` fails at once, naming the efforts it offers. The adapter then sends it
//! the way the provider expects (`reasoning_effort`, plus DeepSeek's `thinking` switch).

use dsh_agent::events::AgentRequest;
use dsh_kernel::{BoxError, Context};
use dsh_llm_openai::{OpenAiAdapterConfig, ProviderKind};

/// Makes every model request of the agent behind `agent_ctx` carry `effort`.
pub fn apply(agent_ctx: &Context, effort: String) -> Result<(), BoxError> {
    let _ = agent_ctx.on_waterfall::<AgentRequest, _>(move |mut proposal, next| {
        proposal.config.reasoning_effort = Some(effort.clone());
        async move { next.run(proposal).await }
    })?;
    Ok(())
}

/// An OpenAI-compatible server's models are not known to dsh, so the adapter would refuse any
/// effort for them ("it takes no reasoning effort"). The person configuring one knows what
/// their server accepts: the configured effort becomes the route's default, which such models
/// then offer (see `OpenAiAdapterConfig::model_info`), and it is sent as given. DeepSeek's
/// models, and every model the catalog describes, keep their own efforts: an effort they do not
/// offer stays an error.
pub fn offer(config: &mut OpenAiAdapterConfig, model: &str, effort: &str) {
    if config.kind != ProviderKind::OpenAiCompatible
        || model.is_empty()
        || dsh_llm::ModelCatalog::row(model).is_some()
    {
        return;
    }
    config.default_effort = Some(effort.to_owned());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_llm_openai::ApiKeySource;

    #[test]
    fn an_unknown_compatible_model_is_made_to_offer_the_configured_effort_but_deepseek_is_not() {
        let mut c = OpenAiAdapterConfig::openai_compatible("http://x", ApiKeySource::NotRequired);
        offer(&mut c, "llama", "minimal");
        assert!(c.model_info("llama").reasoning.unwrap().offers("minimal"));
        let mut d = OpenAiAdapterConfig::deepseek("http://x", ApiKeySource::NotRequired);
        offer(&mut d, "deepseek-v4-flash", "medium");
        assert!(
            !d.model_info("deepseek-v4-flash")
                .reasoning
                .unwrap()
                .offers("medium")
        );
    }
}
