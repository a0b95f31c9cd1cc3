//! The curated verbs the policy decides without an entry: the read-only ones every profile
//! allows inside the lane's worktree (default safe), and the file-writing ones the
//! `workspace-write` profile adds. Each verb names the options that would make it run, write or
//! delete something, which take it off the list.

use super::classes::option_matches;
use super::reader::CommandPart;

/// Whether a verb's arguments name files (checked against the worktree) or are plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arguments {
    /// Every argument that is not an option — and the value of every `--option=value` — is
    /// taken as a path (an over-estimate only ever asks).
    Paths,
    /// The arguments are text, never opened (`echo`, `printf`).
    Text,
}

/// A curated verb: its name (with the subcommand for `git`), and the options that disqualify
/// it.
struct Verb {
    name: &'static str,
    arguments: Arguments,
    /// Options that run, write or delete ([`option_matches`]).
    forbidden: &'static [&'static str],
}

const fn verb(name: &'static str, forbidden: &'static [&'static str]) -> Verb {
    Verb {
        name,
        arguments: Arguments::Paths,
        forbidden,
    }
}

/// Options of `git diff`, `git log` and `git show` that write a file or run a program.
const GIT_OUTPUT_OPTIONS: &[&str] = &["--output", "--ext-diff", "--textconv"];

/// Read-only verbs: allowed in every profile when every path and the cwd are inside the lane's
/// worktree. Long options match by any prefix (`--outp` is `--output`: GNU and git take an
/// unambiguous prefix as the option), so each list names an option once.
const READ_ONLY: &[Verb] = &[
    verb("ls", &[]),
    verb("cat", &[]),
    verb("head", &[]),
    verb("tail", &[]),
    verb("wc", &["--files0-from"]),
    verb("grep", &[]),
    verb("egrep", &[]),
    verb("fgrep", &[]),
    verb("rg", &["--pre", "--hostname-bin", "--search-zip", "-z"]),
    verb(
        "find",
        &[
            "-exec",
            "-execdir",
            "-ok",
            "-okdir",
            "-delete",
            "-fprint",
            "-fprint0",
            "-fprintf",
            "-fls",
            "-files0-from",
        ],
    ),
    verb("file", &["-C", "--compile"]),
    verb("stat", &[]),
    verb("du", &["--files0-from"]),
    verb("tree", &["-o", "--output"]),
    verb("pwd", &[]),
    verb("diff", &[]),
    verb("cmp", &[]),
    verb(
        "sort",
        &[
            "-o",
            "--output",
            "--compress-program",
            "-T",
            "--temporary-directory",
            "--files0-from",
        ],
    ),
    verb("cut", &[]),
    verb("nl", &[]),
    verb("basename", &[]),
    verb("dirname", &[]),
    verb("realpath", &[]),
    verb("readlink", &[]),
    verb("sha256sum", &["-c", "--check"]),
    verb("md5sum", &["-c", "--check"]),
    verb("cd", &[]),
    verb("true", &[]),
    Verb {
        name: "echo",
        arguments: Arguments::Text,
        forbidden: &[],
    },
    Verb {
        name: "printf",
        arguments: Arguments::Text,
        forbidden: &["-v"],
    },
    verb("git status", &[]),
    verb("git diff", GIT_OUTPUT_OPTIONS),
    verb("git log", GIT_OUTPUT_OPTIONS),
    verb("git show", GIT_OUTPUT_OPTIONS),
    verb("git rev-parse", &[]),
    verb("git ls-files", &[]),
    verb("git blame", &[]),
];

/// File-writing verbs the `workspace-write` profile adds, every path inside the worktree.
const WORKSPACE_WRITE: &[Verb] = &[
    verb("mkdir", &[]),
    verb("touch", &[]),
    verb("cp", &[]),
    verb("mv", &[]),
    verb("rm", &[]),
    verb("rmdir", &[]),
    verb("tee", &[]),
    verb("git add", &[]),
    verb("git commit", &[]),
    verb("git mv", &[]),
    verb("git rm", &[]),
    verb("git restore", &[]),
    verb("git stash", &[]),
];

/// The names of the read-only verbs, for documentation and `permissions check`.
pub fn read_only_verbs() -> impl Iterator<Item = &'static str> {
    READ_ONLY.iter().map(|verb| verb.name)
}

/// The names of the verbs `workspace-write` adds.
pub fn workspace_write_verbs() -> impl Iterator<Item = &'static str> {
    WORKSPACE_WRITE.iter().map(|verb| verb.name)
}

/// Which curated list a part's verb is on, with its arguments' kind; `None` when it is on
/// neither or uses an option that disqualifies it.
pub fn classify(part: &CommandPart) -> Option<(Tier, Arguments)> {
    let lists = [
        (Tier::ReadOnly, READ_ONLY),
        (Tier::WorkspaceWrite, WORKSPACE_WRITE),
    ];
    for (tier, list) in lists {
        if let Some(verb) = list.iter().find(|verb| verb_matches(verb.name, part)) {
            let skip = verb.name.split(' ').count();
            let args = part.argv.get(skip..).unwrap_or(&[]);
            if args.iter().any(|arg| forbidden(verb.forbidden, arg)) {
                return None;
            }
            return Some((tier, verb.arguments));
        }
    }
    None
}

/// Which curated list a verb is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Reads only.
    ReadOnly,
    /// Writes files.
    WorkspaceWrite,
}

/// Whether `name` (one word, or `git sub`) names the part's verb.
pub fn verb_matches(name: &str, part: &CommandPart) -> bool {
    name.split(' ')
        .enumerate()
        .all(|(index, word)| part.argv.get(index).is_some_and(|arg| arg == word))
}

/// Whether `arg` is one of `options` ([`option_matches`]: long options by any prefix, short
/// ones inside a cluster).
fn forbidden(options: &[&str], arg: &str) -> bool {
    options.iter().any(|option| option_matches(option, arg))
}
