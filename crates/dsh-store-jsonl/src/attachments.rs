//! Images as files named by their hash, beside the session files.
//!
//! `<sessions>/attachments/<sha256 hex>`: written once through the no-clobber publication every
//! session file uses (temp file, sync, hard link, directory sync), so a crash never leaves a
//! partial image under a final name, and storing the same bytes again finds them there.
//! Reading checks the hash, so a changed file is reported instead of sent.

use std::fmt::Write as _;
use std::io::Read;
use std::path::PathBuf;

use dsh_session::{AttachmentError, Attachments, ImageRef, attachment_digest};
use sha2::{Digest, Sha256};

use crate::fsync::{OsFileOps, PublishError, publish_new, sync_dir};

/// The file-backed [`Attachments`] store.
#[derive(Clone, Debug)]
pub struct FileAttachments {
    dir: PathBuf,
}

impl FileAttachments {
    /// A store in `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The store beside the session files of `sessions_root`.
    pub fn beside_sessions(sessions_root: &std::path::Path) -> Self {
        Self::new(sessions_root.join("attachments"))
    }

    /// Where the store keeps its files.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

fn hex_digest(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for b in digest.iter() {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

impl Attachments for FileAttachments {
    fn put(
        &self,
        bytes: &[u8],
        media_type: &str,
        size: Option<(u32, u32)>,
    ) -> Result<ImageRef, AttachmentError> {
        let hex = hex_digest(bytes);
        let path = self.dir.join(&hex);
        match publish_new(&OsFileOps, &path, bytes) {
            Ok(_) | Err(PublishError::Exists) => {}
            Err(PublishError::Io(e)) => return Err(e.into()),
            // Linked but the name's durability is unknown: sync once more, else report.
            Err(PublishError::DirSync(_, _)) => sync_dir(&self.dir)?,
        }
        Ok(ImageRef {
            attachment_id: format!("sha256:{hex}"),
            media_type: media_type.to_owned(),
            bytes: bytes.len() as u64,
            width: size.map(|s| s.0),
            height: size.map(|s| s.1),
        })
    }

    fn get(&self, image: &ImageRef) -> Result<Vec<u8>, AttachmentError> {
        let hex = attachment_digest(&image.attachment_id)?;
        let file = match std::fs::File::open(self.dir.join(hex)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(AttachmentError::Missing(image.attachment_id.clone()));
            }
            Err(e) => return Err(e.into()),
        };
        // Read one byte past the recorded size: a longer file is damaged, not truncated.
        let mut bytes = Vec::with_capacity(usize::try_from(image.bytes).unwrap_or(0));
        file.take(image.bytes.saturating_add(1))
            .read_to_end(&mut bytes)?;
        if hex_digest(&bytes) != hex {
            return Err(AttachmentError::Damaged(image.attachment_id.clone()));
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_image_is_stored_once_and_read_back_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileAttachments::new(dir.path().join("attachments"));
        let a = store.put(b"png bytes", "image/png", Some((2, 3))).unwrap();
        let b = store.put(b"png bytes", "image/png", Some((2, 3))).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.bytes, 9);
        assert_eq!((a.width, a.height), (Some(2), Some(3)));
        assert!(a.attachment_id.starts_with("sha256:"));
        assert_eq!(store.get(&a).unwrap(), b"png bytes");
        assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1);

        let path = store
            .dir()
            .join(attachment_digest(&a.attachment_id).unwrap());
        std::fs::write(&path, b"other bytes").unwrap();
        assert!(matches!(store.get(&a), Err(AttachmentError::Damaged(_))));
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(store.get(&a), Err(AttachmentError::Missing(_))));
    }

    #[test]
    fn an_id_that_is_not_a_digest_never_becomes_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileAttachments::new(dir.path());
        let evil = ImageRef {
            attachment_id: "sha256:../../../etc/passwd".into(),
            media_type: "image/png".into(),
            bytes: 10,
            width: None,
            height: None,
        };
        assert!(matches!(store.get(&evil), Err(AttachmentError::BadId(_))));
    }
}
