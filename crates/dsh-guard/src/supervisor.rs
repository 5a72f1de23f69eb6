//! The supervisor program's entry point: dsh re-executed in a hidden mode
//! (`dsh __supervise --zygote`, or the `dsh-guard-supervisor` binary in tests), which runs a
//! zygote ([`crate::zygote`]) forking one supervisor ([`crate::job`]) per command.

use std::ffi::OsString;

use crate::zygote::ZYGOTE_ARG;

/// The argument that selects supervisor mode in the `dsh` binary (dispatched before anything
/// else in `main`).
pub const SUPERVISE_ARG: &str = "__supervise";

pub use crate::job::REFUSED_CODE;

/// Runs the supervisor with `args` (everything after [`SUPERVISE_ARG`]) and returns the
/// process exit code. `--zygote` is the one mode: its stdin must be the request socket.
pub fn supervise(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    match args.as_slice() {
        [mode] if mode == ZYGOTE_ARG => crate::zygote::serve(),
        _ => {
            eprintln!("dsh supervisor: expected `{ZYGOTE_ARG}`");
            2
        }
    }
}
