//! Reading the files dsh finds by where they are, and writing files beneath a directory
//! descriptor ([`Place`]: see the `beneath` module) so a write decided for one place cannot
//! land in another.
//!
//! dsh reads some files only because of their place: `$DSH_HOME/config.toml`, a workspace's
//! `AGENTS.md`/`CLAUDE.md`, `.dsh/hooks.json`, skills and command files, the trust record. A
//! confined command can put anything at such a place (it may write the workspace), and a FIFO
//! there used to hang every later session in that directory: `open` of a FIFO waits for a
//! writer, `read` of one waits for data. [`read_placed`] is the one way these files are read:
//!
//! - the file is opened with `O_NONBLOCK` (a FIFO opens at once) and `O_NOCTTY`, then checked
//!   with `fstat` on the descriptor: anything but a regular file (a directory, a FIFO, a
//!   socket, a device such as a symlink to `/dev/zero`) is refused, naming the path and what it
//!   is;
//! - at most the caller's limit is read (a 1 GB sparse file costs one bounded read): past it
//!   the text is cut or refused, as the caller says;
//! - the read runs against a deadline, so a file system that stops answering stops only that
//!   file.

mod beneath;
mod placed;
mod private;
mod trust;

pub use beneath::{Place, Resolver, Root, write_atomic_in};
pub use placed::{
    Oversize, PlacedError, PlacedFile, READ_DEADLINE, append_placed, check_placed, read_placed,
};
pub use private::{PrivateDir, sweep_dead};
pub use trust::{TRUST_FILE, Trust, TrustRecord, content_hash};
