//! Turning a byte offset in a config file into something a person can find: a line number and
//! the dotted key it belongs to.
//!
//! The TOML deserializer reports errors with a byte span but only the innermost key name
//! ("unknown field `x`"), and `x` may exist in several tables. The full path
//! (`profiles.claude.launch.x`) is recovered by re-reading the text with `toml_edit`, which
//! keeps the span of every key and value.

use toml_edit::{ImDocument, Item, Key, Table, Value};

/// The 1-based line of byte `offset` in `text`.
pub(crate) fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    // A span never splits a character, but an offset from elsewhere might; count bytes so
    // this cannot panic on a non-boundary.
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The dotted path of the key at `offset`, or of the key whose value contains it
/// (`handshake.boot_timeout_secs`, `profiles.claude.rules[1].zz`). `None` when the text is not
/// valid TOML or nothing is there.
pub(crate) fn key_path_at(text: &str, offset: usize) -> Option<String> {
    let doc = ImDocument::parse(text).ok()?;
    let mut path = Vec::new();
    walk_table(doc.as_table(), offset, &mut path).then(|| join(&path))
}

/// Joins path segments: keys with dots (quoted when they are not bare keys), indexes appended.
pub(crate) fn join(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&quote_key(name));
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A key as TOML writes it: bare when it can be, quoted otherwise (`"A.B"`).
pub(crate) fn quote_key(name: &str) -> String {
    Key::new(name).display_repr().into_owned()
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// A table key.
    Key(String),
    /// An array element.
    Index(usize),
}

fn contains(span: Option<std::ops::Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|span| span.contains(&offset))
}

fn walk_table(table: &Table, offset: usize, path: &mut Vec<Segment>) -> bool {
    for (name, item) in table.iter() {
        path.push(Segment::Key(name.to_owned()));
        // Children first: a table's key span (in its header) never covers a child's position,
        // but checking the deepest match first keeps the longest path.
        if walk_item(item, offset, path) || contains(table.key(name).and_then(Key::span), offset) {
            return true;
        }
        path.pop();
    }
    false
}

fn walk_item(item: &Item, offset: usize, path: &mut Vec<Segment>) -> bool {
    match item {
        Item::None => false,
        Item::Value(value) => walk_value(value, offset, path),
        Item::Table(table) => walk_table(table, offset, path),
        Item::ArrayOfTables(tables) => {
            for (i, table) in tables.iter().enumerate() {
                path.push(Segment::Index(i));
                if walk_table(table, offset, path) {
                    return true;
                }
                path.pop();
            }
            false
        }
    }
}

fn walk_value(value: &Value, offset: usize, path: &mut Vec<Segment>) -> bool {
    match value {
        Value::InlineTable(table) => {
            for (name, inner) in table.iter() {
                path.push(Segment::Key(name.to_owned()));
                if walk_value(inner, offset, path)
                    || contains(table.key(name).and_then(Key::span), offset)
                {
                    return true;
                }
                path.pop();
            }
        }
        Value::Array(array) => {
            for (i, inner) in array.iter().enumerate() {
                path.push(Segment::Index(i));
                if walk_value(inner, offset, path) {
                    return true;
                }
                path.pop();
            }
        }
        _ => {}
    }
    // Not inside any element: the value as a whole (e.g. a type error on an inline table).
    contains(value.span(), offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(text: &str, needle: &str) -> Option<String> {
        let offset = text.find(needle).expect("needle in text");
        key_path_at(text, offset)
    }

    #[test]
    fn lines_are_one_based() {
        let text = "a = 1\nb = 2\n";
        assert_eq!(line_at(text, 0), 1);
        assert_eq!(line_at(text, 6), 2);
        assert_eq!(line_at(text, 1000), 3);
    }

    #[test]
    fn keys_are_found_in_every_shape_of_table() {
        let text = r#"
top = 1
[handshake]
boot_timeout = 4
[profiles.claude]
launch = { command = "x", bogus = 1 }
[profiles.codex.launch]
env = { "A.B" = "1" }
[[profiles.claude.rules]]
name = "a"
[[profiles.claude.rules]]
name = "b"
zz = 1
"#;
        assert_eq!(path_of(text, "top").as_deref(), Some("top"));
        assert_eq!(
            path_of(text, "boot_timeout").as_deref(),
            Some("handshake.boot_timeout")
        );
        assert_eq!(
            path_of(text, "bogus").as_deref(),
            Some("profiles.claude.launch.bogus")
        );
        assert_eq!(
            path_of(text, "\"A.B\"").as_deref(),
            Some("profiles.codex.launch.env.\"A.B\"")
        );
        assert_eq!(
            path_of(text, "zz").as_deref(),
            Some("profiles.claude.rules[1].zz")
        );
        // A position inside a value names the value's key.
        assert_eq!(
            path_of(text, "\"x\"").as_deref(),
            Some("profiles.claude.launch.command")
        );
    }

    #[test]
    fn invalid_toml_has_no_path() {
        assert_eq!(key_path_at("x = = 1", 4), None);
    }
}
