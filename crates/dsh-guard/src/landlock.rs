//! The Landlock side of the sandbox: is it available (a seam, so tests can simulate a kernel
//! without it), and the ruleset one command runs under.

use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, path_beneath_rules,
};

use crate::policy::DEVICE_ROOTS;

/// The newest Landlock ABI whose rights dsh requests (and was tested against). Raising it
/// changes what a ruleset handles, so only raise it after testing on such a kernel.
pub const ABI_PIN: ABI = ABI::V7;

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
/// under `writes` and on the device files, and with `network` off no TCP bind or connect
/// at all. Signals and abstract unix sockets are scoped to the command's own domain, so it
/// cannot kill dsh, its supervisor or other commands.
///
/// Writable roots get every right except making character or block devices (root could
/// mknod a disk under `/tmp`). A kernel too old for TCP rules (ABI < 4) makes `network = off`
/// a hard error rather than a silent no-op.
pub fn ruleset(writes: &[PathBuf], network: bool) -> Result<RulesetCreated, RulesetError> {
    let all = AccessFs::from_all(ABI_PIN);
    let writable = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut ruleset = Ruleset::default()
        .handle_access(all)?
        .scope(Scope::from_all(ABI_PIN))?;
    if !network {
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::from_all(ABI::V4))?
            .set_compatibility(CompatLevel::BestEffort);
    }
    ruleset
        .create()?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI_PIN)))?
        .add_rules(path_beneath_rules(DEVICE_ROOTS, writable))?
        .add_rules(path_beneath_rules(writes, writable))
}
