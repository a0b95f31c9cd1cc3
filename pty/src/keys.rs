//! Input for a worker: literal text and named keys, and the bytes each becomes on a terminal.

use std::fmt;
use std::str::FromStr;

/// A key a supervisor can press in a worker's terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// Submit: sent as a carriage return, as a real terminal sends it.
    Enter,
    /// Tab.
    Tab,
    /// Escape.
    Esc,
    /// Cursor up.
    Up,
    /// Cursor down.
    Down,
    /// Cursor left.
    Left,
    /// Cursor right.
    Right,
    /// Backspace (DEL, as xterm sends it).
    Backspace,
    /// Interrupt.
    CtrlC,
    /// End of input.
    CtrlD,
    /// Ctrl-U: erase the input line (line editors' "kill to start of line").
    CtrlU,
    /// A digit key, `0` to `9`, as dialogs with numbered choices expect.
    Digit(u8),
}

/// Every key name [`Key::from_str`] accepts, for error messages and help.
pub const KEY_NAMES: &str = "Enter, Tab, Esc, Up, Down, Left, Right, Backspace, C-c (Ctrl-C), C-d (Ctrl-D), C-u (Ctrl-U), 0-9";

impl Key {
    /// The bytes a terminal sends for this key (normal cursor-key mode, or application mode
    /// when the program asked for it with `ESC[?1h`).
    pub fn bytes(self, application_cursor: bool) -> Vec<u8> {
        let arrow = |c: u8| {
            if application_cursor {
                vec![0x1b, b'O', c]
            } else {
                vec![0x1b, b'[', c]
            }
        };
        match self {
            Key::Enter => b"\r".to_vec(),
            Key::Tab => b"\t".to_vec(),
            Key::Esc => b"\x1b".to_vec(),
            Key::Up => arrow(b'A'),
            Key::Down => arrow(b'B'),
            Key::Right => arrow(b'C'),
            Key::Left => arrow(b'D'),
            Key::Backspace => b"\x7f".to_vec(),
            Key::CtrlC => b"\x03".to_vec(),
            Key::CtrlD => b"\x04".to_vec(),
            Key::CtrlU => b"\x15".to_vec(),
            Key::Digit(d) => vec![b'0' + d],
        }
    }

    /// The key's name in tmux's `send-keys` vocabulary.
    pub fn tmux_name(self) -> String {
        match self {
            Key::Enter => "Enter".into(),
            Key::Tab => "Tab".into(),
            Key::Esc => "Escape".into(),
            Key::Up => "Up".into(),
            Key::Down => "Down".into(),
            Key::Left => "Left".into(),
            Key::Right => "Right".into(),
            Key::Backspace => "BSpace".into(),
            Key::CtrlC => "C-c".into(),
            Key::CtrlD => "C-d".into(),
            Key::CtrlU => "C-u".into(),
            Key::Digit(d) => d.to_string(),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Enter => f.write_str("Enter"),
            Key::Tab => f.write_str("Tab"),
            Key::Esc => f.write_str("Esc"),
            Key::Up => f.write_str("Up"),
            Key::Down => f.write_str("Down"),
            Key::Left => f.write_str("Left"),
            Key::Right => f.write_str("Right"),
            Key::Backspace => f.write_str("Backspace"),
            Key::CtrlC => f.write_str("C-c"),
            Key::CtrlD => f.write_str("C-d"),
            Key::CtrlU => f.write_str("C-u"),
            Key::Digit(d) => write!(f, "{d}"),
        }
    }
}

/// A key name that is not one of [`KEY_NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown key name {name:?}; known keys: {KEY_NAMES}")]
pub struct UnknownKey {
    /// The name that was given.
    pub name: String,
}

impl FromStr for Key {
    type Err = UnknownKey;

    /// Parses a key name, case-insensitively: `Enter`, `Esc` (or `Escape`), `C-c` (or
    /// `Ctrl-C`), `Backspace` (or `BSpace`), a digit, …
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let key = match name.to_ascii_lowercase().as_str() {
            "enter" | "return" => Key::Enter,
            "tab" => Key::Tab,
            "esc" | "escape" => Key::Esc,
            "up" => Key::Up,
            "down" => Key::Down,
            "left" => Key::Left,
            "right" => Key::Right,
            "backspace" | "bspace" => Key::Backspace,
            "c-c" | "ctrl-c" => Key::CtrlC,
            "c-d" | "ctrl-d" => Key::CtrlD,
            "c-u" | "ctrl-u" => Key::CtrlU,
            digit if digit.len() == 1 && digit.as_bytes()[0].is_ascii_digit() => {
                Key::Digit(digit.as_bytes()[0] - b'0')
            }
            _ => {
                return Err(UnknownKey {
                    name: name.to_owned(),
                });
            }
        };
        Ok(key)
    }
}

/// One piece of input for a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Literal text, typed as is (wrapped in bracketed paste when the application enabled it).
    Text(String),
    /// A named key.
    Key(Key),
    /// Bytes exactly as a terminal sends them, e.g. keystrokes forwarded from a person's own
    /// terminal while mirroring; never wrapped or translated.
    Bytes(Vec<u8>),
}

/// The bytes that type `text` into a terminal whose application has (or has not) enabled
/// bracketed paste. Inside a paste, an embedded paste terminator is dropped so the text can
/// never end the paste early and be read as keystrokes.
pub fn text_bytes(text: &str, bracketed_paste: bool) -> Vec<u8> {
    if !bracketed_paste {
        return text.as_bytes().to_vec();
    }
    let mut bytes = Vec::with_capacity(text.len() + 12);
    bytes.extend_from_slice(b"\x1b[200~");
    bytes.extend_from_slice(text.replace("\x1b[201~", "").as_bytes());
    bytes.extend_from_slice(b"\x1b[201~");
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_documented_name() {
        for (name, key) in [
            ("Enter", Key::Enter),
            ("tab", Key::Tab),
            ("Esc", Key::Esc),
            ("Escape", Key::Esc),
            ("UP", Key::Up),
            ("Down", Key::Down),
            ("Left", Key::Left),
            ("Right", Key::Right),
            ("Backspace", Key::Backspace),
            ("C-c", Key::CtrlC),
            ("Ctrl-D", Key::CtrlD),
            ("ctrl-u", Key::CtrlU),
            ("7", Key::Digit(7)),
        ] {
            assert_eq!(name.parse::<Key>(), Ok(key), "{name}");
        }
    }

    #[test]
    fn unknown_key_names_the_key() {
        let err = "F13".parse::<Key>().expect_err("F13 is not a key we send");
        assert!(err.to_string().contains("\"F13\""), "{err}");
    }

    #[test]
    fn enter_is_carriage_return_and_arrows_follow_cursor_mode() {
        assert_eq!(Key::Enter.bytes(false), b"\r");
        assert_eq!(Key::Down.bytes(false), b"\x1b[B");
        assert_eq!(Key::Down.bytes(true), b"\x1bOB");
    }

    #[test]
    fn bracketed_paste_wraps_and_cannot_be_escaped() {
        assert_eq!(text_bytes("hi", false), b"hi");
        assert_eq!(text_bytes("a\x1b[201~b", true), b"\x1b[200~ab\x1b[201~");
    }
}
