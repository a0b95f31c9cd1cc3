//! The prompt a claw-code packet (one with `objective`, no `prompt`) turns into.

use super::LaneSpec;

/// The objective first, then each field the packet sets, as a readable block:
///
/// ```text
/// Fix the flaky login test
///
/// Scope: module (auth/)
/// Repository: clawpool
/// Branch policy: rebase on origin/main only
///
/// Acceptance criteria:
/// - login works with an expired token
///
/// Acceptance tests (each must pass before you finish):
/// - cargo test -p auth
/// …
/// ```
pub(crate) fn packet_prompt(spec: &LaneSpec) -> String {
    let objective = spec.objective.as_deref().unwrap_or_default().trim();
    let mut sections: Vec<String> = vec![objective.to_owned()];

    let mut facts = Vec::new();
    match (spec.scope, &spec.scope_path) {
        (Some(scope), Some(path)) => facts.push(line(
            "Scope",
            &format!("{} ({})", scope.as_str(), path.display()),
        )),
        (Some(scope), None) => facts.push(line("Scope", scope.as_str())),
        (None, Some(path)) => facts.push(line("Scope", &path.display().to_string())),
        (None, None) => {}
    }
    push_opt(&mut facts, "Repository", spec.repo.as_deref());
    push_opt(&mut facts, "Branch policy", spec.branch_policy.as_deref());
    sections.push(facts.join("\n"));

    sections.push(list("Acceptance criteria", &spec.acceptance_criteria));
    sections.push(list(
        "Acceptance tests (each must pass before you finish)",
        &spec.acceptance_tests,
    ));
    sections.push(list("Verification plan", &spec.verification_plan));
    let resources: Vec<String> = spec
        .resources
        .iter()
        .map(|r| format!("{}: {}", r.kind, r.value))
        .collect();
    sections.push(list("Resources you may touch", &resources));

    let mut policies = Vec::new();
    push_opt(
        &mut policies,
        "Commit policy",
        spec.commit_policy.as_deref(),
    );
    push_opt(
        &mut policies,
        "Reporting contract",
        spec.reporting_contract.as_deref(),
    );
    if !spec.reporting_targets.is_empty() {
        policies.push(line("Report to", &spec.reporting_targets.join(", ")));
    }
    push_opt(
        &mut policies,
        "Escalation policy",
        spec.escalation_policy.as_deref(),
    );
    push_opt(
        &mut policies,
        "Recovery policy",
        spec.recovery_policy.as_deref(),
    );
    sections.push(policies.join("\n"));

    sections.retain(|s| !s.is_empty());
    sections.join("\n\n")
}

/// `Label: value`; a multi-line value continues on lines indented by two spaces.
fn line(label: &str, value: &str) -> String {
    let value = value.trim();
    let mut out = format!("{label}: ");
    for (i, part) in value.lines().enumerate() {
        if i > 0 {
            out.push_str("\n  ");
        }
        out.push_str(part);
    }
    out
}

fn push_opt(out: &mut Vec<String>, label: &str, value: Option<&str>) {
    if let Some(value) = value {
        out.push(line(label, value));
    }
}

/// `Title:` and one `- item` per line; empty when there are no items.
fn list(title: &str, items: &[String]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut out = format!("{title}:");
    for item in items {
        out.push_str("\n- ");
        for (i, part) in item.trim().lines().enumerate() {
            if i > 0 {
                out.push_str("\n  ");
            }
            out.push_str(part);
        }
    }
    out
}
