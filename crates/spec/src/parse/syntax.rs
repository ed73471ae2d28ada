//! TOML syntax errors, which come before there is a tree: where they are,
//! what the parser says, and the key whose line holds them.

use crate::error::{Reporter, SpecError};
use crate::tree::{join, At};
use std::collections::HashMap;

pub(super) fn toml_error(rep: &Reporter, text: &str, e: &toml_edit::TomlError) -> SpecError {
    let mut offset = e.span().map(|s| s.start).unwrap_or(0).min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    // A control character anywhere on the line is the likeliest cause
    // (TOML allows none but tab, even in comments), and the parser's own
    // message does not name it.
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    if let Some((i, c)) = text[line_start..line_end]
        .char_indices()
        .find(|&(_, c)| c.is_control() && c != '\t' && c != '\r')
    {
        let at = line_start + i;
        let mut err = rep.at(
            At::Text(at),
            key_at(text, at),
            format!(
                "found the control character {} (U+{:04X}), which TOML does not allow anywhere, comments included; expected printable text (tabs are allowed)",
                escape_controls(&c.to_string()),
                c as u32
            ),
        );
        err.column = text[line_start..at].chars().count() + 1;
        return err;
    }
    let what: Vec<String> = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(escape_controls)
        .collect();
    let rest = &text[offset..];
    let found = match rest.chars().next() {
        None => "the end of the file".to_string(),
        Some('\n' | '\r') => "the end of the line".to_string(),
        Some(_) => {
            let token: String = rest
                .chars()
                .take_while(|c| !c.is_whitespace())
                .take(30)
                .collect();
            format!("`{}`", escape_controls(&token))
        }
    };
    let what = if what.is_empty() {
        String::new()
    } else {
        format!(": {}", what.join("; "))
    };
    let mut err = rep.at(
        At::Text(offset),
        key_at(text, offset),
        format!("TOML syntax error{what}; found {found}"),
    );
    if e.span().is_none() {
        err.line = 0;
    } else {
        err.column = text[line_start..offset].chars().count() + 1;
    }
    err
}

/// `s` with every control character written as an escape (`\0`, `\u{1b}`),
/// so a message never sends raw control bytes to the user's terminal.
pub(crate) fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The name of a `[table]` or `[[array.of.tables]]` header line, with the
/// index of the entry for an array of tables (`swap[1]`); None if `line` is
/// not a header.
fn header_name(line: &str, counts: &mut HashMap<String, usize>) -> Option<String> {
    let l = line.trim_start();
    let (body, array) = match l.strip_prefix("[[") {
        Some(r) => (r, true),
        None => (l.strip_prefix('[')?, false),
    };
    // The header's key runs to the first `]` outside quotes.
    let mut quote = None;
    let mut end = None;
    for (i, c) in body.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, ']') => {
                end = Some(i);
                break;
            }
            (None, _) => {}
        }
    }
    let end = end?;
    let inner = &body[..end];
    let rest = &body[end + 1..];
    let rest = if array { rest.strip_prefix(']')? } else { rest };
    let rest = rest.trim_start();
    if !(rest.is_empty() || rest.starts_with('#')) {
        return None;
    }
    let inner = inner.trim();
    // A line of a multi-line array (`[1, 2],`, `["a"]`) is not a header.
    if inner.is_empty() || inner.contains(',') || inner.contains('[') || inner.contains(']') {
        return None;
    }
    let name = match toml_edit::Key::parse(inner) {
        Ok(keys) => keys.iter().fold(String::new(), |p, k| join(&p, k.get())),
        Err(_) => inner.to_string(),
    };
    if array {
        let n = counts.entry(name.clone()).or_insert(0);
        *n += 1;
        Some(format!("{name}[{}]", *n - 1))
    } else {
        Some(name)
    }
}

/// The dotted key whose line holds `offset` (for TOML syntax errors, which
/// come before there is a tree): the `[table]` header on that line or the
/// last one before it, and the key left of `=` on the line, if there is one.
fn key_at(text: &str, offset: usize) -> String {
    let mut offset = offset.min(text.len());
    // On a blank line (an error at the end of the file), the line before.
    while offset > 0
        && text[..offset]
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .trim()
            .is_empty()
        && text[offset..]
            .split('\n')
            .next()
            .unwrap_or("")
            .trim()
            .is_empty()
    {
        offset = text[..offset].rfind('\n').unwrap_or(0);
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    let mut counts = HashMap::new();
    let mut header = None;
    for l in text[..line_start].lines() {
        if let Some(h) = header_name(l, &mut counts) {
            header = Some(h);
        }
    }
    if let Some(h) = header_name(line, &mut counts) {
        return h;
    }
    if let Some(broken) = line.strip_prefix('[') {
        // A header that does not parse (`[machine`): its text.
        let name: String = broken
            .trim_start_matches('[')
            .trim()
            .chars()
            .take_while(|c| !matches!(c, ']' | '#') && !c.is_whitespace())
            .collect();
        return name;
    }
    let local = line
        .split_once('=')
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.starts_with('{') && !k.is_empty());
    match (header, local) {
        (Some(h), Some(k)) => format!("{h}.{k}"),
        (Some(h), None) => h,
        (None, Some(k)) => k,
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_at_names_the_header_on_the_line() {
        let text =
            "[machine]\nmemory = 1\n[bogus]\nx = 1\n[[swap]]\n[[swap]]\ny = 2\n[a.\"b c\"] # c\n";
        let at = |needle: &str| key_at(text, text.find(needle).unwrap());
        assert_eq!(at("[bogus]"), "bogus");
        assert_eq!(at("x = 1"), "bogus.x");
        assert_eq!(at("memory"), "machine.memory");
        assert_eq!(at("y = 2"), "swap[1].y");
        assert_eq!(at("[a."), "a.\"b c\"");
        // A line of a multi-line array is not a header.
        let text = "[task.main]\nsteps = [\n  [1, 2],\n]\n";
        assert_eq!(key_at(text, text.find("[1").unwrap()), "task.main");
        // A header that does not parse is named by its text.
        let text = "[machine]\nmemory = 1\n[task.main\n";
        assert_eq!(key_at(text, text.find("[task").unwrap() + 10), "task.main");
        // At the end of the file, the last line that says something.
        let text = "[machine]\nx = [1,\n\n";
        assert_eq!(key_at(text, text.len()), "machine.x");
    }
}
