//! Replaying the real agent recordings (Claude Code 2.1.330, Codex 0.169.0) through the screen
//! model gives the screens tmux rendered at the end of each session.

use std::path::{Path, PathBuf};

use clawpool_pty::{TermSize, replay};

fn recordings() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recordings");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("recordings folder")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        // A recording with its rendered screens beside the stream (recordings whose screens
        // are kept in the detector corpus instead have only the stream).
        .filter(|path| path.join("stream.bin").is_file() && has_snapshot(path))
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 3,
        "expected the three shared recordings in {}",
        root.display()
    );
    dirs
}

/// The terminal size a recording was made at, from its folder name's `-COLSxROWS` suffix.
fn size_of(dir: &Path) -> TermSize {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let (cols, rows) = name
        .rsplit('-')
        .next()
        .and_then(|size| size.split_once('x'))
        .and_then(|(c, r)| Some((c.parse().ok()?, r.parse().ok()?)))
        .unwrap_or_else(|| panic!("{name}: no -COLSxROWS suffix"));
    TermSize { rows, cols }
}

fn has_snapshot(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| e.path().extension().is_some_and(|ext| ext == "txt"))
    })
}

/// The snapshot taken last in a recording folder (`NN-label.txt` with the highest NN).
fn last_snapshot(dir: &Path) -> PathBuf {
    let mut snapshots: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("recording folder")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
        .collect();
    snapshots.sort();
    snapshots.pop().expect("at least one snapshot")
}

#[test]
fn replaying_each_recording_gives_its_final_snapshot() {
    for dir in recordings() {
        let stream = std::fs::read(dir.join("stream.bin")).expect("stream.bin");
        let expected = std::fs::read_to_string(last_snapshot(&dir)).expect("snapshot");
        let screen = replay::final_screen(&stream, size_of(&dir));
        let got = screen.text();
        // capture-pane prints every row; the snapshot's text ends at its last non-empty row.
        let mut expected_rows: Vec<&str> = expected.lines().map(str::trim_end).collect();
        while expected_rows.last() == Some(&"") {
            expected_rows.pop();
        }
        let got_rows: Vec<&str> = got.lines().collect();
        assert_eq!(
            got_rows,
            expected_rows,
            "replay of {} differs from its last snapshot",
            dir.display()
        );
    }
}

#[test]
fn screens_at_offsets_show_the_session_progressing() {
    let dir = recordings()
        .into_iter()
        .find(|d| d.ends_with("claude-2.1.330-120x40"))
        .expect("claude recording");
    let stream = std::fs::read(dir.join("stream.bin")).expect("stream.bin");
    let size = TermSize {
        rows: 40,
        cols: 120,
    };
    let screens = replay::screens_at(&stream, size, &[0, stream.len() / 2, stream.len()]);
    assert!(screens[0].text().trim().is_empty());
    assert!(!screens[2].text().trim().is_empty());
    assert_eq!(screens[2], replay::final_screen(&stream, size));
}
