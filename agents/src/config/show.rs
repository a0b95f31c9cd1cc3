//! `clawpool config show`: the merged configuration with the file each value came from, as
//! TOML-like text for people or as JSON for scripts.
//!
//! Both forms label every value: `from <file>` for a value a config file set, `default` for a
//! handshake key no file set, and `built-in` for a profile value no file changed (`default`
//! for a profile that configuration added, whose unset fields are empty).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value as Json, json};

use crate::profiles::{Profile, ProfileSet};

use super::Config;
use super::handshake::HandshakeKey;
use super::locate::quote_key;
use super::provenance::{ProfileOrigins, Sourced};

/// The label for a value from `file`.
fn from(file: &Path) -> String {
    format!("from {}", file.display())
}

/// The merged configuration as TOML-like lines with `# from <file>` comments.
pub fn show_text(config: &Config, profiles: &ProfileSet) -> String {
    let mut out = String::new();
    if config.files().is_empty() {
        out.push_str("# No configuration files: defaults and built-in profiles only.\n");
    } else {
        out.push_str("# Merged from (later files win):\n");
        for (i, file) in config.files().iter().enumerate() {
            out.push_str(&format!("#   {}. {}\n", i + 1, file.display()));
        }
    }

    out.push('\n');
    roots_text(&mut out, "trusted_roots", config.trusted_roots());
    roots_text(&mut out, "denied_roots", config.denied_roots());

    out.push_str("\n[handshake]\n");
    let mut block = Block::default();
    for key in HandshakeKey::ALL {
        let options = config.handshake_options();
        let label = options
            .get(key)
            .map_or_else(|| "default".to_owned(), |sourced| from(&sourced.from));
        block.line(format!("{} = {}", key.name(), options.value(key)), label);
    }
    block.render(&mut out);

    let builtin = builtin_names();
    for profile in profiles.iter() {
        let origins = config.profile_origins(profile.name());
        let unset = if builtin
            .as_ref()
            .is_none_or(|names| names.contains(profile.name()))
        {
            "built-in"
        } else {
            "default"
        };
        out.push('\n');
        profile_text(&mut out, profile, origins, unset);
    }
    out
}

fn roots_text(out: &mut String, key: &str, roots: &[Sourced<std::path::PathBuf>]) {
    if roots.is_empty() {
        out.push_str(&format!("{key} = []\n"));
        return;
    }
    out.push_str(&format!("{key} = [\n"));
    let mut block = Block::default();
    for root in roots {
        block.line(
            format!("    {},", toml_string(&root.value.display().to_string())),
            from(&root.from),
        );
    }
    block.render(out);
    out.push_str("]\n");
}

fn profile_text(
    out: &mut String,
    profile: &Profile,
    origins: Option<&ProfileOrigins>,
    unset: &str,
) {
    let label = |path: &str| {
        origins
            .and_then(|o| o.get(path))
            .map_or_else(|| unset.to_owned(), |file| from(file))
    };
    let launch = &profile.manifest.launch;
    let mut shown = BTreeSet::new();
    let mut block = Block::default();
    let mut field = |path: String, value: String| {
        block.line(format!("{path} = {value}"), label(&path));
        shown.insert(path);
    };
    field("launch.command".into(), toml_string(&launch.command));
    field("launch.args".into(), toml_list(&launch.args));
    if launch.env.is_empty() {
        field("launch.env".into(), "{}".into());
    }
    for (key, value) in &launch.env {
        field(format!("launch.env.{}", quote_key(key)), toml_string(value));
    }
    field("launch.prompt_args".into(), toml_list(&launch.prompt_args));
    field("launch.resume_args".into(), toml_list(&launch.resume_args));
    field(
        "launch.sandbox_writes".into(),
        toml_list(&launch.sandbox_writes),
    );
    let store = serde_json::to_value(launch.trust_store)
        .ok()
        .and_then(|v| v.as_str().map(toml_string))
        .unwrap_or_default();
    field("launch.trust_store".into(), store);

    out.push_str(&format!("[profiles.{}]\n", quote_key(profile.name())));
    block.render(out);
    let own = profile.manifest.rules.len();
    let common = profile.rules.len().saturating_sub(own);
    out.push_str(&format!(
        "# rules: {own} (+ {common} common to every profile); dialogs: {}\n",
        profile.dialogs.len()
    ));
    // Whatever else configuration changed (rules, dialogs, input, …), so every value a file
    // set is accounted for.
    for (path, file) in origins.into_iter().flatten() {
        if !shown.contains(path) {
            out.push_str(&format!("# {path}: {}\n", from(file)));
        }
    }
}

/// The merged configuration as JSON:
/// `{"sources", "trusted_roots", "denied_roots", "handshake", "profiles"}`.
///
/// Each root is `{"path", "from"}`; each handshake key `{"value", "from"}` (`"default"` when
/// unset); each profile `{"manifest", "built_in", "from"}` where `manifest` is the effective
/// manifest and `from` maps every dotted path configuration set to its file (anything not
/// listed is built-in).
pub fn show_json(config: &Config, profiles: &ProfileSet) -> Json {
    let path = |p: &Path| Json::String(p.display().to_string());
    let roots = |roots: &[Sourced<std::path::PathBuf>]| {
        roots
            .iter()
            .map(|r| json!({"path": path(&r.value), "from": path(&r.from)}))
            .collect::<Vec<_>>()
    };
    let options = config.handshake_options();
    let handshake: serde_json::Map<String, Json> = HandshakeKey::ALL
        .iter()
        .map(|&key| {
            let from = options
                .get(key)
                .map_or_else(|| Json::String("default".into()), |s| path(&s.from));
            (
                key.name().to_owned(),
                json!({"value": options.value(key), "from": from}),
            )
        })
        .collect();
    let builtin = builtin_names();
    let profiles: serde_json::Map<String, Json> = profiles
        .iter()
        .map(|profile| {
            let from: serde_json::Map<String, Json> = config
                .profile_origins(profile.name())
                .into_iter()
                .flatten()
                .map(|(dotted, file)| (dotted.clone(), path(file)))
                .collect();
            let manifest = serde_json::to_value(&profile.manifest).unwrap_or(Json::Null);
            let built_in = builtin
                .as_ref()
                .is_none_or(|names| names.contains(profile.name()));
            (
                profile.name().to_owned(),
                json!({"manifest": manifest, "built_in": built_in, "from": from}),
            )
        })
        .collect();
    json!({
        "sources": config.files().iter().map(|f| path(f)).collect::<Vec<_>>(),
        "trusted_roots": roots(config.trusted_roots()),
        "denied_roots": roots(config.denied_roots()),
        "handshake": handshake,
        "profiles": profiles,
    })
}

/// The names of the built-in profiles, to tell built-in values from a new profile's defaults.
/// `None` if the built-ins fail to load (they are tested not to); everything then counts as
/// built-in.
fn builtin_names() -> Option<BTreeSet<String>> {
    ProfileSet::builtin()
        .ok()
        .map(|set| set.iter().map(|p| p.name().to_owned()).collect())
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn toml_list(items: &[String]) -> String {
    toml::Value::Array(items.iter().cloned().map(toml::Value::String).collect()).to_string()
}

/// Lines with their `# label` comments aligned in one column.
#[derive(Default)]
struct Block {
    lines: Vec<(String, String)>,
}

impl Block {
    fn line(&mut self, text: String, label: String) {
        self.lines.push((text, label));
    }

    fn render(self, out: &mut String) {
        let width = self
            .lines
            .iter()
            .map(|(text, _)| text.chars().count())
            .max()
            .unwrap_or(0);
        for (text, label) in self.lines {
            let pad = width - text.chars().count();
            out.push_str(&format!("{text}{}  # {label}\n", " ".repeat(pad)));
        }
    }
}
