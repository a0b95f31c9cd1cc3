//! Shared helpers for clawpool's end-to-end tests: where the built binaries are, and
//! throwaway git repositories and tmux sockets that never touch the developer's own.

use std::path::PathBuf;

/// The path of a binary built from this workspace (`clawpool`, `clawpool-scripted-agent`,
/// `clawpool-model-server`), found next to the running test executable's target folder.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    // target/<profile>/deps/<test-binary> → target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binaries live in target/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(
        path.is_file(),
        "{} is not built; run `cargo build --workspace --bins` first (the README's test command does)",
        path.display()
    );
    path
}
