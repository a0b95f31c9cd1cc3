#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use super::names::slug;
use super::paths::normalize;
use super::*;

fn ctx() -> PacketContext {
    PacketContext {
        repo_root: PathBuf::from("/srv/repo"),
        worktree_root: Some(PathBuf::from("/srv/worktrees")),
        default_agent: Some("claude".to_owned()),
    }
}

fn ok(text: &str) -> Batch {
    match parse_packet(text, &ctx()) {
        Ok(batch) => batch,
        Err(e) => panic!("expected a valid packet, got:\n{e}"),
    }
}

fn errs(text: &str) -> Vec<(String, String)> {
    match parse_packet(text, &ctx()) {
        Ok(batch) => panic!("expected errors, got {batch:#?}"),
        Err(e) => e.0.into_iter().map(|e| (e.path, e.message)).collect(),
    }
}

/// The error at `path` whose message contains `needle`, or a panic listing them all.
fn has(errors: &[(String, String)], path: &str, needle: &str) {
    assert!(
        errors.iter().any(|(p, m)| p == path && m.contains(needle)),
        "no error at {path} containing {needle:?}; errors: {errors:#?}"
    );
}

const CLAW_PACKET: &str = r#"{
    "objective": "Implement typed task packet format",
    "scope": "module",
    "scope_path": "runtime/task system",
    "repo": "claw-code-parity",
    "worktree": "/srv/worktrees/wt-1",
    "branch_policy": "origin/main only",
    "acceptance_tests": ["cargo build --workspace", "cargo test --workspace"],
    "acceptance_criteria": ["packet can launch without pane scraping"],
    "resources": [{"kind": "file", "value": "rust/crates/runtime/src/task_packet.rs"}],
    "model": "gpt-5.5",
    "provider": "openai",
    "permission_profile": "workspace-write",
    "commit_policy": "single verified commit",
    "reporting_contract": "print build result, test result, commit sha",
    "reporting_targets": ["leader"],
    "escalation_policy": "stop only on destructive ambiguity",
    "recovery_policy": "retry once then escalate",
    "verification_plan": ["cargo test -p runtime task_packet"]
}"#;

#[test]
fn single_claw_code_packet() {
    let batch = ok(CLAW_PACKET);
    assert_eq!(batch.form, PacketForm::Single);
    assert_eq!(batch.lanes.len(), 1);
    let lane = &batch.lanes[0];
    assert_eq!(lane.name, "implement-typed-task-packet-format");
    assert!(lane.name_derived);
    assert_eq!(lane.source, "$");
    assert_eq!(lane.agent.as_deref(), Some("claude"));
    assert_eq!(lane.scope, Some(TaskScope::Module));
    assert_eq!(lane.scope_path, Some(PathBuf::from("runtime/task system")));
    assert_eq!(lane.worktree, Some(PathBuf::from("/srv/worktrees/wt-1")));
    assert_eq!(lane.repo.as_deref(), Some("claw-code-parity"));
    assert_eq!(lane.acceptance_tests.len(), 2);
    assert_eq!(lane.resources[0].kind, "file");
    assert_eq!(lane.model.as_deref(), Some("gpt-5.5"));
    assert_eq!(lane.reporting_targets, ["leader"]);
    assert_eq!(
        lane.recovery_policy.as_deref(),
        Some("retry once then escalate")
    );
}

#[test]
fn claw_code_prompt_contains_objective_tests_and_policies() {
    let lane = &ok(CLAW_PACKET).lanes[0];
    let p = &lane.prompt;
    assert!(
        p.starts_with("Implement typed task packet format\n\n"),
        "{p}"
    );
    for needle in [
        "Scope: module (runtime/task system)",
        "Repository: claw-code-parity",
        "Branch policy: origin/main only",
        "- packet can launch without pane scraping",
        "Acceptance tests (each must pass before you finish):\n- cargo build --workspace\n- cargo test --workspace",
        "- cargo test -p runtime task_packet",
        "- file: rust/crates/runtime/src/task_packet.rs",
        "Commit policy: single verified commit",
        "Reporting contract: print build result, test result, commit sha",
        "Report to: leader",
        "Escalation policy: stop only on destructive ambiguity",
        "Recovery policy: retry once then escalate",
    ] {
        assert!(p.contains(needle), "prompt lacks {needle:?}:\n{p}");
    }
    // Typed into a terminal later: no control characters but newlines.
    assert!(!p.chars().any(|c| c.is_control() && c != '\n'));
}

#[test]
fn legacy_minimal_claw_code_packet() {
    let batch = ok(r#"{
        "objective": "Legacy packet",
        "scope": "workspace",
        "repo": "claw-code",
        "branch_policy": "origin/main only",
        "acceptance_tests": ["cargo test"],
        "commit_policy": "single commit",
        "reporting_contract": "report sha",
        "escalation_policy": "ask leader"
    }"#);
    let lane = &batch.lanes[0];
    assert_eq!(lane.name, "legacy-packet");
    assert!(lane.prompt.contains("Scope: workspace"));
    assert!(lane.prompt.contains("- cargo test"));
}

#[test]
fn array_of_packets() {
    let batch = ok(r#"[
        {"objective": "Fix the login bug", "acceptance_tests": ["cargo test -p auth"]},
        {"prompt": "Write the changelog", "agent": "codex", "name": "changelog"},
        {"objective": "Fix the login bug"}
    ]"#);
    assert_eq!(batch.form, PacketForm::Array);
    let names: Vec<&str> = batch.lanes.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        ["fix-the-login-bug", "changelog", "fix-the-login-bug-2"]
    );
    assert_eq!(batch.lanes[1].prompt, "Write the changelog");
    assert_eq!(batch.lanes[1].agent.as_deref(), Some("codex"));
    assert!(!batch.lanes[1].name_derived);
    assert_eq!(batch.lanes[2].source, "$[2]");
}

#[test]
fn batch_with_defaults() {
    let batch = ok(r#"{
        "defaults": {
            "agent": "codex",
            "base": "main",
            "trusted_roots": ["."],
            "acceptance_tests": ["cargo test"],
            "commit_policy": "one commit"
        },
        "lanes": [
            {"name": "api", "prompt": "Add the endpoint"},
            {"name": "docs", "prompt": "Document it", "agent": "claude",
             "acceptance_tests": ["mdbook build"], "base": "release/1.2",
             "trusted_roots": ["/srv/worktrees/docs"]},
            {"name": "cli", "prompt": "Add the flag", "acceptance_tests": [],
             "agent": null, "worktree": ".clawpool/worktrees/cli"}
        ]
    }"#);
    assert_eq!(batch.form, PacketForm::Batch);
    let [api, docs, cli] = &batch.lanes[..] else {
        panic!("three lanes")
    };
    // Inherited.
    assert_eq!(api.agent.as_deref(), Some("codex"));
    assert_eq!(api.base.as_deref(), Some("main"));
    assert_eq!(api.trusted_roots, [PathBuf::from("/srv/repo")]);
    assert_eq!(api.acceptance_tests, ["cargo test"]);
    assert_eq!(api.commit_policy.as_deref(), Some("one commit"));
    assert_eq!(api.source, "$.lanes[0]");
    // Scalars override, lists replace (not append).
    assert_eq!(docs.agent.as_deref(), Some("claude"));
    assert_eq!(docs.base.as_deref(), Some("release/1.2"));
    assert_eq!(docs.acceptance_tests, ["mdbook build"]);
    assert_eq!(docs.trusted_roots, [PathBuf::from("/srv/worktrees/docs")]);
    // `[]` empties a list; `null` drops the default, and the context's default applies.
    assert!(cli.acceptance_tests.is_empty());
    assert_eq!(cli.agent.as_deref(), Some("claude"));
    assert_eq!(
        cli.worktree,
        Some(PathBuf::from("/srv/repo/.clawpool/worktrees/cli"))
    );
    // A prompt is sent as written, whatever else the lane sets.
    assert_eq!(api.prompt, "Add the endpoint");
}

#[test]
fn every_error_at_once_with_its_path() {
    let errors = errs(
        r#"{
        "defaults": {"scope": "everything", "name": "x", "agent": 7},
        "lanes": [
            {"name": "Bad Name", "prompt": "a"},
            {"name": "dup", "prompt": "b"},
            {"name": "dup", "prompt": "c"},
            {"name": "nothing-to-do"},
            {"name": "escape", "prompt": "d", "worktree": "../../etc/wt"},
            {"name": "abs", "prompt": "e", "trusted_roots": ["/srv/repo/ok", "/home/me"]},
            {"name": "typo", "prompt": "f", "acceptance_test": ["cargo test"]},
            {"name": "types", "prompt": ["g"], "acceptance_tests": "cargo test",
             "base": 3, "resources": [{"kind": "file"}]},
            "not a lane"
        ],
        "extra": true
    }"#,
    );
    has(&errors, "$.defaults.scope", "invalid scope \"everything\"");
    has(&errors, "$.defaults.name", "cannot be set in `defaults`");
    has(
        &errors,
        "$.defaults.agent",
        "expected a string, found a number",
    );
    has(&errors, "$.lanes[0].name", "invalid lane name \"Bad Name\"");
    has(
        &errors,
        "$.lanes[2].name",
        "duplicate lane name `dup` (already used by $.lanes[1])",
    );
    has(
        &errors,
        "$.lanes[3]",
        "missing field `prompt` or `objective`",
    );
    has(
        &errors,
        "$.lanes[4].worktree",
        "escapes the repository `/srv/repo` and the worktree root `/srv/worktrees` through `..` (it resolves to",
    );
    has(
        &errors,
        "$.lanes[5].trusted_roots[1]",
        "`/home/me` is an absolute path outside",
    );
    has(
        &errors,
        "$.lanes[6].acceptance_test",
        "unknown field `acceptance_test`; did you mean `acceptance_tests`?",
    );
    has(
        &errors,
        "$.lanes[7].prompt",
        "expected a string, found an array",
    );
    has(
        &errors,
        "$.lanes[7].acceptance_tests",
        "expected an array, found a string",
    );
    has(
        &errors,
        "$.lanes[7].base",
        "expected a string, found a number",
    );
    has(&errors, "$.lanes[7].resources[0]", "missing field `value`");
    has(
        &errors,
        "$.lanes[8]",
        "expected a lane (an object), found a string",
    );
    has(&errors, "$.extra", "unknown field `extra`");
    // Nothing more: a field already reported does not cause a second error (e.g. the bad
    // prompt of lanes[7] is not also "missing").
    assert_eq!(errors.len(), 15, "{errors:#?}");
}

#[test]
fn errors_display_lists_all() {
    let e = parse_packet(r#"[{"name": "A"}, {"prompt": 1}]"#, &ctx()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("invalid task packet (3 problems):"),
        "{text}"
    );
    assert!(text.contains("\n  $[0].name: invalid lane name"), "{text}");
    assert!(
        text.contains("\n  $[0]: missing field `prompt` or `objective`"),
        "{text}"
    );
    assert!(
        text.contains("\n  $[1].prompt: expected a string, found a number"),
        "{text}"
    );
}

#[test]
fn json_syntax_error_has_line_and_column() {
    let errors = errs("{\n  \"objective\": \"x\",\n  oops\n}");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, "$");
    assert!(
        errors[0]
            .1
            .starts_with("invalid JSON at line 3, column 3: key must be a string"),
        "{errors:?}"
    );
}

#[test]
fn duplicate_json_key_is_an_error() {
    let errors = errs("{\"objective\": \"a\",\n \"objective\": \"b\"}");
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].1.contains("duplicate key \"objective\""),
        "{errors:?}"
    );
    assert!(errors[0].1.contains("line 2"), "{errors:?}");
}

#[test]
fn wrong_top_level_and_empty_forms() {
    has(&errs("42"), "$", "expected a task packet");
    has(&errs("[]"), "$", "the array has no packets");
    has(
        &errs(r#"{"lanes": []}"#),
        "$.lanes",
        "the batch has no lanes",
    );
    has(&errs(r#"{"defaults": {}}"#), "$", "missing field `lanes`");
    has(
        &errs(r#"{"lanes": {}}"#),
        "$.lanes",
        "expected an array of lanes",
    );
}

#[test]
fn claw_code_value_rules() {
    let errors = errs(
        r#"[
        {"objective": "a", "scope": "module"},
        {"objective": "b", "scope": "single-file"},
        {"objective": " "},
        {"objective": "c", "acceptance_tests": ["ok", " "], "model": ""},
        {"objective": "d", "prompt": "e"},
        {"objective": "f\u001b[2J"},
        {"objective": "g", "resources": [{"kind": "dir", "value": "../x", "note": 1}]}
    ]"#,
    );
    has(
        &errors,
        "$[0]",
        "missing field `scope_path`: it is required when `scope` is `module`",
    );
    has(&errors, "$[1].scope", "did you mean `single_file`?");
    has(&errors, "$[2].objective", "must not be empty");
    has(&errors, "$[3].acceptance_tests[1]", "must not be empty");
    has(&errors, "$[3].model", "must not be empty");
    has(&errors, "$[4]", "not both");
    has(
        &errors,
        "$[5].objective",
        "control character (\\u{1b}) at character 1",
    );
    has(&errors, "$[6].resources[0].note", "unknown field `note`");
    has(
        &errors,
        "$[6].resources[0].value",
        "escapes the repository `/srv/repo` and the worktree root `/srv/worktrees` through `..` (it resolves to `/srv/x`)",
    );
    assert_eq!(errors.len(), 9, "{errors:#?}");
}

#[test]
fn path_rules() {
    let errors = errs(
        r#"[
        {"name": "a", "prompt": "p", "worktree": "/srv/repo"},
        {"name": "b", "prompt": "p", "worktree": "/srv/worktrees"},
        {"name": "c", "prompt": "p", "scope_path": "/srv/worktrees/x"},
        {"name": "d", "prompt": "p", "trusted_roots": ["~/src"]},
        {"name": "e", "prompt": "p", "repo": "/srv/other"},
        {"name": "f", "prompt": "p", "scope_path": ""},
        {"name": "g", "prompt": "p", "trusted_roots": ["/srv/repo-evil"]}
    ]"#,
    );
    has(&errors, "$[0].worktree", "is a root itself");
    has(&errors, "$[1].worktree", "is a root itself");
    has(
        &errors,
        "$[2].scope_path",
        "outside the repository `/srv/repo`; a scope is a part of the repository",
    );
    has(&errors, "$[3].trusted_roots[0]", "`~` is not expanded");
    has(
        &errors,
        "$[4].repo",
        "`/srv/other` is an absolute path outside",
    );
    has(&errors, "$[5].scope_path", "the path is empty");
    has(&errors, "$[6].trusted_roots[0]", "outside");
    assert_eq!(errors.len(), 7, "{errors:#?}");

    // Inside either root, `..` that stays inside, and `..` from the repository into the
    // worktree root are all fine.
    let batch = ok(r#"[
        {"name": "a", "prompt": "p", "worktree": "../worktrees/a",
         "scope_path": "src/../lib/./x.rs", "trusted_roots": ["/srv/worktrees", "sub/.."],
         "repo": "/srv/repo", "resources": [{"kind": "service", "value": "/anything"}]},
        {"name": "b", "prompt": "p", "worktree": "/srv/worktrees/b", "scope_path": "."}
    ]"#);
    let a = &batch.lanes[0];
    assert_eq!(a.worktree, Some(PathBuf::from("/srv/worktrees/a")));
    assert_eq!(a.scope_path, Some(PathBuf::from("lib/x.rs")));
    assert_eq!(
        a.trusted_roots,
        [PathBuf::from("/srv/worktrees"), PathBuf::from("/srv/repo")]
    );
    assert_eq!(batch.lanes[1].scope_path, Some(PathBuf::from(".")));
}

#[test]
fn without_worktree_root_only_the_repository_counts() {
    let ctx = PacketContext::new("/srv/repo");
    let e = parse_packet(r#"{"prompt": "p", "worktree": "/srv/worktrees/a"}"#, &ctx).unwrap_err();
    assert_eq!(e.0.len(), 1);
    assert_eq!(e.0[0].path, "$.worktree");
    assert!(
        e.0[0]
            .message
            .contains("outside the repository `/srv/repo`")
    );
    assert!(!e.0[0].message.contains("worktree root"));
    let batch = parse_packet(r#"{"prompt": "p"}"#, &ctx).unwrap();
    assert_eq!(batch.lanes[0].agent, None);
}

#[test]
fn duplicate_branches_and_overlapping_worktrees() {
    let errors = errs(
        r#"[
        {"name": "a", "prompt": "p", "branch": "lane/a", "worktree": "/srv/worktrees/a"},
        {"name": "b", "prompt": "p", "branch": "lane/a", "worktree": "/srv/worktrees/a/inner"},
        {"name": "c", "prompt": "p", "branch": "bad..name", "worktree": "/srv/worktrees/a"}
    ]"#,
    );
    has(
        &errors,
        "$[1].branch",
        "duplicate branch `lane/a` (already used by $[0])",
    );
    has(&errors, "$[1].worktree", "is inside the worktree of $[0]");
    has(&errors, "$[2].branch", "invalid branch name \"bad..name\"");
    has(
        &errors,
        "$[2].worktree",
        "is the same as the worktree of $[0]",
    );
    assert_eq!(errors.len(), 4, "{errors:#?}");
}

#[test]
fn derived_names_are_valid_and_unique() {
    let batch = ok(r#"[
        {"name": "fix-it", "prompt": "anything"},
        {"objective": "Fix it!"},
        {"objective": "Fix it"},
        {"objective": "日本語だけ"},
        {"prompt": "\n\n  Rewrite the whole storage layer of the application to use SQLite instead"},
        {"objective": "lane 5"},
        {"objective": "!!!"}
    ]"#);
    let names: Vec<&str> = batch.lanes.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fix-it",
            "fix-it-2",
            "fix-it-3",
            "lane-4",
            "rewrite-the-whole-storage-layer-of-the",
            "lane-5",
            "lane-7"
        ]
    );
    for lane in &batch.lanes {
        assert!(is_valid_lane_name(&lane.name), "{}", lane.name);
    }
}

#[test]
fn slugs() {
    assert_eq!(slug("Fix the Login bug"), "fix-the-login-bug");
    assert_eq!(slug("  --Hello__World--  "), "hello-world");
    assert_eq!(slug("v1.2: bump"), "v1-2-bump");
    assert_eq!(slug("ünïcode"), "n-code");
    assert_eq!(slug(""), "");
    let long = slug(&"abcdefghij ".repeat(10));
    assert!(long.len() <= 40 && !long.ends_with('-'), "{long}");
    assert_eq!(slug(&"x".repeat(100)).len(), 40);
}

#[test]
fn lane_name_rule() {
    for good in ["a", "0", "a.b_c-d", &"a".repeat(63)] {
        assert!(is_valid_lane_name(good), "{good}");
    }
    for bad in [
        "",
        "A",
        "-a",
        ".a",
        "_a",
        "a b",
        "a/b",
        "é",
        &"a".repeat(64),
    ] {
        assert!(!is_valid_lane_name(bad), "{bad}");
    }
}

#[test]
fn normalisation() {
    assert_eq!(
        normalize(Path::new("/a/b/../c/./d")),
        PathBuf::from("/a/c/d")
    );
    assert_eq!(normalize(Path::new("/../a")), PathBuf::from("/a"));
    assert_eq!(normalize(Path::new("../../a")), PathBuf::from("../../a"));
    assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
}

#[test]
fn odd_keys_get_bracketed_paths() {
    let errors = errs(r#"{"prompt": "p", "my field": 1}"#);
    has(&errors, "$[\"my field\"]", "unknown field `my field`");
}

#[test]
fn batch_serialises_for_json_output() {
    let batch = ok(CLAW_PACKET);
    let json = serde_json::to_value(&batch).unwrap();
    assert_eq!(json["form"], "single");
    assert_eq!(json["lanes"][0]["scope"], "module");
    assert_eq!(json["lanes"][0]["worktree"], "/srv/worktrees/wt-1");
    assert!(json["lanes"][0].get("base").is_none());
    let errors = parse_packet("[1]", &ctx()).unwrap_err();
    assert_eq!(
        serde_json::to_value(&errors).unwrap(),
        serde_json::json!([{"path": "$[0]", "message": "expected a packet (an object), found a number"}])
    );
}

#[test]
fn names_must_make_a_default_branch() {
    let errors = errs(r#"[{"name": "a..b", "prompt": "p"}, {"name": "c.lock", "prompt": "p"}]"#);
    has(&errors, "$[0].name", "default branch `lanes/a..b`");
    has(&errors, "$[1].name", "default branch `lanes/c.lock`");
    assert_eq!(errors.len(), 2, "{errors:#?}");
    let batch = ok(r#"{"name": "a..b", "prompt": "p", "branch": "work/ab"}"#);
    assert_eq!(batch.lanes[0].branch.as_deref(), Some("work/ab"));
}

const DOC: &str = include_str!("../../../docs/task-packet.md");

#[test]
fn doc_lists_every_field() {
    for name in super::schema::field_names() {
        assert!(
            DOC.contains(&format!("| `{name}` |")),
            "docs/task-packet.md has no table row for `{name}`"
        );
    }
}

#[test]
fn doc_examples_are_valid() {
    let examples = &DOC[DOC.find("## Examples").unwrap()..];
    let blocks: Vec<&str> = examples
        .split("```json\n")
        .skip(1)
        .map(|b| &b[..b.find("```").unwrap()])
        .collect();
    assert_eq!(blocks.len(), 3);
    let forms: Vec<PacketForm> = blocks.iter().map(|b| ok(b).form).collect();
    assert_eq!(
        forms,
        [PacketForm::Single, PacketForm::Array, PacketForm::Batch]
    );
    let names: Vec<String> = ok(blocks[1]).lanes.into_iter().map(|l| l.name).collect();
    assert_eq!(
        names,
        ["fix-the-login-bug", "changelog", "fix-the-login-bug-2"]
    );
    assert_eq!(
        ok(blocks[0]).lanes[0].name,
        "implement-typed-task-packet-format"
    );
    let batch = ok(blocks[2]);
    assert_eq!(batch.lanes[0].agent.as_deref(), Some("codex"));
    assert!(batch.lanes[1].prompt.contains("- mdbook build docs"));
    assert!(!batch.lanes[1].prompt.contains("cargo test --workspace"));
    assert_eq!(batch.lanes[2].agent.as_deref(), Some("claude"));
    assert!(batch.lanes[2].acceptance_tests.is_empty());
}

#[test]
fn doc_prompt_block_matches() {
    let start = DOC.find("## The prompt built from an objective").unwrap();
    let section = &DOC[start..];
    let block = section.split("```text\n").nth(1).unwrap();
    let block = &block[..block.find("```").unwrap()];
    let built = &ok(CLAW_PACKET).lanes[0].prompt;
    assert_eq!(block.trim_end(), built);
}

#[test]
fn merge_and_verification_fields() {
    let batch = ok(r#"{
        "defaults": {"merge_policy": "rebase", "verify_timeout_secs": 30,
                     "acceptance_tests": ["make check"]},
        "lanes": [
            {"name": "a", "prompt": "x", "verify_on_finish": "workspace",
             "verify_commands": {"targeted": ["cargo test -p a"], "merge_ready": ["make ci"]}},
            {"name": "b", "prompt": "y", "merge_policy": "block"}
        ]
    }"#);
    let (a, b) = (&batch.lanes[0], &batch.lanes[1]);
    assert_eq!(a.merge_policy.as_deref(), Some("rebase"));
    assert_eq!(b.merge_policy.as_deref(), Some("block"));
    assert_eq!(a.verify_timeout_secs, Some(30));
    assert_eq!(a.verify_on_finish.as_deref(), Some("workspace"));
    assert_eq!(a.verify_commands["targeted"], ["cargo test -p a"]);
    assert_eq!(a.verify_commands.len(), 2);
    assert!(b.verify_commands.is_empty());

    let errors = errs(
        r#"{"lanes": [{"name": "c", "prompt": "z", "merge_policy": "squash",
            "verify_timeout_secs": 0, "verify_on_finish": "all",
            "verify_commands": {"everything": ["x"], "package": "cargo test"}}]}"#,
    );
    has(
        &errors,
        "$.lanes[0].merge_policy",
        "expected one of `merge_forward`",
    );
    has(&errors, "$.lanes[0].verify_timeout_secs", "at least 1");
    let profile_errors =
        errs(r#"{"lanes": [{"name": "d", "prompt": "z", "permission_profile": "yolo"}]}"#);
    has(
        &profile_errors,
        "$.lanes[0].permission_profile",
        "expected one of `read-only`, `workspace-write`, `danger-full-access`",
    );
    has(
        &errors,
        "$.lanes[0].verify_on_finish",
        "invalid value \"all\"",
    );
    has(
        &errors,
        "$.lanes[0].verify_commands.everything",
        "unknown level `everything`",
    );
    has(
        &errors,
        "$.lanes[0].verify_commands.package",
        "expected an array",
    );
}

#[test]
fn check_packet_keeps_only_the_lanes_no_problem_is_about() {
    let names = |text: &str| -> (Vec<String>, usize) {
        let checked = check_packet(text, &ctx());
        (
            checked.lanes.into_iter().map(|l| l.name).collect(),
            checked.problems.len(),
        )
    };
    // lanes[1] is not about lanes[10]: paths are compared by segment, not by prefix.
    let mut lanes: Vec<String> = (0..11)
        .map(|i| format!(r#"{{"name": "l{i}", "prompt": "x"}}"#))
        .collect();
    lanes[10] = r#"{"name": "Bad", "prompt": "x"}"#.to_owned();
    let text = format!(r#"{{"lanes": [{}]}}"#, lanes.join(","));
    let (kept, problems) = names(&text);
    assert_eq!(problems, 1);
    assert_eq!(kept.len(), 10);
    assert!(kept.contains(&"l1".to_owned()));
    // A duplicate is the second lane's problem only.
    assert_eq!(
        names(r#"{"lanes": [{"name": "a", "prompt": "x"}, {"name": "a", "prompt": "y"}]}"#),
        (vec!["a".to_owned()], 1)
    );
    // A problem in the defaults may be in any lane.
    assert_eq!(
        names(r#"{"defaults": {"scope": "everything"}, "lanes": [{"name": "a", "prompt": "x"}]}"#),
        (vec![], 1)
    );
    // A valid packet: every lane, no problem.
    assert_eq!(
        names(r#"{"name": "a", "prompt": "x"}"#),
        (vec!["a".to_owned()], 0)
    );
}

/// A link inside the repository that points outside it cannot carry a worktree or a trusted
/// root out: paths are checked where they lead, not only as written.
#[test]
fn paths_are_checked_where_they_lead() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let repo = base.join("repo");
    let elsewhere = base.join("elsewhere");
    std::fs::create_dir_all(repo.join("inside")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, repo.join("lnk")).unwrap();
    std::os::unix::fs::symlink(repo.join("inside"), repo.join("ok-link")).unwrap();
    let ctx = PacketContext {
        repo_root: repo.clone(),
        worktree_root: None,
        default_agent: Some("claude".to_owned()),
    };
    let text = r#"[
        {"name": "a", "prompt": "p", "trusted_roots": ["lnk"], "worktree": "lnk/wt"},
        {"name": "b", "prompt": "p", "scope_path": "lnk/src"},
        {"name": "c", "prompt": "p", "worktree": "lnk/../inside/wt-c"},
        {"name": "d", "prompt": "p", "worktree": "ok-link/wt-d", "trusted_roots": ["ok-link"]}
    ]"#;
    let errors: Vec<(String, String)> = match parse_packet(text, &ctx) {
        Ok(batch) => panic!("expected errors, got {batch:#?}"),
        Err(e) => e.0.into_iter().map(|e| (e.path, e.message)).collect(),
    };
    let leads = format!(
        "through a symbolic link: it resolves to `{}",
        elsewhere.display()
    );
    has(&errors, "$[0].trusted_roots[0]", &leads);
    has(&errors, "$[0].worktree", &format!("{leads}/wt`"));
    has(&errors, "$[1].scope_path", &leads);
    // `lnk/../inside/wt-c` is used as written after `..` is resolved (`inside/wt-c`), and
    // a link that stays inside the repository is fine.
    assert_eq!(errors.len(), 3, "{errors:#?}");
}

#[test]
fn a_lane_may_ask_for_its_sandbox_and_only_a_known_one() {
    let batch = ok(r#"{
        "defaults": {"sandbox": "workspace"},
        "lanes": [{"name": "a", "prompt": "x"}, {"name": "b", "prompt": "y", "sandbox": "off"}]
    }"#);
    assert_eq!(batch.lanes[0].sandbox.as_deref(), Some("workspace"));
    assert_eq!(batch.lanes[1].sandbox.as_deref(), Some("off"));
    let errors = errs(r#"{"lanes": [{"name": "c", "prompt": "z", "sandbox": "container"}]}"#);
    has(
        &errors,
        "$.lanes[0].sandbox",
        "expected one of `workspace`, `off`",
    );
}
