//! Where image bytes live: a content-addressed store beside the session log.
//!
//! An image a person attaches or a tool reads enters the conversation as an
//! [`ImageRef`](crate::ImageRef) (`sha256:<hex>`, type, size), never as inline bytes: events stay
//! small, an image seen in twenty requests is stored once, and a request rebuilt on resume reads
//! the very same bytes, so it is byte-identical and the provider's prompt cache still serves it.
//! The store is a service ([`Attachments`]); the file-backed one lives with the JSONL store.

use std::fmt;

use crate::message::ImageRef;

/// Why an image could not be stored or read back.
#[derive(Debug, thiserror::Error)]
pub enum AttachmentError {
    /// The reference is not `sha256:` followed by 64 lower-case hex digits.
    #[error("{0:?} is not an attachment id (expected sha256:<64 hex digits>)")]
    BadId(String),
    /// No stored bytes under this id (deleted, or written on another machine).
    #[error("attachment {0} is missing from the attachment store")]
    Missing(String),
    /// The stored bytes do not hash to their id: the file was changed after it was written.
    #[error("attachment {0} is damaged: its bytes no longer match their hash")]
    Damaged(String),
    /// Reading or writing failed.
    #[error("attachment store: {0}")]
    Io(#[from] std::io::Error),
}

/// A content-addressed image store shared by every session of a process. Writes are durable
/// before [`put`](Attachments::put) returns, so an event naming the image may follow at once.
pub trait Attachments: Send + Sync + 'static {
    /// Stores `bytes` (of `media_type`, `width`×`height` pixels when known) and returns the
    /// reference to them. Storing the same bytes twice stores them once.
    fn put(
        &self,
        bytes: &[u8],
        media_type: &str,
        size: Option<(u32, u32)>,
    ) -> Result<ImageRef, AttachmentError>;

    /// The bytes `image` names, checked against its hash.
    fn get(&self, image: &ImageRef) -> Result<Vec<u8>, AttachmentError>;
}

impl fmt::Debug for dyn Attachments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("dyn Attachments")
    }
}

/// The hex digest of an attachment id, refusing anything that is not exactly `sha256:<64 hex>`
/// (the id becomes a file name, so nothing else may pass).
pub fn attachment_digest(id: &str) -> Result<&str, AttachmentError> {
    id.strip_prefix("sha256:")
        .filter(|hex| {
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        })
        .ok_or_else(|| AttachmentError::BadId(id.to_owned()))
}

/// The image type of `bytes` by its signature: PNG, JPEG, GIF or WebP, the kinds every
/// provider with vision accepts; `None` for anything else.
pub fn image_media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_full_lower_case_digest_is_an_id() {
        let hex = "a".repeat(64);
        assert_eq!(attachment_digest(&format!("sha256:{hex}")).unwrap(), hex);
        for bad in [
            "sha256:../../etc/passwd".to_owned(),
            format!("sha256:{}", "A".repeat(64)),
            format!("md5:{hex}"),
            format!("sha256:{}", "a".repeat(63)),
        ] {
            assert!(attachment_digest(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn images_are_known_by_their_signature() {
        assert_eq!(
            image_media_type(b"\x89PNG\r\n\x1a\n...."),
            Some("image/png")
        );
        assert_eq!(
            image_media_type(&[0xff, 0xd8, 0xff, 0xe0]),
            Some("image/jpeg")
        );
        assert_eq!(image_media_type(b"GIF89a.."), Some("image/gif"));
        assert_eq!(
            image_media_type(b"RIFF\0\0\0\0WEBPVP8 "),
            Some("image/webp")
        );
        assert_eq!(image_media_type(b"%PDF-1.7"), None);
    }
}
