//! Who is at the other end of a control socket (a lane's, or the daemon's): the peer's
//! credentials as the kernel gives them with the connection (`SO_PEERCRED`: pid and uid), and
//! whether that process runs inside a lane.
//!
//! Every lane's agent is started with the lane's mark in its environment ([`LaneMark`]:
//! `CLAWPOOL_LANE_NAME`, `CLAWPOOL_LANE_DIR`). A process's initial environment
//! (`/proc/PID/environ`) is its own memory: a child can clear or rewrite its own, never its
//! ancestors'. So a caller is inside a lane when the caller itself, any of its ancestors (the
//! `ppid` chain up to pid 1), its session leader or its process-group leader carries a mark
//! (a PTY worker and a tmux pane are each a session leader of their own). Operator requests
//! are taken only from callers inside no lane ([`Caller::check_operator`]), a hook report only
//! from a caller inside the socket's own lane and no other ([`Caller::check_hook`]).
//!
//! This stops the direct paths: an agent, or a command it runs, calling `clawpool answer`,
//! `trust`, `send`, … or `clawpool hook` with another lane's token. It is no sandbox: a
//! process running arbitrary code as the same user can leave its lane's process tree
//! (`setsid` and a double fork, with a clean environment) or `ptrace` its parent (`docs/trust.md`,
//! "Threat model").
//!
//! The reading of `/proc` ([`ProcFs`]) is kept apart from the walk and the parsing
//! ([`find_marks`], [`parse_stat`], [`LaneMark::from_environ`]), which take text and are
//! tested on their own.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tokio::net::UnixStream;

/// The environment variable holding the name of the lane whose agent a process is (or was
/// started by).
pub const LANE_NAME_ENV: &str = "CLAWPOOL_LANE_NAME";
/// The environment variable holding the folder of that lane: the mark's identity, unique on the
/// machine where names are only unique in a repository.
pub const LANE_DIR_ENV: &str = "CLAWPOOL_LANE_DIR";

/// How many ancestors are walked at most: a `ppid` chain is short; a longer one is a loop read
/// while processes came and went.
const MAX_DEPTH: usize = 1024;

/// The mark clawpool puts in the environment of each lane's agent when it starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneMark {
    /// The lane's name.
    pub name: String,
    /// The lane's folder.
    pub dir: PathBuf,
}

impl LaneMark {
    /// The mark of lane `name` in `dir`.
    pub fn new(name: &str, dir: &Path) -> Self {
        Self {
            name: name.to_owned(),
            dir: dir.to_owned(),
        }
    }

    /// The environment variables that carry it.
    pub fn env(&self) -> [(String, String); 2] {
        [
            (LANE_NAME_ENV.to_owned(), self.name.clone()),
            (LANE_DIR_ENV.to_owned(), self.dir.display().to_string()),
        ]
    }

    /// The mark in an environment block as `/proc/PID/environ` holds it (`KEY=VALUE` entries,
    /// each ended by a NUL); `None` when it has no lane folder. The last entry of a name wins,
    /// as for `getenv` on a block with duplicates.
    pub fn from_environ(environ: &[u8]) -> Option<Self> {
        let mut name = None;
        let mut dir = None;
        for entry in environ.split(|byte| *byte == 0) {
            let Some(equals) = entry.iter().position(|byte| *byte == b'=') else {
                continue;
            };
            let (key, value) = (&entry[..equals], &entry[equals + 1..]);
            if key == LANE_NAME_ENV.as_bytes() {
                name = Some(String::from_utf8_lossy(value).into_owned());
            } else if key == LANE_DIR_ENV.as_bytes() {
                dir = Some(PathBuf::from(String::from_utf8_lossy(value).into_owned()));
            }
        }
        let dir = dir.filter(|dir| !dir.as_os_str().is_empty())?;
        Some(Self {
            name: name.unwrap_or_default(),
            dir,
        })
    }
}

/// The fields of `/proc/PID/stat` the walk needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The parent (0 for pid 1 and the kernel's threads).
    pub ppid: u32,
    /// The process group.
    pub pgrp: u32,
    /// The session.
    pub session: u32,
}

/// Reads `/proc/PID/stat`'s `ppid`, `pgrp` and `session`. The command name (field 2) is in
/// parentheses and may itself hold spaces and parentheses: the fields are counted from the
/// last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let after = &text[text.rfind(')')? + 1..];
    let mut fields = after.split_ascii_whitespace();
    let _state = fields.next()?;
    let mut number = || fields.next()?.parse::<u32>().ok();
    Some(Stat {
        ppid: number()?,
        pgrp: number()?,
        session: number()?,
    })
}

/// How a marked process relates to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// The caller itself.
    Itself,
    /// One of its ancestors.
    Ancestor,
    /// The leader of its session.
    SessionLeader,
    /// The leader of its process group.
    GroupLeader,
}

impl Relation {
    /// In words, for refusals and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::Itself => "itself",
            Relation::Ancestor => "ancestor",
            Relation::SessionLeader => "session_leader",
            Relation::GroupLeader => "group_leader",
        }
    }
}

/// A process carrying a lane's mark, found from the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    /// The process.
    pub pid: u32,
    /// How it relates to the caller.
    pub relation: Relation,
    /// Its lane.
    pub mark: LaneMark,
}

/// What the walk reads of a process.
pub trait Procs {
    /// Its `stat` fields; `None` when it is gone or unreadable.
    fn stat(&self, pid: u32) -> Option<Stat>;
    /// Its lane mark; `None` when it has none, or its environment cannot be read (a process
    /// of another user, or one that made itself undumpable, as `sshd` does: neither was
    /// started by clawpool as a lane's agent).
    fn mark(&self, pid: u32) -> Option<LaneMark>;
}

/// Every marked process among `pid`, its ancestors, its session leader and its process-group
/// leader, nearest first (the caller, then its ancestors upwards, then the leaders).
pub fn find_marks(pid: u32, procs: &impl Procs) -> Vec<Marked> {
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    let mut look = |pid: u32, relation: Relation, found: &mut Vec<Marked>| {
        if pid == 0 || !seen.insert(pid) {
            return;
        }
        if let Some(mark) = procs.mark(pid) {
            found.push(Marked {
                pid,
                relation,
                mark,
            });
        }
    };
    let own = procs.stat(pid);
    look(pid, Relation::Itself, &mut found);
    let mut parent = own.map(|stat| stat.ppid);
    for _ in 0..MAX_DEPTH {
        let Some(ancestor) = parent.filter(|p| *p != 0) else {
            break;
        };
        look(ancestor, Relation::Ancestor, &mut found);
        parent = procs.stat(ancestor).map(|stat| stat.ppid);
    }
    if let Some(stat) = own {
        look(stat.session, Relation::SessionLeader, &mut found);
        look(stat.pgrp, Relation::GroupLeader, &mut found);
    }
    found
}

/// The processes as `/proc` shows them.
pub struct ProcFs;

impl Procs for ProcFs {
    fn stat(&self, pid: u32) -> Option<Stat> {
        parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    fn mark(&self, pid: u32) -> Option<LaneMark> {
        LaneMark::from_environ(&std::fs::read(format!("/proc/{pid}/environ")).ok()?)
    }
}

/// Whoever connected to a socket: its credentials and the lanes it runs inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Its pid.
    pub pid: u32,
    /// Its uid.
    pub uid: u32,
    /// The marked processes around it, nearest first: empty for a caller inside no lane.
    pub marks: Vec<Marked>,
}

/// Why a caller's request is not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// In words.
    pub reason: String,
    /// The caller, when it could be identified.
    pub caller: Option<Caller>,
    /// The marked process that made it refused: the lane the caller runs inside (for a hook,
    /// the other lane).
    pub inside: Option<Marked>,
}

impl Refusal {
    fn unidentified(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            caller: None,
            inside: None,
        }
    }
}

impl Caller {
    /// The process at the other end of `stream`, with the lanes it runs inside. Refused when
    /// the kernel gives no pid, or the peer runs as another user than this process.
    pub fn of(stream: &UnixStream) -> Result<Self, Refusal> {
        let cred = stream
            .peer_cred()
            .map_err(|e| Refusal::unidentified(format!("the caller's credentials: {e}")))?;
        let pid = cred
            .pid()
            .and_then(|pid| u32::try_from(pid).ok())
            .ok_or_else(|| Refusal::unidentified("the kernel gave no pid for the caller"))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let own = unsafe { libc::geteuid() };
        if cred.uid() != own {
            return Err(Refusal::unidentified(format!(
                "the caller (pid {pid}) runs as uid {}, not as this supervisor's uid {own}",
                cred.uid()
            )));
        }
        Ok(Self::identify(pid, cred.uid(), &ProcFs))
    }

    /// The caller `pid` (of `uid`), as `procs` shows it.
    pub fn identify(pid: u32, uid: u32, procs: &impl Procs) -> Self {
        Self {
            pid,
            uid,
            marks: find_marks(pid, procs),
        }
    }

    /// Operator requests come from outside every lane: refused, naming the lane, when the
    /// caller runs inside one.
    pub fn check_operator(self) -> Result<Self, Refusal> {
        let Some(inside) = self.marks.first().cloned() else {
            return Ok(self);
        };
        let reason = format!(
            "the caller (pid {}) runs inside lane {:?} ({}): operator requests are taken only \
             from outside every lane",
            self.pid,
            inside.mark.name,
            describe(&inside)
        );
        Err(Refusal {
            reason,
            caller: Some(self),
            inside: Some(inside),
        })
    }

    /// A hook report comes from the agent of the lane in `lane_dir`: refused unless the caller
    /// runs inside that lane and inside no other.
    pub fn check_hook(self, lane_dir: &Path) -> Result<Self, Refusal> {
        let foreign = self.marks.iter().find(|m| m.mark.dir != lane_dir).cloned();
        let reason = match (&foreign, self.marks.is_empty()) {
            (None, false) => return Ok(self),
            (Some(other), _) => format!(
                "the hook's caller (pid {}) runs inside lane {:?} ({}), not this lane",
                self.pid,
                other.mark.name,
                describe(other)
            ),
            (None, true) => format!(
                "the hook's caller (pid {}) runs inside no lane: hooks are taken only from the \
                 lane's own agent",
                self.pid
            ),
        };
        Err(Refusal {
            reason,
            caller: Some(self),
            inside: foreign,
        })
    }
}

/// Which process carries the mark, and how it is the caller's.
fn describe(marked: &Marked) -> String {
    match marked.relation {
        Relation::Itself => format!("it carries the lane's mark, as pid {}", marked.pid),
        Relation::Ancestor => format!("its ancestor pid {} is the lane's agent", marked.pid),
        Relation::SessionLeader => {
            format!("its session leader pid {} is the lane's agent", marked.pid)
        }
        Relation::GroupLeader => format!(
            "its process-group leader pid {} is the lane's agent",
            marked.pid
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Processes as a table: pid → (stat, mark).
    struct Table(HashMap<u32, (Stat, Option<LaneMark>)>);

    impl Procs for Table {
        fn stat(&self, pid: u32) -> Option<Stat> {
            self.0.get(&pid).map(|(stat, _)| *stat)
        }
        fn mark(&self, pid: u32) -> Option<LaneMark> {
            self.0.get(&pid).and_then(|(_, mark)| mark.clone())
        }
    }

    fn stat(ppid: u32, pgrp: u32, session: u32) -> Stat {
        Stat {
            ppid,
            pgrp,
            session,
        }
    }

    fn lane(name: &str) -> Option<LaneMark> {
        Some(LaneMark::new(name, Path::new(&format!("/repo/{name}"))))
    }

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let line = "4242 (my (odd) prog) S 17 4242 4200 34816 4242 4194304 0 0";
        assert_eq!(parse_stat(line), Some(stat(17, 4242, 4200)));
        assert_eq!(parse_stat("1 (init) S 0 1 1 0"), Some(stat(0, 1, 1)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("5 (x) S 1 two 3"), None);
    }

    #[test]
    fn the_mark_is_read_from_an_environ_block() {
        let block = b"PATH=/bin\0CLAWPOOL_LANE_NAME=fix\0CLAWPOOL_LANE_DIR=/repo/fix\0";
        assert_eq!(
            LaneMark::from_environ(block),
            Some(LaneMark::new("fix", Path::new("/repo/fix")))
        );
        // A name without a folder, or an empty folder, is no mark.
        assert_eq!(LaneMark::from_environ(b"CLAWPOOL_LANE_NAME=fix\0"), None);
        assert_eq!(LaneMark::from_environ(b"CLAWPOOL_LANE_DIR=\0"), None);
        assert_eq!(LaneMark::from_environ(b""), None);
        // The last of duplicated entries, as getenv reads them.
        let twice = b"CLAWPOOL_LANE_DIR=/a\0CLAWPOOL_LANE_DIR=/b";
        assert_eq!(
            LaneMark::from_environ(twice).map(|m| m.dir),
            Some(PathBuf::from("/b"))
        );
        let env: Vec<u8> = LaneMark::new("x", Path::new("/r/x"))
            .env()
            .iter()
            .flat_map(|(k, v)| format!("{k}={v}\0").into_bytes())
            .collect();
        assert_eq!(
            LaneMark::from_environ(&env),
            lane("x").map(|mut m| {
                m.dir = PathBuf::from("/r/x");
                m
            })
        );
    }

    /// A shell started by a lane's agent (pid 100, a PTY session leader), running `clawpool`.
    fn agent_tree() -> Table {
        Table(HashMap::from([
            (1, (stat(0, 1, 1), None)),
            (50, (stat(1, 50, 50), None)), // the supervisor
            (100, (stat(50, 100, 100), lane("victim-a"))),
            (200, (stat(100, 200, 100), None)), // bash
            (300, (stat(200, 200, 100), None)), // clawpool answer …
        ]))
    }

    #[test]
    fn a_process_under_a_lanes_agent_is_inside_that_lane() {
        let caller = Caller::identify(300, 1000, &agent_tree());
        assert_eq!(caller.marks.len(), 1, "{caller:?}");
        assert_eq!(caller.marks[0].pid, 100);
        assert_eq!(caller.marks[0].relation, Relation::Ancestor);
        let refusal = caller.check_operator().expect_err("inside a lane");
        assert!(
            refusal.reason.contains("\"victim-a\""),
            "{}",
            refusal.reason
        );
        assert_eq!(refusal.inside.map(|m| m.pid), Some(100));
    }

    #[test]
    fn a_process_outside_every_lane_is_an_operator() {
        let caller = Caller::identify(50, 1000, &agent_tree());
        assert!(caller.marks.is_empty());
        assert!(caller.check_operator().is_ok());
    }

    #[test]
    fn a_process_that_left_the_tree_is_still_caught_by_its_session_or_group() {
        // Double-forked (re-parented to 1) but still in the agent's session.
        let mut table = agent_tree();
        table.0.insert(400, (stat(1, 400, 100), None));
        let marks = Caller::identify(400, 1000, &table).marks;
        assert_eq!(marks.len(), 1);
        assert_eq!(marks[0].relation, Relation::SessionLeader);
        // Re-parented, in the agent's group but in a session of its own.
        table.0.insert(401, (stat(1, 100, 401), None));
        let marks = Caller::identify(401, 1000, &table).marks;
        assert_eq!(marks[0].relation, Relation::GroupLeader);
        // With setsid and a double fork it is outside: the limit docs/trust.md names.
        table.0.insert(402, (stat(1, 402, 402), None));
        assert!(Caller::identify(402, 1000, &table).marks.is_empty());
    }

    #[test]
    fn a_hook_is_taken_only_from_inside_its_own_lane() {
        let own = Path::new("/repo/victim-a");
        let tree = agent_tree();
        assert!(Caller::identify(300, 1000, &tree).check_hook(own).is_ok());
        // From outside every lane.
        let refusal = Caller::identify(50, 1000, &tree)
            .check_hook(own)
            .expect_err("no lane");
        assert!(
            refusal.reason.contains("inside no lane"),
            "{}",
            refusal.reason
        );
        // From another lane, even when the caller puts the target's mark in its own
        // environment: its ancestor, the other lane's agent, still carries its own.
        let mut table = agent_tree();
        table
            .0
            .insert(500, (stat(50, 500, 500), lane("attacker-b")));
        table.0.insert(501, (stat(500, 501, 500), lane("victim-a")));
        let refusal = Caller::identify(501, 1000, &table)
            .check_hook(own)
            .expect_err("another lane");
        assert!(
            refusal.reason.contains("\"attacker-b\""),
            "{}",
            refusal.reason
        );
    }

    #[test]
    fn a_loop_in_the_parent_chain_ends_the_walk() {
        let table = Table(HashMap::from([
            (7, (stat(8, 7, 7), None)),
            (8, (stat(7, 8, 8), lane("a"))),
        ]));
        let marks = Caller::identify(7, 0, &table).marks;
        assert_eq!(marks.len(), 1);
        assert_eq!(marks[0].pid, 8);
    }

    #[test]
    fn this_process_is_found_in_proc() {
        let me = std::process::id();
        let stat = ProcFs.stat(me).expect("our own stat");
        assert_eq!(stat.ppid, std::os::unix::process::parent_id());
    }
}
