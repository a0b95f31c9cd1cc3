//! Where `clawpool ui`'s own log lines go: to a file, never onto the terminal the dashboard
//! draws on (a `notify` warning written to stderr lands in the middle of the drawn screen and
//! stays there until the next full redraw).
//!
//! The file is `ui.log` in the repository's clawpool folder (`<common git dir>/clawpool/`,
//! beside `daemon.log`), or with `--all` in clawpool's folder of the user's state dir
//! (`$XDG_STATE_HOME/clawpool/ui.log`, else `~/.local/state/clawpool/ui.log`). Lines are
//! appended. When it cannot be opened the lines are dropped: still never the screen.

use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::sync::Mutex;

use tracing_subscriber::fmt::writer::BoxMakeWriter;

use crate::cli::UiArgs;

/// The file `clawpool ui` run with `args` logs to, when one can be named.
pub fn path(args: &UiArgs) -> Option<PathBuf> {
    if args.all {
        return crate::known_repos::state_folder().map(|dir| dir.join("ui.log"));
    }
    let repo = clawpool_worktree::Repo::open(&args.repo).ok()?;
    Some(repo.state_dir().root().join("ui.log"))
}

/// The log writer for `clawpool ui`: the file of [`path`], or nowhere.
pub fn writer(args: &UiArgs) -> BoxMakeWriter {
    match path(args).and_then(|path| open(&path)) {
        Some(file) => BoxMakeWriter::new(Mutex::new(file)),
        None => BoxMakeWriter::new(std::io::sink),
    }
}

fn open(path: &std::path::Path) -> Option<File> {
    std::fs::create_dir_all(path.parent()?).ok()?;
    OpenOptions::new().create(true).append(true).open(path).ok()
}
