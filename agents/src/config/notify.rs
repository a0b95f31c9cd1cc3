//! `[[notify]]`: where clawpool tells a person that a lane needs them (`docs/notify.md`).
//!
//! Each entry is one endpoint: a webhook (`webhook = "URL"`, with the JSON `format` a Slack or
//! Discord incoming webhook takes directly), a program given the notification on its stdin
//! (`command = [...]`), or a desktop notification (`desktop = true`), with the situations it
//! wants (`events`). Entries of every file are kept, in file order; what they are sent and
//! when is the notifier's (`clawpool_pool::notifier`).
//!
//! A webhook's URL is a secret (Slack's and Discord's carry their token in the path): only
//! [`NotifyTarget::redacted`] is ever printed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::error::ConfigError;
use super::locate::line_at;

/// The situations a notification can be for (`events = [...]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// A lane entered `blocked` (any subphase but `tool_permission` and `budget`).
    Blocked,
    /// A person must act while the lane stays in its state (`lane.escalated`).
    Escalated,
    /// A lane waits for a person to answer a tool's permission question
    /// (`blocked{tool_permission}`).
    ToolPermission,
    /// A lane finished a turn.
    Finished,
    /// A lane failed.
    Failed,
    /// A lane's work is ready to land: green at `merge_ready` on a fresh branch
    /// (`lane.merge.ready`).
    Landed,
    /// A lane held over its budget (`blocked{budget}`).
    Budget,
}

impl NotifyEvent {
    /// Every situation this build can notify, in the order `docs/notify.md` lists them.
    pub const SUPPORTED: [NotifyEvent; 7] = [
        NotifyEvent::Blocked,
        NotifyEvent::Escalated,
        NotifyEvent::ToolPermission,
        NotifyEvent::Finished,
        NotifyEvent::Failed,
        NotifyEvent::Landed,
        NotifyEvent::Budget,
    ];

    /// Its name in `events` and in a notification's `event`.
    pub const fn name(self) -> &'static str {
        match self {
            NotifyEvent::Blocked => "blocked",
            NotifyEvent::Escalated => "escalated",
            NotifyEvent::ToolPermission => "tool_permission",
            NotifyEvent::Finished => "finished",
            NotifyEvent::Failed => "failed",
            NotifyEvent::Landed => "landed",
            NotifyEvent::Budget => "budget",
        }
    }

    /// Whether a lane in this situation waits for a person (the dashboard's bell rings for
    /// these).
    pub const fn needs_person(self) -> bool {
        matches!(
            self,
            NotifyEvent::Blocked
                | NotifyEvent::Escalated
                | NotifyEvent::ToolPermission
                | NotifyEvent::Budget
        )
    }
}

/// The body shape a webhook is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// The notification itself (`docs/notify.md`, "The notification").
    #[default]
    Json,
    /// `{"text": …}`, as a Slack incoming webhook takes it.
    Slack,
    /// `{"content": …}`, as a Discord webhook takes it.
    Discord,
}

/// Where one entry sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifySink {
    /// An HTTP(S) POST to the URL.
    Webhook {
        /// The URL (a secret: print [`NotifyTarget::redacted`]).
        url: String,
        /// The body's shape.
        format: WebhookFormat,
    },
    /// A program and its arguments, given the notification's JSON on stdin.
    Command(Vec<String>),
    /// `notify-send`, where a desktop session bus exists.
    Desktop,
}

/// One `[[notify]]` entry, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyTarget {
    /// Its name: `name = "…"`, or `notify#N` by its place among all entries (1-based). The
    /// notifier keeps each endpoint's delivery state under it.
    pub name: String,
    /// Where it sends.
    pub sink: NotifySink,
    /// The situations it is sent.
    pub events: BTreeSet<NotifyEvent>,
    /// The file it was written in.
    pub from: PathBuf,
}

impl NotifyTarget {
    /// What it sends to, safe to print: a webhook as its scheme and host only (the path and
    /// query of Slack's and Discord's URLs are the token), a command as its program.
    pub fn redacted(&self) -> String {
        match &self.sink {
            NotifySink::Webhook { url, .. } => redact_url(url),
            NotifySink::Command(argv) => format!("command {}", argv[0]),
            NotifySink::Desktop => "desktop (notify-send)".to_owned(),
        }
    }

    /// Whether it wants notifications of `event`.
    pub fn wants(&self, event: NotifyEvent) -> bool {
        self.events.contains(&event)
    }
}

/// `scheme://host[:port]/…`: no user, password, path or query.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or(authority);
    let hidden = if rest.len() > authority.len() || authority.contains('@') {
        "/…"
    } else {
        ""
    };
    format!("{scheme}://{host}{hidden}")
}

/// One `[[notify]]` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyEntry {
    /// A name for the endpoint (its delivery state is kept under it).
    #[serde(default)]
    pub name: Option<String>,
    /// A URL to POST to.
    #[serde(default)]
    pub webhook: Option<Spanned<String>>,
    /// The webhook body's shape (`json`, `slack`, `discord`).
    #[serde(default)]
    pub format: Option<Spanned<WebhookFormat>>,
    /// A program and its arguments.
    #[serde(default)]
    pub command: Option<Spanned<Vec<String>>>,
    /// A desktop notification.
    #[serde(default)]
    pub desktop: Option<Spanned<bool>>,
    /// The situations wanted; all of them when left out.
    #[serde(default)]
    pub events: Option<Spanned<Vec<NotifyEvent>>>,
}

/// Checks one file's entries; `before` is how many entries earlier files had (for the
/// default names).
pub fn parse_entries(
    file: &Path,
    text: &str,
    entries: &[Spanned<NotifyEntry>],
    before: usize,
) -> Result<Vec<NotifyTarget>, ConfigError> {
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let at = |span: std::ops::Range<usize>, key: &str, message: String| {
                ConfigError::Invalid {
                    file: file.to_path_buf(),
                    line: Some(line_at(text, span.start)),
                    key: Some(format!("notify.{key}")),
                    message,
                }
            };
            let span = entry.span();
            let entry = entry.get_ref();
            let desktop = entry.desktop.as_ref().filter(|d| *d.get_ref());
            let given = [
                entry.webhook.is_some(),
                entry.command.is_some(),
                desktop.is_some(),
            ];
            if given.iter().filter(|g| **g).count() != 1 {
                return Err(at(
                    span,
                    "webhook",
                    "each [[notify]] entry needs exactly one of `webhook = \"URL\"`, `command = [\"program\", …]` or `desktop = true`".to_owned(),
                ));
            }
            if let (Some(format), None) = (&entry.format, &entry.webhook) {
                return Err(at(
                    format.span(),
                    "format",
                    "`format` is for a webhook's body; this entry has no `webhook`".to_owned(),
                ));
            }
            let sink = if let Some(url) = &entry.webhook {
                let value = url.get_ref().trim();
                let host = value
                    .strip_prefix("https://")
                    .or_else(|| value.strip_prefix("http://"))
                    .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""));
                if host.is_none_or(str::is_empty) {
                    return Err(at(
                        url.span(),
                        "webhook",
                        format!(
                            "{} is not an http:// or https:// URL with a host",
                            redact_url(value)
                        ),
                    ));
                }
                NotifySink::Webhook {
                    url: value.to_owned(),
                    format: entry.format.as_ref().map(|f| *f.get_ref()).unwrap_or_default(),
                }
            } else if let Some(command) = &entry.command {
                if command.get_ref().first().is_none_or(|p| p.trim().is_empty()) {
                    return Err(at(
                        command.span(),
                        "command",
                        "the command is empty; name a program, then its arguments".to_owned(),
                    ));
                }
                NotifySink::Command(command.get_ref().clone())
            } else {
                NotifySink::Desktop
            };
            let events = match &entry.events {
                None => NotifyEvent::SUPPORTED.into_iter().collect(),
                Some(events) => {
                    if events.get_ref().is_empty() {
                        return Err(at(
                            events.span(),
                            "events",
                            "no events: list at least one, or leave `events` out for all".to_owned(),
                        ));
                    }
                    events.get_ref().iter().copied().collect()
                }
            };
            Ok(NotifyTarget {
                name: entry
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("notify#{}", before + i + 1)),
                sink,
                events,
                from: file.to_path_buf(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigFile;

    fn parse(text: &str) -> Result<Vec<NotifyTarget>, ConfigError> {
        let file = ConfigFile::parse(Path::new("/c.toml"), text)?;
        parse_entries(Path::new("/c.toml"), text, &file.notify, 0)
    }

    #[test]
    fn entries_of_each_kind_are_read_with_their_events() {
        let targets = parse(
            "[[notify]]\nwebhook = \"https://hooks.slack.com/services/T/B/secret\"\nformat = \"slack\"\nevents = [\"blocked\", \"tool_permission\"]\n\
             [[notify]]\nname = \"pager\"\ncommand = [\"page\", \"--now\"]\n\
             [[notify]]\ndesktop = true\n",
        )
        .expect("valid");
        assert_eq!(targets.len(), 3);
        assert_eq!(targets[0].name, "notify#1");
        assert_eq!(
            targets[0].sink,
            NotifySink::Webhook {
                url: "https://hooks.slack.com/services/T/B/secret".into(),
                format: WebhookFormat::Slack
            }
        );
        assert!(targets[0].wants(NotifyEvent::ToolPermission));
        assert!(!targets[0].wants(NotifyEvent::Finished));
        assert_eq!(targets[0].redacted(), "https://hooks.slack.com/…");
        assert_eq!(targets[1].name, "pager");
        assert_eq!(targets[1].redacted(), "command page");
        assert_eq!(targets[2].sink, NotifySink::Desktop);
        assert_eq!(targets[2].events.len(), NotifyEvent::SUPPORTED.len());
    }

    #[test]
    fn bad_entries_name_the_line_and_never_print_the_url() {
        let cases = [
            ("[[notify]]\nevents = [\"blocked\"]\n", 1, "exactly one of"),
            (
                "[[notify]]\nwebhook = \"ftp://x/secret-token\"\n",
                2,
                "not an http:// or https:// URL",
            ),
            ("[[notify]]\ncommand = []\n", 2, "the command is empty"),
            (
                "[[notify]]\ndesktop = true\nformat = \"slack\"\n",
                3,
                "has no `webhook`",
            ),
        ];
        for (text, line, says) in cases {
            let err = parse(text).expect_err(text);
            assert_eq!(err.line(), Some(line), "{text}: {err}");
            assert!(err.to_string().contains(says), "{text}: {err}");
            assert!(!err.to_string().contains("secret-token"), "{err}");
        }
        let err = parse("[[notify]]\ndesktop = true\nevents = [\"blockd\"]\n").expect_err("typo");
        assert!(err.to_string().contains("blockd"), "{err}");
    }

    #[test]
    fn a_repositorys_own_file_cannot_set_notify() {
        let text = "[[notify]]\ncommand = [\"sh\", \"-c\", \"curl evil\"]\n";
        let err = super::super::repository::check_repository_file(
            Path::new("/r/.clawpool.toml"),
            text,
            &BTreeSet::new(),
            &Default::default(),
        )
        .expect_err("refused");
        assert!(err.to_string().contains("cannot set this"), "{err}");
        assert_eq!(err.line(), Some(1));
    }

    #[test]
    fn redaction_keeps_only_scheme_and_host() {
        assert_eq!(
            redact_url("https://user:pw@discord.com/api/webhooks/1/tok?x=1"),
            "https://discord.com/…"
        );
        assert_eq!(redact_url("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
    }
}
