//! Key decoding: turns the bytes read from the terminal into [`Key`]s.
//!
//! Reads can split anything — an escape sequence, a UTF-8 character, a bracketed paste or
//! its end marker — so the [`Decoder`] keeps what it cannot decode yet. A lone `ESC` is
//! ambiguous (the Esc key, or the start of a sequence whose rest is late), so it stays
//! pending until the caller reports, through [`Decoder::flush`], that no byte followed
//! within [`ESC_TIMEOUT`].

use std::time::Duration;

/// How long a pending `ESC` waits for the rest of a sequence before it counts as the Esc
/// key. Terminals write a whole sequence at once, so a short wait suffices.
pub const ESC_TIMEOUT: Duration = Duration::from_millis(30);

const PASTE_END: &[u8] = b"\x1b[201~";

/// Escape sequences longer than this without a final byte are garbage, not a key still
/// arriving; dropping them keeps one stray `ESC [` from swallowing all later input.
const MAX_SEQUENCE: usize = 32;

/// One decoded key press (or paste).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A printable character.
    Char(char),
    /// A bracketed paste, with line ends normalised to `\n`.
    Paste(String),
    /// Carriage return, what the Enter key sends (a following line feed is part of it).
    Enter,
    /// A bare line feed (Ctrl-J).
    LineFeed,
    /// DEL or BS.
    Backspace,
    /// Arrow up (`ESC [ A` or `ESC O A`).
    Up,
    /// Arrow down (`ESC [ B` or `ESC O B`).
    Down,
    /// A lone Esc.
    Esc,
    /// Ctrl-C (0x03; raw mode delivers it as a byte, not a signal).
    CtrlC,
    /// Ctrl-U (0x15): empties the draft, as in Claude Code.
    CtrlU,
    /// A key this agent has no use for (other control bytes and escape sequences).
    Ignored,
}

/// What one decoding step found at the start of the pending bytes.
enum Parsed {
    /// A key, made of this many bytes.
    Key(Key, usize),
    /// The start-of-paste marker, this many bytes.
    PasteStart(usize),
    /// Not enough bytes yet.
    Incomplete,
}

/// A stateful decoder; feed it every byte read, in order.
#[derive(Debug, Default)]
pub struct Decoder {
    pending: Vec<u8>,
    /// The paste collected so far, while inside a bracketed paste.
    paste: Option<Vec<u8>>,
}

impl Decoder {
    /// A decoder with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes what `bytes` completes; keeps what is still partial.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        self.pending.extend_from_slice(bytes);
        self.drain(false)
    }

    /// Whether bytes wait for a continuation that may never come, so that the caller should
    /// call [`flush`](Self::flush) after [`ESC_TIMEOUT`] of silence. An unfinished paste
    /// does not count: it ends only with its end marker.
    pub fn has_partial(&self) -> bool {
        self.paste.is_none() && !self.pending.is_empty()
    }

    /// Gives up waiting: a pending `ESC` becomes the Esc key, and the bytes after it are
    /// decoded on their own.
    pub fn flush(&mut self) -> Vec<Key> {
        self.drain(true)
    }

    fn drain(&mut self, timed_out: bool) -> Vec<Key> {
        let mut keys = Vec::new();
        let mut pos = 0;
        loop {
            let rest = &self.pending[pos..];
            if let Some(paste) = &mut self.paste {
                if let Some(end) = find(rest, PASTE_END) {
                    paste.extend_from_slice(&rest[..end]);
                    pos += end + PASTE_END.len();
                    let bytes = std::mem::take(paste);
                    self.paste = None;
                    keys.push(Key::Paste(paste_text(&bytes)));
                    continue;
                }
                // The end marker may be split across reads: keep what could be its start.
                let keep = partial_suffix(rest, PASTE_END);
                paste.extend_from_slice(&rest[..rest.len() - keep]);
                pos += rest.len() - keep;
                break;
            }
            if rest.is_empty() {
                break;
            }
            match parse_one(rest, timed_out) {
                Parsed::Key(key, len) => {
                    keys.push(key);
                    pos += len;
                }
                Parsed::PasteStart(len) => {
                    self.paste = Some(Vec::new());
                    pos += len;
                }
                Parsed::Incomplete => break,
            }
        }
        self.pending.drain(..pos);
        keys
    }
}

fn parse_one(bytes: &[u8], timed_out: bool) -> Parsed {
    let key = match bytes[0] {
        0x1b => return parse_escape(bytes, timed_out),
        // Some senders end a line with CR LF; that is still one Enter.
        b'\r' if bytes.get(1) == Some(&b'\n') => return Parsed::Key(Key::Enter, 2),
        b'\r' => Key::Enter,
        b'\n' => Key::LineFeed,
        0x7f | 0x08 => Key::Backspace,
        0x03 => Key::CtrlC,
        0x15 => Key::CtrlU,
        0x00..=0x1f => Key::Ignored,
        byte @ 0x20..=0x7e => Key::Char(char::from(byte)),
        _ => return parse_utf8(bytes, timed_out),
    };
    Parsed::Key(key, 1)
}

fn parse_escape(bytes: &[u8], timed_out: bool) -> Parsed {
    let wait_or_esc = if timed_out {
        Parsed::Key(Key::Esc, 1)
    } else {
        Parsed::Incomplete
    };
    match bytes.get(1) {
        None => wait_or_esc,
        Some(b'[') => parse_csi(bytes, wait_or_esc),
        Some(b'O') => match bytes.get(2) {
            None => wait_or_esc,
            Some(b'A') => Parsed::Key(Key::Up, 3),
            Some(b'B') => Parsed::Key(Key::Down, 3),
            Some(_) => Parsed::Key(Key::Ignored, 3),
        },
        // ESC followed by anything else is Esc pressed before that key (or Alt+key, which
        // this agent does not use): the next byte is decoded on its own.
        Some(_) => Parsed::Key(Key::Esc, 1),
    }
}

/// `ESC [ params final`: parameter and intermediate bytes are 0x20–0x3f, the final byte
/// 0x40–0x7e.
fn parse_csi(bytes: &[u8], wait_or_esc: Parsed) -> Parsed {
    for (i, &byte) in bytes.iter().enumerate().skip(2) {
        match byte {
            0x40..=0x7e => {
                let params = &bytes[2..i];
                let len = i + 1;
                // Modified arrows (`ESC [ 1 ; 2 A`) still move the selection.
                let plain = params.is_empty() || params.starts_with(b"1;");
                return match byte {
                    b'A' if plain => Parsed::Key(Key::Up, len),
                    b'B' if plain => Parsed::Key(Key::Down, len),
                    b'~' if params == b"200" => Parsed::PasteStart(len),
                    _ => Parsed::Key(Key::Ignored, len),
                };
            }
            0x20..=0x3f if i < MAX_SEQUENCE => {}
            _ => return Parsed::Key(Key::Ignored, i),
        }
    }
    wait_or_esc
}

fn parse_utf8(bytes: &[u8], timed_out: bool) -> Parsed {
    let len = match bytes[0] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return Parsed::Key(Key::Ignored, 1),
    };
    if bytes.len() < len {
        return if timed_out {
            Parsed::Key(Key::Ignored, bytes.len())
        } else {
            Parsed::Incomplete
        };
    }
    match std::str::from_utf8(&bytes[..len])
        .ok()
        .and_then(|s| s.chars().next())
    {
        Some(c) => Parsed::Key(Key::Char(c), len),
        None => Parsed::Key(Key::Ignored, 1),
    }
}

/// Pasted text with CR LF and CR turned into `\n`: terminals (and tmux) send pasted line
/// ends as CR.
fn paste_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n")
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The length of the longest proper prefix of `marker` that `bytes` ends with.
fn partial_suffix(bytes: &[u8], marker: &[u8]) -> usize {
    (1..marker.len())
        .rev()
        .find(|&k| bytes.ends_with(&marker[..k]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Vec<Key> {
        Decoder::new().feed(bytes)
    }

    /// Feeds `bytes` one byte per read, the worst split there is.
    fn decode_bytewise(bytes: &[u8]) -> Vec<Key> {
        let mut decoder = Decoder::new();
        bytes.iter().flat_map(|b| decoder.feed(&[*b])).collect()
    }

    #[test]
    fn typed_text_and_control_keys() {
        assert_eq!(
            decode(b"hi\x7f\r\x03\n\x08\x15"),
            vec![
                Key::Char('h'),
                Key::Char('i'),
                Key::Backspace,
                Key::Enter,
                Key::CtrlC,
                Key::LineFeed,
                Key::Backspace,
                Key::CtrlU,
            ]
        );
        assert_eq!(
            decode(b"a\r\nb"),
            vec![Key::Char('a'), Key::Enter, Key::Char('b')]
        );
    }

    #[test]
    fn utf8_characters_even_split_across_reads() {
        assert_eq!(
            decode("é❯".as_bytes()),
            vec![Key::Char('é'), Key::Char('❯')]
        );
        assert_eq!(
            decode_bytewise("✻x".as_bytes()),
            vec![Key::Char('✻'), Key::Char('x')]
        );
    }

    #[test]
    fn arrows_in_both_encodings() {
        assert_eq!(
            decode(b"\x1b[A\x1b[B\x1bOA\x1bOB\x1b[1;2A\x1b[C"),
            vec![
                Key::Up,
                Key::Down,
                Key::Up,
                Key::Down,
                Key::Up,
                Key::Ignored
            ]
        );
    }

    #[test]
    fn arrow_split_across_reads() {
        let mut decoder = Decoder::new();
        assert_eq!(decoder.feed(b"\x1b"), vec![]);
        assert!(decoder.has_partial());
        assert_eq!(decoder.feed(b"["), vec![]);
        assert_eq!(decoder.feed(b"B1"), vec![Key::Down, Key::Char('1')]);
        assert!(!decoder.has_partial());
    }

    #[test]
    fn lone_esc_needs_the_timeout() {
        let mut decoder = Decoder::new();
        assert_eq!(decoder.feed(b"\x1b"), vec![]);
        assert_eq!(decoder.flush(), vec![Key::Esc]);
        assert!(!decoder.has_partial());
        // Esc followed by a key in the same read is Esc, then that key.
        assert_eq!(decode(b"\x1bx"), vec![Key::Esc, Key::Char('x')]);
        assert_eq!(decode(b"\x1b\x1b[A"), vec![Key::Esc, Key::Up]);
    }

    #[test]
    fn unfinished_sequence_at_timeout_is_esc_then_text() {
        let mut decoder = Decoder::new();
        assert_eq!(decoder.feed(b"\x1b["), vec![]);
        assert_eq!(decoder.flush(), vec![Key::Esc, Key::Char('[')]);
    }

    #[test]
    fn unknown_sequences_are_ignored_whole() {
        assert_eq!(decode(b"\x1b[3~x"), vec![Key::Ignored, Key::Char('x')]);
        assert_eq!(decode(b"\x1b[201~"), vec![Key::Ignored]);
    }

    #[test]
    fn bracketed_paste() {
        assert_eq!(
            decode(b"a\x1b[200~line 1\rline 2\r\nx\x03\x1b[A\x1b[201~b"),
            vec![
                Key::Char('a'),
                Key::Paste("line 1\nline 2\nx\x03\x1b[A".to_owned()),
                Key::Char('b'),
            ]
        );
    }

    #[test]
    fn paste_split_byte_by_byte() {
        let keys = decode_bytewise("\x1b[200~héllo\x1b[20\x1b[201~\r".as_bytes());
        assert_eq!(
            keys,
            vec![Key::Paste("héllo\x1b[20".to_owned()), Key::Enter]
        );
    }

    #[test]
    fn paste_end_marker_split_across_reads() {
        let mut decoder = Decoder::new();
        assert_eq!(decoder.feed(b"\x1b[200~abc\x1b[2"), vec![]);
        assert!(
            !decoder.has_partial(),
            "an open paste is not a timeout matter"
        );
        assert_eq!(decoder.flush(), vec![], "the timeout does not end a paste");
        assert_eq!(decoder.feed(b"01"), vec![]);
        assert_eq!(decoder.feed(b"~"), vec![Key::Paste("abc".to_owned())]);
    }

    #[test]
    fn runaway_sequence_is_dropped() {
        let mut bytes = b"\x1b[".to_vec();
        bytes.extend(std::iter::repeat_n(b'1', 40));
        let keys = decode(&bytes);
        assert_eq!(keys[0], Key::Ignored);
        assert!(keys[1..].iter().all(|k| *k == Key::Char('1')));
    }
}
