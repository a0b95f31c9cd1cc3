//! Loading, validating and patching profiles.

use super::*;

fn patch(profile: &str, file: &str, text: &str) -> SourcedPatch {
    #[derive(serde::Deserialize)]
    struct File {
        profiles: BTreeMap<String, ManifestPatch>,
    }
    let parsed: File = toml::from_str(text).expect("test patch parses");
    SourcedPatch {
        profile: profile.into(),
        patch: parsed.profiles[profile].clone(),
        file: file.into(),
        text: text.into(),
    }
}

#[test]
fn every_builtin_profile_loads() {
    let set = ProfileSet::builtin().expect("built-ins load");
    for name in [
        "claude", "codex", "opencode", "gemini", "qwen", "aider", "claw", "scripted",
    ] {
        let profile = set.get(name).expect("built-in present");
        assert_eq!(profile.name(), name);
        assert!(
            profile.rules.iter().any(|r| r.signal == Signal::Shell),
            "{name} gets common rules"
        );
    }
}

#[test]
fn an_unknown_agent_lists_the_known_ones() {
    let set = ProfileSet::builtin().expect("built-ins load");
    let err = set.get("cursor").expect_err("no such agent");
    assert!(err.to_string().contains("\"cursor\""));
    assert!(err.to_string().contains("claude"));
}

#[test]
fn a_patch_changes_the_command_and_merges_env_and_rules_by_name() {
    let text = r#"
[profiles.claude.launch]
command = "/opt/claude/bin/claude"
env = { ANTHROPIC_BASE_URL = "http://127.0.0.1:9" }

[[profiles.claude.rules]]
name = "working_status_line"
signal = "working"
region = "below_input"
match = { contains = "esc to stop" }

[profiles.claude.dialog_policy]
tool_permission = "auto"
"#;
    let mut p = patch("claude", "/etc/clawpool.toml", text);
    // dialog_policy auto needs an answer: give the dialog one through a full replacement.
    p.patch.dialog_policy.clear();
    let set = ProfileSet::with_patches(&[p]).expect("patch applies");
    let claude = set.get("claude").expect("claude");
    assert_eq!(claude.manifest.launch.command, "/opt/claude/bin/claude");
    assert_eq!(claude.manifest.launch.env["DISABLE_AUTOUPDATER"], "1");
    assert_eq!(
        claude.manifest.launch.env["ANTHROPIC_BASE_URL"],
        "http://127.0.0.1:9"
    );
    let rule = claude
        .rules
        .iter()
        .filter(|r| r.name == "working_status_line")
        .collect::<Vec<_>>();
    assert_eq!(rule.len(), 1, "replaced, not added");
    assert!(matches!(&rule[0].matcher, Matcher::Contains(s) if s == "esc to stop"));
}

#[test]
fn a_patch_sets_how_long_a_draft_shows_before_enter_and_gemini_waits_by_default() {
    let set = ProfileSet::builtin().expect("built-ins load");
    assert_eq!(
        set.get("gemini")
            .expect("gemini")
            .manifest
            .input
            .submit_after_ms,
        200
    );
    assert_eq!(
        set.get("claude")
            .expect("claude")
            .manifest
            .input
            .submit_after_ms,
        0
    );
    let text = "[profiles.claude.input]\nsubmit_after_ms = 75\n";
    let set = ProfileSet::with_patches(&[patch("claude", "/etc/c.toml", text)]).expect("applies");
    assert_eq!(
        set.get("claude")
            .expect("claude")
            .manifest
            .input
            .submit_after_ms,
        75
    );
}

#[test]
fn an_auto_policy_without_an_answer_is_refused_naming_the_dialog() {
    let text = "[profiles.claude.dialog_policy]\ntool_permission = \"auto\"\n";
    let err = ProfileSet::with_patches(&[patch("claude", "/etc/c.toml", text)])
        .expect_err("auto without answer");
    assert_eq!(err.rule.as_deref(), Some("tool_permission"));
    assert!(err.message.contains("answer"), "{err}");
}

#[test]
fn an_invalid_regex_names_the_file_rule_and_line() {
    let text = r#"
[[profiles.claude.rules]]
name = "broken"
signal = "working"
region = "screen"
match = { regex = "(unclosed" }
"#;
    let err = ProfileSet::with_patches(&[patch("claude", "/home/u/.clawpool.toml", text)])
        .expect_err("bad regex");
    assert_eq!(err.file, "/home/u/.clawpool.toml");
    assert_eq!(err.rule.as_deref(), Some("broken"));
    assert_eq!(err.line, Some(3));
    assert!(err.message.contains("invalid regex"), "{err}");
    assert!(
        err.to_string()
            .starts_with("/home/u/.clawpool.toml:3 (rule \"broken\")"),
        "{err}"
    );
}

#[test]
fn an_input_box_with_both_rule_kinds_is_refused_naming_both() {
    let text = "[profiles.claude.input]\nbottom_rule = \"▀\"\n";
    let err = ProfileSet::with_patches(&[patch("claude", "c.toml", text)]).expect_err("rules");
    assert_eq!(err.file, "c.toml");
    assert!(
        err.message.contains("input.rule and input.bottom_rule"),
        "{err}"
    );
    let text = "[profiles.opencode.input]\nbottom_rule = \"▀▀\"\n";
    let err = ProfileSet::with_patches(&[patch("opencode", "o.toml", text)]).expect_err("two");
    assert!(
        err.message
            .contains("input.bottom_rule must be one character, not \"▀▀\""),
        "{err}"
    );
}

#[test]
fn an_unknown_region_is_refused() {
    let text = r#"
[[profiles.claude.rules]]
name = "where"
signal = "working"
region = "status_bar"
match = { contains = "x" }
"#;
    let err = ProfileSet::with_patches(&[patch("claude", "c.toml", text)]).expect_err("region");
    assert!(
        err.message.contains("unknown region \"status_bar\""),
        "{err}"
    );
    assert_eq!(err.line, Some(3));
}

#[test]
fn unknown_keys_in_a_manifest_name_the_key_and_line() {
    let text = "engine = 1\nname = \"x\"\n[launch]\ncomand = \"x\"\n";
    let err = toml::from_str::<Manifest>(text)
        .map_err(|e| toml_error("x.toml", text, &e))
        .expect_err("typo");
    assert_eq!(err.line, Some(4));
    assert!(err.message.contains("comand"), "{err}");
}

#[test]
fn a_new_profile_from_config_needs_a_command() {
    let text = "[profiles.mine.input]\nprefix = \">\"\n";
    let err = ProfileSet::with_patches(&[patch("mine", "c.toml", text)]).expect_err("no command");
    assert!(err.message.contains("launch.command"), "{err}");
    let text = "[profiles.mine.launch]\ncommand = \"mine-agent\"\n";
    let set = ProfileSet::with_patches(&[patch("mine", "c.toml", text)]).expect("new profile");
    assert_eq!(
        set.get("mine").expect("added").manifest.launch.command,
        "mine-agent"
    );
}

#[test]
fn a_newer_rule_engine_is_refused() {
    let text = "engine = 99\nname = \"future\"\n[launch]\ncommand = \"f\"\n";
    let manifest: Manifest = toml::from_str(text).expect("parses");
    let err = Profile::compile(manifest, "future.toml", text).expect_err("engine gate");
    assert!(err.message.contains("rule engine 99"), "{err}");
}
