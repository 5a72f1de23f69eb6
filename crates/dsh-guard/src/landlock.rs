//! The Landlock side of the sandbox: is it available (a seam, so tests can simulate a kernel
//! without it), and the ruleset one command runs under.

use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, path_beneath_rules,
};

use crate::policy::DEVICE_ROOTS;

/// The newest Landlock ABI whose rights dsh requests: the newest the landlock crate knows.
/// A kernel with an older ABI enforces what it knows (best effort), and [`kernel_abi`] tells
/// dsh what that is, so it can say what is missing and refuse below `[sandbox] min_abi`.
/// Rights of ABI 8 to 10 (pathname unix sockets, UDP) were tested on no kernel yet: they are
/// only handled with the network off, where refusing them is the point.
pub const ABI_PIN: ABI = ABI::V10;

/// The Landlock ABI of the running kernel: 0 when Landlock is not built in or not enabled.
#[allow(unsafe_code)]
pub fn kernel_abi() -> u32 {
    /// `LANDLOCK_CREATE_RULESET_VERSION`.
    const VERSION: libc::c_ulong = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call only
    // returns a number (or -1 with errno); nothing is read or written.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0 as libc::size_t,
            VERSION,
        )
    };
    u32::try_from(abi).unwrap_or(0)
}

/// Why a confining mode cannot be enforced here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{cause}")]
pub struct Unavailable {
    /// What the kernel said, e.g. "Landlock is not enabled (lsm= lacks landlock)".
    pub cause: String,
}

/// Tells whether Landlock can confine commands on this machine. The seam exists so tests can
/// simulate a kernel without Landlock: the refusal path must be exercised, never skipped.
pub trait LandlockProbe: Send + Sync + fmt::Debug {
    /// `Ok` when a ruleset can be created and enforced.
    fn probe(&self) -> Result<(), Unavailable>;
}

/// The running kernel, probed once per process by creating (not enforcing) a ruleset that
/// requires Landlock.
#[derive(Debug, Default)]
pub struct KernelProbe {
    result: OnceLock<Result<(), Unavailable>>,
}

impl LandlockProbe for KernelProbe {
    fn probe(&self) -> Result<(), Unavailable> {
        self.result
            .get_or_init(|| {
                Ruleset::default()
                    .set_compatibility(CompatLevel::HardRequirement)
                    .handle_access(AccessFs::from_all(ABI::V1))
                    .and_then(Ruleset::create)
                    .map(drop)
                    .map_err(|e| Unavailable {
                        cause: format!("Landlock cannot be used on this kernel: {e}"),
                    })
            })
            .clone()
    }
}

/// A probe that always fails with `cause`: a kernel without Landlock, for tests.
#[derive(Debug, Clone)]
pub struct UnavailableProbe(pub String);

impl LandlockProbe for UnavailableProbe {
    fn probe(&self) -> Result<(), Unavailable> {
        Err(Unavailable {
            cause: self.0.clone(),
        })
    }
}

/// The ruleset of one confined command: reads and execution everywhere, every write right
/// under `writes` and on the device files, and with `network` off no TCP (nor, on kernels
/// that know them, UDP or pathname unix socket connections outside the roots) at all.
/// Signals and abstract unix sockets are scoped to the command's own domain, so it cannot
/// kill dsh, its supervisor or other commands. With a `proxy_port` (the network by
/// allow-list) the command may connect over TCP to that port only: dsh's proxy, which decides
/// by host name. Binding stays allowed (a test server of the project may listen).
///
/// Writable roots get every right except making character or block devices (root could
/// mknod a disk under `/tmp`). Everything is requested best effort: what this kernel cannot
/// enforce is known from [`kernel_abi`] and reported by the guard, and seccomp refuses
/// non-unix sockets with the network off whatever the ABI.
pub fn ruleset(
    writes: &[PathBuf],
    network: bool,
    proxy_port: Option<u16>,
) -> Result<RulesetCreated, RulesetError> {
    let mut all = AccessFs::from_all(ABI_PIN);
    if network {
        // Connecting to a unix socket outside the roots (the Docker socket, the session bus,
        // an SSH agent) stays allowed while the network is on.
        all &= !AccessFs::ResolveUnix;
    }
    let writable = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut ruleset = Ruleset::default()
        .handle_access(all)?
        .scope(Scope::from_all(ABI_PIN))?;
    let proxy_port = proxy_port.filter(|_| network);
    if !network {
        ruleset = ruleset.handle_access(AccessNet::from_all(ABI_PIN))?;
    } else if proxy_port.is_some() {
        ruleset = ruleset.handle_access(AccessNet::ConnectTcp)?;
    }
    let created = ruleset
        .create()?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI_PIN)))?
        .add_rules(path_beneath_rules(DEVICE_ROOTS, writable))?
        .add_rules(path_beneath_rules(writes, writable))?;
    match proxy_port {
        Some(port) => created.add_rule(NetPort::new(port, AccessNet::ConnectTcp)),
        None => Ok(created),
    }
}

/// What a Landlock ABI below the pin leaves unenforced, one phrase per missing piece, for the
/// notice dsh prints once. `namespaces` says whether a read-only mount namespace covers what
/// Landlock lacks; `network` whether the network is on.
pub fn gaps(abi: u32, namespaces: bool, network: bool) -> Vec<&'static str> {
    let mut gaps = Vec::new();
    if abi < 2 {
        gaps.push(
            "renaming or linking files across directories inside the writable roots fails (EXDEV)",
        );
    }
    if abi < 3 && !namespaces {
        gaps.push("truncate(2) of files outside the writable roots is not refused");
    }
    if abi < 4 && !network {
        gaps.push("TCP is refused by the seccomp filter only (no Landlock network rules)");
    }
    if abi < 6 && !namespaces {
        gaps.push("commands can signal processes outside the sandbox (dsh, other commands)");
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::gaps;

    #[test]
    fn the_newest_abi_with_namespaces_leaves_nothing_to_report() {
        assert!(gaps(7, true, false).is_empty());
        assert!(gaps(7, false, true).is_empty());
    }

    #[test]
    fn truncate_and_signals_are_gaps_only_without_a_namespace_to_cover_them() {
        let without = gaps(2, false, true);
        assert!(
            without.iter().any(|g| g.contains("truncate")),
            "{without:?}"
        );
        assert!(without.iter().any(|g| g.contains("signal")), "{without:?}");
        let with = gaps(2, true, true);
        assert!(!with.iter().any(|g| g.contains("truncate")), "{with:?}");
        assert!(!with.iter().any(|g| g.contains("signal")), "{with:?}");
    }

    #[test]
    fn tcp_without_landlock_network_rules_is_named_only_with_the_network_off() {
        assert!(gaps(3, true, false).iter().any(|g| g.contains("TCP")));
        assert!(!gaps(3, true, true).iter().any(|g| g.contains("TCP")));
        assert!(!gaps(4, true, false).iter().any(|g| g.contains("TCP")));
    }

    #[test]
    fn abi_one_cannot_rename_across_directories() {
        assert!(gaps(1, true, true).iter().any(|g| g.contains("EXDEV")));
        assert!(!gaps(2, true, true).iter().any(|g| g.contains("EXDEV")));
    }
}
