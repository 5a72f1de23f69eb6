//! Making model and tool text safe to draw.
//!
//! A tool's output may contain escape sequences (`\e[2J`, `\e[?1049l`) that, written to the
//! terminal, would clear the screen or leave the alternate screen under the UI. Cells keep
//! printable text only: escape sequences are dropped, tabs expand, a `\r` restarts its line
//! (as progress bars mean it), other control characters become `�`-free nothing.

/// Tab stops every this many columns.
const TAB: usize = 4;

/// `text` without escape sequences or control characters (newlines kept).
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut line_start = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                out.push('\n');
                line_start = out.len();
            }
            '\t' => {
                let col = out[line_start..].chars().count();
                let pad = TAB - col % TAB;
                out.extend(std::iter::repeat_n(' ', pad));
            }
            // A lone `\r` rewrites its line; `\r\n` is just a line end.
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    out.truncate(line_start);
                }
            }
            '\u{1b}' => skip_escape(&mut chars),
            // C1 controls, bidi overrides and other invisible format characters.
            c if c.is_control() || is_bidi_control(c) => {}
            c => out.push(c),
        }
    }
    out
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Consumes the rest of an escape sequence whose ESC was just read.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        // CSI: parameters and intermediates, then one final byte in `@`..=`~`.
        Some('[') => {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
        // OSC, DCS, SOS, PM, APC: up to BEL or ST (`ESC \`).
        Some(']' | 'P' | 'X' | '^' | '_') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' {
                    if chars.peek() == Some(&'\\') {
                        chars.next();
                    }
                    break;
                }
            }
        }
        // Character-set selection takes one more byte.
        Some('(' | ')' | '*' | '+') => {
            chars.next();
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screen_clearing_and_mode_switching_sequences_never_reach_the_terminal() {
        let text = "before\u{1b}[2J\u{1b}[?1049l\u{1b}]0;title\u{7}after\u{1b}[31m red\u{1b}[0m";
        assert_eq!(sanitize(text), "beforeafter red");
    }

    #[test]
    fn carriage_return_rewrites_its_line_and_tabs_expand() {
        assert_eq!(sanitize("10%\r50%\r100%\nok\r\n"), "100%\nok\n");
        assert_eq!(sanitize("a\tb"), "a   b");
        assert_eq!(sanitize("x\u{202e}y\u{7}"), "xy");
    }
}
