//! Containment: the supervisor is a child subreaper, so every orphaned descendant of the
//! command (double forks, `setsid` daemons) becomes its child; once `bash` is gone, "has a
//! child" means "something still runs", and the sweep kills and reaps until nothing does.

use std::collections::HashSet;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::waitpid;
use nix::unistd::{Pid, getpid};

/// SIGKILLs every child, reaps one, and repeats until there are no children left; returns how
/// many distinct processes were killed.
///
/// Only our own unreaped children are signalled, so no pid can have been recycled for a
/// stranger. A killed child's own children are reparented to us before it becomes reapable
/// (the kernel reparents before notifying), so the next round sees them.
pub(crate) fn sweep() -> u32 {
    let mut killed = HashSet::new();
    loop {
        for pid in children() {
            killed.insert(pid);
            let _ = kill(pid, Signal::SIGKILL);
        }
        match waitpid(None::<Pid>, None) {
            Ok(_) | Err(Errno::EINTR) => continue,
            // ECHILD: nothing left.
            Err(_) => break,
        }
    }
    u32::try_from(killed.len()).unwrap_or(u32::MAX)
}

/// Our children: from `/proc/self/task/*/children` where the kernel offers it, else by
/// scanning every process's parent.
fn children() -> Vec<Pid> {
    match children_from_tasks() {
        Some(pids) => pids,
        None => children_by_scan(),
    }
}

fn children_from_tasks() -> Option<Vec<Pid>> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let text = std::fs::read_to_string(task.ok()?.path().join("children")).ok()?;
        pids.extend(parse_pids(&text));
    }
    Some(pids)
}

fn children_by_scan() -> Vec<Pid> {
    let me = getpid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            (parent_of(&stat)? == me).then(|| Pid::from_raw(pid))
        })
        .collect()
}

fn parse_pids(text: &str) -> impl Iterator<Item = Pid> + '_ {
    text.split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .map(Pid::from_raw)
}

/// The parent pid from a `/proc/<pid>/stat` line: the field after the state, which follows the
/// last `)` (the command name may itself contain parentheses and spaces).
fn parent_of(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_is_read_after_the_last_parenthesis() {
        assert_eq!(parent_of("12 (a) b) S 34 12 12 0"), Some(34));
        assert_eq!(parent_of("garbage"), None);
    }

    #[test]
    fn pids_parse_from_a_children_file() {
        let pids: Vec<_> = parse_pids("3 5 \n").collect();
        assert_eq!(pids, vec![Pid::from_raw(3), Pid::from_raw(5)]);
    }
}
