//! Task data on a page. maud's `(…)` splice escapes markup; [`Shown`] also
//! makes the characters that steer bidirectional text visible, so a
//! payload, an id or an error holding U+202E (RIGHT-TO-LEFT OVERRIDE)
//! cannot reverse the text around it: it is shown as `\u{202e}`.

use maud::Render;
use std::fmt::Write as _;

use crate::terminal::is_bidi_control;

/// `s` with every bidirectional control written as `\u{…}`.
pub fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_bidi_control(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// A value from the table, rendered as escaped, visible text.
pub struct Shown<'a>(pub &'a str);

impl Render for Shown<'_> {
    fn render_to(&self, buffer: &mut String) {
        visible(self.0).as_str().render_to(buffer);
    }
}

/// A duration in milliseconds as the pages show it: seconds, minutes or
/// hours, one decimal.
pub(super) fn seconds(ms: u64) -> String {
    match ms {
        0..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{:.1} min", ms as f64 / 60_000.0),
        _ => format!("{:.1} h", ms as f64 / 3_600_000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use maud::html;

    #[test]
    fn bidi_controls_are_shown_and_markup_escaped() {
        let hostile = "abc\u{202e}fed<b>\u{2066}x\u{2069}\u{200f}";
        let page = html! { td { (Shown(hostile)) } }.into_string();
        assert_eq!(
            page,
            "<td>abc\\u{202e}fed&lt;b&gt;\\u{2066}x\\u{2069}\\u{200f}</td>"
        );
        assert_eq!(visible("plain ✓ text"), "plain ✓ text");
    }
}
