//! The arguments of one supervised job, as [`crate::SandboxPolicy::supervisor_args`] writes
//! them and the supervisor reads them.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::mode::SandboxMode;
use crate::namespace::Namespaces;

/// What the executor asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Args {
    pub mode: SandboxMode,
    pub network: bool,
    /// The one TCP port a command may connect to (dsh's network proxy), when the network is
    /// by allow-list.
    pub proxy_port: Option<u16>,
    /// Writable roots (devices aside).
    pub writes: Vec<PathBuf>,
    /// Paths inside the writable roots that stay read-only (`.git`, `.dsh`, `$DSH_HOME`).
    pub protect: Vec<PathBuf>,
    /// Which namespaces the job gets.
    pub namespaces: Namespaces,
    /// Exec `argv` as a program instead of supervising `bash -c`.
    pub program: bool,
    /// After `--`: the `bash -c` script, or with `--program` the program and its arguments.
    pub argv: Vec<OsString>,
}

impl Args {
    pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, String> {
        let mut args = args.into_iter();
        let mut mode = None;
        let mut network = true;
        let mut proxy_port = None;
        let mut writes = Vec::new();
        let mut protect = Vec::new();
        let mut namespaces = Namespaces::None;
        let mut program = false;
        loop {
            let Some(flag) = args.next() else {
                return Err("missing `-- <command>`".into());
            };
            let flag = flag.to_string_lossy().into_owned();
            if flag == "--" {
                break;
            }
            if flag == "--program" {
                program = true;
                continue;
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let text = || value.to_string_lossy().into_owned();
            match flag.as_str() {
                "--mode" => mode = Some(text().parse::<SandboxMode>().map_err(|e| e.to_string())?),
                "--network" => network = value == "on",
                "--proxy-port" => {
                    proxy_port = Some(
                        text()
                            .parse::<u16>()
                            .map_err(|e| format!("--proxy-port: {e}"))?,
                    )
                }
                "--write" => writes.push(PathBuf::from(value)),
                "--protect" => protect.push(PathBuf::from(value)),
                "--ns" => namespaces = text().parse()?,
                other => return Err(format!("unknown flag {other}")),
            }
        }
        let argv: Vec<OsString> = args.collect();
        match (program, argv.len()) {
            (_, 0) => return Err("missing the command".into()),
            (false, 1) | (true, _) => {}
            (false, _) => return Err("expected one command after `--`".into()),
        }
        Ok(Self {
            mode: mode.ok_or("missing --mode")?,
            network,
            proxy_port,
            writes,
            protect,
            namespaces,
            program,
            argv,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn malformed_arguments_are_refused() {
        assert!(Args::parse(os(&["--mode", "full", "--", "x"])).is_err());
        assert!(Args::parse(os(&["--mode", "read-only"])).is_err());
        assert!(Args::parse(os(&["--mode", "read-only", "--"])).is_err());
        assert!(Args::parse(os(&["--mode", "read-only", "--", "a", "b"])).is_err());
        assert!(Args::parse(os(&["--mode", "read-only", "--ns", "some", "--", "a"])).is_err());
        let program = Args::parse(os(&["--mode", "read-only", "--program", "--", "a", "b"]));
        assert_eq!(program.unwrap().argv, ["a", "b"]);
    }
}
