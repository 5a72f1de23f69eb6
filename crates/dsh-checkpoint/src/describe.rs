//! What a rewind did, in the words every front end prints (`dsh sessions rewind`, the chat's
//! and the terminal UI's `/rewind`, the editor's `/rewind`), so they cannot drift apart.

use std::fmt::Write as _;

use crate::RewindReport;

impl RewindReport {
    /// The report of a rewind to the start of `to_turn`: the files restored, the files left
    /// as they are (with why) and whether the conversation went back; one item per line.
    pub fn describe(&self, to_turn: u64) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "rewound to the start of turn {to_turn}");
        if self.changed.is_empty() {
            let _ = writeln!(out, "  files: nothing to restore");
        } else {
            let _ = writeln!(
                out,
                "  files restored ({}): {}",
                self.changed.len(),
                self.changed.join(", ")
            );
        }
        for left in &self.left {
            let _ = writeln!(out, "  left as it is: {left}");
        }
        if self.conversation {
            let _ = writeln!(
                out,
                "  conversation: turn {to_turn} and later are out of the history (still in the log)"
            );
        }
        out
    }
}
