//! The supervisor as a standalone binary, so dsh-guard's own tests (and embedders without the
//! `dsh` binary) can run commands under it; `dsh` itself runs the same code as
//! `dsh __supervise`.

fn main() {
    std::process::exit(dsh_guard::supervise(std::env::args_os().skip(1)));
}
