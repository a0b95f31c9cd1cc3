//! A lane's sandbox (`docs/sandbox.md`): the bubblewrap command line that confines the lane's
//! agent — and everything it starts, Codex's app server and the lane's verification commands —
//! to its worktree, and the probe that says whether bubblewrap works on this machine at all.
//!
//! Everything is read-only (`--ro-bind / /`) but, in this order (later mounts win):
//!
//! 1. a private `/tmp`, `/dev` and `/proc`;
//! 2. the worktree itself, read-write (first, because a main checkout's worktree holds its
//!    `.git`, which the next steps narrow);
//! 3. what git needs to commit from the worktree: the repository's `objects/`, `refs/` and
//!    `logs/`, and this worktree's own admin folder `<common>/worktrees/<name>` (a lane in a
//!    main checkout gets its `.git` with `hooks/` and `config` kept read-only: a hook written
//!    there would run outside the sandbox, in clawpool's own git commands);
//! 4. hidden (an empty read-only tmpfs): clawpool's folder in the common git dir (every lane's
//!    record, the pool's sockets, the operators' grants), the other worktrees of the
//!    repository, and the user's runtime folder of long-path sockets. A folder that holds
//!    nothing but the repository's worktrees (the default `<repo>.lanes/`) is hidden whole and
//!    a linked worktree inside it bound back: one mount, not one per other lane — at 1,000
//!    lanes, 999 mounts in each of 1,000 sandboxes stalled the kernel's mount locks;
//! 5. the agent's own state (its profile's `sandbox_writes`) and the configuration's
//!    `sandbox_rw`, read-write;
//! 6. the lane's own record folder, read-only, so that its hooks reach its control socket
//!    (a socket connects on a read-only mount) — with its supervisor lock masked, so the agent
//!    cannot hold it — or, for a control socket in the runtime folder, that one socket;
//! 7. the agent's settings file clawpool writes (Claude Code's hook settings), read-only, so
//!    the agent reads it wherever it is and never changes it.
//!
//! No pid namespace and no new session: the agent stays in the worker's process group (the
//! pid the state file records is bubblewrap's, the group's leader, and every signal clawpool
//! sends goes to the group) and keeps its controlling terminal, the lane's own PTY or tmux
//! pane. `--die-with-parent` ends the agent if bubblewrap itself is killed. The user namespace
//! (`--unshare-user`) is what makes the read-only mounts stick: even a root agent cannot
//! remount them inside it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clawpool_lanes::{LaneSandbox, SandboxNetwork};
use clawpool_pty::SpawnSpec;

/// The bubblewrap program when the configuration names none: `bwrap` on `PATH`.
pub const DEFAULT_BWRAP: &str = "bwrap";

/// What a lane asked for: its sandbox and the bubblewrap program to build it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRequest {
    /// The lane's sandbox as recorded.
    pub lane: LaneSandbox,
    /// The bubblewrap program: a path, or a name looked up in `PATH`.
    pub bwrap: OsString,
}

/// The bubblewrap programs that made a sandbox in this process: probed once each. A lane
/// start probed it anew before — a namespace made and torn down per lane, on the runtime's
/// thread, which at 200 lanes started at once queued every start behind the others'. Only
/// success is kept: a program that stops working later fails the agent's own start instead,
/// so a lane is still never started unsandboxed.
static WORKING: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Whether bubblewrap can make a sandbox here: the program it found, or why not.
pub fn probe(bwrap: &OsString, path_var: Option<&std::ffi::OsStr>) -> Result<PathBuf, String> {
    let program = clawpool_pty::resolve_program(bwrap, Path::new("/"), path_var).map_err(|_| {
        format!(
            "bubblewrap ({}) is not installed or not on PATH; install the `bubblewrap` package, \
             name it with `bwrap = \"/path/to/bwrap\"`, or set `sandbox = \"off\"`",
            bwrap.to_string_lossy()
        )
    })?;
    if WORKING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains(&program)
    {
        return Ok(program);
    }
    let output = Command::new(&program)
        .args(["--unshare-user", "--die-with-parent", "--ro-bind", "/", "/"])
        .args(["--proc", "/proc", "--dev", "/dev", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("running {}: {e}", program.display()))?;
    if output.status.success() {
        WORKING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(program.clone());
        return Ok(program);
    }
    let said = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    Err(format!(
        "{} cannot make a sandbox here ({}): {said}; user namespaces may be disabled \
         (sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, or an AppArmor \
         restriction on unprivileged user namespaces)",
        program.display(),
        output.status
    ))
}

/// A lane's sandbox, ready to wrap what the lane starts.
#[derive(Debug, Clone)]
pub struct Sandbox {
    program: PathBuf,
    args: Vec<OsString>,
    recorded: LaneSandbox,
}

/// What a lane's sandbox is built from.
pub struct SandboxSite<'a> {
    /// The lane's worktree.
    pub dir: &'a Path,
    /// The lane's record folder (its registry folder), or `None` for a lane whose record is in
    /// its worktree.
    pub record: Option<&'a Path>,
    /// The lane's control socket.
    pub socket: &'a Path,
    /// The agent's home folder.
    pub home: Option<&'a Path>,
    /// The agent's profile's `sandbox_writes` (`~/…` paths; a trailing `/` marks a folder).
    pub agent_writes: &'a [String],
    /// `PATH` as the agent will have it (to find bubblewrap).
    pub path_var: Option<&'a std::ffi::OsStr>,
    /// For a lane whose channel is Codex's app server: the lane's folder that stands in for
    /// Codex's daemon folder (see [`codex_daemon_dir`]).
    pub codex_daemon: Option<&'a Path>,
    /// The agent's settings file clawpool writes for it (Claude Code's hook settings, in the
    /// record folder): bound read-only, readable wherever the record is hidden, never written.
    pub agent_settings: Option<&'a Path>,
}

/// The folder Codex 0.169.0 keeps its app server's socket in, whatever `--listen` names: it
/// makes the named path a link to `/tmp/codex-daemon-<uid>/<hash>`. In a sandbox `/tmp` is
/// private, so the lane's own folder is bound there instead — not the host's, which holds
/// every other Codex's sockets — and clawpool follows the link into that folder.
pub fn codex_daemon_dir() -> PathBuf {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    PathBuf::from(format!("/tmp/codex-daemon-{uid}"))
}

impl Sandbox {
    /// Probes bubblewrap and builds the lane's sandbox; the error says why the lane cannot
    /// have one (the lane then does not start).
    pub fn build(request: &SandboxRequest, site: &SandboxSite<'_>) -> Result<Self, String> {
        let program = probe(&request.bwrap, site.path_var)?;
        let mut args = Args::default();
        args.flag("--unshare-user").flag("--die-with-parent");
        if request.lane.network == SandboxNetwork::None {
            args.flag("--unshare-net");
        }
        args.pair("--ro-bind", "/", "/");
        args.one("--dev", "/dev")
            .one("--proc", "/proc")
            .one("--tmpfs", "/tmp");
        // The worktree first: a main checkout holds its `.git`, whose binds and hidden folders
        // below must land on top of it, not be covered by it again.
        args.pair("--bind", site.dir, site.dir);
        let git = GitSite::of(site.dir);
        if let Some(git) = &git {
            git.bind(&mut args)?;
        }
        // Hidden: clawpool's folder (every lane's record and socket, the pool's), the other
        // worktrees, the runtime folder of long-path sockets. Each is an empty tmpfs now and
        // made read-only last, once what is put back inside it has its mount point.
        let mut hidden = Vec::new();
        let mut bind_back = false;
        if let Some(git) = &git {
            let own = git.common.join("clawpool");
            if own.is_dir() {
                hidden.push(own);
            }
            let worktrees = git.hidden_worktrees(site.dir);
            hidden.extend(worktrees.folders);
            bind_back = worktrees.own_inside;
        }
        let runtime = clawpool_worktree::layout::runtime_dir();
        if runtime.is_dir() && !runtime.starts_with("/tmp") {
            hidden.push(runtime);
        }
        for path in &hidden {
            args.one("--tmpfs", path);
        }
        if bind_back {
            args.pair("--bind", site.dir, site.dir);
        }
        for entry in site.agent_writes {
            let folder = entry.ends_with('/');
            let Some(path) = home_path(entry.trim_end_matches('/'), site.home) else {
                continue;
            };
            if folder {
                std::fs::create_dir_all(&path).map_err(|e| {
                    format!("making {} for the sandboxed agent: {e}", path.display())
                })?;
                args.pair("--bind", &path, &path);
            } else {
                args.pair("--bind-try", &path, &path);
            }
        }
        for path in &request.lane.rw {
            if !path.exists() {
                return Err(format!(
                    "sandbox_rw names {}, which does not exist",
                    path.display()
                ));
            }
            args.pair("--bind", path, path);
        }
        if let Some(daemon) = site.codex_daemon {
            // Codex refuses a socket folder that is not the user's own with mode 0700.
            std::fs::create_dir_all(daemon)
                .and_then(|()| {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(daemon, std::fs::Permissions::from_mode(0o700))
                })
                .map_err(|e| format!("making {} for Codex's sockets: {e}", daemon.display()))?;
            args.pair("--bind", daemon, codex_daemon_dir());
        }
        // The lane's own hook endpoint, and nothing else of its record.
        match site.record {
            Some(record) if site.socket.starts_with(record) => {
                args.pair("--ro-bind", record, record);
                let lock = clawpool_worktree::layout::lane_lock(record);
                args.pair("--ro-bind", Path::new("/dev/null"), &lock);
            }
            _ if site.socket.starts_with(site.dir) => {}
            _ => {
                args.pair("--bind-try", site.socket, site.socket);
            }
        }
        if let Some(settings) = site.agent_settings {
            args.pair("--ro-bind", settings, settings);
        }
        for path in &hidden {
            args.one("--remount-ro", path);
        }
        Ok(Self {
            program,
            args: args.0,
            recorded: request.lane.clone(),
        })
    }

    /// The sandbox as the lane's state file records it.
    pub fn recorded(&self) -> &LaneSandbox {
        &self.recorded
    }

    /// The bubblewrap program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// bubblewrap's arguments that make the sandbox, then `--chdir` to `cwd` and `--`: the
    /// command to confine follows them.
    pub fn args_for(&self, cwd: &Path) -> Vec<OsString> {
        let mut args = self.args.clone();
        args.push("--chdir".into());
        args.push(cwd.as_os_str().to_owned());
        args.push("--".into());
        args
    }

    /// `spec` run inside the sandbox: bubblewrap in its place, the same environment, folder,
    /// terminal and logs.
    pub fn wrap(&self, spec: SpawnSpec) -> SpawnSpec {
        let mut args = self.args_for(&spec.cwd);
        args.push(spec.program.clone());
        args.extend(spec.args.iter().cloned());
        SpawnSpec {
            program: self.program.clone().into_os_string(),
            args,
            ..spec
        }
    }
}

/// A `~/…` path under `home`, or an absolute one as it is.
fn home_path(entry: &str, home: Option<&Path>) -> Option<PathBuf> {
    match entry.strip_prefix("~/") {
        Some(rest) => home.map(|home| home.join(rest)),
        None => Some(PathBuf::from(entry)).filter(|p| p.is_absolute()),
    }
}

/// bubblewrap's arguments, in order.
#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flag(&mut self, flag: &str) -> &mut Self {
        self.0.push(flag.into());
        self
    }

    fn one(&mut self, flag: &str, path: impl AsRef<std::ffi::OsStr>) -> &mut Self {
        self.0.push(flag.into());
        self.0.push(path.as_ref().to_owned());
        self
    }

    fn pair(
        &mut self,
        flag: &str,
        from: impl AsRef<std::ffi::OsStr>,
        to: impl AsRef<std::ffi::OsStr>,
    ) -> &mut Self {
        self.0.push(flag.into());
        self.0.push(from.as_ref().to_owned());
        self.0.push(to.as_ref().to_owned());
        self
    }
}

/// Where the worktree's git data is.
struct GitSite {
    /// The common git dir (objects, refs).
    common: PathBuf,
    /// This worktree's own admin folder, or `None` for a main checkout (whose admin folder is
    /// the common dir).
    admin: Option<PathBuf>,
}

impl GitSite {
    /// The git data of the worktree `dir`, from its `.git` (a folder, or a file naming its
    /// admin folder); `None` outside a repository.
    fn of(dir: &Path) -> Option<Self> {
        let dot_git = dir.join(".git");
        if dot_git.is_dir() {
            return Some(Self {
                common: dot_git,
                admin: None,
            });
        }
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let admin = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
        let admin = if admin.is_absolute() {
            admin
        } else {
            dir.join(admin)
        };
        let common = std::fs::read_to_string(admin.join("commondir")).ok()?;
        let common = admin.join(common.trim());
        Some(Self {
            common: common.canonicalize().unwrap_or(common),
            admin: Some(admin.canonicalize().unwrap_or(admin)),
        })
    }

    /// What git writes when the lane commits, made writable.
    fn bind(&self, args: &mut Args) -> Result<(), String> {
        let Some(admin) = &self.admin else {
            // A main checkout: its `.git`, but not what would run outside the sandbox.
            args.pair("--bind", &self.common, &self.common);
            for kept in ["hooks", "config"] {
                let path = self.common.join(kept);
                if path.exists() {
                    args.pair("--ro-bind", &path, &path);
                }
            }
            return Ok(());
        };
        // A reflog folder git cannot make inside the read-only common dir would fail the
        // commit.
        let logs = self.common.join("logs");
        std::fs::create_dir_all(&logs)
            .map_err(|e| format!("making {} for the sandboxed lane: {e}", logs.display()))?;
        for shared in ["objects", "refs", "logs"] {
            let path = self.common.join(shared);
            args.pair("--bind", &path, &path);
        }
        args.pair("--bind", admin, admin);
        Ok(())
    }

    /// The repository's other worktrees: the main checkout's folder is left read-only (the
    /// lane reads the project there, as anyone may), the other lanes' are hidden.
    fn other_worktrees(&self, dir: &Path) -> Vec<PathBuf> {
        let own = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        let Ok(entries) = std::fs::read_dir(self.common.join("worktrees")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| std::fs::read_to_string(entry.path().join("gitdir")).ok())
            .filter_map(|gitdir| {
                let folder = PathBuf::from(gitdir.trim()).parent()?.to_owned();
                folder.canonicalize().ok()
            })
            .filter(|folder| *folder != own && !own.starts_with(folder))
            .collect()
    }

    /// The folders that hide the other worktrees from the lane in `dir`.
    fn hidden_worktrees(&self, dir: &Path) -> HiddenWorktrees {
        let own = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        // A main checkout is never bound back: its `.git` binds, made before, would be
        // covered by the worktree's own files again.
        let linked = self.admin.is_some();
        hide_worktrees(self.other_worktrees(dir), &own, linked)
    }
}

/// How a lane's sandbox hides the repository's other worktrees.
#[derive(Debug, PartialEq)]
struct HiddenWorktrees {
    /// Each hidden by an empty tmpfs.
    folders: Vec<PathBuf>,
    /// The lane's own worktree is inside one of `folders` and must be bound back.
    own_inside: bool,
}

/// Groups `others` (canonical paths) by the folder they are in: a folder whose every entry is
/// one of them — or the lane's own worktree `own`, when it is a linked one and can be bound
/// back — is hidden whole; any other folder keeps its worktrees hidden one by one.
fn hide_worktrees(others: Vec<PathBuf>, own: &Path, own_linked: bool) -> HiddenWorktrees {
    use std::collections::{BTreeMap, BTreeSet};
    let mut by_parent: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    let mut alone = Vec::new();
    for other in others {
        match other.parent() {
            Some(parent) => {
                by_parent
                    .entry(parent.to_owned())
                    .or_default()
                    .insert(other);
            }
            None => alone.push(other),
        }
    }
    let mut hidden = HiddenWorktrees {
        folders: alone,
        own_inside: false,
    };
    for (parent, worktrees) in by_parent {
        let own_here = own.parent() == Some(parent.as_path());
        let only_worktrees = (own_linked || !own_here)
            && std::fs::read_dir(&parent).is_ok_and(|entries| {
                // `parent` is canonical, so an entry's path is too unless it is a link — which
                // then matches nothing and keeps the folder visible.
                entries.flatten().all(|entry| {
                    let path = parent.join(entry.file_name());
                    worktrees.contains(&path) || (own_here && path == own)
                })
            });
        if only_worktrees {
            hidden.folders.push(parent);
            hidden.own_inside |= own_here;
        } else {
            hidden.folders.extend(worktrees);
        }
    }
    hidden
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_bwrap_is_named_with_what_to_do() {
        let err = probe(&OsString::from("/nonexistent/bwrap"), None).expect_err("missing");
        assert!(err.contains("/nonexistent/bwrap"), "{err}");
        assert!(err.contains("sandbox = \"off\""), "{err}");
    }

    #[test]
    fn home_paths_expand_and_relative_ones_are_dropped() {
        let home = Path::new("/home/u");
        assert_eq!(
            home_path("~/.codex", Some(home)),
            Some(PathBuf::from("/home/u/.codex"))
        );
        assert_eq!(home_path("~/.codex", None), None);
        assert_eq!(home_path("rel", Some(home)), None);
        assert_eq!(home_path("/abs", Some(home)), Some(PathBuf::from("/abs")));
    }

    /// `lanes/` with three worktrees (the lane's own among them), `mixed/` with two and a
    /// file of somebody else's.
    fn worktree_folders() -> (tempfile::TempDir, PathBuf, Vec<PathBuf>) {
        let root = tempfile::tempdir().expect("tempdir");
        let base = root.path().canonicalize().expect("canonical");
        let mut others = Vec::new();
        for path in ["lanes/a", "lanes/b", "lanes/own", "mixed/c", "mixed/d"] {
            std::fs::create_dir_all(base.join(path)).expect("mkdir");
            if path != "lanes/own" {
                others.push(base.join(path));
            }
        }
        std::fs::write(base.join("mixed/notes.txt"), "not a worktree").expect("write");
        (root, base, others)
    }

    #[test]
    fn a_folder_of_nothing_but_worktrees_is_hidden_whole_and_the_own_one_bound_back() {
        let (_root, base, others) = worktree_folders();
        let hidden = hide_worktrees(others, &base.join("lanes/own"), true);
        assert_eq!(
            hidden,
            HiddenWorktrees {
                folders: vec![
                    base.join("lanes"),
                    base.join("mixed/c"),
                    base.join("mixed/d")
                ],
                own_inside: true,
            }
        );
    }

    #[test]
    fn a_main_checkout_among_the_worktrees_keeps_them_hidden_one_by_one() {
        let (_root, base, others) = worktree_folders();
        let hidden = hide_worktrees(others, &base.join("lanes/own"), false);
        assert!(!hidden.own_inside);
        assert!(hidden.folders.contains(&base.join("lanes/a")), "{hidden:?}");
        assert!(!hidden.folders.contains(&base.join("lanes")), "{hidden:?}");
    }

    #[test]
    fn worktrees_in_a_folder_of_another_lane_are_hidden_whole_without_binding_back() {
        let (_root, base, mut others) = worktree_folders();
        others.push(base.join("lanes/own"));
        let hidden = hide_worktrees(others, &base.join("elsewhere"), true);
        assert!(hidden.folders.contains(&base.join("lanes")), "{hidden:?}");
        assert!(!hidden.own_inside);
    }
}
