//! What the standard streams are connected to, for decisions a front end makes once at start
//! (whether to read stdin, whether the streamed answer was already seen).

use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

/// The file behind a stream, by a duplicate of its descriptor (the stream itself is untouched).
pub fn metadata_of(stream: &impl AsFd) -> Option<std::fs::Metadata> {
    let fd = stream.as_fd().try_clone_to_owned().ok()?;
    std::fs::File::from(fd).metadata().ok()
}

/// Whether stdout and stderr are one terminal, so text streamed on stderr was already seen on
/// the screen stdout would print to.
pub fn same_terminal() -> bool {
    let (out, err) = (std::io::stdout(), std::io::stderr());
    if !out.is_terminal() || !err.is_terminal() {
        return false;
    }
    match (metadata_of(&out), metadata_of(&err)) {
        (Some(a), Some(b)) => a.rdev() == b.rdev() && a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
