//! Text from the wire, made safe to show: whatever a worker says about
//! itself (host name, version, error messages) reaches log lines, the
//! console and result files only through [`wire_text`], so it can neither
//! forge a line nor hold a terminal nor fill a disk.

use std::fmt::Write as _;

/// Most characters of one worker-supplied text that are kept.
pub const WIRE_TEXT_MAX_CHARS: usize = 256;

/// `s` as one bounded line: control characters (newlines, carriage returns,
/// ESC and the rest) and invisible format characters (bidi overrides,
/// zero-width marks) escaped as `\n`, `\r`, `\t` or `\u{..}`; cut after
/// [`WIRE_TEXT_MAX_CHARS`] characters with a marker saying how many bytes
/// were left out.
pub fn wire_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(WIRE_TEXT_MAX_CHARS + 32));
    for (shown, (at, c)) in s.char_indices().enumerate() {
        if shown == WIRE_TEXT_MAX_CHARS {
            let _ = write!(out, "…[{} more bytes]", s.len() - at);
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || invisible(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Format characters that change how the text around them reads without
/// showing themselves: bidi embeddings, overrides and isolates, zero-width
/// marks and joiners, the byte-order mark, interlinear annotation.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_format_characters_are_escaped() {
        assert_eq!(wire_text("node-7.example"), "node-7.example");
        assert_eq!(
            wire_text("a\nINFO worker joined FAKE\r\t"),
            "a\\nINFO worker joined FAKE\\r\\t"
        );
        assert_eq!(wire_text("\x1b[31mred\x1b[0m"), "\\u{1b}[31mred\\u{1b}[0m");
        assert_eq!(wire_text("x\u{202e}exe.txt"), "x\\u{202e}exe.txt");
        assert_eq!(wire_text("\u{7f}\u{85}\0"), "\\u{7f}\\u{85}\\u{0}");
        // ordinary non-ASCII text is kept
        assert_eq!(wire_text("höst-東京"), "höst-東京");
        assert!(!wire_text("\u{2028}").contains('\u{2028}'));
    }

    #[test]
    fn long_text_is_cut_with_a_marker() {
        let long = "é".repeat(1000);
        let shown = wire_text(&long);
        assert!(shown.starts_with(&"é".repeat(WIRE_TEXT_MAX_CHARS)));
        assert!(shown.ends_with(&format!("…[{} more bytes]", 2 * (1000 - 256))));
        assert_eq!(
            shown.chars().count(),
            WIRE_TEXT_MAX_CHARS + "…[1488 more bytes]".chars().count()
        );
        let exact = "x".repeat(WIRE_TEXT_MAX_CHARS);
        assert_eq!(wire_text(&exact), exact);
        // an escape counts as one character of the source
        let newlines = "\n".repeat(300);
        assert_eq!(
            wire_text(&newlines),
            format!("{}…[44 more bytes]", "\\n".repeat(256))
        );
    }
}
