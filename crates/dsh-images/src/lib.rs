//! Images for vision models: what `read_image`, `dsh run --image`, an editor's image block and
//! an MCP server's image result all go through before a model sees them.
//!
//! [`attach`] checks the bytes are PNG, JPEG, GIF or WebP (the kinds every provider with vision
//! accepts) by their signature, measures them, downscales a large one so its long edge is at
//! most [`MAX_EDGE`] pixels (providers scale larger images down anyway, after billing the
//! upload; a smaller image costs fewer tokens and stays under request limits), and stores the
//! result once in the attachment store, returning the reference events carry.

use std::io::Cursor;
use std::path::Path;

use dsh_session::{AttachmentError, Attachments, ImageRef, image_media_type};
use image::{ImageFormat, ImageReader};

/// The longest edge an attached image keeps, in pixels (what Anthropic and OpenAI resize to).
pub const MAX_EDGE: u32 = 1568;

/// The largest image file read at all, in bytes.
pub const MAX_INPUT_BYTES: usize = 20 * 1024 * 1024;

/// The largest image sent as it is; a larger one is re-encoded smaller even when its
/// dimensions are within [`MAX_EDGE`].
pub const MAX_SENT_BYTES: usize = 3 * 1024 * 1024 + 512 * 1024;

/// Why an image could not be attached.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Not PNG, JPEG, GIF or WebP.
    #[error("not an image a model can read (PNG, JPEG, GIF or WebP expected)")]
    NotAnImage,
    /// Larger than [`MAX_INPUT_BYTES`].
    #[error("the image is {0} bytes; at most {MAX_INPUT_BYTES} are read")]
    TooLarge(usize),
    /// The bytes claim a format but do not decode.
    #[error("the image could not be decoded: {0}")]
    Undecodable(String),
    /// Storing it failed.
    #[error(transparent)]
    Store(#[from] AttachmentError),
    /// The file is missing, not a regular file, too large or unreadable (the text names it).
    #[error("{0}")]
    File(String),
}

/// The bytes of the image file at `path`, read the way dsh reads files it was pointed at
/// (`dsh_fs::read_placed`): a FIFO or device is refused instead of blocking, at most
/// [`MAX_INPUT_BYTES`] are read, within a deadline. `read_image`, `dsh run --image` and the
/// terminal UI's `@shot.png` all read through it.
pub fn read_file(path: &Path) -> Result<Vec<u8>, ImageError> {
    match dsh_fs::read_placed(path, MAX_INPUT_BYTES as u64, dsh_fs::Oversize::Refuse) {
        Ok(Some(file)) => Ok(file.bytes),
        Ok(None) => Err(ImageError::File(format!(
            "{}: no such file",
            path.display()
        ))),
        Err(e) => Err(ImageError::File(e.to_string())),
    }
}

/// An image ready for a model: stored, with what was done to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    /// The reference events carry.
    pub image: ImageRef,
    /// The original size, when it was scaled down.
    pub scaled_from: Option<(u32, u32)>,
}

/// Checks, measures, downscales when needed, and stores `bytes` (see the crate docs).
pub fn attach(store: &dyn Attachments, bytes: &[u8]) -> Result<Attached, ImageError> {
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(ImageError::TooLarge(bytes.len()));
    }
    let media_type = image_media_type(bytes).ok_or(ImageError::NotAnImage)?;
    let format = ImageFormat::from_mime_type(media_type).ok_or(ImageError::NotAnImage)?;
    let reader = ImageReader::with_format(Cursor::new(bytes), format);
    let (width, height) = reader
        .into_dimensions()
        .map_err(|e| ImageError::Undecodable(e.to_string()))?;
    if width.max(height) <= MAX_EDGE && bytes.len() <= MAX_SENT_BYTES {
        let image = store.put(bytes, media_type, Some((width, height)))?;
        return Ok(Attached {
            image,
            scaled_from: None,
        });
    }
    let decoded = ImageReader::with_format(Cursor::new(bytes), format)
        .decode()
        .map_err(|e| ImageError::Undecodable(e.to_string()))?;
    let small = if width.max(height) > MAX_EDGE {
        decoded.resize(MAX_EDGE, MAX_EDGE, image::imageops::FilterType::Triangle)
    } else {
        // Within the edge but heavy: halve until the encoding fits.
        decoded.resize(width / 2, height / 2, image::imageops::FilterType::Triangle)
    };
    // Photographs stay JPEG (much smaller); everything else becomes PNG (lossless, and what a
    // screenshot should stay).
    let (out_format, out_type) = match format {
        ImageFormat::Jpeg => (ImageFormat::Jpeg, "image/jpeg"),
        _ => (ImageFormat::Png, "image/png"),
    };
    let small = if out_format == ImageFormat::Jpeg {
        image::DynamicImage::ImageRgb8(small.to_rgb8())
    } else {
        small
    };
    let mut encoded = Cursor::new(Vec::new());
    small
        .write_to(&mut encoded, out_format)
        .map_err(|e| ImageError::Undecodable(e.to_string()))?;
    let encoded = encoded.into_inner();
    let image = store.put(&encoded, out_type, Some((small.width(), small.height())))?;
    Ok(Attached {
        image,
        scaled_from: Some((width, height)),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_store_jsonl::FileAttachments;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let img = image::RgbImage::from_fn(width, height, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
        });
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn a_small_image_is_stored_as_it_is_with_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileAttachments::new(dir.path());
        let bytes = png(40, 30);
        let a = attach(&store, &bytes).unwrap();
        assert_eq!(a.scaled_from, None);
        assert_eq!((a.image.width, a.image.height), (Some(40), Some(30)));
        assert_eq!(a.image.media_type, "image/png");
        assert_eq!(store.get(&a.image).unwrap(), bytes);
    }

    #[test]
    fn a_large_image_is_scaled_to_the_maximum_edge() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileAttachments::new(dir.path());
        let a = attach(&store, &png(3136, 1000)).unwrap();
        assert_eq!(a.scaled_from, Some((3136, 1000)));
        assert_eq!((a.image.width, a.image.height), (Some(1568), Some(500)));
        let back = store.get(&a.image).unwrap();
        assert_eq!(image_media_type(&back), Some("image/png"));
    }

    #[test]
    fn what_is_not_an_image_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileAttachments::new(dir.path());
        assert!(matches!(
            attach(&store, b"%PDF-1.7 ..."),
            Err(ImageError::NotAnImage)
        ));
        assert!(matches!(
            attach(&store, b"\x89PNG\r\n\x1a\ngarbage"),
            Err(ImageError::Undecodable(_))
        ));
    }
}
