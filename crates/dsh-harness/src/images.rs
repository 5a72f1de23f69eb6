//! Images a person attaches to a message (`dsh run --image`, an editor's or the browser's image
//! block): checked, downscaled and stored once through `dsh-images`, the same path the
//! `read_image` tool takes, so every front end sends what the others would.

use std::path::Path;
use std::sync::Arc;

use dsh_agent::{AgentRegistry, ImageRefused, PromptImages};
use dsh_session::{Attachments, ContentBlock, SessionId};

use crate::config::Settings;
use crate::open::session_route;
use crate::switch::SessionChoices;
use crate::{Harness, HarnessError};

/// The harness's [`PromptImages`]: what [`Harness::attach_image`] does, for front ends that
/// reach the harness only through the context (the ACP bridge). It holds the pieces the
/// session's model is decided from, not the harness, so the context it is provided on holds
/// no cycle back to itself.
pub(crate) struct ImageGate {
    pub(crate) settings: Arc<Settings>,
    pub(crate) choices: Arc<SessionChoices>,
    pub(crate) registry: Arc<AgentRegistry>,
    pub(crate) attachments: Arc<dyn Attachments>,
}

impl ImageGate {
    /// The facts of the model `session` runs on now.
    fn model(&self, session: &SessionId) -> dsh_llm::ModelFacts {
        let route = session_route(&self.settings, &self.choices, &self.registry, session);
        self.settings.catalog.facts(&route.model)
    }

    fn attach(
        &self,
        session: &SessionId,
        label: &str,
        bytes: &[u8],
    ) -> Result<ContentBlock, String> {
        let model = self.model(session);
        if !model.vision {
            return Err(format!(
                "{label}: model `{}` does not read images (if it does, say so in the config: \
                 [models.\"{}\"] vision = true)",
                model.id, model.id
            ));
        }
        let attached = dsh_images::attach(self.attachments.as_ref(), bytes)
            .map_err(|e| format!("{label}: {e}"))?;
        Ok(ContentBlock::Image {
            attachment: attached.image,
        })
    }
}

impl PromptImages for ImageGate {
    fn attach(
        &self,
        session: &SessionId,
        label: &str,
        bytes: &[u8],
    ) -> Result<ContentBlock, ImageRefused> {
        ImageGate::attach(self, session, label, bytes).map_err(ImageRefused)
    }
}

impl Harness {
    /// An image block for a message to `session`, from `bytes` (`label` names them in
    /// errors: a file name, "the pasted image"). Refused before anything is stored when the
    /// session's model reads no images: sending the model a line in place of the picture the
    /// person chose would answer a question nobody asked.
    pub fn attach_image(
        &self,
        session: &SessionId,
        label: &str,
        bytes: &[u8],
    ) -> Result<ContentBlock, HarnessError> {
        self.images
            .attach(session, label, bytes)
            .map_err(HarnessError::Image)
    }

    /// [`Harness::attach_image`] for files, read with `dsh_images::read_file` (a FIFO or
    /// device is refused, at most `dsh_images::MAX_INPUT_BYTES` each); errors name the path.
    /// All are read and checked before the first is stored.
    pub fn attach_image_files(
        &self,
        session: &SessionId,
        paths: &[impl AsRef<Path>],
    ) -> Result<Vec<ContentBlock>, HarnessError> {
        let mut read = Vec::with_capacity(paths.len());
        for path in paths {
            let path = path.as_ref();
            let label = path.display().to_string();
            let bytes =
                dsh_images::read_file(path).map_err(|e| HarnessError::Image(e.to_string()))?;
            if dsh_session::image_media_type(&bytes).is_none() {
                return Err(HarnessError::Image(format!(
                    "{label}: {}",
                    dsh_images::ImageError::NotAnImage
                )));
            }
            read.push((label, bytes));
        }
        read.iter()
            .map(|(label, bytes)| self.attach_image(session, label, bytes))
            .collect()
    }
}
