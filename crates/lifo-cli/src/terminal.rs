//! Text from the table as a terminal may show it. Ids, errors, reasons and
//! payloads are whatever a producer wrote: a control character could move
//! the cursor, clear the screen or end a table's row, and a bidirectional
//! control (U+202E, RIGHT-TO-LEFT OVERRIDE) reverses the text around it.
//! [`shown`] writes each as an escape (`\u{202e}`, `\n`), as the console
//! does on its pages (`ui::text`).

use std::borrow::Cow;
use std::fmt::Write as _;

/// True for the bidirectional formatting characters (Unicode's
/// Bidi_Control property).
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// True for what a terminal does not print as a glyph: control characters
/// (C0, DEL, C1), bidirectional controls, and the line and paragraph
/// separators (U+2028, U+2029), which some terminals break lines at.
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// `s` with every character of [`is_unsafe`] escaped: `\n`, `\t`, `\u{1b}`,
/// `\u{202e}` (Rust's escapes, one line whatever `s` holds).
pub fn shown(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            let _ = write!(out, "{}", c.escape_debug());
        } else if is_unsafe(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One line of JSON with the characters of [`is_unsafe`] that serde_json
/// leaves raw (DEL, C1, the bidirectional controls, U+2028 and U+2029)
/// written as JSON escapes (`\u202e`): the same JSON value, safe on a terminal. They can
/// only be inside strings, where the escape means the same character.
pub fn json_shown(json: String) -> String {
    if !json.chars().any(is_unsafe) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if is_unsafe(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_controls_are_escaped_on_one_line() {
        assert_eq!(shown("plain ✓ text"), "plain ✓ text");
        assert!(matches!(shown("plain"), Cow::Borrowed(_)));
        assert_eq!(
            shown("abc\u{202e}fed\x1b[2J\nnext\r\u{2066}x\u{2069}\u{85}\u{7f}\u{2028}"),
            "abc\\u{202e}fed\\u{1b}[2J\\nnext\\r\\u{2066}x\\u{2069}\\u{85}\\u{7f}\\u{2028}"
        );
    }

    #[test]
    fn json_keeps_its_value_and_loses_its_raw_controls() {
        let v = serde_json::json!({"lastError": "a\u{202e}b\u{85}c\u{7f}\n"});
        let text = json_shown(serde_json::to_string(&v).unwrap());
        assert!(!text.chars().any(is_unsafe), "{text}");
        assert_eq!(text, r#"{"lastError":"a\u202eb\u0085c\u007f\n"}"#);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
    }
}
