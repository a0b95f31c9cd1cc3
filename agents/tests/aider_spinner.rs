//! aider draws its `Waiting for <model>` bar from a thread of its own, which may draw between
//! two of the main thread's prints. Each print then starts at the cursor the bar left on its
//! moving block, over the bar's row. These tests take aider's real byte streams against a
//! provider that is down (`tests/fixtures/recordings/aider-0.86.2-refuse-*`), move one of the
//! bar's own writes, unchanged, to a place aider's two threads allow, and check that the
//! profile still reads the provider as down. Seen in an end-to-end run: a retry whose
//! `Retrying in 16.0 seconds...` began on the bar's row read as working for its whole wait,
//! and the lane went `running`.

use std::path::Path;

use clawpool_agents::detect::{Phase, Seen, observe_in};
use clawpool_agents::profiles::{Profile, ProfileSet, Signal};
use clawpool_pty::TermSize;
use clawpool_pty::replay::final_screen;

const SIZES: [TermSize; 3] = [
    TermSize {
        cols: 120,
        rows: 40,
    },
    TermSize { cols: 80, rows: 24 },
    TermSize { cols: 80, rows: 12 },
];

/// aider's print of the error's meaning, and of the retry that follows it.
const MEANING: &[u8] = b"\x1b[38;5;196mThe API provider's servers are down or overloaded.";
const RETRYING: &[u8] = b"Retrying in ";
/// The start of the next failure's print, which ends a retry's wait.
const NEXT_FAILURE: &[u8] = b"\x1b[38;5;214mlitellm.";

fn stream(size: TermSize) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../tests/fixtures/recordings/aider-0.86.2-refuse-{}x{}/stream.bin",
        size.cols, size.rows
    ));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

fn find_from(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| from + i)
}

/// Every distinct write of the bar in the stream: `\r`, the frame and its text, and the
/// backspaces that leave the cursor on the frame's moving block.
fn bar_writes(stream: &[u8]) -> Vec<Vec<u8>> {
    let write = regex::bytes::Regex::new(r"\r[ ░█]{10} Waiting for openai/scripted-model\x08+")
        .expect("the bar's write as a pattern");
    let mut writes: Vec<Vec<u8>> = Vec::new();
    for found in write.find_iter(stream) {
        if !writes.iter().any(|w| w == found.as_bytes()) {
            writes.push(found.as_bytes().to_vec());
        }
    }
    writes
}

/// `stream[..cut]` with `write` put in at `at`.
fn with_write_at(stream: &[u8], write: &[u8], at: usize, cut: usize) -> Vec<u8> {
    let mut bytes = stream[..at].to_vec();
    bytes.extend_from_slice(write);
    bytes.extend_from_slice(&stream[at..cut]);
    bytes
}

/// The rule the profile reads the screen by, when it reads a provider retry; what it saw
/// otherwise.
fn provider_rule(profile: &Profile, bytes: &[u8], size: TermSize) -> Result<String, String> {
    let screen = final_screen(bytes, size);
    let seen = observe_in(profile, &screen, Phase::Turn).observation;
    match seen.seen {
        Seen::Signal {
            signal: Signal::ProviderRetry,
        } => Ok(seen.rule),
        other => Err(format!(
            "{other:?} by rule {} ({:?}) on:\n{}",
            seen.rule,
            seen.evidence,
            screen.text()
        )),
    }
}

#[test]
fn a_retry_printed_over_the_bar_is_still_a_provider_retry() {
    let profiles = ProfileSet::builtin().expect("built-in profiles");
    let profile = profiles.get("aider").expect("the aider profile");
    let mut checked = 0;
    for size in SIZES {
        let stream = stream(size);
        let writes = bar_writes(&stream);
        assert!(
            writes.len() >= 10,
            "the bar's frames at {size:?}: {}",
            writes.len()
        );
        for retry in find_all(&stream, RETRYING) {
            // The wait ends where the next failure is printed over the bar.
            let Some(wait_end) = find_from(&stream, NEXT_FAILURE, retry) else {
                continue;
            };
            assert_eq!(
                provider_rule(profile, &stream[..wait_end], size).as_deref(),
                Ok("provider_retrying"),
                "as recorded, at {size:?}"
            );
            for write in &writes {
                let bytes = with_write_at(&stream, write, retry, wait_end);
                assert_eq!(
                    provider_rule(profile, &bytes, size).as_deref(),
                    Ok("provider_retrying"),
                    "the bar drawn before the retry's print at {size:?}: {:?}",
                    String::from_utf8_lossy(write)
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 3 * 7 * 10, "{checked} screens checked");
}

#[test]
fn giving_up_printed_over_the_bar_is_still_the_provider_down() {
    let profiles = ProfileSet::builtin().expect("built-in profiles");
    let profile = profiles.get("aider").expect("the aider profile");
    for size in SIZES {
        let stream = stream(size);
        let gave_up = *find_all(&stream, MEANING)
            .last()
            .expect("the meaning printed when aider gives up");
        assert_eq!(
            find_from(&stream, RETRYING, gave_up),
            None,
            "no retry after the last meaning at {size:?}"
        );
        assert_eq!(
            provider_rule(profile, &stream, size).as_deref(),
            Ok("provider_gave_up"),
            "as recorded, at {size:?}"
        );
        for write in bar_writes(&stream) {
            let bytes = with_write_at(&stream, &write, gave_up, stream.len());
            assert_eq!(
                provider_rule(profile, &bytes, size).as_deref(),
                Ok("provider_gave_up"),
                "the bar drawn before the meaning's print at {size:?}: {:?}",
                String::from_utf8_lossy(&write)
            );
        }
    }
}
