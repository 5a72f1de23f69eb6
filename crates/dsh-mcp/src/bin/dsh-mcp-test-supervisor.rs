//! dsh-guard's supervisor for this package's tests (`dsh` runs the same code as
//! `dsh __supervise`): what confines a stdio server in the sandbox tests.

fn main() {
    std::process::exit(dsh_guard::supervise(std::env::args_os().skip(1)));
}
