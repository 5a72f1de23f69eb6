//! The last steps in a command's own process, between `fork` and `exec`: what makes it a
//! confined process whatever it was started as.
//!
//! In order:
//! 1. `setsid`: a session of its own, without a controlling terminal. `/dev/tty` then fails
//!    (`ENXIO`) instead of reaching the terminal dsh runs in, where `TIOCSTI` would type into
//!    the user's shell.
//! 2. Every descriptor above 2 close-on-exec (`close_range`): nothing dsh or the supervisor
//!    inherited (a listening socket while the network is off, a file outside the roots)
//!    reaches the command.
//! 3. In a confining mode:
//!    - capabilities cut: bounding set emptied, ambient and inheritable sets cleared, then
//!      effective and permitted, so a command started as root is an ordinary user to the
//!      kernel (no `chown`, `setcap`, `sethostname`, raw sockets, `CAP_SYS_PTRACE` reads of
//!      other processes' `/proc` files), and nothing it executes can regain them;
//!    - `no_new_privs`, so setuid programs gain nothing;
//!    - the seccomp filter ([`crate::seccomp`]);
//!    - the Landlock ruleset, whose status is checked: a ruleset the kernel did not enforce at
//!      all fails the start.
//!
//! The supervisor is single-threaded, so these steps may allocate (the landlock crate does).
//! Any failure fails the spawn: the command never runs with less than was asked.

use std::io;

use landlock::{RulesetCreated, RulesetStatus};
use seccompiler::BpfProgram;

/// What one command's process applies to itself before `exec`.
#[derive(Debug, Default)]
pub(crate) struct Confinement {
    /// Cut every capability (confining modes).
    pub drop_capabilities: bool,
    /// The seccomp filter to install.
    pub seccomp: Option<BpfProgram>,
    /// The Landlock ruleset to enforce.
    pub ruleset: Option<RulesetCreated>,
}

impl Confinement {
    /// Applies everything, in order; see the module docs.
    pub(crate) fn apply(&mut self) -> io::Result<()> {
        nix::unistd::setsid().map_err(io::Error::from)?;
        cloexec_from(3)?;
        if self.drop_capabilities {
            drop_capabilities()?;
        }
        if self.drop_capabilities || self.seccomp.is_some() || self.ruleset.is_some() {
            nix::sys::prctl::set_no_new_privs().map_err(io::Error::from)?;
        }
        if let Some(program) = &self.seccomp {
            crate::seccomp::install(program)?;
        }
        if let Some(ruleset) = self.ruleset.take() {
            let status = ruleset.restrict_self().map_err(io::Error::other)?;
            if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
                return Err(io::Error::other("Landlock did not enforce the ruleset"));
            }
        }
        Ok(())
    }
}

/// Marks every descriptor from `first` up close-on-exec. `CLOSE_RANGE_CLOEXEC` (Linux 5.11)
/// keeps them usable until `exec` (the standard library's own error pipe among them); older
/// kernels get the same from `/proc/self/fd`.
#[allow(unsafe_code)]
pub(crate) fn cloexec_from(first: u32) -> io::Result<()> {
    // SAFETY: `close_range` takes plain integers and only changes descriptor flags.
    let done = unsafe { libc::close_range(first, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as i32) };
    if done == 0 {
        return Ok(());
    }
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let Some(fd) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if fd >= first as i32 {
            // SAFETY: `fcntl(F_SETFD)` on a descriptor number only changes its flags; a number
            // that is not open (the directory listing's own) fails harmlessly.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    Ok(())
}

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// `CAP_SETPCAP`, needed to shrink the bounding set.
const CAP_SETPCAP: u32 = 8;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empties the bounding set (when this process may: it has `CAP_SETPCAP`; without it, and
/// not root, it has nothing to lose), the ambient set, then every other set.
#[allow(unsafe_code)]
fn drop_capabilities() -> io::Result<()> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: `capget` writes two `CapData` for version 3, which `data` holds.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if data[0].effective & (1 << CAP_SETPCAP) != 0 {
        for cap in 0..=last_capability() {
            // SAFETY: plain integers. EINVAL for a number this kernel does not know is fine.
            unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        }
    } else if nix::unistd::geteuid().is_root() {
        return Err(io::Error::other(
            "running as root without CAP_SETPCAP, the capability bounding set cannot be cleared",
        ));
    }
    // SAFETY: plain integers.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    let empty = [CapData::default(); 2];
    // SAFETY: `capset` reads two `CapData` for version 3; dropping capabilities is always
    // allowed.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, empty.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The highest capability number this kernel knows (`CAP_LAST_CAP`).
fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        // 63 covers every capability a kernel can have; unknown numbers fail harmlessly.
        .unwrap_or(63)
}
