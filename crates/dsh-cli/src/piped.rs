//! Piped input of `dsh run`: `dsh run -` reads the task from standard input, and with a task
//! given, input piped in (`git diff | dsh run "review this"`) is attached to it as context.
//!
//! Only a pipe, a socket or a regular file is read. A terminal is never read (a headless run
//! must not wait for a person who is not typing), and neither is a character device such as
//! `/dev/null` (what CI and service managers hand a process). Reading stops past
//! [`MAX_BYTES`]: the input is refused with a message rather than silently cut.

use std::io::{IsTerminal, Read};
use std::os::unix::fs::FileTypeExt;

use anyhow::{Context as _, bail};

/// The most input read from stdin (1 MiB): a large diff fits, a runaway producer does not.
pub const MAX_BYTES: usize = 1 << 20;

/// The task argument meaning "read the task from standard input".
pub const FROM_STDIN: &str = "-";

/// Whether standard input is something `dsh run` reads: a pipe, a socket or a regular file.
pub fn stdin_is_readable() -> bool {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return false;
    }
    crate::terminal::metadata_of(&stdin).is_some_and(|meta| {
        let kind = meta.file_type();
        kind.is_fifo() || kind.is_socket() || kind.is_file()
    })
}

/// The task of `dsh run`, or why there is none.
#[derive(Debug)]
pub enum Task {
    /// The text to send.
    Text(String),
    /// A usage mistake (exit 2), with its message.
    Usage(String),
    /// Standard input could not be used (exit 1).
    Failed(anyhow::Error),
}

/// The task from the `TASK` arguments and standard input: `-` alone reads the task itself;
/// otherwise readable input is attached to the task.
pub fn task(words: &[String]) -> Task {
    let given = words.join(" ");
    if given == FROM_STDIN {
        if !stdin_is_readable() {
            return Task::Usage(
                "`dsh run -` reads the task from standard input, but it is a terminal or \
                 /dev/null: pipe the task in, e.g. `echo \"fix the build\" | dsh run -`"
                    .to_owned(),
            );
        }
        return match read_stdin() {
            Ok(text) if text.trim().is_empty() => {
                Task::Usage("the task read from standard input is empty".to_owned())
            }
            Ok(text) => Task::Text(text.trim_end().to_owned()),
            Err(e) => Task::Failed(e),
        };
    }
    if given.trim().is_empty() {
        return Task::Usage("the task is empty".to_owned());
    }
    if !stdin_is_readable() {
        return Task::Text(given);
    }
    match read_stdin() {
        Ok(input) => Task::Text(attach(&given, &input)),
        Err(e) => Task::Failed(e),
    }
}

/// Reads all of standard input, at most [`MAX_BYTES`]. Bytes that are not UTF-8 are replaced
/// (a diff of a binary file must not fail the run).
pub fn read_stdin() -> anyhow::Result<String> {
    read_bounded(std::io::stdin().lock(), MAX_BYTES)
}

fn read_bounded(input: impl Read, max: usize) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    input
        .take(limit)
        .read_to_end(&mut bytes)
        .context("cannot read standard input")?;
    if bytes.len() > max {
        bail!(
            "standard input is larger than {} KiB; save it to a file and name the file in the \
             task instead",
            max / 1024
        );
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The task as sent: the task, then the piped input fenced as context (nothing added when the
/// input is blank).
pub fn attach(task: &str, input: &str) -> String {
    if input.trim().is_empty() {
        return task.to_owned();
    }
    let body = input.strip_suffix('\n').unwrap_or(input);
    format!("{task}\n\n<stdin>\n{body}\n</stdin>")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn input_past_the_bound_is_refused_with_its_size_named() {
        assert_eq!(read_bounded(&b"abcd"[..], 4).unwrap(), "abcd");
        let err = read_bounded(&vec![b'x'; 3000][..], 2048).unwrap_err();
        assert!(err.to_string().contains("larger than 2 KiB"), "{err}");
    }

    #[test]
    fn piped_input_is_fenced_after_the_task_and_blank_input_adds_nothing() {
        assert_eq!(
            attach("review this", "diff --git a b\n"),
            "review this\n\n<stdin>\ndiff --git a b\n</stdin>"
        );
        assert_eq!(attach("task", " \n"), "task");
    }
}
