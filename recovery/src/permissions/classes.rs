//! Classes of commands and paths that no profile, entry or grant makes safe on its own
//! (`docs/permissions.md`, "Never default safe" and "Protected paths").
//!
//! It owns three lists and the way an argument is matched against them:
//!
//! - **protected paths** ([`protected`]): clawpool's and the agents' own control files — what
//!   an agent would change to widen what it may do, or to change what clawpool believes;
//! - **options and verbs that name a program** ([`runs_a_program`]): `sort
//!   --compress-program`, `rg --pre`, `git clone -c`, `cargo --config`, `xargs`, …;
//! - **git outside the lane's own repository** ([`foreign_git`]): a git command whose
//!   repository would be discovered anywhere but the lane's worktree runs that repository's
//!   configuration (`core.fsmonitor`, `core.hooksPath`, a pager).
//!
//! [`option_matches`] is the one place an argument is matched against an option's name: GNU
//! tools (and git) take any prefix of a long option as the option (`--outp=x` is `--output=x`),
//! so a prefix counts; a one-letter option counts inside a cluster of short options (`-uo`).
//! Matching over-estimates (an ambiguous prefix is an error to the tool, here it is the
//! option): an over-estimate only ever asks.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::reader::CommandPart;

/// A protected path's class, and what the policy answers for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protected {
    /// clawpool's own state: `.claw/` in any worktree (the state file, hooks, control socket,
    /// supervisor lock), the repository's common git dir (lane registry, grants), the user's
    /// clawpool folders. Written, moved or deleted: *deny* — no task needs it.
    ClawpoolControl,
    /// A secret: `.claw/hook-token`, the grant key. Read as well as written: *deny*.
    Secret,
    /// An agent's own settings: `.claude/`, `.codex/`, `.gemini/`, `.qwen/`, `.cursor/`
    /// folders and `.claude.json`, in the worktree or the home folder. Written: *ask* — a task
    /// may change a project's agent settings, but only a person may say so.
    AgentSettings,
    /// clawpool's configuration: `.clawpool.toml`. Written: *ask*, as agent settings.
    ClawpoolConfig,
}

impl Protected {
    /// A short stable name, used in the deciding rule (`protected:agent_settings`).
    pub fn code(self) -> &'static str {
        match self {
            Self::ClawpoolControl => "clawpool_control",
            Self::Secret => "secret",
            Self::AgentSettings => "agent_settings",
            Self::ClawpoolConfig => "clawpool_config",
        }
    }

    /// Whether the policy denies it (otherwise a person is asked).
    pub fn denies(self) -> bool {
        matches!(self, Self::ClawpoolControl | Self::Secret)
    }

    /// Why, in words.
    pub fn reason(self) -> &'static str {
        match self {
            Self::ClawpoolControl => "it changes clawpool's own control files",
            Self::Secret => "it reads or writes a secret of clawpool's",
            Self::AgentSettings => {
                "it changes an agent's own settings (only a person may widen what an agent does)"
            }
            Self::ClawpoolConfig => "it changes clawpool's configuration",
        }
    }
}

/// The protected folders and files outside the worktree that only the lane's caller knows:
/// the common git dir, the user's clawpool folders, the grant key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedPaths {
    /// clawpool's folders (every path under each is [`Protected::ClawpoolControl`]).
    pub control: Vec<PathBuf>,
    /// Secret files ([`Protected::Secret`]).
    pub secrets: Vec<PathBuf>,
}

/// Folder names whose contents are an agent's own settings, wherever they are.
const AGENT_SETTINGS_FOLDERS: &[&str] = &[".claude", ".codex", ".gemini", ".qwen", ".cursor"];
/// File names that are an agent's own settings, wherever they are.
const AGENT_SETTINGS_FILES: &[&str] = &[".claude.json"];
/// clawpool's folder in every worktree.
const CLAW_FOLDER: &str = ".claw";
/// The hook token's name in `.claw/`.
const HOOK_TOKEN: &str = "hook-token";
/// clawpool's repository configuration file.
const CLAWPOOL_CONFIG: &str = ".clawpool.toml";

/// The protected class of a resolved path, if it has one. `.git` folders are the policy's own
/// hard block (`hard_block:git_internals`) and not repeated here.
pub fn protected(path: &Path, paths: &ProtectedPaths) -> Option<Protected> {
    if paths.secrets.iter().any(|secret| path == secret) {
        return Some(Protected::Secret);
    }
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|component| match component {
            std::path::Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    if let Some(at) = names.iter().position(|name| *name == CLAW_FOLDER) {
        if names.get(at + 1).is_some_and(|name| *name == HOOK_TOKEN) {
            return Some(Protected::Secret);
        }
        return Some(Protected::ClawpoolControl);
    }
    if paths.control.iter().any(|folder| path.starts_with(folder)) {
        return Some(Protected::ClawpoolControl);
    }
    let is = |list: &[&str], name: &std::ffi::OsStr| list.iter().any(|wanted| name == *wanted);
    if names.iter().any(|name| is(AGENT_SETTINGS_FOLDERS, name))
        || names
            .last()
            .is_some_and(|name| is(AGENT_SETTINGS_FILES, name))
    {
        return Some(Protected::AgentSettings);
    }
    if names.last().is_some_and(|name| *name == CLAWPOOL_CONFIG) {
        return Some(Protected::ClawpoolConfig);
    }
    None
}

/// Whether `arg` is the option `option`: for `--long`, the option itself, any prefix of it
/// (GNU and git abbreviations), each with or without `=value`; for a one-letter `-x`, `-x`
/// alone or inside a cluster of short options (`-ux`, `-xVALUE`); for a one-dash word
/// (`-exec`, `-TT`), exactly that word.
pub fn option_matches(option: &str, arg: &str) -> bool {
    if let Some(long) = option.strip_prefix("--") {
        let Some(given) = arg.strip_prefix("--") else {
            return false;
        };
        let name = given.split_once('=').map_or(given, |(name, _)| name);
        return !name.is_empty() && long.starts_with(name);
    }
    let short_letter = option
        .strip_prefix('-')
        .filter(|letter| letter.chars().count() == 1);
    match short_letter {
        Some(letter) if !arg.starts_with("--") && arg.starts_with('-') => {
            arg.get(1..).is_some_and(|cluster| cluster.contains(letter))
        }
        _ => arg == option,
    }
}

/// Options that make a verb run a program it names (or configuration that names one).
/// The verb is a command name or `git SUB`.
const PROGRAM_OPTIONS: &[(&str, &[&str])] = &[
    ("sort", &["--compress-program"]),
    ("rg", &["--pre", "--hostname-bin", "--search-zip", "-z"]),
    ("find", &["-exec", "-execdir", "-ok", "-okdir"]),
    ("cargo", &["--config", "-Z"]),
    ("rsync", &["-e", "--rsh", "--rsync-path"]),
    ("ssh", &["-o", "-F"]),
    ("scp", &["-o", "-F", "-S"]),
    (
        "tar",
        &[
            "--to-command",
            "-I",
            "--use-compress-program",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
            "-F",
            "--rsh-command",
        ],
    ),
    ("zip", &["-TT", "--unzip-command"]),
    ("less", &["--lesskey-file"]),
    ("man", &["-P", "--pager", "-H", "--html"]),
    (
        "git clone",
        &["-c", "--config", "-u", "--upload-pack", "--template"],
    ),
    ("git init", &["--template"]),
    ("git fetch", &["--upload-pack"]),
    ("git pull", &["--upload-pack"]),
    ("git ls-remote", &["--upload-pack"]),
    ("git push", &["--receive-pack", "--exec"]),
    ("git archive", &["--exec"]),
    ("git rebase", &["-x", "--exec"]),
    ("git difftool", &["-x", "--extcmd", "-t", "--tool"]),
    ("git mergetool", &["-t", "--tool"]),
    ("git diff", &["--ext-diff", "--textconv"]),
    ("git log", &["--ext-diff", "--textconv"]),
    ("git show", &["--ext-diff", "--textconv"]),
];

/// Verbs whose arguments are a program they run (or whose every use changes what programs
/// git runs): an entry or grant for one of them would be an entry for every program.
const RUNNERS: &[&str] = &[
    "xargs",
    "env",
    "nice",
    "nohup",
    "timeout",
    "stdbuf",
    "setsid",
    "sudo",
    "doas",
    "su",
    "exec",
    "command",
    "builtin",
    "eval",
    "source",
    ".",
    "watch",
    "flock",
    "ionice",
    "taskset",
    "chroot",
    "unshare",
    "nsenter",
    "strace",
    "ltrace",
    "script",
    "parallel",
    "busybox",
    "git submodule",
    "git bisect",
    "git config",
    "git filter-branch",
    "git hook",
];

/// What names a program in `part`, if anything does: the runner verb, or the option.
pub fn runs_a_program(part: &CommandPart) -> Option<String> {
    let named = |name: &str| {
        name.split(' ')
            .enumerate()
            .all(|(index, word)| part.argv.get(index).is_some_and(|arg| arg == word))
    };
    if let Some(runner) = RUNNERS.iter().find(|runner| named(runner)) {
        return Some((*runner).to_owned());
    }
    PROGRAM_OPTIONS
        .iter()
        .filter(|(verb, _)| named(verb))
        .find_map(|(verb, options)| {
            let skip = verb.split(' ').count();
            let args = part.argv.get(skip..).unwrap_or(&[]);
            args.iter()
                .find(|arg| options.iter().any(|option| option_matches(option, arg)))
                .map(|arg| format!("{verb} {arg}"))
        })
}

/// Most folders walked up from a git command's cwd to the worktree before the answer is
/// "not certain" (foreign).
const MAX_DISCOVERY_DEPTH: usize = 64;

/// Where git would find a repository other than the lane's own for a git command run in
/// `cwd` (resolved; `None`: unknown), if it would: the cwd outside the worktree, or a folder
/// between the cwd and the worktree (the cwd included, the worktree not) that holds a `.git`
/// or looks like a git folder itself (holds `HEAD`). `None` when discovery ends at the
/// worktree.
pub fn foreign_git(cwd: Option<&Path>, worktree: &Path) -> Option<PathBuf> {
    let Some(cwd) = cwd else {
        return Some(PathBuf::from("(an unknown folder)"));
    };
    if !cwd.starts_with(worktree) {
        return Some(cwd.to_path_buf());
    }
    for folder in cwd.ancestors().take(MAX_DISCOVERY_DEPTH) {
        if folder == worktree {
            return None;
        }
        let holds = |name: &str| std::fs::symlink_metadata(folder.join(name)).is_ok();
        if holds(".git") || holds("HEAD") || folder.file_name().is_some_and(|n| n == ".git") {
            return Some(folder.to_path_buf());
        }
    }
    Some(cwd.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_matches_its_gnu_abbreviations_and_short_clusters() {
        let yes = [
            ("--output", "--output"),
            ("--output", "--output=x"),
            ("--output", "--outp=x"),
            ("--output", "--out"),
            ("--output", "--o=x"),
            ("--compress-program", "--compress-prog=sh"),
            ("-o", "-o"),
            ("-o", "-uo"),
            ("-o", "-ofile"),
            ("-exec", "-exec"),
        ];
        let no = [
            ("--output", "--oneline"),
            ("--output", "--output-indicator-new=x"),
            ("--output", "--"),
            ("--output", "-o"),
            ("-o", "--only"),
            ("-exec", "-execdir"),
            ("-exec", "-e"),
        ];
        for (option, arg) in yes {
            assert!(option_matches(option, arg), "{arg} is {option}");
        }
        for (option, arg) in no {
            assert!(!option_matches(option, arg), "{arg} is not {option}");
        }
    }

    #[test]
    fn protected_paths_are_found_by_name_and_by_folder() {
        let paths = ProtectedPaths {
            control: vec![
                PathBuf::from("/repo/.git"),
                PathBuf::from("/state/clawpool"),
            ],
            secrets: vec![PathBuf::from("/state/clawpool/grant-key")],
        };
        let table = [
            (
                "/w/.claw/worker-state.json",
                Some(Protected::ClawpoolControl),
            ),
            ("/w/.claw", Some(Protected::ClawpoolControl)),
            ("/w/.claw/hook-token", Some(Protected::Secret)),
            ("/state/clawpool/grant-key", Some(Protected::Secret)),
            (
                "/state/clawpool/permission-grants.json",
                Some(Protected::ClawpoolControl),
            ),
            (
                "/w/.claude/settings.local.json",
                Some(Protected::AgentSettings),
            ),
            ("/home/u/.claude.json", Some(Protected::AgentSettings)),
            ("/home/u/.codex/config.toml", Some(Protected::AgentSettings)),
            ("/w/.clawpool.toml", Some(Protected::ClawpoolConfig)),
            ("/w/src/main.rs", None),
            ("/w/.clawpool/lanes/a/src/x", None),
            ("/w/.claude-notes.md", None),
        ];
        for (path, class) in table {
            assert_eq!(protected(Path::new(path), &paths), class, "{path}");
        }
    }
}
