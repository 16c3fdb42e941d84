//! Text for a terminal from names the exporter does not control: process
//! names (any user sets its own with `prctl(PR_SET_NAME)` or
//! `/proc/self/comm`), cgroup names, sysfs event names, reasons that
//! quote them. Written raw, an escape sequence in such a name runs in the
//! viewer's terminal: OSC 52 sets the clipboard, CSI clears the screen,
//! and a bidi override (U+202E) shows text reversed. Every terminal view
//! (`top`, `stat`, `check`, `list`) writes such names through
//! [`escape`]; `--json` escapes through JSON.
//!
//! A leaf: no `crate::` uses.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as is: C0 controls (tab and
/// newline included: they break the table), DEL, C1 controls, and the
/// bidirectional formatting characters (embeddings, overrides, isolates
/// and marks).
pub fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with every [`unsafe_char`] written as an escape, as `ps` shows
/// such names: `\x1b` for ASCII controls and DEL, `\u{9b}` for the others.
/// Borrowed when there is nothing to escape.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !unsafe_char(c) {
            out.push(c);
        } else if c.is_ascii() {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_are_escaped() {
        assert!(matches!(escape("nginx: worker"), Cow::Borrowed(_)));
        assert_eq!(escape("\x1b]52;c;eA==\x07"), "\\x1b]52;c;eA==\\x07");
        assert_eq!(escape("a\tb\nc\rd\0"), "a\\x09b\\x0ac\\x0dd\\x00");
        assert_eq!(escape("del\x7f"), "del\\x7f");
        assert_eq!(escape("c1\u{9b}2J"), "c1\\u{9b}2J");
        assert_eq!(escape("evil\u{202E}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(escape("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        // Printable text, whatever its script, stays.
        assert_eq!(escape("кошка 猫 ünïcode"), "кошка 猫 ünïcode");
    }
}
