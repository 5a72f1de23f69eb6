//! An in-memory attachment store for adapter and loop tests: the seam is
//! `dsh_session::Attachments`; the file-backed store is tested on its own in `dsh-store-jsonl`.

use std::collections::HashMap;
use std::fmt::Write as _;

use dsh_session::{AttachmentError, Attachments, ImageRef};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// Images kept in a map under the same `sha256:<hex>` ids the file store uses, so a request a
/// test builds names exactly what a real one would.
#[derive(Debug, Default)]
pub struct MemoryAttachments {
    images: Mutex<HashMap<String, Vec<u8>>>,
}

impl MemoryAttachments {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Attachments for MemoryAttachments {
    fn put(
        &self,
        bytes: &[u8],
        media_type: &str,
        size: Option<(u32, u32)>,
    ) -> Result<ImageRef, AttachmentError> {
        let mut id = String::from("sha256:");
        for b in Sha256::digest(bytes).iter() {
            let _ = write!(id, "{b:02x}");
        }
        self.images.lock().insert(id.clone(), bytes.to_vec());
        Ok(ImageRef {
            attachment_id: id,
            media_type: media_type.to_owned(),
            bytes: bytes.len() as u64,
            width: size.map(|s| s.0),
            height: size.map(|s| s.1),
        })
    }

    fn get(&self, image: &ImageRef) -> Result<Vec<u8>, AttachmentError> {
        self.images
            .lock()
            .get(&image.attachment_id)
            .cloned()
            .ok_or_else(|| AttachmentError::Missing(image.attachment_id.clone()))
    }
}

/// A valid 2×1 PNG (a red and a blue pixel): the smallest image every decoder and provider
/// accepts, for tests that attach, send or read one.
pub const TINY_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x7b, 0x40, 0xe8,
    0xdd, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0x00, 0x04,
    0xff, 0x01, 0x07, 0x00, 0x01, 0xff, 0xe2, 0x23, 0x9e, 0x59, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
