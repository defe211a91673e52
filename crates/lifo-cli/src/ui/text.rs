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

/// Most characters of an error a list shows (the task's page shows it whole).
pub const LIST_ERROR_CHARS: usize = 200;
/// Most characters of a task id a list shows (its link names it whole).
pub const LIST_ID_CHARS: usize = 64;

/// A value cut to its first `.1` characters for a list, then `…`, as
/// [`Shown`] renders it: a 60 KB error or a 2,048-byte id would otherwise
/// make one row of a list as tall as the page. The title attribute of the
/// cell says that it is cut; the task's page has the whole value.
pub struct Cut<'a>(pub &'a str, pub usize);

impl Cut<'_> {
    /// Whether the value is longer than it is shown.
    pub fn is_cut(&self) -> bool {
        self.0.chars().nth(self.1).is_some()
    }
}

impl Render for Cut<'_> {
    fn render_to(&self, buffer: &mut String) {
        match self.0.char_indices().nth(self.1) {
            Some((at, _)) => {
                Shown(&self.0[..at]).render_to(buffer);
                buffer.push('…');
            }
            None => Shown(self.0).render_to(buffer),
        }
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

    #[test]
    fn a_list_cuts_a_long_value_after_its_characters() {
        let cut = |s: &str, n| html! { td { (Cut(s, n)) } }.into_string();
        assert_eq!(cut("short", 10), "<td>short</td>");
        assert_eq!(cut("0123456789abc", 10), "<td>0123456789…</td>");
        assert_eq!(cut("ééééé<é", 6), "<td>ééééé&lt;…</td>");
        assert!(Cut("0123456789a", 10).is_cut() && !Cut("0123456789", 10).is_cut());
    }
}
