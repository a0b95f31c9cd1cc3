//! The workspace's layering, checked from its sources: inside each crate, the top-level modules
//! must not import each other in circles (`docs/architecture.md`), and the binary speaks the
//! lanes' control protocol only through its typed API (issue #27). Cargo already refuses
//! cycles between crates; this catches them between the modules of one crate, where the
//! compiler allows them.
//!
//! A module's imports are the `crate::NAME` paths in its files outside comments and test code
//! (`tests.rs`, a `tests/` folder, and what follows `#[cfg(test)]`), grouped imports
//! (`crate::{a, b::c}`) included.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose modules are checked (the test crate itself is a set of tests, not layers).
const CRATES: [&str; 8] = [
    "pty",
    "worktree",
    "lanes",
    "recovery",
    "agents",
    "lane",
    "pool",
    "supervisor",
];

#[test]
fn no_crate_imports_its_own_modules_in_circles() {
    let mut found = BTreeMap::new();
    for krate in CRATES {
        let graph = module_graph(&workspace().join(krate).join("src"));
        let cycles = cycles(&graph);
        if !cycles.is_empty() {
            found.insert(krate, cycles);
        }
    }
    assert!(
        found.is_empty(),
        "module cycles per crate (each the modules that reach each other): {found:?}"
    );
}

/// Issue #27: the binary and the pool are clients of the lane's control socket through its
/// typed API (`clawpool_lane::control`, `docs/control-protocol.md`) and nothing else: no file
/// of `supervisor/src` or `pool/src` that reaches a control socket writes a request line by hand, opens the
/// socket itself, or reads a reply as JSON by key.
#[test]
fn the_binary_speaks_the_control_protocol_only_through_its_types() {
    let mut clients = Vec::new();
    let mut found = Vec::new();
    let files = ["supervisor/src", "pool/src"].into_iter().flat_map(|src| {
        let src = workspace().join(src);
        rust_files(&src)
            .into_iter()
            .map(move |file| (src.clone(), file))
    });
    for (src, file) in files {
        let code = production_code(&std::fs::read_to_string(&file).expect("read"));
        if !(code.contains("control_socket(") || code.contains("control::")) {
            continue;
        }
        let name = file
            .strip_prefix(&src)
            .expect("below src")
            .display()
            .to_string();
        clients.push(name.clone());
        for raw in [
            // A reply read by key, as `serde_json::Value`.
            "reply[",
            "reply.get(",
            // A request line written by hand (the pre-versioned lines, or this version's).
            "{\"command\"",
            "{\"v\"",
            // The socket opened around the protocol's client (`control::ask`).
            "UnixStream",
            "control::request(",
        ] {
            if code.contains(raw) {
                found.push(format!("{name}: {raw}"));
            }
        }
    }
    // The commands that reach a lane's socket: operator commands, merge-forward and verify
    // and `recover` (the pool's `operator.rs`, `lane_checks.rs`, `recover.rs`), the
    // dashboard's screen.
    for client in [
        "operator.rs",
        "lane_checks.rs",
        "recover.rs",
        "ui/screen.rs",
    ] {
        assert!(
            clients.iter().any(|c| c == client),
            "{client} is no longer seen reaching a control socket: update this test ({clients:?})"
        );
    }
    assert!(
        found.is_empty(),
        "the control protocol spoken by hand: {found:?}"
    );
}

/// A file that indexes a control reply by key is caught (the check above is not vacuous).
#[test]
fn a_reply_read_by_key_is_caught() {
    let code = production_code(
        "let reply = control::ask(&socket, Request::Screen).await?;\n// reply[\"ok\"] in a comment\nif reply[\"ok\"] == true {}",
    );
    assert!(code.contains("control::") && code.contains("reply["));
    let commented = production_code("// reply[\"ok\"]\nlet x = control::ask;");
    assert!(!commented.contains("reply["));
}

/// The workspace's top folder (this crate is `tests/` in it).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_owned()
}

/// The top-level modules of the crate at `src` and the top-level modules each imports.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).expect("below src");
        let parts: Vec<String> = relative
            .with_extension("")
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let top = parts[0].clone();
        if top == "lib" || top == "main" || parts.iter().any(|p| p == "tests") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read source");
        let imports = crate_paths(&production_code(&text));
        graph.entry(top).or_default().extend(imports);
    }
    // `crate::Worker` is the module that the crate root re-exports it from.
    let reexports = root_reexports(src);
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (module, imports) in graph.iter_mut() {
        *imports = imports
            .iter()
            .map(|name| reexports.get(name).unwrap_or(name).clone())
            .filter(|m| modules.contains(m) && m != module)
            .collect();
    }
    graph
}

/// What the crate root re-exports (`pub use module::{Name, …}`), by name: the module.
fn root_reexports(src: &Path) -> BTreeMap<String, String> {
    let root = ["lib.rs", "main.rs"]
        .iter()
        .find_map(|name| std::fs::read_to_string(src.join(name)).ok())
        .unwrap_or_default();
    let code = production_code(&root);
    let mut names = BTreeMap::new();
    for statement in code.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.rsplit("::").next().unwrap_or_default();
            let name = name.rsplit(" as ").next().unwrap_or_default().trim();
            if !name.is_empty() {
                names.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    names
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The file without comment lines and without what follows its first `#[cfg(test)]`.
fn production_code(text: &str) -> String {
    let before_tests = text.split("#[cfg(test)]").next().unwrap_or_default();
    before_tests
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment after every `crate::` in `code`, grouped imports included.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            found.extend(group.split(',').filter_map(first_ident));
        } else if let Some(name) = first_ident(rest) {
            found.insert(name);
        }
    }
    found
}

fn first_ident(text: &str) -> Option<String> {
    let ident: String = text
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!ident.is_empty()).then_some(ident)
}

/// The strongly connected components of more than one module, each sorted (Tarjan's).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, module: &'a str) {
            let n = self.index.len();
            self.index.insert(module, n);
            self.low.insert(module, n);
            self.stack.push(module);
            for next in &self.graph[module] {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[module].min(self.low[next]);
                    self.low.insert(module, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[module].min(self.index[next]);
                    self.low.insert(module, low);
                }
            }
            if self.low[module] == self.index[module] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    component.push(top.to_owned());
                    if top == module {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for module in graph.keys() {
        if !walk.index.contains_key(module.as_str()) {
            walk.visit(module);
        }
    }
    walk.found.sort();
    walk.found
}

#[test]
fn a_cycle_through_a_grouped_import_is_found_and_comments_are_not_imports() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", "use crate::{b::Thing, c};"),
        ("b", "fn f() { crate::a::g() }"),
        ("c", "// crate::a in a comment is no import"),
    ]
    .into_iter()
    .map(|(module, code)| (module.to_owned(), crate_paths(&production_code(code))))
    .collect();
    assert_eq!(cycles(&graph), vec![vec!["a".to_owned(), "b".to_owned()]]);
}

/// What the binary's spawn, adopt and daemon files must not hold, each with why: starting,
/// the registry, the supervisor lock and adoption are the pool's (`clawpool_pool::start`,
/// `registry`, `supervisor_lock`, `adoption`; issue #27, "the pool as a library"). These
/// files turn flags and socket messages into the pool's requests and render its replies.
const POOL_LOGIC: [(&str, &str); 31] = [
    (
        "lane_registry(",
        "a lane's registry folder is read or written by the pool",
    ),
    (
        "RegistryEntry",
        "a lane's registry entry is built and written by the pool",
    ),
    (
        "write_entry(",
        "a lane's registry entry is written by the pool",
    ),
    (
        "prepare_lane_worktree",
        "worktrees are made by the pool's start",
    ),
    (
        "worktree_status(",
        "git: a lane's folder is checked by the pool's plan",
    ),
    ("git2::", "git is the pool's (through the worktree crate)"),
    (
        "Command::new(\"git\")",
        "git is the pool's (through the worktree crate)",
    ),
    (
        "SupervisorLock::hold",
        "a lane's own lock is taken by the pool's start and adoption",
    ),
    (
        "StateRecorder",
        "a lane's state is recorded by its engine, set up by the pool",
    ),
    (
        "LaneJob",
        "a lane's job is built by the pool's start and adoption",
    ),
    (
        "try_lock(",
        "the repository's supervisor lock is the pool's",
    ),
    ("fn adopt_lane", "adoption decisions are the pool's"),
    ("fn find_worker", "adoption decisions are the pool's"),
    ("fn never_started", "adoption decisions are the pool's"),
    ("fn record_lost", "adoption decisions are the pool's"),
    (
        "fn earlier_run",
        "which lanes an earlier run left is the pool's",
    ),
    (
        "fn start_all",
        "starting lanes with bounded concurrency is the pool's",
    ),
    ("fn plan(", "planning a packet's lanes is the pool's"),
    (
        "operator_verdict(",
        "an operator command is carried to its lane by the pool's operator",
    ),
    (
        "control::ask(",
        "merge-forward and verify reach a lane's supervisor through the pool's lane_checks",
    ),
    (
        "LaneChecks",
        "a lane's checks are run (by its supervisor or directly) by the pool's lane_checks",
    ),
    (
        "Start::Resume",
        "a follow-up to a lane that ended is driven by the pool",
    ),
    (
        "fn ended_lane",
        "which ended lane takes a follow-up is the pool's",
    ),
    (
        "fn find_lane",
        "a lane argument finds its lane through the pool's lane_lookup",
    ),
    (
        "fn registered(",
        "a lane argument finds its lane through the pool's lane_lookup",
    ),
    (
        "push(\"send\")",
        "the MCP server sends to a lane through the pool in-process, not a child `clawpool send`",
    ),
    (
        "\"--detach\"",
        "the MCP server spawns through the pool in-process, not a child `clawpool spawn --detach`",
    ),
    (
        "GrantStore",
        "an operator's yes is kept as a grant by the pool's remember",
    ),
    ("GrantKey", "a kept grant is signed by the pool's remember"),
    (
        "fn by_hand",
        "which recipe `recover` runs by hand is the pool's recover",
    ),
    (
        "tokio::process::Command",
        "the MCP server's operations are the pool's requests, never a child `clawpool`",
    ),
];

/// The binary's files that issue #27 emptied of pool logic (`supervisor/src/`, a folder
/// meaning every file in it). The operator commands' rendering is `operator_cmd.rs`
/// (`run_lane.rs` keeps `clawpool run`, one lane outside any pool, which builds its own lane
/// job); `follow_up.rs` moved whole. `board.rs` and `gc.rs` are also held to
/// [`BOARD_GC_LOGIC`].
const POOL_CLIENTS: [&str; 11] = [
    "spawn.rs",
    "daemon",
    "loaded.rs",
    "known_repos.rs",
    "checks.rs",
    "operator_cmd.rs",
    "mcp/pool_api.rs",
    "permissions_cmd.rs",
    "policy_cmd.rs",
    "board.rs",
    "gc.rs",
];

/// What moved from the binary's board and gc into the pool (`clawpool_pool::board`, `gc`),
/// each with why: the files that render boards and gc verdicts must not work them out again.
const BOARD_GC_LOGIC: [(&str, &str); 17] = [
    (
        "BranchesNow",
        "a lane's branch against its base now is worked out by the pool's board",
    ),
    (
        "branch_record(",
        "an ended lane's kept branch record is read and written by the pool's board",
    ),
    (
        "with_ages(",
        "a board row's ages and liveness are the pool's board",
    ),
    ("fn lane_row(", "a board row is made by the pool's board"),
    ("fn collect(", "a board's rows are collected by the pool"),
    (
        "fn repository_cost(",
        "what a repository's lanes cost together is the pool's board",
    ),
    (
        "registered_names(",
        "which lanes are registered is read by the pool",
    ),
    (
        "remove_lane_worktree",
        "git: a lane's worktree is removed by the pool's gc",
    ),
    (
        "pushed_to(",
        "git: whether a branch is pushed is checked by the pool's gc",
    ),
    (
        "worktree_status(",
        "git: a lane's worktree is read by the pool",
    ),
    (
        "merge-base",
        "git: whether work is landed is checked by the pool's gc",
    ),
    (
        "Command::new(\"git\")",
        "git is the pool's (through the worktree crate)",
    ),
    (
        "remove_dir_all(",
        "a lane's registry folder is removed by the pool's gc",
    ),
    (
        ".removed(",
        "gc's removed marker is written by the pool's gc",
    ),
    (
        "SupervisorLock::hold",
        "a lane's lock is taken by the pool's gc while it judges the lane",
    ),
    (
        "kill_server(",
        "an idle tmux server is ended by the pool's gc",
    ),
    (
        "known_repos::remove",
        "the index of repositories is updated by the pool's gc",
    ),
];

/// The binary's files that render the board and gc (`supervisor/src/`).
const BOARD_GC_CLIENTS: [&str; 2] = ["board.rs", "gc.rs"];

/// The places in `code` (production code of `file`) that hold pool logic.
fn pool_logic_in(file: &str, code: &str) -> Vec<String> {
    POOL_LOGIC
        .iter()
        .filter(|(pattern, _)| code.contains(pattern))
        .map(|(pattern, why)| format!("{file}: `{pattern}` ({why})"))
        .collect()
}

/// Issue #27: the binary's spawn, adopt and daemon hold no pool logic — no registry writes,
/// no adoption decisions, no git — only the conversion of their input into the pool's
/// requests and the rendering of what it reports.
#[test]
fn the_binary_holds_no_pool_logic_in_spawn_adopt_and_the_daemon() {
    let src = workspace().join("supervisor/src");
    let mut found = Vec::new();
    for client in POOL_CLIENTS {
        let path = src.join(client);
        assert!(path.exists(), "{client} is gone: update this test");
        let files = if path.is_dir() {
            rust_files(&path)
        } else {
            vec![path]
        };
        for file in files {
            let code = production_code(&std::fs::read_to_string(&file).expect("read"));
            let name = file.strip_prefix(&src).expect("below src").display();
            found.extend(pool_logic_in(&name.to_string(), &code));
        }
    }
    assert!(found.is_empty(), "pool logic in the binary: {found:#?}");
}

/// Issue #27: the board and gc are the pool's (`clawpool_pool::board`, `gc`); the binary's
/// `board.rs` and `gc.rs` turn flags into requests and render the typed rows and verdicts —
/// no git, no branch records, no removal, no liveness of their own.
#[test]
fn the_binary_holds_no_board_or_gc_logic() {
    let src = workspace().join("supervisor/src");
    let mut found = Vec::new();
    for client in BOARD_GC_CLIENTS {
        let path = src.join(client);
        assert!(path.is_file(), "{client} is gone: update this test");
        let code = production_code(&std::fs::read_to_string(&path).expect("read"));
        found.extend(
            BOARD_GC_LOGIC
                .iter()
                .filter(|(pattern, _)| code.contains(pattern))
                .map(|(pattern, why)| format!("{client}: `{pattern}` ({why})")),
        );
    }
    assert!(
        found.is_empty(),
        "board or gc logic in the binary: {found:#?}"
    );
}

/// A registry write or an adoption decision in one of those files is caught (the check above
/// is not vacuous); one in a comment is not.
#[test]
fn pool_logic_in_the_binary_is_caught() {
    let code = production_code(
        "// lane_registry(&repo, name) in a comment\nlet entry = lane_registry(&repo, name).entry();\nasync fn adopt_lane() {}",
    );
    let found = pool_logic_in("spawn.rs", &code);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(pool_logic_in("spawn.rs", &production_code("// RegistryEntry {")).is_empty());
}

/// What may start a child `clawpool` in the dashboard (`supervisor/src/ui/`), each a top-level
/// function of its file: `attach` takes over the terminal (`clawpool attach`). A follow-up is
/// handed to the repository's daemon, not to a child.
const UI_CHILDREN: [(&str, &str); 1] = [("mod.rs", "attach")];

/// How a child process is started.
const CHILD_PROCESS: [&str; 3] = [
    "tokio::process::Command",
    "std::process::Command",
    "current_exe(",
];

/// `code` without the top-level function `name` (its signature to the `}` that closes it at
/// the start of a line).
fn without_fn(code: &str, name: &str) -> String {
    let Some(at) = code.find(&format!("fn {name}(")) else {
        return code.to_owned();
    };
    let start = code[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = code[at..].find("\n}").map_or(code.len(), |i| at + i + 2);
    format!("{}{}", &code[..start], &code[end..])
}

/// The places in `code` that read a JSON value by a key written in the code: `doc["key"]`,
/// `value.get("key")`, `value.pointer(…)` (an array literal, `["a", "b"]`, is none).
fn value_read_by_key(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("[\"") {
        let before = code[..at].chars().next_back();
        let after = &code[at..];
        let written = after
            .find("\"]")
            .is_some_and(|end| after[end + 2..].trim_start().starts_with("= "));
        if !written
            && before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ']' || c == ')')
        {
            let line_start = code[..at].rfind('\n').map_or(0, |i| i + 1);
            let line_end = code[at..].find('\n').map_or(code.len(), |i| at + i);
            found.push(code[line_start..line_end].trim().to_owned());
        }
    }
    for raw in [".get(\"", ".pointer("] {
        if code.contains(raw) {
            found.push(raw.to_owned());
        }
    }
    found
}

/// What in the dashboard's file `file` (its production `code`) is not the pool's client it
/// must be: a child process outside [`UI_CHILDREN`], a JSON value read by key.
fn ui_layering_in(file: &str, code: &str) -> Vec<String> {
    let mut code = code.to_owned();
    for (allowed_file, function) in UI_CHILDREN {
        if file == allowed_file {
            code = without_fn(&code, function);
        }
    }
    let mut found: Vec<String> = CHILD_PROCESS
        .iter()
        .filter(|raw| code.contains(*raw))
        .map(|raw| format!("{file}: `{raw}` (an operator key is the pool's request, in-process)"))
        .collect();
    found.extend(
        value_read_by_key(&code)
            .into_iter()
            .map(|read| format!("{file}: `{read}` (rows and replies are the pool's types)")),
    );
    found
}

/// Issue #27: `clawpool ui` is a client of the pool library like the CLI and the MCP server:
/// its operator keys are the pool's requests made in-process (`Pool::handle`), never a child
/// `clawpool COMMAND` whose output it parses, and its lane rows are the pool's typed board
/// rows, never JSON read by key. Only `attach` starts a child.
#[test]
fn the_dashboard_is_a_client_of_the_pool_in_process() {
    let src = workspace().join("supervisor/src/ui");
    let mut found = Vec::new();
    for file in rust_files(&src) {
        let code = production_code(&std::fs::read_to_string(&file).expect("read"));
        let name = file
            .strip_prefix(&src)
            .expect("below src")
            .display()
            .to_string();
        found.extend(ui_layering_in(&name, &code));
    }
    assert!(
        found.is_empty(),
        "the dashboard not a client of the pool: {found:#?}"
    );
    let actions = production_code(&std::fs::read_to_string(src.join("actions.rs")).expect("read"));
    assert!(
        actions.contains("Pool::reading(") && actions.contains(".handle("),
        "ui/actions.rs no longer makes the pool's requests: update this test"
    );
    for (file, function) in UI_CHILDREN {
        let code = production_code(&std::fs::read_to_string(src.join(file)).expect("read"));
        assert!(
            code.contains(&format!("fn {function}(")),
            "ui/{file} has no `{function}` any more: update this test"
        );
    }
}

/// A child `clawpool` outside `attach` and a row read by key are caught; the same inside
/// `attach`, an array literal, and a comment are not.
#[test]
fn a_dashboard_running_the_cli_or_reading_rows_by_key_is_caught() {
    let code = production_code(
        "fn start() {\n    let program = std::env::current_exe();\n    let dir = lane[\"worktree\"].as_str();\n}\n",
    );
    assert_eq!(ui_layering_in("mod.rs", &code).len(), 2, "{code}");
    let allowed = production_code(
        "async fn attach(app: &mut App) {\n    tokio::process::Command::new(std::env::current_exe()?);\n}\nconst LEVELS: [&str; 1] = [\"targeted\"];\n// doc[\"reason\"]\n",
    );
    assert!(ui_layering_in("mod.rs", &allowed).is_empty());
    assert_eq!(ui_layering_in("view.rs", &allowed).len(), 2);
}

/// The binary renders the pool's typed replies and the lanes' typed documents: no state
/// document, event or row is read back from JSON by key anywhere in it (`clawpool board`'s
/// table and the dashboard share one set of typed cells, `supervisor/src/cells.rs`, so the two
/// never disagree). Building a document to print (`doc["kind"] = …`) is not reading one.
#[test]
fn the_binary_reads_no_document_by_key() {
    let mut found = Vec::new();
    for file in rust_files(&workspace().join("supervisor/src")) {
        let code = production_code(&std::fs::read_to_string(&file).expect("read"));
        found.extend(
            value_read_by_key(&code)
                .into_iter()
                .map(|line| format!("{}: {line}", file.display())),
        );
    }
    assert!(found.is_empty(), "documents read by key: {found:#?}");
}
