//! The seccomp filter of a confined command: what Landlock cannot refuse.
//!
//! - `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)`: pushing input into a terminal (a line typed into
//!   the user's shell, run unconfined when dsh exits) and the Linux console's equivalents.
//!   Commands have no controlling terminal already (the supervisor makes them session leaders);
//!   the filter also stops a command that opens a terminal device by name.
//! - With the network off, every socket family but `AF_UNIX`: UDP, MPTCP (a TCP variant
//!   Landlock's TCP rules do not cover), raw, packet, netlink and vsock sockets. With the
//!   network on, `AF_VSOCK` still (it reaches a VM's host, e.g. WSL2's Windows side).
//! - `prlimit` and `setpriority` of another process (only without a PID namespace can a
//!   command name dsh's pid, but then it could starve dsh).
//! - `io_uring`, whose `IORING_OP_SOCKET`/`IORING_OP_OPENAT` act without the system calls
//!   this filter and Landlock see.
//! - System calls of another ABI: i386 entries (`int 0x80`) kill the process (seccompiler's
//!   architecture check); x32 numbers, which share the x86-64 architecture value, are refused.
//!
//! Refusals are `EPERM`, which commands report as "Operation not permitted". The comparisons
//! on `ioctl`'s request and `socket`'s family look at the low 32 bits only, as the kernel does
//! (both are `unsigned int` there), so high bits cannot smuggle a request past them.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// Why no filter could be built here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot build the seccomp filter: {0}")]
pub struct FilterError(String);

fn error(e: impl std::fmt::Display) -> FilterError {
    FilterError(e.to_string())
}

#[cfg(target_arch = "x86_64")]
const ARCH: Option<TargetArch> = Some(TargetArch::x86_64);
#[cfg(target_arch = "aarch64")]
const ARCH: Option<TargetArch> = Some(TargetArch::aarch64);
#[cfg(target_arch = "riscv64")]
const ARCH: Option<TargetArch> = Some(TargetArch::riscv64);
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
const ARCH: Option<TargetArch> = None;

/// The filter for a confined command with the network `on` or off; `by_proxy` (the network by
/// allow-list) also refuses IPv4/IPv6 sockets that are not streams (UDP, raw): Landlock's TCP
/// rules cannot see them, and a datagram to any resolver or host would go around the proxy.
pub(crate) fn filter(network: bool, by_proxy: bool) -> Result<BpfProgram, FilterError> {
    let arch = ARCH.ok_or_else(|| error("this architecture has no seccomp filter in dsh"))?;
    let arg =
        |index, op, value: u64| SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value);
    let one = |condition: Result<SeccompCondition, _>| {
        condition
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(error)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(
        libc::SYS_ioctl,
        vec![
            one(arg(1, SeccompCmpOp::Eq, u64::from(libc::TIOCSTI as u32)))?,
            one(arg(1, SeccompCmpOp::Eq, u64::from(libc::TIOCLINUX as u32)))?,
        ],
    );
    let unix = libc::AF_UNIX as u64;
    let vsock = libc::AF_VSOCK as u64;
    let family = if network {
        one(arg(0, SeccompCmpOp::Eq, vsock))?
    } else {
        one(arg(0, SeccompCmpOp::Ne, unix))?
    };
    let mut socket = vec![family.clone()];
    if network && by_proxy {
        for inet in [libc::AF_INET, libc::AF_INET6] {
            for kind in [libc::SOCK_DGRAM, libc::SOCK_RAW, libc::SOCK_SEQPACKET] {
                // The type argument carries SOCK_NONBLOCK/SOCK_CLOEXEC in its high bits.
                let rule = SeccompRule::new(vec![
                    arg(0, SeccompCmpOp::Eq, inet as u64).map_err(error)?,
                    arg(1, SeccompCmpOp::MaskedEq(0xf), kind as u64).map_err(error)?,
                ])
                .map_err(error)?;
                socket.push(rule);
            }
        }
    }
    rules.insert(libc::SYS_socket, socket);
    rules.insert(libc::SYS_socketpair, vec![family]);
    // Another process's limits and priority (`prlimit --pid`, `renice -p`): a confined command
    // could otherwise starve dsh of descriptors or CPU where it can name dsh's pid (no PID
    // namespace). A process's own (`pid`/`who` 0, as `ulimit` and `nice` use) stays allowed.
    let pid_and_new_limit = SeccompRule::new(vec![
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0).map_err(error)?,
        SeccompCondition::new(2, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0).map_err(error)?,
    ])
    .map_err(error)?;
    rules.insert(libc::SYS_prlimit64, vec![pid_and_new_limit]);
    rules.insert(
        libc::SYS_setpriority,
        vec![one(arg(1, SeccompCmpOp::Ne, 0))?],
    );
    for call in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        // An empty chain matches on the number alone.
        rules.insert(call, Vec::new());
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(error)?;
    let mut program = BpfProgram::try_from(filter).map_err(error)?;
    if arch == TargetArch::x86_64 {
        refuse_x32(&mut program)?;
    }
    Ok(program)
}

/// Bit that marks an x32 system call number on x86-64.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Inserts, right after seccompiler's architecture check (three instructions, nothing jumps
/// across their end), "any number with the x32 bit set: EPERM". The x32 ABI shares the x86-64
/// architecture value, so the rules above would not see its `socket` or `ioctl`.
fn refuse_x32(program: &mut BpfProgram) -> Result<(), FilterError> {
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JGE_K: u16 = 0x05 | 0x30;
    const BPF_RET_K: u16 = 0x06;
    // `seccomp_data.nr` is its first field.
    const NR_OFFSET: u32 = 0;
    if program.len() < 3 {
        return Err(error("unexpected seccompiler program layout"));
    }
    let insert = [
        sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: NR_OFFSET,
        },
        sock_filter {
            code: BPF_JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        },
    ];
    program.splice(3..3, insert);
    Ok(())
}

/// Installs `program` on the calling thread (`no_new_privs` must be set already, or the
/// kernel refuses an unprivileged filter).
pub(crate) fn install(program: &BpfProgram) -> std::io::Result<()> {
    seccompiler::apply_filter(program).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_network_settings_build_a_filter_with_the_x32_guard_after_the_arch_check() {
        for network in [true, false] {
            let program = filter(network, false).unwrap();
            assert!(program.len() > 10, "{program:?}");
            if ARCH == Some(TargetArch::x86_64) {
                assert_eq!(program[4].k, X32_SYSCALL_BIT);
                assert_eq!(program[5].k, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
            }
        }
    }
}
