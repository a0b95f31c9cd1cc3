//! Publishing finished lanes: `clawpool push` to a bare repository made in the test, `clawpool
//! pr` against the scripted GitHub-compatible forge (`clawpool-forge-double`) serving that
//! repository — one pull request per branch across runs, the token sent, the forge's 401, 404
//! and 422 surfaced with its message, `lane.pr.opened` in the events, the state file and the
//! board; refused from inside a lane — and `clawpool gc`, which keeps a lane whose commits are
//! neither landed nor pushed.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};

use clawpool_tests::workspace_bin;
use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

const TOKEN: &str = "test-token-123";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A bare repository as the lanes' `origin`, with the base branch on it.
fn bare_origin(s: &Setup) -> PathBuf {
    let bare = s.sandbox.dir.path().join("origin.git");
    git(
        s.sandbox.dir.path(),
        &["init", "-q", "--bare", "-b", "main", "origin.git"],
    );
    git(
        &s.repo,
        &["remote", "add", "origin", &bare.display().to_string()],
    );
    git(&s.repo, &["push", "-q", "origin", "main"]);
    bare
}

/// `clawpool-forge-double` serving `acme/widgets` over `bare`; killed when dropped.
struct ForgeDouble {
    child: Child,
    url: String,
    record: PathBuf,
}

impl ForgeDouble {
    fn start(dir: &Path, bare: &Path) -> Self {
        let record = dir.join("forge-requests.jsonl");
        let mut child = std::process::Command::new(workspace_bin("clawpool-forge-double"))
            .args(["--repository", "acme/widgets", "--token", TOKEN, "--bare"])
            .arg(bare)
            .arg("--record")
            .arg(&record)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(dir.join("forge.log")).expect("forge log"))
            .spawn()
            .expect("clawpool-forge-double starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the forge says where it listens");
        let address = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Self {
            child,
            url: format!("http://{address}"),
            record,
        }
    }

    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for ForgeDouble {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A configuration file: the test's, with `forge`'s lines as its `[forge]` table.
fn forge_config(s: &Setup, file: &str, forge: &str) -> PathBuf {
    let path = s.sandbox.dir.path().join(file);
    let base = std::fs::read_to_string(&s.config).expect("config");
    std::fs::write(&path, format!("{base}\n[forge]\n{forge}\n")).expect("forge config");
    path
}

fn clawpool(s: &Setup, args: &[&str], config: &Path, token: &str) -> Output {
    s.sandbox
        .clawpool()
        .args(args)
        .arg("--config")
        .arg(config)
        .env("GITHUB_TOKEN", token)
        .current_dir(&s.repo)
        .output()
        .expect("clawpool")
}

/// `clawpool` for a reading command (no configuration).
fn read(s: &Setup, args: &[&str]) -> Output {
    s.sandbox
        .clawpool()
        .args(args)
        .current_dir(&s.repo)
        .output()
        .expect("clawpool")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(out)
        )
    })
}

/// The one JSON error document a failed command printed on stderr.
fn error(out: &Output) -> Value {
    assert_eq!(out.status.code(), Some(1), "{}", stderr(out));
    let doc: Value = serde_json::from_slice(&out.stderr)
        .unwrap_or_else(|e| panic!("{e}: one JSON error expected, got {}", stderr(out)));
    doc["error"].clone()
}

const PACKET: &str = r#"{"defaults": {"agent": "scripted"}, "lanes": [
  {"name": "feat", "prompt": "Add the out file\n\nIt must say done.", "acceptance_tests": ["test -f out.txt"]},
  {"name": "noop", "prompt": "nothing"}
]}"#;

#[test]
fn push_and_pr_open_one_pull_request_per_branch_and_surface_the_forges_refusals() {
    let s = setup();
    let out = s.spawn(PACKET, &["--output-format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bare = bare_origin(&s);
    let forge = ForgeDouble::start(s.sandbox.dir.path(), &bare);
    let config = forge_config(
        &s,
        "forge.toml",
        &format!(
            "kind = \"github\"\napi_url = {:?}\nrepository = \"acme/widgets\"",
            forge.url
        ),
    );
    let feat_head = git(&s.lanes_dir().join("feat"), &["rev-parse", "HEAD"]);

    // push: the branch lands in the bare remote.
    let out = clawpool(
        &s,
        &["push", "feat", "--output-format", "json"],
        &config,
        TOKEN,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pushed = json(&out);
    assert_eq!(pushed["branch"], "lanes/feat", "{pushed}");
    assert_eq!(pushed["remote"], "origin");
    assert_eq!(pushed["head"], feat_head.as_str());
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/lanes/feat"]),
        feat_head
    );
    assert!(forge.requests().is_empty(), "push asks no forge");

    // pr: one pull request, the token sent, title and body from the task and its outcome.
    let out = clawpool(
        &s,
        &["pr", "feat", "--output-format", "json"],
        &config,
        TOKEN,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = json(&out);
    assert_eq!(first["number"], 1, "{first}");
    assert_eq!(first["existing"], false);
    assert_eq!(first["title"], "Add the out file");
    let url = first["url"].as_str().expect("url").to_owned();
    let requests = forge.requests();
    assert!(
        requests
            .iter()
            .all(|r| r["authorization"] == format!("Bearer {TOKEN}")),
        "{requests:?}"
    );
    let posts: Vec<&Value> = requests.iter().filter(|r| r["method"] == "POST").collect();
    assert_eq!(posts.len(), 1, "{requests:?}");
    let sent = &posts[0]["body"];
    assert_eq!(sent["head"], "lanes/feat");
    assert_eq!(sent["base"], "main");
    assert_eq!(sent["title"], "Add the out file");
    let body = sent["body"].as_str().unwrap_or_default();
    for part in ["> It must say done.", "green level:", "lane work", "`feat`"] {
        assert!(body.contains(part), "{part:?} not in the body:\n{body}");
    }
    assert!(
        requests[0]["query"]
            .as_array()
            .is_some_and(|q| q.contains(&serde_json::json!(["head", "acme:lanes/feat"]))),
        "the open pull request is looked for first: {requests:?}"
    );

    // A second run finds it: still one pull request for the branch.
    let out = clawpool(&s, &["pr", "feat"], &config, TOKEN);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("already has pull request #1") && text.contains(&url),
        "{text}"
    );
    let requests = forge.requests();
    assert_eq!(requests.iter().filter(|r| r["method"] == "POST").count(), 1);

    // lane.pr.opened in the events, the state file and the board.
    let events = std::fs::read_to_string(s.repo.join(".git/clawpool/lanes/feat/events.jsonl"))
        .expect("events");
    let opened: Vec<Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "lane.pr.opened")
        .collect();
    assert_eq!(opened.len(), 1, "recorded once for one PR at one HEAD");
    assert_eq!(opened[0]["detail"]["number"], 1);
    assert_eq!(opened[0]["detail"]["url"], url.as_str());
    let out = read(&s, &["state", "feat", "--output-format", "json"]);
    let state = json(&out);
    assert_eq!(state["pull_request"]["number"], 1, "{state}");
    assert_eq!(state["pull_request"]["head"], feat_head.as_str());
    let out = read(&s, &["board", "--output-format", "json"]);
    let board = json(&out);
    let row = board["lanes"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["lane"] == "feat"))
        .expect("feat on the board");
    assert_eq!(row["pull_request"]["url"], url.as_str());
    let out = read(&s, &["board"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let feat_row = table
        .lines()
        .find(|l| l.starts_with("feat "))
        .unwrap_or_else(|| panic!("feat row in {table}"));
    assert!(feat_row.trim_end().ends_with("#1"), "{table}");

    // 401: a wrong token, with the forge's message.
    let out = clawpool(
        &s,
        &["pr", "feat", "--output-format", "json"],
        &config,
        "wrong",
    );
    let refused = error(&out);
    assert_eq!(refused["kind"], "forge_unauthorized", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Bad credentials")
    );
    // 404: a repository the forge does not have.
    let missing = forge_config(
        &s,
        "missing.toml",
        &format!("api_url = {:?}\nrepository = \"acme/gone\"", forge.url),
    );
    let refused = error(&clawpool(
        &s,
        &["pr", "feat", "--output-format", "json"],
        &missing,
        TOKEN,
    ));
    assert_eq!(refused["kind"], "forge_not_found", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Not Found")
    );
    // 422: a branch with no commits beyond its base.
    let noop = s.lanes_dir().join("noop");
    git(&noop, &["reset", "-q", "--hard", "main"]);
    let refused = error(&clawpool(
        &s,
        &["pr", "noop", "--output-format", "json"],
        &config,
        TOKEN,
    ));
    assert_eq!(refused["kind"], "forge_unprocessable", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("No commits between main and lanes/noop"),
        "{refused}"
    );
    let asked = forge.requests().len();
    assert_eq!(
        forge
            .requests()
            .iter()
            .filter(|r| r["method"] == "POST")
            .count(),
        2
    );

    // From inside a lane (the mark clawpool gives every lane agent's processes): refused
    // before anything is pushed or asked.
    let out = s
        .sandbox
        .clawpool()
        .args(["pr", "feat", "--output-format", "json", "--config"])
        .arg(&config)
        .env("GITHUB_TOKEN", TOKEN)
        .env("CLAWPOOL_LANE_NAME", "feat")
        .env("CLAWPOOL_LANE_DIR", s.repo.join(".git/clawpool/lanes/feat"))
        .current_dir(&s.repo)
        .output()
        .expect("clawpool");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let refused: Value = serde_json::from_slice(&out.stderr).expect("one JSON error");
    assert_eq!(refused["error"]["kind"], "caller_refused", "{refused}");
    assert_eq!(forge.requests().len(), asked, "the forge was not asked");
}

#[test]
fn gc_keeps_a_lane_whose_commits_are_neither_landed_nor_pushed() {
    let s = setup();
    let out = s.spawn(
        r#"{"defaults": {"agent": "scripted"}, "lanes": [{"name": "pushed", "prompt": "p"}, {"name": "local", "prompt": "l"}]}"#,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let bare = bare_origin(&s);
    let config = forge_config(&s, "forge.toml", "remote = \"origin\"");
    let out = clawpool(&s, &["push", "pushed"], &config, "");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("pushed to origin: lanes/pushed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let gc = |args: &[&str]| {
        s.sandbox
            .clawpool()
            .arg("gc")
            .args(args)
            .arg("--repo")
            .arg(&s.repo)
            .output()
            .expect("gc")
    };

    let out = gc(&["--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out);
    let verdict = |lane: &str| {
        doc["lanes"]
            .as_array()
            .and_then(|l| l.iter().find(|v| v["lane"] == lane))
            .cloned()
            .unwrap_or_else(|| panic!("{lane} in {doc}"))
    };
    assert_eq!(verdict("pushed")["removed"], true, "{doc}");
    assert_eq!(verdict("pushed")["because"], "pushed", "{doc}");
    assert_eq!(verdict("local")["removed"], false, "{doc}");
    assert_eq!(
        verdict("local")["because"],
        "not_landed_nor_pushed",
        "{doc}"
    );
    assert!(s.lanes_dir().join("local/out.txt").exists());
    assert!(!s.lanes_dir().join("pushed").exists());
    // The pushed branch is still there, on both sides.
    git(&s.repo, &["rev-parse", "--verify", "lanes/pushed"]);
    git(&bare, &["rev-parse", "--verify", "lanes/pushed"]);

    // Text says which lane was kept and why.
    let out = gc(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("kept 1 lane(s) whose work is neither landed nor pushed: local"),
        "{text}"
    );
    // Once pushed, it may go.
    let out = clawpool(&s, &["push", "local"], &config, "");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&gc(&["--output-format", "json"]));
    assert_eq!(doc["lanes"][0]["lane"], "local", "{doc}");
    assert_eq!(doc["lanes"][0]["because"], "pushed", "{doc}");
}
