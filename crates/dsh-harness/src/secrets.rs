//! dsh's own environment holds no secret by the time anything it starts runs.
//!
//! Commands get a scrubbed environment (`dsh_shell::env`), but a command can still read its
//! parent's: `tr '\0' '\n' < /proc/$PPID/environ` prints dsh's *original* environment block,
//! which removing a variable with `std::env::remove_var` does not change. So [`protect`], the
//! first thing `main` does (before any thread exists), moves every secret variable out of the
//! process environment for good:
//!
//! 1. It collects the secret variables: every name that looks like a credential
//!    ([`dsh_shell::env::looks_secret`], the names commands never see) plus every
//!    `api_key_env` named in the config file, whatever it is called, the session store's
//!    `password_env` and `DSH_STORE_URL` (a database url may hold a password).
//! 2. If there are any, it writes them to an anonymous memory file (`memfd`, never on disk) and
//!    re-executes `/proc/self/exe` with the same arguments and an environment without them;
//!    the memfd's descriptor number travels in [`HANDOFF`] (`FD,PID`, not secret).
//! 3. The re-executed dsh (same pid) finds [`HANDOFF`] naming its own pid, reads the secrets
//!    into memory (handed to [`crate::env`]) and closes the memfd before anything else runs, so no child can
//!    inherit it.
//! 4. Either way, it marks the process not dumpable (`PR_SET_DUMPABLE = 0`, as Codex does):
//!    processes of the same user can then neither read `/proc/<dsh>/environ` or `mem` nor
//!    attach a debugger.
//!
//! Keys are read through [`crate::env`] (the private copy), never from `std::env`.

use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, RawFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::os::unix::process::CommandExt as _;

/// The variable telling a re-executed dsh where its secrets are: `FD,PID`. The pid makes a
/// stale copy inherited by another dsh (started by a hook, say) harmless: it names a process
/// that is not the reader.
pub const HANDOFF: &str = "DSH_SECRETS_FD";

/// The memfd's name, checked on the receiving side (`/proc/self/fd/N` → `/memfd:dsh-secrets`).
const MEMFD_NAME: &str = "dsh-secrets";

/// Moves secret variables out of dsh's environment (re-executing dsh once when there are any)
/// and makes the process non-dumpable. Must run first in `main`, while the process has one
/// thread: a re-exec replaces the whole process. Returns warnings for the person (nothing
/// is logged yet at that point): what could not be done, and so what stays exposed.
pub fn protect() -> Vec<String> {
    let mut warnings = Vec::new();
    let vault = match receive() {
        Received::Secrets(vault) => vault,
        Received::Broken(why) => {
            warnings.push(format!(
                "cannot read the secrets passed to this process ({why}); provider keys are \
                 unavailable"
            ));
            BTreeMap::new()
        }
        Received::Nothing => {
            let configured = configured_key_names();
            let (secrets, kept) = split_env(std::env::vars_os(), &configured);
            if secrets.is_empty() {
                secrets
            } else {
                // Returns only when the re-exec failed: keep running, protected by the
                // dumpable flag alone.
                let error = reexec(&secrets, kept);
                warnings.push(format!(
                    "cannot re-execute dsh without its secret variables ({error}); they stay \
                     in its environment, readable only by root"
                ));
                secrets
            }
        }
    };
    crate::env::adopt_secrets(vault);
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        warnings.push(format!("cannot make the process non-dumpable: {e}"));
    }
    warnings
}

/// Splits an environment into the secret variables (names that look like credentials, or
/// named in `configured`) and the rest. The rest never carries a [`HANDOFF`]: one inherited
/// from another dsh is stale.
fn split_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    configured: &[OsString],
) -> (BTreeMap<OsString, OsString>, Vec<(OsString, OsString)>) {
    let mut secrets = BTreeMap::new();
    let mut kept = Vec::new();
    for (name, value) in vars {
        if name == HANDOFF {
            continue;
        }
        if dsh_shell::env::looks_secret(&name) || configured.contains(&name) {
            secrets.insert(name, value);
        } else {
            kept.push((name, value));
        }
    }
    (secrets, kept)
}

/// `DSH_STORE_URL`, and every `api_key_env` the config file names, every MCP server's
/// `bearer_token_env_var`, the store's `password_env` and `[web_search] api_key_env`, read leniently: a file that does not
/// parse yields none here, and the real load reports it a moment later.
fn configured_key_names() -> Vec<OsString> {
    let mut names = vec![OsString::from(crate::config::store::STORE_URL_ENV)];
    names.extend(file_key_names());
    names
}

fn file_key_names() -> Vec<OsString> {
    let Ok(home) = crate::config::dsh_home(&crate::env::process_env) else {
        return Vec::new();
    };
    // The real load, a moment later, reports a file that cannot be read.
    let Ok(Some(text)) = crate::config::read_config(&home.value.join("config.toml")) else {
        return Vec::new();
    };
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let named = |section: &str, key: &'static str| -> Vec<OsString> {
        let Some(entries) = table.get(section).and_then(toml::Value::as_table) else {
            return Vec::new();
        };
        entries
            .values()
            .filter_map(|p| p.get(key)?.as_str())
            .filter(|name| !name.is_empty())
            .map(OsString::from)
            .collect()
    };
    let mut names = named("providers", "api_key_env");
    names.extend(named("mcp_servers", "bearer_token_env_var"));
    for (section, key) in [("store", "password_env"), ("web_search", "api_key_env")] {
        names.extend(
            table
                .get(section)
                .and_then(|table| table.get(key)?.as_str())
                .filter(|name| !name.is_empty())
                .map(OsString::from),
        );
    }
    names
}

/// `NAME=VALUE\0…`, the layout of an environment block (names hold no `=`, values no NUL).
fn encode(secrets: &BTreeMap<OsString, OsString>) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in secrets {
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
        out.push(0);
    }
    out
}

fn decode(bytes: &[u8]) -> BTreeMap<OsString, OsString> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let at = entry.iter().position(|b| *b == b'=')?;
            Some((
                OsString::from_vec(entry[..at].to_vec()),
                OsString::from_vec(entry[at + 1..].to_vec()),
            ))
        })
        .collect()
}

/// Re-executes this binary without the secret variables, handing them over in a memfd.
/// Returns only on failure.
fn reexec(secrets: &BTreeMap<OsString, OsString>, kept: Vec<(OsString, OsString)>) -> String {
    // Not close-on-exec: the descriptor must survive the exec; the new image closes it.
    let memfd = match nix::sys::memfd::memfd_create(MEMFD_NAME, nix::sys::memfd::MFdFlags::empty())
    {
        Ok(fd) => fd,
        Err(e) => return format!("memfd_create: {e}"),
    };
    let mut file = File::from(memfd);
    if let Err(e) = file.write_all(&encode(secrets)) {
        return format!("writing the memfd: {e}");
    }
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| OsString::from("dsh"));
    let handoff = format!("{},{}", file.as_raw_fd(), std::process::id());
    // `/proc/self/exe` is this very binary even if its file was replaced or deleted since.
    let error = std::process::Command::new("/proc/self/exe")
        .arg0(&argv0)
        .args(args)
        .env_clear()
        .envs(kept)
        .env(HANDOFF, handoff)
        .exec();
    format!("exec /proc/self/exe: {error}")
}

/// What a start found in [`HANDOFF`].
enum Received {
    /// No handoff for this process: a first start.
    Nothing,
    /// The secrets the previous image of this process passed on.
    Secrets(BTreeMap<OsString, OsString>),
    /// A handoff for this process that could not be read.
    Broken(String),
}

fn receive() -> Received {
    let Some(value) = std::env::var_os(HANDOFF) else {
        return Received::Nothing;
    };
    let parsed = value.to_str().and_then(|v| {
        let (fd, pid) = v.split_once(',')?;
        Some((fd.parse::<RawFd>().ok()?, pid.parse::<u32>().ok()?))
    });
    let Some((fd, pid)) = parsed else {
        return Received::Nothing;
    };
    if pid != std::process::id() {
        return Received::Nothing;
    }
    // The exec renamed the process after `/proc/self/exe` ("exe"); give it its name back so
    // `ps`, `top` and `pkill dsh` still find it.
    restore_name();
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap_or_default();
    if !link
        .as_os_str()
        .as_bytes()
        .starts_with(format!("/memfd:{MEMFD_NAME}").as_bytes())
    {
        return Received::Broken(format!("descriptor {fd} is not dsh's secrets memfd"));
    }
    let mut file = adopt(fd);
    let mut bytes = Vec::new();
    match file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut bytes))
    {
        // Dropping `file` closes the memfd: nothing started later can inherit it.
        Ok(_) => Received::Secrets(decode(&bytes)),
        Err(e) => Received::Broken(format!("reading descriptor {fd}: {e}")),
    }
}

/// Takes ownership of the inherited memfd so that reading it and closing it are one step.
#[allow(unsafe_code)]
fn adopt(fd: RawFd) -> File {
    // SAFETY: `fd` is open and is the `dsh-secrets` memfd (checked through /proc/self/fd by the
    // caller); it was handed to this very process (the pid matched) by its previous image,
    // and nothing else in this image owns it: `protect` runs first in `main`, before any other
    // code could have opened or adopted a descriptor. So this is its one owner.
    unsafe { File::from_raw_fd(fd) }
}

fn restore_name() {
    let name = std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n.as_bytes().to_vec())
        })
        .unwrap_or_else(|| b"dsh".to_vec());
    // The kernel keeps 15 bytes of a process name.
    let name: Vec<u8> = name.into_iter().take(15).collect();
    if let Ok(name) = CString::new(name) {
        let _ = nix::sys::prctl::set_name(&name);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn credentials_and_configured_key_variables_are_secret_the_rest_is_kept() {
        let (secrets, kept) = split_env(
            vars(&[
                ("DEEPSEEK_API_KEY", "sk-1"),
                ("github_token", "ghp"),
                ("MOCK_AUTH", "sk-2"),
                ("PATH", "/bin"),
                ("DSH_HOME", "/h"),
                (HANDOFF, "3,1"),
            ]),
            &[OsString::from("MOCK_AUTH")],
        );
        let names: Vec<_> = secrets.keys().map(|k| k.to_str().unwrap()).collect();
        assert_eq!(names, ["DEEPSEEK_API_KEY", "MOCK_AUTH", "github_token"]);
        assert_eq!(kept, vars(&[("PATH", "/bin"), ("DSH_HOME", "/h")]));
    }

    #[test]
    fn the_handoff_round_trips_values_with_equals_signs_and_newlines() {
        let secrets: BTreeMap<_, _> = vars(&[("A_KEY", "x=y\nz"), ("B_TOKEN", "")])
            .into_iter()
            .collect();
        assert_eq!(decode(&encode(&secrets)), secrets);
    }
}
