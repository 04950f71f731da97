//! Text that came from outside (a prompt, a checkpoint label, a session name, a path) as it
//! is printed for a terminal.
//!
//! A prompt holding `ESC]0;…BEL` would retitle the terminal, `ESC[2J` clear it, a lone CR
//! overwrite the line, U+202E reverse what follows: prompts come from conversations, pasted
//! text and injected content, so none of that reaches a terminal as it is. Each such
//! character is shown escaped, as Rust writes it (`\x1b`, `\r`, `\u{202e}`), so the reader
//! sees that it is there. JSON output keeps the exact text; only what a person reads is
//! escaped. A backslash stays as it is: the escaping keeps the terminal safe, it is not a
//! reversible encoding.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` for one line of terminal output: every control character (C0, DEL, C1), newline
/// and tab included, and every bidirectional override or isolate (U+202A–U+202E,
/// U+2066–U+2069) shown escaped.
///
/// ```
/// use retrace::object::terminal_line;
/// assert_eq!(terminal_line("fix \x1b[2J\u{202e}it\r\n"), r"fix \x1b[2J\u{202e}it\r\n");
/// assert_eq!(terminal_line("plain: unchanged"), "plain: unchanged");
/// ```
#[must_use]
pub fn terminal_line(text: &str) -> Cow<'_, str> {
    escaped(text, false)
}

/// `text` for terminal output of several lines: as [`terminal_line`], but newlines and tabs
/// are kept (a prompt shown in full, a message that lists paths one per line).
///
/// ```
/// use retrace::object::terminal_text;
/// assert_eq!(terminal_text("one\n\ttwo\r\x07"), "one\n\ttwo\\r\\x07");
/// ```
#[must_use]
pub fn terminal_text(text: &str) -> Cow<'_, str> {
    escaped(text, true)
}

/// Whether a terminal would act on `c` (or reorder text around it) rather than show it.
fn hostile(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escaped(text: &str, lines: bool) -> Cow<'_, str> {
    let kept = |c: char| lines && matches!(c, '\n' | '\t');
    if !text.chars().any(|c| hostile(c) && !kept(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            _ if !hostile(c) || kept(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0'..='\x7f' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            _ => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::{terminal_line, terminal_text};

    #[test]
    fn what_a_terminal_would_act_on_is_shown_escaped() {
        // A title change, a screen clear, a lone CR, a right-to-left override.
        let prompt = "fix it\x1b]0;pwned\x07 \x1b[2J\rdone \u{202e}txt.exe";
        let line = terminal_line(prompt);
        assert_eq!(
            line,
            r"fix it\x1b]0;pwned\x07 \x1b[2J\rdone \u{202e}txt.exe"
        );
        assert!(!line.chars().any(|c| c.is_control() || c == '\u{202e}'));
        // DEL, C1 (CSI as one character), every override and isolate, NUL.
        assert_eq!(terminal_line("\x7f\u{9b}\0"), r"\x7f\u{9b}\x00");
        for c in ('\u{202a}'..='\u{202e}').chain('\u{2066}'..='\u{2069}') {
            assert_eq!(
                terminal_line(&c.to_string()),
                format!("\\u{{{:x}}}", u32::from(c))
            );
        }
        // One line: newlines and tabs escaped too; several lines: they are kept.
        assert_eq!(terminal_line("a\nb\tc"), r"a\nb\tc");
        assert_eq!(terminal_text("a\nb\tc\r\n"), "a\nb\tc\\r\n");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for text in [
            "",
            "src/main.rs",
            "日本語のプロンプト",
            r"C:\path \x1b",
            "emoji 🎉 ok",
        ] {
            assert!(matches!(terminal_line(text), std::borrow::Cow::Borrowed(t) if t == text));
        }
        // A zero-width joiner or an Arabic letter mark is not an override: kept.
        assert_eq!(terminal_line("a\u{200d}b\u{061c}"), "a\u{200d}b\u{061c}");
    }
}
