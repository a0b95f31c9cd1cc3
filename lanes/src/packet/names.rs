//! Lane names, names derived from an objective, git ref names, and "did you mean" hints.

/// The longest lane name (the pattern's `{0,62}` plus the first character).
pub(crate) const MAX_NAME_LEN: usize = 63;

/// The longest slug taken from an objective, before a `-N` suffix.
const MAX_SLUG_LEN: usize = 40;

/// The lane-name rule, as written in messages and the docs.
pub(crate) const NAME_PATTERN: &str = "^[a-z0-9][a-z0-9._-]{0,62}$";

/// Whether `name` matches `^[a-z0-9][a-z0-9._-]{0,62}$`.
pub fn is_valid_lane_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    name.len() <= MAX_NAME_LEN
        && (first.is_ascii_lowercase() || first.is_ascii_digit())
        && chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

/// A lane name made from free text: ASCII letters and digits lower-cased, every other run of
/// characters one `-`, at most 40 characters (cut at a `-` when one is near the end).
/// Empty when the text has no ASCII letter or digit.
pub(crate) fn slug(text: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
            if out.len() > MAX_SLUG_LEN {
                break;
            }
        } else {
            dash = true;
        }
    }
    if out.len() > MAX_SLUG_LEN {
        out.truncate(MAX_SLUG_LEN);
        // Prefer ending on a word boundary, unless that drops most of the slug.
        if let Some(cut) = out.rfind('-').filter(|&i| i >= MAX_SLUG_LEN / 2) {
            out.truncate(cut);
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// Why `name` is not a usable git branch name (a subset of `git check-ref-format --branch`),
/// or `None` when it is.
pub(crate) fn ref_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Some("it contains whitespace or a control character");
    }
    if name
        .chars()
        .any(|c| matches!(c, '~' | '^' | ':' | '?' | '*' | '[' | '\\'))
    {
        return Some("it contains one of ~ ^ : ? * [ \\");
    }
    if name.contains("..") || name.contains("@{") || name.contains("//") {
        return Some("it contains `..`, `@{` or `//`");
    }
    if name == "@" || name.starts_with('-') || name.starts_with('/') {
        return Some("it is `@` or starts with `-` or `/`");
    }
    if name.ends_with('/') || name.ends_with('.') || name.ends_with(".lock") {
        return Some("it ends with `/`, `.` or `.lock`");
    }
    if name.split('/').any(|part| part.starts_with('.')) {
        return Some("a part of it starts with `.`");
    }
    None
}

/// Why `name`, a valid ref name, cannot be a lane's own branch (what `git branch NAME`
/// would make of it), or `None` when it can.
pub(crate) fn own_branch_problem(name: &str) -> Option<&'static str> {
    if name == "HEAD" {
        return Some("`HEAD` is not a branch: name the lane's own branch");
    }
    if name.starts_with("refs/") {
        return Some("it is a full ref: write the branch name without `refs/heads/`");
    }
    None
}

/// The candidate closest to `word` by edit distance, when it is close enough to be a typo.
pub(crate) fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
