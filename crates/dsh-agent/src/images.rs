//! How a front end that builds messages itself turns a person's image into a message block:
//! the seam between the front ends and the composition root, like [`crate::AgentPlanner`].
//!
//! Whether a session's model reads images (its catalogue row, a person's model switch, the
//! config's `vision`) and where pictures are stored are the composition root's business; a
//! front end such as the ACP bridge only holds bytes from its client. So the root provides one
//! [`PromptImages`] on the root context and every front end attaches images through it, sending
//! the model what `dsh run --image` would.

use dsh_session::{ContentBlock, SessionId};

/// An image that cannot go into a message; the text names it and says why (the model that
/// reads no images, a picture too large or not an image at all).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ImageRefused(pub String);

/// The composition root's image attacher, provided on the root context as `dyn PromptImages`.
pub trait PromptImages: Send + Sync + 'static {
    /// An image block for a message to `session` from `bytes` (`label` names them in the
    /// error), stored before it is returned; refused before anything is stored when the
    /// session's model reads no images.
    fn attach(
        &self,
        session: &SessionId,
        label: &str,
        bytes: &[u8],
    ) -> Result<ContentBlock, ImageRefused>;
}
