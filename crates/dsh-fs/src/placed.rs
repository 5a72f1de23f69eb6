//! [`read_placed`]: open without blocking, check the kind, read a bounded amount in time.

use std::fs::{File, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How long one read may take before the file is given up (a stalled network file system).
pub const READ_DEADLINE: Duration = Duration::from_secs(2);

/// What to do with a file larger than the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oversize {
    /// Keep the first `limit` bytes and say the file was cut (instruction files: their text is
    /// budgeted anyway).
    Cut,
    /// Refuse the file (structured files: a cut JSON or TOML document means something else).
    Refuse,
}

/// A file read by [`read_placed`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedFile {
    /// Its bytes, at most the limit.
    pub bytes: Vec<u8>,
    /// Whether the file was longer than the limit (only with [`Oversize::Cut`]).
    pub cut: bool,
}

/// Why a placed file was not read. Each names the path, since the person has to find it.
#[derive(Debug, thiserror::Error)]
pub enum PlacedError {
    /// Something other than a regular file is at the path.
    #[error("{} is {what}, not a regular file; refused", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What is there (`a FIFO`, `a directory`, …).
        what: &'static str,
    },
    /// The file is larger than the limit and the caller refuses such files.
    #[error("{} is larger than {limit} bytes; refused", path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// The read did not finish within [`READ_DEADLINE`].
    #[error("{} could not be read within {deadline:?}; refused", path.display())]
    TimedOut {
        /// The path.
        path: PathBuf,
        /// The deadline that passed.
        deadline: Duration,
    },
    /// Opening or reading failed.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Reads the file at `path` (following symlinks to their target, which is checked like the
/// file itself): `Ok(None)` when nothing is there, at most `limit` bytes otherwise.
pub fn read_placed(
    path: &Path,
    limit: u64,
    oversize: Oversize,
) -> Result<Option<PlacedFile>, PlacedError> {
    read_placed_within(path, limit, oversize, READ_DEADLINE)
}

fn read_placed_within(
    path: &Path,
    limit: u64,
    oversize: Oversize,
    deadline: Duration,
) -> Result<Option<PlacedFile>, PlacedError> {
    let io = |source| PlacedError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // A socket cannot be opened at all; name it rather than the errno.
        Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {
            return Err(PlacedError::NotRegular {
                path: path.to_path_buf(),
                what: kind_at(path),
            });
        }
        Err(e) => return Err(io(e)),
    };
    let kind = file.metadata().map_err(io)?.file_type();
    if !kind.is_file() {
        return Err(PlacedError::NotRegular {
            path: path.to_path_buf(),
            what: describe(&kind),
        });
    }
    let (bytes, longer) = read_in_time(file, limit, deadline).map_err(|e| match e {
        Timed::Out => PlacedError::TimedOut {
            path: path.to_path_buf(),
            deadline,
        },
        Timed::Failed(source) => io(source),
    })?;
    if longer && oversize == Oversize::Refuse {
        return Err(PlacedError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(Some(PlacedFile { bytes, cut: longer }))
}

enum Timed {
    Out,
    Failed(std::io::Error),
}

/// Reads `limit + 1` bytes at most on a thread of its own, waiting for it until `deadline`: a
/// read that hangs leaves only that thread behind. Returns the first `limit` bytes and whether
/// there were more.
fn read_in_time(file: File, limit: u64, deadline: Duration) -> Result<(Vec<u8>, bool), Timed> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("dsh-read".into())
        .spawn(move || {
            let mut bytes = Vec::new();
            let result = file
                .take(limit.saturating_add(1))
                .read_to_end(&mut bytes)
                .map(|_| bytes);
            let _ = tx.send(result);
        });
    if let Err(e) = spawned {
        return Err(Timed::Failed(e));
    }
    match rx.recv_timeout(deadline) {
        Ok(Ok(mut bytes)) => {
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            let longer = bytes.len() > limit;
            bytes.truncate(limit);
            Ok((bytes, longer))
        }
        Ok(Err(e)) => Err(Timed::Failed(e)),
        Err(_) => Err(Timed::Out),
    }
}

/// Opens the file at `path` for appending (creating it), refusing anything but a regular file
/// the way [`read_placed`] does: a FIFO in a history file's place must not make dsh wait for a
/// reader.
pub fn append_placed(path: &Path) -> Result<File, PlacedError> {
    let io = |source| PlacedError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // A FIFO without a reader, or a socket.
            Some(nix::libc::ENXIO) => PlacedError::NotRegular {
                path: path.to_path_buf(),
                what: kind_at(path),
            },
            _ => io(e),
        })?;
    let kind = file.metadata().map_err(io)?.file_type();
    if !kind.is_file() {
        return Err(PlacedError::NotRegular {
            path: path.to_path_buf(),
            what: describe(&kind),
        });
    }
    Ok(file)
}

/// Whether the path holds a regular file (`Ok(false)`: nothing there), for files a library
/// opens itself (the line editor's history): checked by path, so a file swapped in between the
/// check and the open still gets through; use [`read_placed`] where the read is ours.
pub fn check_placed(path: &Path) -> Result<bool, PlacedError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(true),
        Ok(m) => Err(PlacedError::NotRegular {
            path: path.to_path_buf(),
            what: describe(&m.file_type()),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(PlacedError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn describe(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

fn kind_at(path: &Path) -> &'static str {
    std::fs::metadata(path).map_or("not a regular file", |m| describe(&m.file_type()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn refused(path: &Path) -> String {
        match read_placed(path, 1024, Oversize::Refuse) {
            Err(e @ PlacedError::NotRegular { .. }) => e.to_string(),
            other => panic!("{} was not refused as irregular: {other:?}", path.display()),
        }
    }

    #[test]
    fn a_fifo_without_a_writer_is_refused_at_once_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("AGENTS.md");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let message = refused(&fifo);
        assert!(message.contains("AGENTS.md is a FIFO"), "{message}");
    }

    #[test]
    fn directories_sockets_and_devices_are_refused_by_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("config.toml");
        std::fs::create_dir(&sub).unwrap();
        assert!(refused(&sub).contains("is a directory"));
        let socket = dir.path().join("hooks.json");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        assert!(refused(&socket).contains("is a socket"));
        let zero = dir.path().join("CLAUDE.md");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(refused(&zero).contains("is a character device"));
    }

    #[test]
    fn a_huge_sparse_file_costs_one_bounded_read_and_is_cut_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        let file = File::create(&big).unwrap();
        file.set_len(1 << 30).unwrap();
        let cut = read_placed(&big, 100, Oversize::Cut).unwrap().unwrap();
        assert_eq!(cut.bytes.len(), 100);
        assert!(cut.cut);
        let err = read_placed(&big, 100, Oversize::Refuse).unwrap_err();
        assert!(err.to_string().contains("larger than 100 bytes"), "{err}");
    }

    #[test]
    fn a_missing_file_is_none_and_a_small_one_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_placed(&dir.path().join("none"), 10, Oversize::Refuse)
                .unwrap()
                .is_none()
        );
        let small = dir.path().join("small");
        std::fs::write(&small, "exactly10!").unwrap();
        let read = read_placed(&small, 10, Oversize::Refuse).unwrap().unwrap();
        assert_eq!(read.bytes, b"exactly10!");
        assert!(!read.cut);
    }

    #[test]
    fn appending_refuses_a_fifo_without_waiting_for_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("history");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = append_placed(&fifo).unwrap_err();
        assert!(err.to_string().contains("is a FIFO"), "{err}");
        let file = dir.path().join("fresh");
        std::io::Write::write_all(&mut append_placed(&file).unwrap(), b"x").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
    }

    #[test]
    fn a_read_that_does_not_finish_in_time_is_given_up() {
        // A FIFO opened read-write never reports end of file: reading it through a regular
        // file's path is impossible, so the deadline is exercised on the reader directly.
        let (reader, _writer) = nix::unistd::pipe().unwrap();
        let file = File::from(reader);
        let outcome = read_in_time(file, 10, Duration::from_millis(50));
        assert!(matches!(outcome, Err(Timed::Out)));
    }
}
