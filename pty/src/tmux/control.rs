//! The tmux control-mode client: one long-lived `tmux -C` per server.
//!
//! Commands go in on its stdin, one per line; tmux answers each in order with a block
//! `%begin … %end` (or `%error`) flagged as ours. Between blocks come notifications:
//! `%output %<pane> <data>` for every pane in a window linked into the control session (which
//! is why each worker's window is linked there), `%layout-change` when a window is resized,
//! `%exit` when the server goes away.
//!
//! Theory of operation: [`ControlClient::command`] appends a waiter to `pending` and writes the
//! command under one lock, so waiters are queued in the order tmux will answer. The reader
//! task owns the stdout side: it decodes `%output` straight into the pane's hub (no
//! subprocess, no polling) and hands each reply block to the oldest waiter.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};

use super::TmuxError;
use crate::{ScreenHub, TermSize};

/// What a reply waiter gets: the block's lines, or tmux's error text.
pub(crate) type Reply = Result<Vec<String>, String>;

/// Runs on the reader task when a reply arrives, before any later output is applied: used to
/// rebuild a screen from a capture without a window in which output could be lost.
pub(crate) type InlineHook = Box<dyn FnOnce(&Reply) + Send>;

struct Waiter {
    reply: oneshot::Sender<Reply>,
    inline: Option<InlineHook>,
}

/// A pane whose output the reader feeds into a hub.
struct PaneSink {
    hub: Weak<ScreenHub>,
    window: String,
}

pub(crate) struct ControlClient {
    stdin: tokio::sync::Mutex<ChildStdin>,
    shared: Arc<Shared>,
    /// Kept so the client process is killed with us (`kill_on_drop`).
    child: Child,
}

struct Shared {
    pending: Mutex<VecDeque<Waiter>>,
    panes: Mutex<HashMap<String, PaneSink>>,
    /// Becomes true when the control client ends (`%exit`, or its stdout closed).
    closed: watch::Sender<bool>,
    /// Becomes true once tmux reports the client attached (`%session-changed`); commands
    /// that need a current client fail before that.
    attached: watch::Sender<bool>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The maps stay consistent across a panic in another holder (every update is one insert
    // or remove), so a poisoned lock is still safe to use.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ControlClient {
    /// Attaches a control-mode client to `session` on the server reached by `base` (a tmux
    /// command with its `-L` socket already set).
    pub(crate) async fn attach(mut base: Command, session: &str) -> Result<Self, TmuxError> {
        base.args(["-C", "attach-session", "-t", session])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group: a signal to the supervisor's group (SIGTERM from a
            // service manager, Ctrl-C in its terminal) must reach the supervisor only, which
            // then ends its lanes and the server through this client. Killed with us all the
            // same (`kill_on_drop`), and tmux ends it when its stdin closes.
            .process_group(0)
            .kill_on_drop(true);
        let mut child = base.spawn().map_err(|source| TmuxError::Io {
            what: "starting the tmux control-mode client",
            source,
        })?;
        let stdin = child.stdin.take().ok_or(TmuxError::ControlClosed)?;
        let stdout = child.stdout.take().ok_or(TmuxError::ControlClosed)?;
        let (closed, _) = watch::channel(false);
        let (attached, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            pending: Mutex::new(VecDeque::new()),
            panes: Mutex::new(HashMap::new()),
            closed,
            attached,
        });
        let mut attached = shared.attached.subscribe();
        let mut closed = shared.closed.subscribe();
        tokio::spawn(read_notifications(stdout, Arc::clone(&shared)));
        let client = Self {
            stdin: tokio::sync::Mutex::new(stdin),
            shared,
            child,
        };
        tokio::select! {
            _ = attached.wait_for(|attached| *attached) => Ok(client),
            _ = closed.wait_for(|closed| *closed) => Err(TmuxError::ControlClosed),
        }
    }

    /// Runs one tmux command line and returns its output lines.
    pub(crate) async fn command(&self, line: &str) -> Result<Vec<String>, TmuxError> {
        self.command_with(line, None).await
    }

    /// Like [`command`](Self::command), with a hook that runs on the reader task as soon as
    /// the reply arrives.
    pub(crate) async fn command_with(
        &self,
        line: &str,
        inline: Option<InlineHook>,
    ) -> Result<Vec<String>, TmuxError> {
        debug_assert!(!line.contains('\n'), "one command per line");
        let (tx, rx) = oneshot::channel();
        {
            let mut stdin = self.stdin.lock().await;
            if *self.shared.closed.borrow() {
                return Err(TmuxError::ControlClosed);
            }
            lock(&self.shared.pending).push_back(Waiter { reply: tx, inline });
            let mut bytes = line.as_bytes().to_vec();
            bytes.push(b'\n');
            if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                return Err(TmuxError::ControlClosed);
            }
        }
        match rx.await {
            Ok(Ok(lines)) => Ok(lines),
            Ok(Err(message)) => Err(TmuxError::Command {
                command: line.split(' ').next().unwrap_or(line).to_owned(),
                message,
            }),
            Err(_) => Err(TmuxError::ControlClosed),
        }
    }

    /// Routes `%output` for `pane` (e.g. `%3`, in window `@3`) into `hub`.
    pub(crate) fn register(&self, pane: &str, window: &str, hub: &Arc<ScreenHub>) {
        lock(&self.shared.panes).insert(
            pane.to_owned(),
            PaneSink {
                hub: Arc::downgrade(hub),
                window: window.to_owned(),
            },
        );
    }

    /// Stops routing output for `pane`.
    pub(crate) fn unregister(&self, pane: &str) {
        lock(&self.shared.panes).remove(pane);
    }

    /// The control client's process id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Resolves once the control client has ended (the server exited or was killed).
    pub(crate) fn closed(&self) -> watch::Receiver<bool> {
        self.shared.closed.subscribe()
    }
}

async fn read_notifications(stdout: ChildStdout, shared: Arc<Shared>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::with_capacity(4096);
    // Lines of the reply block being read, and whether that block answers one of ours.
    let mut block: Option<(bool, Vec<String>)> = None;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if let Some((ours, lines)) = block.as_mut() {
            let end = line.starts_with(b"%end ");
            let error = line.starts_with(b"%error ");
            if end || error {
                let ours = *ours;
                let lines = std::mem::take(lines);
                block = None;
                if ours {
                    deliver(
                        &shared,
                        if end {
                            Ok(lines)
                        } else {
                            Err(lines.join("\n"))
                        },
                    );
                }
            } else {
                lines.push(String::from_utf8_lossy(&line).into_owned());
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix(b"%output ") {
            route_output(&shared, rest);
        } else if let Some(rest) = line.strip_prefix(b"%begin ") {
            // `%begin <time> <number> <flags>`: flag 1 marks a command sent by this client.
            let flags = rest.rsplit(|&b| b == b' ').next().unwrap_or(b"0");
            let ours = std::str::from_utf8(flags)
                .ok()
                .and_then(|f| f.parse::<u32>().ok())
                .is_some_and(|f| f & 1 == 1);
            block = Some((ours, Vec::new()));
        } else if let Some(rest) = line.strip_prefix(b"%layout-change ") {
            route_layout(&shared, rest);
        } else if line.starts_with(b"%session-changed ") {
            shared.attached.send_replace(true);
        } else if line.starts_with(b"%exit") {
            break;
        }
    }
    shared.closed.send_replace(true);
    for waiter in lock(&shared.pending).drain(..) {
        let _ = waiter.reply.send(Err("the tmux server went away".into()));
    }
}

fn deliver(shared: &Shared, reply: Reply) {
    let Some(waiter) = lock(&shared.pending).pop_front() else {
        return;
    };
    if let Some(hook) = waiter.inline {
        hook(&reply);
    }
    let _ = waiter.reply.send(reply);
}

fn route_output(shared: &Shared, rest: &[u8]) {
    let Some(space) = rest.iter().position(|&b| b == b' ') else {
        return;
    };
    let pane = String::from_utf8_lossy(&rest[..space]);
    let hub = lock(&shared.panes)
        .get(pane.as_ref())
        .and_then(|sink| sink.hub.upgrade());
    if let Some(hub) = hub {
        hub.feed(&decode_output(&rest[space + 1..]));
    }
}

/// `%layout-change @<window> <layout> …`, where the layout starts `<checksum>,<W>x<H>,…`.
fn route_layout(shared: &Shared, rest: &[u8]) {
    let text = String::from_utf8_lossy(rest);
    let mut words = text.split(' ');
    let (Some(window), Some(layout)) = (words.next(), words.next()) else {
        return;
    };
    let Some(size) = layout.split(',').nth(1).and_then(parse_size) else {
        return;
    };
    let hubs: Vec<Arc<ScreenHub>> = lock(&shared.panes)
        .values()
        .filter(|sink| sink.window == window)
        .filter_map(|sink| sink.hub.upgrade())
        .collect();
    for hub in hubs {
        if hub.size() != size {
            hub.resize(size);
        }
    }
}

fn parse_size(text: &str) -> Option<TermSize> {
    let (cols, rows) = text.split_once('x')?;
    Some(TermSize {
        rows: rows.parse().ok()?,
        cols: cols.parse().ok()?,
    })
}

/// Undoes tmux's escaping of `%output` data: bytes below 32 and the backslash arrive as
/// `\ooo` octal; everything else is the pane's bytes as they are.
pub(crate) fn decode_output(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i] == b'\\'
            && i + 3 < data.len()
            && data[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b))
        {
            let value = data[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(value as u8);
            i += 4;
        } else {
            out.push(data[i]);
            i += 1;
        }
    }
    out
}

/// Quotes `text` as one tmux command argument: inside double quotes, with the characters
/// tmux would otherwise interpret (`\`, `"`, `$`, a leading `~`) escaped and control
/// characters written as octal escapes, so any text arrives byte for byte.
pub(crate) fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for ch in text.chars() {
        match ch {
            '\\' | '"' | '$' | '~' => {
                quoted.push('\\');
                quoted.push(ch);
            }
            c if (c as u32) < 0x20 || c == '\x7f' => {
                quoted.push_str(&format!("\\{:03o}", c as u32));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_octal_escapes_and_keeps_utf8() {
        assert_eq!(
            decode_output(b"a\\033[1m\\134b \xe2\x9c\xbb\\015\\012"),
            b"a\x1b[1m\\b \xe2\x9c\xbb\r\n"
        );
        // A backslash not followed by three octal digits is kept as is.
        assert_eq!(decode_output(b"x\\9y\\01"), b"x\\9y\\01");
    }

    #[test]
    fn quotes_everything_tmux_would_interpret() {
        assert_eq!(quote("~/a $HOME \"q\" \\"), r#""\~/a \$HOME \"q\" \\""#);
        assert_eq!(quote("a\nb\x1b"), r#""a\012b\033""#);
        assert_eq!(quote("✻ ;{} #{x}"), "\"✻ ;{} #{x}\"");
    }

    #[test]
    fn parses_layout_sizes() {
        assert_eq!(
            parse_size("120x40"),
            Some(TermSize {
                rows: 40,
                cols: 120
            })
        );
        assert_eq!(parse_size("bad"), None);
    }
}
