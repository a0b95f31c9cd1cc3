//! The commits a lane's branch gained, in a real repository: the cap that keeps a history
//! gained at once (60 commits here) to the newest `limit` with the rest counted, which the
//! supervisor turns into `lane.commit.created` events and one `lane.commits.skipped`.

// Shared with lanes.rs; not every helper is used here.
#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};

use clawpool_worktree::{LaneWorktreeSpec, prepare_lane_worktree};
use support::{Sandbox, open};

/// The supervisor's cap on `lane.commit.created` per look (`MAX_COMMIT_EVENTS`).
const LIMIT: usize = 50;

/// A lane `a` of repository `proj` that gained `count` commits (`commit 1` oldest) over its
/// base, while `main` moved on by one commit of its own. Returns the lane's folder, the sha
/// the lane was made from, and the lane's commits oldest first.
fn lane_with_commits(sb: &Sandbox, count: usize) -> (PathBuf, String, Vec<String>) {
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let spec = LaneWorktreeSpec::new(&repo, "a").expect("the lane name is valid");
    prepare_lane_worktree(&repo, &spec).expect("the lane is created");
    let base = sb.sha(&root, "main");
    for i in 1..=count {
        sb.git(
            &spec.path,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("commit {i}"),
            ],
        );
    }
    // The base's own later work is not the lane's, even though it is newer.
    sb.git(
        &root,
        &["commit", "-q", "--allow-empty", "-m", "main moves on"],
    );
    let shas = lines(&sb.git(
        &spec.path,
        &["rev-list", "--reverse", &format!("{base}..HEAD")],
    ));
    assert_eq!(shas.len(), count);
    (spec.path, base, shas)
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_owned).collect()
}

fn look(path: &Path, known: &[&str], limit: usize) -> clawpool_worktree::NewCommits {
    clawpool_worktree::new_commits(path, known, limit).expect("the new commits are read")
}

#[test]
fn sixty_new_commits_give_the_newest_fifty_oldest_first_and_count_the_ten_older() {
    let sb = Sandbox::new();
    let (lane, base, shas) = lane_with_commits(&sb, 60);

    let new = look(&lane, &[&base, "main"], LIMIT);

    assert_eq!(new.head, shas[59]);
    assert_eq!(new.commits.len(), LIMIT);
    // The newest fifty, oldest first: commit 11 … commit 60, the newest last.
    let got: Vec<(&str, &str)> = new
        .commits
        .iter()
        .map(|c| (c.sha.as_str(), c.subject.as_str()))
        .collect();
    let expected_subjects: Vec<String> = (11..=60).map(|i| format!("commit {i}")).collect();
    let expected: Vec<(&str, &str)> = shas[10..]
        .iter()
        .zip(&expected_subjects)
        .map(|(sha, subject)| (sha.as_str(), subject.as_str()))
        .collect();
    assert_eq!(got, expected);
    // The ten older ones are only counted; the oldest of them is named.
    assert_eq!(new.left_out, 10);
    assert_eq!(new.oldest_left_out.as_deref(), Some(shas[0].as_str()));
}

#[test]
fn within_the_limit_every_commit_is_reported_and_nothing_is_left_out() {
    let sb = Sandbox::new();
    let (lane, base, shas) = lane_with_commits(&sb, LIMIT);

    let new = look(&lane, &[&base, "main"], LIMIT);

    let got: Vec<&str> = new.commits.iter().map(|c| c.sha.as_str()).collect();
    assert_eq!(got, shas.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(new.left_out, 0);
    assert_eq!(new.oldest_left_out, None);
}

#[test]
fn the_next_look_from_the_last_reported_commit_reports_only_what_came_after() {
    let sb = Sandbox::new();
    let (lane, base, shas) = lane_with_commits(&sb, 60);
    let first = look(&lane, &[&base, "main"], LIMIT);
    sb.git(&lane, &["commit", "-q", "--allow-empty", "-m", "commit 61"]);

    // What the supervisor knows after the first look: its head. A known revision that does not
    // resolve (a commit since garbage-collected) is skipped, not an error.
    let missing = "0123456789abcdef0123456789abcdef01234567";
    let next = look(&lane, &[&first.head, &base, "main", missing], LIMIT);

    assert_eq!(first.head, shas[59]);
    let got: Vec<&str> = next.commits.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(got, ["commit 61"]);
    assert_eq!(next.left_out, 0);
    assert_eq!(next.oldest_left_out, None);
}

#[test]
fn own_work_counts_commits_without_merges_or_the_base_whoever_counts_and_sees_dirt() {
    use clawpool_worktree::{CommitGraph, OwnWork, commit_graph, own_work};
    let sb = Sandbox::new();
    let (lane, base, _) = lane_with_commits(&sb, 3);
    // The base brought in by a merge: the merge commit is not the lane's own work.
    sb.git(
        &lane,
        &["merge", "-q", "--no-ff", "-m", "bring main in", "main"],
    );
    let root = sb.path().join("proj");
    let common = open(&root).common_dir().to_path_buf();
    let by_git = |hidden: &[&str]| {
        let mut args = vec!["rev-list", "--count", "--no-merges", "HEAD", "--not"];
        args.extend(hidden);
        sb.git(&lane, &args).trim().parse::<u64>().expect("a count")
    };
    let clean = OwnWork {
        commits: 3,
        dirty: false,
    };

    assert_eq!(commit_graph(&common), CommitGraph::None);
    let by_libgit2 = own_work(&lane, &["main", &base]).expect("looked at");
    assert_eq!(by_libgit2, clean);
    assert_eq!(by_libgit2.commits, by_git(&["main", &base]));
    // A base that does not resolve is an error, never a count.
    assert!(own_work(&lane, &["no-such-ref"]).is_err());

    // git's default graph, which libgit2 cannot read: git counts, and says the same.
    sb.git(&root, &["commit-graph", "write", "--reachable"]);
    assert_eq!(commit_graph(&common), CommitGraph::Unreadable);
    assert_eq!(own_work(&lane, &["main", &base]).expect("looked at"), clean);
    assert!(own_work(&lane, &["no-such-ref"]).is_err());

    // Uncommitted work is dirt, whoever counts.
    std::fs::write(lane.join("notes.txt"), "left behind\n").expect("writable");
    let dirty = OwnWork {
        dirty: true,
        ..clean
    };
    assert_eq!(own_work(&lane, &["main", &base]).expect("looked at"), dirty);
}
