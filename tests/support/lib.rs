//! Shared helpers for clawpool's end-to-end tests: where the built binaries are, throwaway git
//! repositories, and an environment that keeps every test away from the developer's own HOME
//! and tmux server.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The path of a binary built from this workspace (`clawpool`, `clawpool-scripted-agent`,
/// `clawpool-model-server`), found next to the running test executable's target folder.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    // target/<profile>/deps/<test-binary> → target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binaries live in target/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(
        path.is_file(),
        "{} is not built; run `cargo build --workspace --bins` first (the README's test command does)",
        path.display()
    );
    path
}

/// A sandbox for one test: a temporary folder holding a fake HOME and the tmux socket folder,
/// and a marker every process started through it carries in its environment, so a test can
/// prove none of them is left behind.
pub struct Sandbox {
    /// The sandbox folder, removed when the sandbox is dropped.
    pub dir: tempfile::TempDir,
    /// The value of `CLAWPOOL_TEST_MARKER` in every process started through the sandbox.
    pub marker: String,
}

impl Sandbox {
    /// A new, empty sandbox.
    pub fn new() -> Self {
        Self::new_in(&std::env::temp_dir())
    }

    /// A new, empty sandbox in `parent`: for an agent whose own sandbox replaces `/tmp`, whose
    /// HOME must then be elsewhere.
    pub fn new_in(parent: &Path) -> Self {
        let dir = tempfile::tempdir_in(parent).expect("sandbox temp dir");
        std::fs::create_dir_all(dir.path().join("home")).expect("sandbox home");
        std::fs::create_dir_all(dir.path().join("tmux")).expect("sandbox tmux dir");
        let marker = format!(
            "clawpool-test-{}-{}",
            std::process::id(),
            dir.path()
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("x")
        );
        Self { dir, marker }
    }

    /// The fake HOME.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The fake `XDG_STATE_HOME`, where clawpool keeps the user's index of repositories with
    /// lanes (`clawpool ui --all`).
    pub fn state_home(&self) -> PathBuf {
        self.home().join(".local").join("state")
    }

    /// The folder tmux keeps its sockets in (`TMUX_TMPDIR`).
    pub fn tmux_dir(&self) -> PathBuf {
        self.dir.path().join("tmux")
    }

    /// `program` started from an empty environment: only `PATH` (this process's), HOME,
    /// XDG_CONFIG_HOME, XDG_STATE_HOME and TMUX_TMPDIR inside the sandbox, and the marker. Nothing of the
    /// developer's environment (API keys, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, …) gets through,
    /// nor to anything the program starts: use it for whatever runs the real agents.
    pub fn clean_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("XDG_STATE_HOME", self.state_home())
            .env("TMUX_TMPDIR", self.tmux_dir())
            .env("CLAWPOOL_TEST_MARKER", &self.marker);
        cmd
    }

    /// `clawpool` like [`Sandbox::clawpool`], but from an empty environment
    /// ([`Sandbox::clean_command`]).
    pub fn clawpool_clean_env(&self) -> Command {
        self.clean_command(workspace_bin("clawpool"))
    }

    /// `tmux` talking to the sandbox's private servers (`TMUX_TMPDIR` inside the sandbox).
    pub fn tmux(&self) -> Command {
        let mut cmd = self.clean_command("tmux");
        cmd.env_remove("TMUX");
        cmd
    }

    /// `clawpool` with HOME, XDG_CONFIG_HOME, XDG_STATE_HOME and TMUX_TMPDIR inside the
    /// sandbox.
    pub fn clawpool(&self) -> Command {
        let mut cmd = Command::new(workspace_bin("clawpool"));
        cmd.env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("XDG_STATE_HOME", self.state_home())
            .env("TMUX_TMPDIR", self.tmux_dir())
            .env("CLAWPOOL_TEST_MARKER", &self.marker)
            .env_remove("TMUX");
        cmd
    }

    /// Processes still alive (not zombies) that carry this sandbox's marker.
    pub fn leftover_processes(&self) -> Vec<u32> {
        let needle = format!("CLAWPOOL_TEST_MARKER={}", self.marker);
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let zombie = stat
                    .rsplit(')')
                    .next()
                    .and_then(|rest| rest.split_whitespace().next())
                    == Some("Z");
                !zombie
                    && environ
                        .split(|&b| b == 0)
                        .any(|var| var == needle.as_bytes())
            })
            .collect()
    }

    /// [`Sandbox::leftover_processes`] once they had up to `patience` to finish exiting: a
    /// tmux server told to quit (`kill-server`) exits on its own time, after the command that
    /// told it has returned.
    pub fn leftover_processes_after(&self, patience: std::time::Duration) -> Vec<u32> {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let left = self.leftover_processes();
            if left.is_empty() || std::time::Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Live tmux server sockets left in the sandbox's socket folder.
    pub fn leftover_tmux_sockets(&self) -> Vec<PathBuf> {
        let Ok(dirs) = std::fs::read_dir(self.tmux_dir()) else {
            return Vec::new();
        };
        dirs.filter_map(|d| d.ok())
            .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten())
            .filter_map(|s| s.ok().map(|s| s.path()))
            .collect()
    }
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

/// A fresh git repository with one commit on `main`.
pub fn git_repo(parent: &Path, name: &str) -> PathBuf {
    let repo = parent.join(name);
    std::fs::create_dir_all(&repo).expect("repo dir");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["commit", "-q", "--allow-empty", "-m", "Initial commit"][..],
    ] {
        let status = Command::new("git")
            .args(["-c", "user.name=test", "-c", "user.email=test@localhost"])
            .args(args)
            .current_dir(&repo)
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?} failed");
    }
    repo
}

/// The subjects of a repository's commits, newest first.
pub fn git_log(repo: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["log", "--format=%s"])
        .current_dir(repo)
        .output()
        .expect("git log");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The real agents (Claude Code, Codex), the scripted model server, and `clawpool run` children.
// ---------------------------------------------------------------------------------------------

/// Where `scripts/install-agents.sh` put the real agents: `$CLAWPOOL_AGENTS_DIR`, else
/// `<repo>/.agents`.
pub fn agents_dir() -> PathBuf {
    match std::env::var_os("CLAWPOOL_AGENTS_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the tests package sits in the workspace")
            .join(".agents"),
    }
}

/// The installed real agent `name` (`claude`, `codex`). Panics, saying how to install it,
/// when it is missing: these tests must fail, not pass silently, without the agents.
pub fn real_agent(name: &str) -> PathBuf {
    let path = agents_dir().join("node_modules/.bin").join(name);
    assert!(
        path.is_file(),
        "the real agent {name:?} is not installed at {}: run `scripts/install-agents.sh` \
         (CI does; it installs the pinned Claude Code and Codex into .agents/)",
        path.display()
    );
    path
}

/// A `PATH` for the real agents: `/usr/bin:/bin`, after the folders holding `node` (Codex's
/// entry point is a Node script) and `git`, wherever this machine keeps them.
pub fn agent_path() -> String {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for tool in ["node", "git"] {
        let found = std::env::var_os("PATH")
            .and_then(|path| std::env::split_paths(&path).find(|dir| dir.join(tool).is_file()));
        if let Some(dir) = found
            && !dirs.contains(&dir)
        {
            dirs.push(dir);
        }
    }
    for dir in ["/usr/bin", "/bin"] {
        if !dirs.iter().any(|d| d == Path::new(dir)) {
            dirs.push(dir.into());
        }
    }
    std::env::join_paths(dirs)
        .expect("PATH folders without colons")
        .into_string()
        .expect("a UTF-8 PATH")
}

/// `clawpool-model-server` running a script; killed when dropped.
pub struct ModelServer {
    child: std::process::Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// The request record (`--record`).
    pub record: PathBuf,
    /// Its stderr: one line per request.
    pub log: PathBuf,
}

impl ModelServer {
    /// Starts the server with `script` (a JSON list of turns), keeping its files in `dir`,
    /// and waits until it says where it listens.
    pub fn start(dir: &Path, script: &serde_json::Value) -> Self {
        Self::start_with(dir, script, &[])
    }

    /// [`ModelServer::start`] with more command-line flags (`--every-request-is-a-task`, …).
    pub fn start_with(dir: &Path, script: &serde_json::Value, flags: &[&str]) -> Self {
        use std::io::BufRead;
        std::fs::create_dir_all(dir).expect("model server folder");
        let script_path = dir.join("model-script.json");
        std::fs::write(&script_path, script.to_string()).expect("model script");
        let record = dir.join("model-requests.jsonl");
        let log = dir.join("model-server.log");
        let mut child = Command::new(workspace_bin("clawpool-model-server"))
            .arg("--script")
            .arg(&script_path)
            .arg("--record")
            .arg(&record)
            .arg("--port-file")
            .arg(dir.join("model-port"))
            .args(flags)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("model server log"))
            .spawn()
            .expect("clawpool-model-server starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(std::time::Duration::from_secs(20)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("clawpool-model-server did not say where it listens within 20 s");
            }
        };
        let port = line
            .trim()
            .strip_prefix("listening on 127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "unexpected first line from clawpool-model-server: {line:?}; stderr: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            });
        Self {
            child,
            port,
            record,
            log,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far, as recorded.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The task ("main") requests so far.
    pub fn main_requests(&self) -> Vec<serde_json::Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["kind"] == "main")
            .collect()
    }

    /// Stops the server (also done on drop).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A loopback port that refuses connections: bound (so nobody else gets it) but never
/// listening, so a connection attempt gets ECONNREFUSED. Released when dropped.
pub struct ClosedPort {
    _socket: tokio::net::TcpSocket,
    /// The port.
    pub port: u16,
}

impl ClosedPort {
    /// Reserves a port.
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
        socket
            .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind a loopback port");
        let port = socket.local_addr().expect("bound address").port();
        Self {
            _socket: socket,
            port,
        }
    }
}

impl Default for ClosedPort {
    fn default() -> Self {
        Self::new()
    }
}

/// Writes `$home/.claude.json` so Claude Code skips its onboarding (as docs/real-agents.md
/// says), merged with `extra` (top-level keys). No project is trusted unless `extra` says so.
pub fn seed_claude_home(home: &Path, extra: serde_json::Value) {
    let mut config = serde_json::json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "numStartups": 3,
    });
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            config.insert(key.clone(), value.clone());
        }
    }
    std::fs::create_dir_all(home).expect("home");
    std::fs::write(home.join(".claude.json"), config.to_string()).expect(".claude.json");
}

/// Sets Codex up in `sandbox`'s HOME as docs/real-agents.md says: `~/.codex/config.toml`
/// pointing at the model server through a `mock` provider (no project trusted), and
/// `codex login --with-api-key` with `api_key`.
pub fn seed_codex_home(sandbox: &Sandbox, model_url: &str, api_key: &str) {
    use std::io::Write;
    let codex_home = sandbox.home().join(".codex");
    std::fs::create_dir_all(&codex_home).expect("~/.codex");
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\n\
             name = \"mock\"\nbase_url = \"{model_url}/v1\"\nenv_key = \"OPENAI_API_KEY\"\n\
             wire_api = \"responses\"\n"
        ),
    )
    .expect("~/.codex/config.toml");
    let mut login = sandbox
        .clean_command(real_agent("codex"))
        .env("PATH", agent_path())
        .args(["login", "--with-api-key"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("codex login starts");
    login
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(format!("{api_key}\n").as_bytes())
        .expect("key to codex login");
    let out = login.wait_with_output().expect("codex login ends");
    assert!(
        out.status.success() && codex_home.join("auth.json").is_file(),
        "codex login --with-api-key failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `clawpool run --output-format json` child whose stdout is read line by line as it comes
/// (every lane event, then the `{"outcome": …}` line). On drop it is interrupted like Ctrl-C
/// (so it stops its agent), and killed if it does not end.
pub struct LaneRun {
    child: std::process::Child,
    events: std::sync::mpsc::Receiver<serde_json::Value>,
    /// Every line read so far, in order.
    pub seen: Vec<serde_json::Value>,
    /// Where clawpool's stderr goes.
    pub stderr: PathBuf,
    exited: Option<std::process::ExitStatus>,
}

impl LaneRun {
    /// Starts `cmd` (a `clawpool run … --output-format json` command), its stderr going to
    /// `stderr`.
    pub fn start(mut cmd: Command, stderr: &Path) -> Self {
        use std::io::BufRead;
        let mut child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(stderr).expect("clawpool stderr file"))
            .spawn()
            .expect("clawpool run starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, events) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| serde_json::json!({ "unparsed": line }));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            events,
            seen: Vec::new(),
            stderr: stderr.to_owned(),
            exited: None,
        }
    }

    /// clawpool's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line within `timeout`: `Ok(None)` when none came in time, `Err(())` once
    /// stdout has ended.
    fn next(&mut self, timeout: std::time::Duration) -> Result<Option<serde_json::Value>, ()> {
        match self.events.recv_timeout(timeout) {
            Ok(event) => {
                self.seen.push(event.clone());
                Ok(Some(event))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(()),
        }
    }

    /// Waits up to `patience` for the next line matching `pred` and returns it; panics with
    /// everything seen so far (and `context()`, e.g. the agent's screen) otherwise.
    pub fn wait_for(
        &mut self,
        what: &str,
        patience: std::time::Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
        context: impl Fn() -> String,
    ) -> serde_json::Value {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next(left) {
                Ok(Some(event)) if pred(&event) => return event,
                Ok(Some(_)) => {}
                Ok(None) => panic!(
                    "no {what} within {patience:?}\n{}\n{}",
                    self.report(),
                    context()
                ),
                Err(()) => panic!(
                    "clawpool's output ended before {what}\n{}\n{}",
                    self.report(),
                    context()
                ),
            }
        }
    }

    /// Every line that comes within `window` (a bounded observation: "nothing happens for N
    /// seconds" is what some tests assert).
    pub fn lines_within(&mut self, window: std::time::Duration) -> Vec<serde_json::Value> {
        let deadline = std::time::Instant::now() + window;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return lines;
            }
            match self.next(left) {
                Ok(Some(event)) => lines.push(event),
                // The window is over, or the output ended and nothing more can come.
                Ok(None) | Err(()) => return lines,
            }
        }
    }

    /// Sends `signal` to clawpool.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.child.id());
    }

    /// Reads the rest of the output (up to `patience`) and waits for clawpool to exit.
    pub fn wait_exit(&mut self, patience: std::time::Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next(left) {
                Ok(Some(_)) => {}
                Ok(None) => panic!(
                    "clawpool did not exit within {patience:?}\n{}",
                    self.report()
                ),
                Err(()) => break,
            }
        }
        let status = self.child.wait().expect("wait for clawpool");
        self.exited = Some(status);
        status
    }

    /// The lane events seen so far (lines with a `kind`).
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.seen
            .iter()
            .filter(|e| e.get("kind").is_some())
            .cloned()
            .collect()
    }

    /// Everything seen so far and clawpool's stderr, for a failure message.
    pub fn report(&self) -> String {
        let lines: Vec<String> = self.seen.iter().map(|e| e.to_string()).collect();
        format!(
            "clawpool output so far:\n{}\nclawpool stderr:\n{}",
            lines.join("\n"),
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        )
    }
}

impl Drop for LaneRun {
    fn drop(&mut self) {
        if self.exited.is_some() || matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // Like Ctrl-C: clawpool stops its agent (SIGTERM, then SIGKILL after 5 s) and exits.
        // SAFETY: kill(2) on our own, not yet reaped, child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The events of a trusted lane from spawn to finished, with its trust dialog answered by
/// policy, in order.
pub const TRUSTED_BOOT_TO_FINISHED: &[&str] = &[
    "lane.started",
    "lane.trust_required",
    "lane.dialog_answered",
    "lane.trust_resolved",
    "lane.ready",
    "lane.prompt_typed",
    "lane.prompt_sent",
    "lane.prompt_accepted",
    "lane.running",
    "lane.finished",
];

/// Asserts the lane events' `kind`s include `expected` in this order (others may come
/// between); returns the positions found.
pub fn assert_kinds_in_order(events: &[serde_json::Value], expected: &[&str]) -> Vec<usize> {
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    let mut at = 0;
    let mut found = Vec::new();
    for want in expected {
        match kinds[at..].iter().position(|k| k == want) {
            Some(i) => {
                found.push(at + i);
                at += i + 1;
            }
            None => panic!("{want} missing or out of order in {kinds:?}"),
        }
    }
    found
}

/// The states a lane moved to (`to.status`, with `/subphase` when blocked), in order.
pub fn transitions(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.get("from").is_some() || e["kind"] == "lane.started")
        .filter_map(|e| {
            let to = e.get("to")?;
            let status = to["status"].as_str()?;
            Some(match to["subphase"].as_str() {
                Some(sub) => format!("{status}/{sub}"),
                None => status.to_owned(),
            })
        })
        .collect()
}

/// Now, in milliseconds since the epoch, as events' `at_ms` are.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The lane state file at `path` (a record `state.json` or a publication
/// `.claw/worker-state.json`) once it holds the lane event numbered `seq` or a later one,
/// waiting up to `patience`. A lane's supervisor writes its state files behind its event log
/// (`docs/state-file.md`, "Writing"), so a test that saw an event on the stream and then reads
/// or changes the file waits for this first. Panics with the file as last read otherwise.
pub fn state_file_at(path: &Path, seq: u64, patience: std::time::Duration) -> serde_json::Value {
    let deadline = std::time::Instant::now() + patience;
    loop {
        let read = std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
        if let Some(doc) = &read
            && doc["lane_event"]["seq"]
                .as_u64()
                .is_some_and(|at| at >= seq)
        {
            return doc.clone();
        }
        if std::time::Instant::now() >= deadline {
            panic!(
                "{} never held event {seq} within {patience:?}; last read: {read:?}",
                path.display()
            );
        }
        // The write is in another process, and no event says it is done: look again soon.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A lane's published state file (`LANE/.claw/worker-state.json`) once it holds every event
/// of the lane's own log so far, waiting up to 30 s: the file is written behind the log, by at
/// most the write in flight (`docs/state-file.md`). The log is the lane's `.claw/events.jsonl`
/// for a `clawpool run` lane, else its registry folder's, found through the worktree's `.git`.
pub fn published_state(lane: &Path) -> serde_json::Value {
    let own = lane.join(".claw/events.jsonl");
    let log = if own.exists() {
        own
    } else {
        let git = std::fs::read_to_string(lane.join(".git")).expect("a linked worktree's .git");
        let admin = PathBuf::from(git.trim().strip_prefix("gitdir: ").expect("a gitdir: line"));
        let common = admin
            .parent()
            .and_then(Path::parent)
            .expect("the common git dir");
        let name = lane.file_name().expect("a lane folder");
        common
            .join("clawpool/lanes")
            .join(name)
            .join("events.jsonl")
    };
    let last = std::fs::read_to_string(&log)
        .expect("the lane's event log")
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|event| event["seq"].as_u64())
        .max()
        .expect("an event in the lane's log");
    state_file_at(
        &lane.join(".claw/worker-state.json"),
        last,
        std::time::Duration::from_secs(30),
    )
}
