//! Reading a tool-permission dialog off an agent's screen: which tool it asks for, and the
//! command or file. It knows the dialogs of Claude Code 2.1.330 (`Bash command`, `Create
//! file`, `Edit file`) and Codex 0.169.0 (`Would you like to run the following command?`), as
//! recorded in `tests/fixtures/screens/`.
//!
//! What it cannot read whole is not read at all: a dialog of another shape, or a command or
//! path the agent shortened with `…`, gives `None`, and the question goes to a person.

use std::path::{Path, PathBuf};

use super::policy::{Request, Tool};

/// The question on screen, as the policy takes it, or `None` when the dialog cannot be read
/// with certainty. `cwd` is where the agent runs its commands (the lane's worktree).
pub fn read_dialog(rows: &[String], cwd: &Path) -> Option<Request> {
    read_claude(rows, cwd).or_else(|| read_codex(rows, cwd))
}

/// Claude Code: a header line (`Bash command`, `Create file`, `Edit file`), then for a command
/// the command between two dashed rules, for a file the file's path on the next line; then
/// `Do you want to …`.
fn read_claude(rows: &[String], cwd: &Path) -> Option<Request> {
    let question = rows
        .iter()
        .rposition(|row| row.trim_start().starts_with("Do you want to "))?;
    let (header, tool) = rows[..question]
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, row)| claude_header(row.trim()).map(|tool| (index, tool)))?;
    let body = &rows[header + 1..question];
    match tool {
        Tool::Bash => {
            let is_rule = |row: &&String| is_dashed_rule(row);
            let start = body.iter().position(|row| is_rule(&row))?;
            let length = body[start + 1..].iter().position(|row| is_rule(&row))?;
            let lines = &body[start + 1..start + 1 + length];
            command_from(lines).map(|command| Request::Command {
                command,
                cwd: cwd.to_path_buf(),
            })
        }
        Tool::Write | Tool::Edit => {
            let path = body
                .iter()
                .map(|row| row.trim())
                .find(|row| !row.is_empty())?;
            whole(path).then(|| Request::File {
                tool,
                path: PathBuf::from(path),
            })
        }
    }
}

fn claude_header(line: &str) -> Option<Tool> {
    match line {
        "Bash command" => Some(Tool::Bash),
        "Create file" | "Write file" | "Overwrite file" => Some(Tool::Write),
        "Edit file" => Some(Tool::Edit),
        _ => None,
    }
}

/// A row of Claude Code's dashed rule (`╌╌╌…`).
fn is_dashed_rule(row: &str) -> bool {
    let row = row.trim();
    !row.is_empty() && row.chars().all(|c| c == '╌')
}

/// Codex: `Would you like to run the following command?`, then the command on a line starting
/// with `$ ` (continued on the following lines up to a blank line).
fn read_codex(rows: &[String], cwd: &Path) -> Option<Request> {
    let question = rows.iter().rposition(|row| {
        row.trim_start()
            .starts_with("Would you like to run the following command?")
    })?;
    let after = &rows[question + 1..];
    let start = after
        .iter()
        .position(|row| row.trim_start().starts_with("$ "))?;
    let first = after[start].trim_start().strip_prefix("$ ")?.to_owned();
    let rest = after[start + 1..]
        .iter()
        .take_while(|row| !row.trim().is_empty())
        .cloned();
    let lines: Vec<String> = std::iter::once(first).chain(rest).collect();
    command_from(&lines).map(|command| Request::Command {
        command,
        cwd: cwd.to_path_buf(),
    })
}

/// The command shown on `lines`: each line trimmed, joined with newlines (a line the dialog
/// wrapped becomes two commands, each of which must pass on its own: never fewer checks).
fn command_from(lines: &[String]) -> Option<String> {
    let lines: Vec<&str> = lines.iter().map(|line| line.trim()).collect();
    let command = lines.join("\n").trim().to_owned();
    (!command.is_empty() && whole(&command)).then_some(command)
}

/// Whether a shown text is whole: agents shorten long ones with `…`.
fn whole(text: &str) -> bool {
    !text.contains('…')
}
