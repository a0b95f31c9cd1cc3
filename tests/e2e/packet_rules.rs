//! One rule for refs and paths in packets, checked by `packet validate` and `spawn` alike
//! (issue #27, bite 8): a lane's own branch is a branch name (not `HEAD`, not a full ref), and
//! its worktree is never inside a `.git` folder.

use serde_json::Value;

use crate::spawn::{setup, stderr};

#[test]
fn head_full_refs_and_worktrees_inside_git_are_refused_by_validate_and_spawn_alike() {
    let s = setup();
    let packet = s.sandbox.dir.path().join("rules.json");
    let cases = [
        (
            r#"{"name": "a", "agent": "scripted", "prompt": "x", "branch": "HEAD"}"#,
            "branch",
            "HEAD",
        ),
        (
            r#"{"name": "b", "agent": "scripted", "prompt": "x", "branch": "refs/heads/main"}"#,
            "branch",
            "refs/heads/",
        ),
        (
            r#"{"name": "c", "agent": "scripted", "prompt": "x", "worktree": ".git/x"}"#,
            "worktree",
            ".git",
        ),
    ];
    for (text, field, named) in cases {
        std::fs::write(&packet, text).expect("packet");
        let validated = s
            .sandbox
            .clawpool()
            .args(["packet", "validate", "--output-format", "json", "--repo"])
            .arg(&s.repo)
            .arg(&packet)
            .output()
            .expect("clawpool packet validate");
        assert_eq!(
            validated.status.code(),
            Some(2),
            "{text}: {}",
            stderr(&validated)
        );
        let err: Value = serde_json::from_slice(validated.stderr.trim_ascii()).expect("JSON error");
        assert_eq!(err["error"]["kind"], "invalid_packet", "{err}");
        let problem = &err["error"]["problems"][0];
        assert_eq!(problem["path"], format!("$.{field}"), "{err}");
        assert!(
            problem["message"]
                .as_str()
                .unwrap_or_default()
                .contains(named),
            "{err}"
        );

        let spawned = s.spawn(text, &["--output-format", "json"]);
        assert_eq!(
            spawned.status.code(),
            Some(2),
            "{text}: {}",
            stderr(&spawned)
        );
        let err: Value = serde_json::from_slice(spawned.stderr.trim_ascii()).expect("JSON error");
        assert_eq!(err["error"]["kind"], "invalid_packet", "{err}");
    }
    // Nothing was made: no branch, no worktree, nothing inside `.git`.
    let branches = std::process::Command::new("git")
        .args(["branch", "--format=%(refname)"])
        .current_dir(&s.repo)
        .output()
        .expect("git branch");
    let branches = String::from_utf8_lossy(&branches.stdout);
    assert!(!branches.contains("refs/heads/refs/"), "{branches}");
    assert!(!s.repo.join(".git/x").exists());
    assert!(!s.lanes_dir().exists());
}
