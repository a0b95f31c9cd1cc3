//! The shell-command reader: turns the text of a command an agent asks to run into the simple
//! commands it is made of, or refuses it.
//!
//! It owns the line between "read with certainty" and "not": it splits well-formed compounds
//! (`&&`, `||`, `;`, `|`, newlines) into [`CommandPart`]s with their literal arguments and
//! redirections, and refuses ([`Refusal`]) everything whose effect cannot be known from the
//! text alone — control flow, grouping, substitutions, expansions, globs, here-documents,
//! behaviour-changing environment prefixes, `git` global options. A refusal means *ask*,
//! never *allow* (`docs/permissions.md`). Parsing is `brush-parser`'s; this module only walks
//! its syntax tree and decides what it can vouch for.

use std::fmt;

use brush_parser::ast::{
    self, AndOrList, Command, CommandPrefixOrSuffixItem, CompoundList, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, Pipeline, SeparatorOperator, SimpleCommand,
};
use brush_parser::word::{self, TildeExpr, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

/// Longest command text the reader reads; longer ones are refused (ask).
pub const MAX_COMMAND_CHARS: usize = 8192;

/// Deepest nesting of brackets the reader hands to the parser. A deeper one is refused before
/// parsing, so that no input can exhaust the parser's stack.
const MAX_BRACKET_DEPTH: usize = 32;

/// Environment-assignment prefixes that cannot change what a command does beyond its locale,
/// time zone or colours; any other prefix (`PAGER=`, `GIT_EXTERNAL_DIFF=`, `LD_PRELOAD=`, …)
/// is refused.
const HARMLESS_ENV_PREFIXES: &[&str] = &[
    "LANG", "LANGUAGE", "TZ", "NO_COLOR", "CLICOLOR", "TERM", "COLUMNS", "LINES",
];

/// `git` options before the subcommand that change nothing but its output; any other
/// (`-c`, `-C`, `--git-dir`, `--exec-path`, `--config-env`, …) is refused.
const HARMLESS_GIT_GLOBAL_OPTIONS: &[&str] = &["--no-pager", "--no-optional-locks"];

/// Why the reader would not vouch for a command. Each is an *ask*.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Empty or blank command text.
    Empty,
    /// Longer than [`MAX_COMMAND_CHARS`].
    TooLong,
    /// Control characters other than tab and newline.
    ControlCharacter,
    /// Brackets nested deeper than the reader reads.
    TooDeep,
    /// Not well-formed shell: unbalanced quotes or brackets, a stray operator, …
    Unparseable(String),
    /// `for`, `while`, `until`, `if`, `case`, arithmetic commands, functions.
    ControlFlow(&'static str),
    /// `( … )` subshells and `{ …; }` groups.
    Grouping,
    /// A command run in the background (`&`), or a coprocess.
    Background,
    /// `$(…)` or backquotes.
    CommandSubstitution,
    /// `<(…)` or `>(…)`.
    ProcessSubstitution,
    /// `$VAR`, `${…}` or `$((…))`: a value the text does not show.
    Expansion,
    /// An unquoted glob or brace expansion (`*`, `?`, `[`, `{`): paths the text does not show.
    Glob,
    /// `~user`, `~+`, `~-`: a folder the text does not show.
    Tilde,
    /// A here-document or here-string.
    HereDocument,
    /// A redirection to a file descriptor the reader does not follow, or a process.
    Redirection,
    /// An environment assignment before a command that can change what it does, or on its own.
    EnvironmentPrefix(String),
    /// A `git` option before the subcommand that changes what git runs or where.
    GitGlobalOption(String),
    /// `time`, `!`: pipeline modifiers.
    PipelineModifier,
    /// A `#` comment: text the shell ignores, shown to a person who reads the question.
    Comment,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "empty command"),
            Self::TooLong => write!(f, "longer than {MAX_COMMAND_CHARS} characters"),
            Self::ControlCharacter => write!(f, "control characters in the command"),
            Self::TooDeep => write!(f, "brackets nested deeper than {MAX_BRACKET_DEPTH}"),
            Self::Unparseable(why) => write!(f, "not well-formed shell ({why})"),
            Self::ControlFlow(what) => write!(f, "control flow ({what})"),
            Self::Grouping => write!(f, "a subshell or command group"),
            Self::Background => write!(f, "a command run in the background"),
            Self::CommandSubstitution => write!(f, "command substitution"),
            Self::ProcessSubstitution => write!(f, "process substitution"),
            Self::Expansion => write!(f, "a variable or arithmetic expansion"),
            Self::Glob => write!(f, "an unquoted glob or brace expansion"),
            Self::Tilde => write!(f, "a tilde form other than ~"),
            Self::HereDocument => write!(f, "a here-document or here-string"),
            Self::Redirection => write!(f, "a redirection the reader does not follow"),
            Self::EnvironmentPrefix(name) => write!(f, "environment prefix {name}="),
            Self::GitGlobalOption(option) => write!(f, "git global option {option}"),
            Self::PipelineModifier => write!(f, "a pipeline modifier (time, !)"),
            Self::Comment => write!(f, "a # comment"),
        }
    }
}

impl Refusal {
    /// A short stable name, used in the deciding rule (`reader:command_substitution`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::TooLong => "too_long",
            Self::ControlCharacter => "control_character",
            Self::TooDeep => "too_deep",
            Self::Unparseable(_) => "unparseable",
            Self::ControlFlow(_) => "control_flow",
            Self::Grouping => "grouping",
            Self::Background => "background",
            Self::CommandSubstitution => "command_substitution",
            Self::ProcessSubstitution => "process_substitution",
            Self::Expansion => "expansion",
            Self::Glob => "glob",
            Self::Tilde => "tilde",
            Self::HereDocument => "here_document",
            Self::Redirection => "redirection",
            Self::EnvironmentPrefix(_) => "environment_prefix",
            Self::GitGlobalOption(_) => "git_global_option",
            Self::PipelineModifier => "pipeline_modifier",
            Self::Comment => "comment",
        }
    }
}

/// What a redirection does to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectMode {
    /// `<`: reads it.
    Read,
    /// `>`, `>>`, `>|`, `<>`, `&>`: writes it.
    Write,
}

/// A redirection to a named file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// Read or write.
    pub mode: RedirectMode,
    /// The file, as written (`~` kept as the first character for the home folder).
    pub target: String,
}

/// One simple command of a compound: what runs, with which literal arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPart {
    /// The command and its arguments, quotes removed. `argv[0]` is the verb. For `git`, the
    /// harmless global options are dropped, so `argv[1]` is the subcommand.
    pub argv: Vec<String>,
    /// Harmless environment prefixes (`LANG=C`), as `(name, value)`.
    pub env: Vec<(String, String)>,
    /// Redirections to named files, in order.
    pub redirects: Vec<Redirect>,
    /// Which pipeline of the command this part belongs to (0-based, in order).
    pub pipeline: usize,
}

impl CommandPart {
    /// The command's name (`argv[0]`).
    pub fn verb(&self) -> &str {
        self.argv.first().map(String::as_str).unwrap_or("")
    }

    /// The arguments after the verb.
    pub fn args(&self) -> &[String] {
        self.argv.get(1..).unwrap_or(&[])
    }
}

/// Reads `text` as a shell command: the simple commands it is made of, in order, or why it
/// cannot be read with certainty.
pub fn read_command(text: &str) -> Result<Vec<CommandPart>, Refusal> {
    if text.trim().is_empty() {
        return Err(Refusal::Empty);
    }
    if text.chars().count() > MAX_COMMAND_CHARS {
        return Err(Refusal::TooLong);
    }
    if text
        .chars()
        .any(|c| c.is_control() && c != '\t' && c != '\n')
    {
        return Err(Refusal::ControlCharacter);
    }
    if has_comment(text) {
        return Err(Refusal::Comment);
    }
    if bracket_depth(text) > MAX_BRACKET_DEPTH {
        return Err(Refusal::TooDeep);
    }
    let options = parser_options();
    let program = Parser::new(text.as_bytes(), &options)
        .parse_program()
        .map_err(|error| Refusal::Unparseable(error.to_string()))?;
    let mut reader = Reader {
        options,
        parts: Vec::new(),
        pipelines: 0,
    };
    for list in &program.complete_commands {
        reader.compound_list(list)?;
    }
    if reader.parts.is_empty() {
        return Err(Refusal::Empty);
    }
    Ok(reader.parts)
}

fn parser_options() -> ParserOptions {
    ParserOptions {
        // `@(…)`-style patterns are globs the reader would refuse anyway; off, they do not parse.
        enable_extended_globbing: false,
        ..ParserOptions::default()
    }
}

/// Whether a `#` could start a comment: at the start or after a blank or an operator. Quotes
/// are ignored, so a quoted `#` counts too (an over-estimate is only a refusal).
fn has_comment(text: &str) -> bool {
    let mut previous = None;
    for c in text.chars() {
        let after_boundary =
            previous.is_none_or(|p: char| p.is_whitespace() || ";&|()<>".contains(p));
        if c == '#' && after_boundary {
            return true;
        }
        previous = Some(c);
    }
    false
}

/// The deepest nesting of `(`, `{` and `[` in the text, quotes ignored (an over-estimate is
/// only a refusal).
fn bracket_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for c in text.chars() {
        match c {
            '(' | '{' | '[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

struct Reader {
    options: ParserOptions,
    parts: Vec<CommandPart>,
    pipelines: usize,
}

impl Reader {
    fn compound_list(&mut self, list: &CompoundList) -> Result<(), Refusal> {
        for item in &list.0 {
            if matches!(item.1, SeparatorOperator::Async) {
                return Err(Refusal::Background);
            }
            self.and_or_list(&item.0)?;
        }
        Ok(())
    }

    fn and_or_list(&mut self, list: &AndOrList) -> Result<(), Refusal> {
        for (_, pipeline) in list {
            self.pipeline(pipeline)?;
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &Pipeline) -> Result<(), Refusal> {
        if pipeline.timed.is_some() || pipeline.bang {
            return Err(Refusal::PipelineModifier);
        }
        let index = self.pipelines;
        self.pipelines += 1;
        for command in &pipeline.seq {
            let part = self.command(command, index)?;
            self.parts.push(part);
        }
        Ok(())
    }

    fn command(&self, command: &Command, pipeline: usize) -> Result<CommandPart, Refusal> {
        match command {
            Command::Simple(simple) => self.simple_command(simple, pipeline),
            Command::Compound(compound, _) => Err(compound_refusal(compound)),
            Command::Function(_) => Err(Refusal::ControlFlow("function definition")),
            Command::ExtendedTest(..) => Err(Refusal::ControlFlow("[[ … ]]")),
        }
    }

    fn simple_command(
        &self,
        command: &SimpleCommand,
        pipeline: usize,
    ) -> Result<CommandPart, Refusal> {
        let mut part = CommandPart {
            argv: Vec::new(),
            env: Vec::new(),
            redirects: Vec::new(),
            pipeline,
        };
        let prefix = command.prefix.iter().flat_map(|prefix| prefix.0.iter());
        for item in prefix {
            match item {
                CommandPrefixOrSuffixItem::AssignmentWord(assignment, _) => {
                    part.env.push(self.assignment(assignment)?);
                }
                other => self.item(other, &mut part)?,
            }
        }
        if let Some(name) = &command.word_or_name {
            part.argv.push(self.word(&name.value)?);
        }
        let suffix = command.suffix.iter().flat_map(|suffix| suffix.0.iter());
        for item in suffix {
            self.item(item, &mut part)?;
        }
        if part.argv.is_empty() {
            // Assignments alone change the shell's own state for what follows.
            let name = part.env.first().map(|(name, _)| name.clone());
            return Err(Refusal::EnvironmentPrefix(name.unwrap_or_default()));
        }
        if part.argv[0] == "git" {
            strip_git_global_options(&mut part.argv)?;
        }
        Ok(part)
    }

    fn item(
        &self,
        item: &CommandPrefixOrSuffixItem,
        part: &mut CommandPart,
    ) -> Result<(), Refusal> {
        match item {
            CommandPrefixOrSuffixItem::Word(word) => part.argv.push(self.word(&word.value)?),
            // After the command name an assignment is an ordinary argument (`make X=1`).
            CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                part.argv.push(self.word(&word.value)?);
            }
            CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
                if let Some(redirect) = self.redirect(redirect)? {
                    part.redirects.push(redirect);
                }
            }
            CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                return Err(Refusal::ProcessSubstitution);
            }
        }
        Ok(())
    }

    fn assignment(&self, assignment: &ast::Assignment) -> Result<(String, String), Refusal> {
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(name) => name.clone(),
            ast::AssignmentName::ArrayElementName(name, _) => {
                return Err(Refusal::EnvironmentPrefix(name.clone()));
            }
        };
        let harmless = HARMLESS_ENV_PREFIXES.contains(&name.as_str()) || name.starts_with("LC_");
        if !harmless || assignment.append {
            return Err(Refusal::EnvironmentPrefix(name));
        }
        let value = match &assignment.value {
            ast::AssignmentValue::Scalar(value) => self.word(&value.value)?,
            ast::AssignmentValue::Array(_) => return Err(Refusal::EnvironmentPrefix(name)),
        };
        Ok((name, value))
    }

    /// A redirection to a named file, `None` for a descriptor duplication (`2>&1`), or a refusal.
    fn redirect(&self, redirect: &IoRedirect) -> Result<Option<Redirect>, Refusal> {
        match redirect {
            IoRedirect::HereDocument(..) | IoRedirect::HereString(..) => Err(Refusal::HereDocument),
            IoRedirect::OutputAndError(target, _) => Ok(Some(Redirect {
                mode: RedirectMode::Write,
                target: self.word(&target.value)?,
            })),
            IoRedirect::File(_, kind, target) => {
                let mode = match kind {
                    IoFileRedirectKind::Read => RedirectMode::Read,
                    IoFileRedirectKind::Write
                    | IoFileRedirectKind::Append
                    | IoFileRedirectKind::ReadAndWrite
                    | IoFileRedirectKind::Clobber => RedirectMode::Write,
                    IoFileRedirectKind::DuplicateInput | IoFileRedirectKind::DuplicateOutput => {
                        return match target {
                            IoFileRedirectTarget::Fd(_) => Ok(None),
                            IoFileRedirectTarget::Duplicate(word)
                                if self.word(&word.value)?.parse::<u32>().is_ok()
                                    || word.value == "-" =>
                            {
                                Ok(None)
                            }
                            _ => Err(Refusal::Redirection),
                        };
                    }
                };
                match target {
                    IoFileRedirectTarget::Filename(word) => Ok(Some(Redirect {
                        mode,
                        target: self.word(&word.value)?,
                    })),
                    IoFileRedirectTarget::ProcessSubstitution(..) => {
                        Err(Refusal::ProcessSubstitution)
                    }
                    IoFileRedirectTarget::Fd(_) | IoFileRedirectTarget::Duplicate(_) => {
                        Err(Refusal::Redirection)
                    }
                }
            }
        }
    }

    /// The literal value of a word, quotes removed, or a refusal when its value is not in the
    /// text. The home-folder tilde is kept as a leading `~`.
    fn word(&self, text: &str) -> Result<String, Refusal> {
        let pieces = word::parse(text, &self.options)
            .map_err(|error| Refusal::Unparseable(error.to_string()))?;
        let mut value = String::new();
        for piece in &pieces {
            unquoted_piece(&piece.piece, &mut value)?;
        }
        Ok(value)
    }
}

fn compound_refusal(compound: &ast::CompoundCommand) -> Refusal {
    use ast::CompoundCommand as C;
    match compound {
        C::Arithmetic(_) => Refusal::ControlFlow("(( … ))"),
        C::ArithmeticForClause(_) | C::ForClause(_) => Refusal::ControlFlow("for"),
        C::CaseClause(_) => Refusal::ControlFlow("case"),
        C::IfClause(_) => Refusal::ControlFlow("if"),
        C::WhileClause(_) => Refusal::ControlFlow("while"),
        C::UntilClause(_) => Refusal::ControlFlow("until"),
        C::BraceGroup(_) | C::Subshell(_) => Refusal::Grouping,
        C::Coprocess(_) => Refusal::Background,
    }
}

fn unquoted_piece(piece: &WordPiece, value: &mut String) -> Result<(), Refusal> {
    match piece {
        WordPiece::Text(text) => {
            if text.contains(['*', '?', '[', '{']) {
                return Err(Refusal::Glob);
            }
            value.push_str(text);
        }
        WordPiece::SingleQuotedText(text) => value.push_str(text),
        WordPiece::EscapeSequence(escape) => {
            // `\x` is `x`; a backslash-newline joins lines and is nothing.
            let escaped = escape.strip_prefix('\\').unwrap_or(escape);
            if escaped != "\n" {
                value.push_str(escaped);
            }
        }
        WordPiece::DoubleQuotedSequence(pieces) => {
            for piece in pieces {
                double_quoted_piece(piece, value)?;
            }
        }
        WordPiece::TildeExpansion(TildeExpr::Home) => value.push('~'),
        WordPiece::TildeExpansion(_) => return Err(Refusal::Tilde),
        WordPiece::CommandSubstitution(_) | WordPiece::BackquotedCommandSubstitution(_) => {
            return Err(Refusal::CommandSubstitution);
        }
        WordPiece::ParameterExpansion(_)
        | WordPiece::ArithmeticExpression(_)
        | WordPiece::AnsiCQuotedText(_)
        | WordPiece::GettextDoubleQuotedSequence(_) => return Err(Refusal::Expansion),
    }
    Ok(())
}

fn double_quoted_piece(piece: &WordPieceWithSource, value: &mut String) -> Result<(), Refusal> {
    match &piece.piece {
        WordPiece::Text(text) => value.push_str(text),
        WordPiece::EscapeSequence(escape) => {
            // Inside double quotes a backslash escapes only `$`, backquote, `"`, `\` and newline.
            match escape.strip_prefix('\\') {
                Some("\n") => {}
                Some(escaped @ ("$" | "`" | "\"" | "\\")) => value.push_str(escaped),
                _ => value.push_str(escape),
            }
        }
        WordPiece::CommandSubstitution(_) | WordPiece::BackquotedCommandSubstitution(_) => {
            return Err(Refusal::CommandSubstitution);
        }
        _ => return Err(Refusal::Expansion),
    }
    Ok(())
}

/// Drops `git`'s harmless global options so that `argv[1]` is the subcommand; refuses any
/// other option before the subcommand.
fn strip_git_global_options(argv: &mut Vec<String>) -> Result<(), Refusal> {
    while let Some(option) = argv.get(1).filter(|arg| arg.starts_with('-')) {
        if !HARMLESS_GIT_GLOBAL_OPTIONS.contains(&option.as_str()) {
            return Err(Refusal::GitGlobalOption(option.clone()));
        }
        argv.remove(1);
    }
    Ok(())
}
