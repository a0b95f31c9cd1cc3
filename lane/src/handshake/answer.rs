//! Answering a dialog: a choice's steps, run against the worker.
//!
//! Keys and text are sent as given; an `expect` step waits for the screen to show the
//! expected text and keep showing it for its `stable` time. Agents redraw dialogs (Claude Code
//! resets its trust dialog's highlight shortly after showing it), so when an `expect` times
//! out the whole choice starts over, a bounded number of times, instead of pressing on blind.
//!
//! Every key and text goes only to the dialog it answers: the dialog's whole rule is checked
//! against a fresh snapshot immediately before each one, and a dialog no longer on screen ends
//! the answer with an error instead of sending the key to whatever replaced it (a key meant for
//! a trust dialog pressed into a permission dialog answers that one). The one exception is the
//! key that submits a text this choice just typed (aider's `y` then Enter): the text changed
//! the question's line, which was checked before the text went in.

use std::time::Duration;

use clawpool_pty::{Input, Worker};
use tokio::time::Instant;

use clawpool_agents::detect::region_rows;
use clawpool_agents::profiles::{Dialog, Matcher, Profile, Region, Step};

/// How often a choice's steps are started over before giving up.
const MAX_RUNS: u32 = 3;

/// How long a dialog may take to go away once answered.
const DISMISS_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `choice` of `dialog`. Returns an error message when it could not be completed.
pub async fn answer(
    worker: &Worker,
    profile: &Profile,
    dialog: &Dialog,
    choice: &str,
) -> Result<(), String> {
    let steps = dialog
        .choices
        .get(choice)
        .ok_or_else(|| format!("dialog {:?} has no choice {choice:?}", dialog.name))?;
    let mut last_error = String::new();
    'runs: for _ in 0..MAX_RUNS {
        let mut after_text = false;
        for step in steps {
            let typed = matches!(step, Step::Text(_));
            match step {
                Step::Keys(keys) => {
                    for key in keys {
                        if !std::mem::take(&mut after_text) {
                            still_showing(worker, profile, dialog)?;
                        }
                        worker
                            .send(&Input::Key(*key))
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                }
                Step::Text(text) => {
                    still_showing(worker, profile, dialog)?;
                    worker
                        .send(&Input::Text(text.clone()))
                        .await
                        .map_err(|e| e.to_string())?
                }
                Step::Expect {
                    matcher,
                    region,
                    stable,
                    timeout,
                } => {
                    if let Err(err) =
                        expect(worker, profile, matcher, *region, *stable, *timeout).await
                    {
                        last_error = err;
                        continue 'runs;
                    }
                }
            }
            after_text = typed;
        }
        // Only a dialog that went away was answered; looking again while it is still being
        // torn down would answer it twice (and send the second answer's keys elsewhere).
        let gone = Matcher::Not(Box::new(dialog.matcher.clone()));
        return expect(
            worker,
            profile,
            &gone,
            dialog.region,
            Duration::ZERO,
            DISMISS_TIMEOUT,
        )
        .await
        .map_err(|_| {
            format!(
                "dialog {:?} still showing after answering {choice:?}",
                dialog.name
            )
        });
    }
    Err(last_error)
}

/// Whether `dialog` is on the worker's screen right now, by its whole rule.
fn still_showing(worker: &Worker, profile: &Profile, dialog: &Dialog) -> Result<(), String> {
    let rows = region_rows(&worker.snapshot(), &profile.input, dialog.region);
    match dialog.matcher.find(&rows) {
        Some(_) => Ok(()),
        None => Err(format!(
            "dialog {:?} is no longer on screen; no key was pressed into what replaced it",
            dialog.name
        )),
    }
}

/// Waits until `matcher` holds on `region` without interruption for `stable`.
async fn expect(
    worker: &Worker,
    profile: &Profile,
    matcher: &Matcher,
    region: Region,
    stable: Duration,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut changes = worker.changes();
    let mut holding_since: Option<Instant> = None;
    loop {
        let rows = region_rows(&worker.snapshot(), &profile.input, region);
        let now = Instant::now();
        match matcher.find(&rows) {
            Some(_) => {
                let since = *holding_since.get_or_insert(now);
                if now.duration_since(since) >= stable {
                    return Ok(());
                }
            }
            None => holding_since = None,
        }
        if now >= deadline {
            return Err(format!("expected screen did not show within {timeout:?}"));
        }
        let wake = match holding_since {
            Some(since) => (since + stable).min(deadline),
            None => deadline,
        };
        tokio::select! {
            more = changes.changed() => if !more {
                return Err("the worker's output ended".into());
            },
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}
