//! Files written beneath a directory descriptor, so a write decided for one place cannot land
//! in another.
//!
//! The guard decides that a `write` may change `<workspace>/a/b.txt` because the path lies in
//! a writable root. If the tool then opened that path by name, every component would be
//! resolved again: a command running in the background could have turned `a` into a symlink
//! to `~` in between, and the write would replace `~/b.txt`. So a confined write starts from
//! a descriptor of the root ([`Root`]) and resolves the rest *beneath* it
//! (`openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, Linux 5.6): a symlink or `..` that
//! leads out of the root fails (`EXDEV`) instead of being followed. Where `openat2` is missing
//! (older kernels, a container's seccomp profile) each component is opened with `O_NOFOLLOW`
//! from its parent's descriptor and symlinks are expanded by hand with the same rule.
//!
//! A [`Place`] is one file to read or replace: a root, a path relative to it, and whether
//! resolution is confined. An unconfined place (the root `/`, anything goes) uses the same
//! code, so there is one write path, not two.
//!
//! Replacing a file ([`Place::replace`]) writes a temporary sibling created exclusively
//! (`O_CREAT | O_EXCL | O_NOFOLLOW`) in the parent's descriptor, flushes it, renames it over
//! the target within that same descriptor and flushes the directory: readers see the old file
//! or the new one, a crash or failure leaves the old file as it was, and the rename cannot
//! leave the directory the parent's descriptor names. A final component that is a symlink is
//! followed (the file it points to is replaced, not the link), beneath the root too.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata, Permissions};
use std::io::{self, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat, openat2, readlinkat, renameat};
use nix::sys::stat::{Mode, fstatat, mkdirat};

/// How many symlinks one resolution follows before it gives up (`ELOOP`), as the kernel does.
const MAX_SYMLINKS: usize = 40;

/// How paths are resolved beneath a root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (Linux 5.6+).
    Openat2,
    /// One component at a time with `O_NOFOLLOW`, symlinks expanded by hand.
    Walk,
}

impl Resolver {
    /// `openat2` where this kernel has it, else the walk; probed once per process.
    pub fn detect() -> Resolver {
        static FOUND: OnceLock<Resolver> = OnceLock::new();
        *FOUND.get_or_init(|| {
            let how = OpenHow::new()
                .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
                .resolve(ResolveFlag::RESOLVE_BENEATH);
            match openat2(nix::fcntl::AT_FDCWD, ".", how) {
                Err(Errno::ENOSYS | Errno::EPERM | Errno::EINVAL) => Resolver::Walk,
                _ => Resolver::Openat2,
            }
        })
    }
}

/// A directory writes are confined beneath, held open by descriptor.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
    resolver: Resolver,
}

impl Root {
    /// Opens the directory `path`, which must be absolute and free of symlinks (a canonical
    /// path): a symlink found on the way means a component was replaced since it was made
    /// canonical, and is refused.
    pub fn open(path: &Path) -> io::Result<Root> {
        Self::open_with(path, Resolver::detect())
    }

    /// [`Root::open`] with a chosen resolver (tests exercise the walk on kernels that have
    /// `openat2`).
    pub fn open_with(path: &Path, resolver: Resolver) -> io::Result<Root> {
        if !path.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a root must be an absolute path",
            ));
        }
        let slash = open_path(nix::fcntl::AT_FDCWD, Path::new("/"))?;
        let rest = path.strip_prefix("/").unwrap_or(path);
        let fd = if rest.as_os_str().is_empty() {
            slash
        } else {
            resolve(
                &slash,
                Path::new("/"),
                rest,
                Confine::NoSymlinks,
                resolver,
                true,
            )?
        };
        if !File::from(fd.try_clone()?).metadata()?.is_dir() {
            return Err(io::Error::from(io::ErrorKind::NotADirectory));
        }
        Ok(Root {
            fd,
            path: path.to_path_buf(),
            resolver,
        })
    }

    /// The root's path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How far resolution may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Confine {
    /// Anywhere (an approved or unconfined write).
    No,
    /// Beneath the root; symlinks that stay beneath it are followed.
    Beneath,
    /// Beneath the root, and no symlink at all.
    NoSymlinks,
}

/// One file to read or replace: `rel` resolved from `root`, confined or not.
#[derive(Debug)]
pub struct Place {
    root: Root,
    rel: PathBuf,
    confine: Confine,
}

impl Place {
    /// `path` (absolute) with no confinement: resolved from `/` as the kernel would.
    pub fn anywhere(path: &Path) -> io::Result<Place> {
        let root = Root::open(Path::new("/"))?;
        let rel = path.strip_prefix("/").unwrap_or(path).to_path_buf();
        Ok(Place {
            root,
            rel,
            confine: Confine::No,
        })
    }

    /// `rel` beneath `root`: nothing it resolves to may leave the root.
    pub fn beneath(root: Root, rel: &Path) -> Place {
        Place {
            root,
            rel: rel.to_path_buf(),
            confine: Confine::Beneath,
        }
    }

    /// The file's metadata, following symlinks (beneath the root when confined).
    pub fn metadata(&self) -> io::Result<Metadata> {
        let fd = self.resolve(&self.rel, true, OFlag::O_PATH)?;
        File::from(fd).metadata()
    }

    /// Whether the last component exists as a symlink whose target does not (resolution
    /// fails with `ENOENT` only past it).
    pub fn is_dangling_symlink(&self) -> bool {
        let Ok((parent, name)) = self.parent() else {
            return false;
        };
        let Ok(stat) = fstatat(&parent, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
            return false;
        };
        is_symlink(stat.st_mode)
            && matches!(self.metadata(), Err(e) if e.kind() == io::ErrorKind::NotFound)
    }

    /// Opens the file for reading, following symlinks (beneath the root when confined). Only
    /// a regular file opens: the kind is checked on the very file that is then opened, so a
    /// FIFO swapped in cannot block the read.
    pub fn open_read(&self) -> io::Result<File> {
        let fd = self.resolve_raw(&self.rel, true)?;
        if !File::from(fd.try_clone()?).metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(File::from(reopen(&fd, OFlag::O_RDONLY | OFlag::O_NOCTTY)?))
    }

    /// The real path of the directory the file is (or would be) in, as the kernel names it
    /// now: what a caller checks against places that must stay untouched.
    pub fn real_parent(&self) -> io::Result<PathBuf> {
        let (parent, _) = self.parent()?;
        real_path(&parent)
    }

    /// Creates every missing directory above the file, beneath the root when confined.
    pub fn create_parent_dirs(&self) -> io::Result<()> {
        let Some(parent) = self.rel.parent() else {
            return Ok(());
        };
        let mut done = PathBuf::new();
        for component in parent.components() {
            done.push(component);
            match self.resolve(&done, true, OFlag::O_PATH | OFlag::O_DIRECTORY) {
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let above = match done.parent() {
                Some(p) if !p.as_os_str().is_empty() => {
                    self.resolve(p, true, OFlag::O_PATH | OFlag::O_DIRECTORY)?
                }
                _ => self.root.fd.try_clone()?,
            };
            let name = done.file_name().unwrap_or(OsStr::new("."));
            match mkdirat(&above, name, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Replaces (or creates) the file with `bytes`, atomically and durably (see the module
    /// docs). `permissions` are applied to the new file (pass the old file's, so replacing
    /// keeps its mode). Through a symlink, the file it points to is replaced. Returns the new
    /// file's metadata, taken from the file itself after the rename (looking the name up again
    /// could find another file by then).
    pub fn replace(&self, bytes: &[u8], permissions: Option<Permissions>) -> io::Result<Metadata> {
        self.replace_if(bytes, permissions, &|_| Ok(()))
    }

    /// [`Place::replace`], after `allow` accepted the real path of the directory the file is
    /// written into: the very directory (by descriptor) the write then goes to, so a symlink
    /// flipped after the check cannot move the write into a place `allow` refuses.
    pub fn replace_if(
        &self,
        bytes: &[u8],
        permissions: Option<Permissions>,
        allow: &dyn Fn(&Path) -> io::Result<()>,
    ) -> io::Result<Metadata> {
        let (dir, name) = self.final_parent()?;
        allow(&real_path(&dir)?)?;
        write_atomic_in(&dir, &name, bytes, permissions)
    }

    /// The parent directory's descriptor and the file's name, the last component not
    /// followed.
    fn parent(&self) -> io::Result<(OwnedFd, OsString)> {
        let name = self
            .rel
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?
            .to_owned();
        let dir = match self.rel.parent() {
            Some(p) if !p.as_os_str().is_empty() => {
                self.resolve(p, true, OFlag::O_PATH | OFlag::O_DIRECTORY)?
            }
            _ => self.root.fd.try_clone()?,
        };
        Ok((dir, name))
    }

    /// Like [`Place::parent`], but when the last component is a symlink, the parent and name
    /// of the file it leads to (itself resolved beneath the root when confined).
    fn final_parent(&self) -> io::Result<(OwnedFd, OsString)> {
        let (dir, name) = self.parent()?;
        let is_link = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|s| is_symlink(s.st_mode));
        if !is_link {
            return Ok((dir, name));
        }
        // The target, resolved as a whole (confined), then named by the kernel: its parent
        // is opened again with no symlink allowed, so the name cannot be redirected between
        // the two steps.
        let target = self.resolve(&self.rel, true, OFlag::O_PATH)?;
        let real = real_path(&target)?;
        let relative = match self.confine {
            Confine::No => real.strip_prefix("/").unwrap_or(&real).to_path_buf(),
            Confine::Beneath | Confine::NoSymlinks => {
                let root = real_path(&self.root.fd)?;
                real.strip_prefix(&root)
                    .map_err(|_| escape())?
                    .to_path_buf()
            }
        };
        let name = relative
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?
            .to_owned();
        let dir = match relative.parent() {
            Some(p) if !p.as_os_str().is_empty() => resolve(
                &self.root.fd,
                &self.root.path,
                p,
                match self.confine {
                    Confine::No => Confine::No,
                    _ => Confine::NoSymlinks,
                },
                self.root.resolver,
                true,
            )?,
            _ => self.root.fd.try_clone()?,
        };
        Ok((dir, name))
    }

    fn resolve_raw(&self, rel: &Path, follow_last: bool) -> io::Result<OwnedFd> {
        resolve(
            &self.root.fd,
            &self.root.path,
            rel,
            self.confine,
            self.root.resolver,
            follow_last,
        )
    }

    fn resolve(&self, rel: &Path, follow_last: bool, flags: OFlag) -> io::Result<OwnedFd> {
        let fd = self.resolve_raw(rel, follow_last)?;
        if flags.contains(OFlag::O_PATH) && !flags.contains(OFlag::O_DIRECTORY) {
            return Ok(fd);
        }
        if flags.contains(OFlag::O_DIRECTORY) {
            if !File::from(fd.try_clone()?).metadata()?.is_dir() {
                return Err(io::Error::from(io::ErrorKind::NotADirectory));
            }
            return Ok(fd);
        }
        // Reopen the resolved file through its own descriptor: no name is looked up again.
        reopen(&fd, flags)
    }
}

/// `rel` resolved from `root` under `confine`, as an `O_PATH` descriptor. `root_path` is the
/// root's canonical name: an absolute symlink that points beneath it is followed there.
fn resolve(
    root: &OwnedFd,
    root_path: &Path,
    rel: &Path,
    confine: Confine,
    resolver: Resolver,
    follow_last: bool,
) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    if rel.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a path beneath a root must be relative",
        ));
    }
    let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    if !follow_last {
        flags |= OFlag::O_NOFOLLOW;
    }
    if confine == Confine::No {
        return openat(root, rel, flags, Mode::empty()).map_err(io::Error::from);
    }
    match resolver {
        Resolver::Openat2 => {
            let mut resolve = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS;
            if confine == Confine::NoSymlinks {
                resolve |= ResolveFlag::RESOLVE_NO_SYMLINKS;
            }
            let how = OpenHow::new().flags(flags).resolve(resolve);
            match openat2(root, rel, how) {
                Ok(fd) => Ok(fd),
                // The kernel refuses every absolute symlink beneath a root, even one that
                // points back inside it (`/ws/current -> /ws/releases/3`): the walk tells the
                // two apart.
                Err(Errno::EXDEV) if confine == Confine::Beneath => {
                    walk(root, root_path, rel, confine, follow_last)
                }
                Err(Errno::EXDEV) => Err(escape()),
                Err(Errno::ELOOP) if confine == Confine::NoSymlinks => Err(escape()),
                Err(other) => Err(other.into()),
            }
        }
        Resolver::Walk => walk(root, root_path, rel, confine, follow_last),
    }
}

/// The hand-made resolution: a stack of directory descriptors from the root down, each
/// component opened with `O_NOFOLLOW` from the one above; `..` pops (never above the root),
/// a symlink is read and its target's components are resolved in its place. An absolute
/// target is followed only when it names a place beneath the root (`root_path`), from the
/// root's own descriptor; any other leaves the root and is refused.
fn walk(
    root: &OwnedFd,
    root_path: &Path,
    rel: &Path,
    confine: Confine,
    follow_last: bool,
) -> io::Result<OwnedFd> {
    let mut stack: Vec<OwnedFd> = vec![root.try_clone()?];
    let mut pending: Vec<OsString> = components(rel)?;
    pending.reverse();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        let last = pending.is_empty();
        if part == "." {
            if last {
                return stack.pop().ok_or_else(escape);
            }
            continue;
        }
        if part == ".." {
            if stack.len() == 1 {
                return Err(escape());
            }
            stack.pop();
            if last {
                return stack.pop().ok_or_else(escape);
            }
            continue;
        }
        let top = stack.last().ok_or_else(escape)?;
        let fd = openat(
            top,
            part.as_os_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let meta = File::from(fd.try_clone()?).metadata()?;
        if meta.file_type().is_symlink() && (!last || follow_last) {
            if confine == Confine::NoSymlinks {
                return Err(escape());
            }
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(Errno::ELOOP.into());
            }
            let mut target = PathBuf::from(readlinkat(top, part.as_os_str())?);
            if target.is_absolute() {
                target = target
                    .strip_prefix(root_path)
                    .map_err(|_| escape())?
                    .to_path_buf();
                stack.truncate(1);
            }
            let mut expanded = components(&target)?;
            expanded.reverse();
            pending.extend(expanded);
            continue;
        }
        if last {
            return Ok(fd);
        }
        if !meta.is_dir() {
            return Err(Errno::ENOTDIR.into());
        }
        stack.push(fd);
    }
    stack.pop().ok_or_else(escape)
}

/// The components of a relative path, as names (`.` and `..` kept for the walk).
fn components(path: &Path) -> io::Result<Vec<OsString>> {
    path.components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name.to_owned()),
            Component::CurDir => Ok(OsString::from(".")),
            Component::ParentDir => Ok(OsString::from("..")),
            Component::RootDir | Component::Prefix(_) => Err(escape()),
        })
        .collect()
}

/// Whether a `st_mode` is a symlink's.
fn is_symlink(mode: u32) -> bool {
    nix::sys::stat::SFlag::from_bits_truncate(mode & nix::sys::stat::SFlag::S_IFMT.bits())
        == nix::sys::stat::SFlag::S_IFLNK
}

/// The error of a path that resolves outside its root.
fn escape() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "it resolves outside the writable root (through a symbolic link or `..`)",
    )
}

/// Opens the file an `O_PATH` descriptor names, with `flags`, without looking up any name:
/// through the descriptor's own `/proc/self/fd` entry, which the kernel resolves to the file
/// itself.
fn reopen(fd: &OwnedFd, flags: OFlag) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    openat(
        nix::fcntl::AT_FDCWD,
        link.as_str(),
        flags | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)
}

/// The kernel's name for what `fd` refers to now.
fn real_path(fd: &OwnedFd) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Longest part of the target's name kept in the temporary name, in bytes: with the dot, the
/// `.dsh-<pid>-<n>-<nanos>.tmp` suffix (at most 50 bytes) stays within NAME_MAX (255 bytes).
const TEMP_STEM_BYTES: usize = 100;

/// The start of `name` that fits [`TEMP_STEM_BYTES`], cut on a character boundary. Counted in
/// bytes, not characters: NAME_MAX is in bytes, and a name of 100 CJK characters is 300.
fn temp_stem(name: &str) -> &str {
    let mut end = name.len().min(TEMP_STEM_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Replaces (or creates) `name` in the directory `dir` with `bytes`: a temporary sibling
/// created exclusively, flushed, renamed over the name within `dir`, then `dir` flushed.
/// Returns the new file's metadata as of after the rename.
pub fn write_atomic_in(
    dir: &OwnedFd,
    name: &OsStr,
    bytes: &[u8],
    permissions: Option<Permissions>,
) -> io::Result<Metadata> {
    if name.as_bytes().contains(&b'/') || name == "." || name == ".." || name.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file name",
        ));
    }
    let stem = temp_stem(&name.to_string_lossy()).to_owned();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut attempt = 0;
    let (file, temp) = loop {
        let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
        let temp = format!(".{stem}.dsh-{}-{n}-{nanos:x}.tmp", std::process::id());
        match openat(
            dir,
            temp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(fd) => break (File::from(fd), temp),
            Err(Errno::EEXIST) if attempt < 16 => attempt += 1,
            Err(e) => return Err(e.into()),
        }
    };
    let written = (|| {
        let mut file = file;
        file.write_all(bytes)?;
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        file.sync_all()?;
        renameat(dir, temp.as_str(), dir, name).map_err(io::Error::from)?;
        file.metadata()
    })();
    let meta = match written {
        Ok(meta) => meta,
        Err(error) => {
            let _ =
                nix::unistd::unlinkat(dir, temp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
            return Err(error);
        }
    };
    // The new content is durable and in place; flushing the directory makes the rename
    // durable too. Some file systems refuse to fsync a directory: that must not turn a
    // completed replacement into a reported failure.
    let _ = reopen(dir, OFlag::O_RDONLY | OFlag::O_DIRECTORY)
        .and_then(|d| nix::unistd::fsync(d.as_fd()).map_err(io::Error::from));
    Ok(meta)
}

/// Opens `path` as an `O_PATH` descriptor from `dirfd`.
fn open_path(dirfd: impl AsFd, path: &Path) -> io::Result<OwnedFd> {
    openat(
        dirfd,
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_stem_is_cut_in_bytes_on_a_character_boundary() {
        assert_eq!(temp_stem("short.rs"), "short.rs");
        let wide = "文".repeat(84);
        let stem = temp_stem(&wide);
        assert_eq!(stem.len(), 99, "33 whole characters");
        assert!(wide.starts_with(stem));
    }
}
