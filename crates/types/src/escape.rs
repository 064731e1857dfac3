//! Text someone else wrote (a guest's log line, an error that quotes a guest's stderr) as a
//! human reads it: [`Escaped`] shows it on one line with no control characters, so the text can
//! neither start a line of its own in a log (and pass for the node's) nor drive the terminal it
//! is printed on (ANSI escape sequences). Only renderings for humans escape: stored text and the
//! API keep what was written, as JSON escapes it already.
//!
//! What is escaped, and how: `\` as `\\`; newline, carriage return and tab as `\n`, `\r`, `\t`;
//! every other control character (C0, DEL and C1, ESC included) and the characters that break or
//! reorder a line without being controls (the Unicode line and paragraph separators, the
//! bidirectional marks, embeddings, overrides and isolates) as `\u{HEX}`, HEX their code point
//! in lowercase. Because a `\` in the text is doubled, every `\` in the output starts an escape,
//! and the output decodes to exactly one text.

use std::fmt;

/// `text`, escaped as the module says when displayed. Writes straight to the formatter: showing a
/// line allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0;
        // The start of the run of characters shown as they are, not yet written.
        let mut plain = 0;
        for (at, c) in text.char_indices() {
            if !is_escaped(c) {
                continue;
            }
            f.write_str(&text[plain..at])?;
            match c {
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c => write!(f, "\\u{{{:x}}}", u32::from(c))?,
            }
            plain = at + c.len_utf8();
        }
        f.write_str(&text[plain..])
    }
}

/// Whether `c` is shown escaped.
fn is_escaped(c: char) -> bool {
    c == '\\' || c.is_control() || breaks_or_reorders_a_line(c)
}

/// Characters that are not controls (Unicode's `Cc`) but end a line in some viewers (U+2028,
/// U+2029) or reorder what follows them on screen (the bidirectional formatting characters), so
/// a line could show other text than it holds.
fn breaks_or_reorders_a_line(c: char) -> bool {
    matches!(
        c,
        '\u{2028}'
            | '\u{2029}'
            | '\u{061c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shown(text: &str) -> String {
        Escaped(text).to_string()
    }

    /// The text `shown` came from: the inverse the module promises, or `None` if `shown` is not
    /// something [`Escaped`] writes.
    fn decode(shown: &str) -> Option<String> {
        let mut text = String::new();
        let mut chars = shown.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                text.push(c);
                continue;
            }
            match chars.next()? {
                '\\' => text.push('\\'),
                'n' => text.push('\n'),
                'r' => text.push('\r'),
                't' => text.push('\t'),
                'u' => {
                    (chars.next()? == '{').then_some(())?;
                    let hex: String = chars.by_ref().take_while(|&c| c != '}').collect();
                    text.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                _ => return None,
            }
        }
        Some(text)
    }

    #[test]
    fn a_forged_log_line_and_a_colour_stay_on_one_line_as_text() {
        let guest = "ok\n2026-01-01T00:00:00Z INFO fake line\x1b[31m";
        assert_eq!(
            shown(guest),
            r"ok\n2026-01-01T00:00:00Z INFO fake line\u{1b}[31m"
        );
    }

    #[test]
    fn each_kind_of_character_is_escaped_as_the_module_says() {
        assert_eq!(shown("a\\nb"), r"a\\nb");
        assert_eq!(shown("\r\t\0\x7f"), r"\r\t\u{0}\u{7f}");
        assert_eq!(shown("\u{85}\u{9b}"), r"\u{85}\u{9b}");
        assert_eq!(shown("a\u{2028}b\u{202e}c"), r"a\u{2028}b\u{202e}c");
        assert_eq!(shown("plain text, é and 日本"), "plain text, é and 日本");
        assert_eq!(shown(""), "");
    }

    #[test]
    fn a_backslash_in_the_text_is_not_read_as_an_escape() {
        // The guest wrote the six characters `\u{1b}` and, apart, a real ESC.
        let literal = shown(r"\u{1b}");
        let real = shown("\x1b");
        assert_ne!(literal, real);
        assert_eq!(decode(&literal).as_deref(), Some(r"\u{1b}"));
        assert_eq!(decode(&real).as_deref(), Some("\x1b"));
    }

    proptest! {
        #[test]
        fn shown_text_holds_no_control_and_decodes_to_the_original(text in any::<String>()) {
            let out = shown(&text);
            prop_assert!(
                !out.chars().any(|c| c.is_control() || breaks_or_reorders_a_line(c)),
                "{out:?}"
            );
            prop_assert_eq!(decode(&out), Some(text));
        }

        #[test]
        fn text_that_looks_like_escapes_decodes_to_the_original(
            chars in prop::collection::vec(
                prop_oneof![
                    Just('\\'), Just('u'), Just('{'), Just('}'), Just('n'), Just('1'),
                    Just('b'), Just('\n'), Just('\x1b'), Just('\u{9b}'), any::<char>(),
                ],
                0..64,
            )
        ) {
            let text: String = chars.into_iter().collect();
            prop_assert_eq!(decode(&shown(&text)), Some(text));
        }

        #[test]
        fn text_with_nothing_to_escape_is_shown_as_it_is(
            text in "[^\\\\\\p{Cc}\u{2028}\u{2029}\u{61c}\u{200e}\u{200f}\u{202a}-\u{202e}\u{2066}-\u{2069}]*"
        ) {
            prop_assert_eq!(shown(&text), text);
        }
    }
}
