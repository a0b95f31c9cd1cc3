//! The detector regression corpus: every real screen under `tests/fixtures/screens/<agent>-
//! <version>/NN-<state>-<W>x<H>.{ansi,txt}` must be read as its file name says. The `.ansi`
//! capture is replayed through the screen model (so dim placeholder text is seen as dim); a
//! `.txt` alone is read as plain rows. Every dialog of every built-in agent profile must be
//! what some screen is read as.

use std::path::{Path, PathBuf};

use clawpool_agents::detect::{Seen, explain};
use clawpool_agents::profiles::{DialogKind, ProfileSet, Signal};
use clawpool_pty::{ScreenSnapshot, TermSize};

struct Case {
    path: PathBuf,
    agent: String,
    state: String,
    size: TermSize,
}

fn cases() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/screens");
    let mut cases = Vec::new();
    for dir in std::fs::read_dir(&root).expect("corpus folder").flatten() {
        let folder = dir.file_name().to_string_lossy().into_owned();
        let agent = folder.split('-').next().unwrap_or_default().to_owned();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .expect("agent folder")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "txt"))
            .collect();
        files.sort();
        for txt in files {
            let stem = txt.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            // NN-<state>-<W>x<H>
            let parts: Vec<&str> = stem.splitn(2, '-').collect();
            let rest = parts.get(1).copied().unwrap_or_default();
            let (state, size) = rest.rsplit_once('-').expect("NN-state-WxH");
            let (w, h) = size.split_once('x').expect("WxH");
            let size = TermSize {
                cols: w.parse().expect("width"),
                rows: h.parse().expect("height"),
            };
            let ansi = txt.with_extension("ansi");
            cases.push(Case {
                path: if ansi.is_file() { ansi } else { txt.clone() },
                agent: agent.clone(),
                state: state.to_owned(),
                size,
            });
        }
    }
    assert!(
        cases.len() >= 40,
        "corpus looks incomplete: {} screens",
        cases.len()
    );
    cases
}

fn screen(case: &Case) -> ScreenSnapshot {
    let bytes = std::fs::read(&case.path).expect("screen file");
    clawpool_pty::replay::capture_screen(&bytes, case.size)
}

fn expected(state: &str, seen: &Seen) -> bool {
    match state {
        "booting" => matches!(
            seen,
            Seen::Unknown
                | Seen::Signal {
                    signal: Signal::Booting
                }
        ),
        "trust_required" => matches!(
            seen,
            Seen::Dialog {
                dialog: DialogKind::Trust,
                ..
            }
        ),
        "boot_dialog" => matches!(
            seen,
            Seen::Dialog {
                dialog: DialogKind::Boot,
                ..
            }
        ),
        "tool_permission" => {
            matches!(
                seen,
                Seen::Dialog {
                    dialog: DialogKind::ToolPermission,
                    ..
                }
            )
        }
        "ready_for_prompt" | "finished" => matches!(seen, Seen::Idle),
        "draft_typed" => matches!(seen, Seen::Draft { .. }),
        "running" => matches!(
            seen,
            Seen::Signal {
                signal: Signal::Working
            }
        ),
        "provider_retry" => matches!(
            seen,
            Seen::Signal {
                signal: Signal::ProviderRetry
            }
        ),
        other => panic!("unknown state {other:?} in a corpus file name"),
    }
}

#[test]
fn every_corpus_screen_is_read_as_its_name_says() {
    let profiles = ProfileSet::builtin().expect("built-in profiles");
    let mut failures = Vec::new();
    for case in cases() {
        let profile = profiles
            .get(&case.agent)
            .expect("a profile for every corpus agent");
        let explanation = explain(profile, &screen(&case));
        if !expected(&case.state, &explanation.observation.seen) {
            failures.push(format!(
                "{}: expected {}, got {:?} (rule {}, evidence {:?})",
                case.path.display(),
                case.state,
                explanation.observation.seen,
                explanation.observation.rule,
                explanation.observation.evidence
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} misread screens:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_draft_is_never_ready_and_the_draft_text_is_read() {
    let profiles = ProfileSet::builtin().expect("built-in profiles");
    for case in cases().iter().filter(|c| c.state == "draft_typed") {
        let profile = profiles.get(&case.agent).expect("profile");
        match explain(profile, &screen(case)).observation.seen {
            Seen::Draft { text } => assert!(
                text.contains("hello") || text.contains("a.txt") || !text.is_empty(),
                "{}: {text:?}",
                case.path.display()
            ),
            other => panic!("{}: {other:?}", case.path.display()),
        }
    }
}

/// Every dialog of every built-in agent profile is exercised by at least one corpus screen
/// (read as that dialog), so no dialog rule stands on documentation alone. The scripted test
/// agent has no corpus: its screens are its own (`tests/scripted-agent/`).
#[test]
fn every_profile_dialog_is_read_on_some_corpus_screen() {
    let profiles = ProfileSet::builtin().expect("built-in profiles");
    let mut seen: std::collections::BTreeSet<(String, String)> = Default::default();
    for case in cases() {
        let profile = profiles.get(&case.agent).expect("profile");
        let observation = explain(profile, &screen(&case)).observation;
        if matches!(observation.seen, Seen::Dialog { .. }) {
            seen.insert((case.agent.clone(), observation.rule));
        }
    }
    let unexercised: Vec<String> = profiles
        .iter()
        .filter(|profile| profile.name() != "scripted")
        .flat_map(|profile| {
            profile
                .dialogs
                .iter()
                .filter(|dialog| !seen.contains(&(profile.name().to_owned(), dialog.name.clone())))
                .map(|dialog| format!("{}/{}", profile.name(), dialog.name))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        unexercised.is_empty(),
        "dialogs no corpus screen is read as: {unexercised:?}"
    );
}
