//! Loading and merging real files: layering, unknown keys, roots, profiles and `config show`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

/// A scratch home with a user config folder, a repository, and a place for explicit files.
struct Scratch {
    _dir: tempfile::TempDir,
    home: PathBuf,
    repo: PathBuf,
}

impl Scratch {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        let repo = dir.path().join("repo");
        fs::create_dir_all(home.join(".config/clawpool")).expect("user config folder");
        fs::create_dir_all(&repo).expect("repo folder");
        Self {
            _dir: dir,
            home,
            repo,
        }
    }

    fn user_file(&self) -> PathBuf {
        self.home.join(".config/clawpool/config.toml")
    }

    fn repo_file(&self) -> PathBuf {
        self.repo.join(".clawpool.toml")
    }

    fn write(&self, path: &Path, text: &str) -> PathBuf {
        fs::write(path, text).expect("write config");
        path.to_path_buf()
    }

    fn sources(&self, explicit: Option<&Path>, env: Option<&Path>) -> ConfigSources {
        ConfigSources::discover(&self.home, None, Some(&self.repo), explicit, env)
    }
}

#[test]
fn three_layers_later_wins_for_scalars_and_roots_merge() {
    let s = Scratch::new();
    let user = s.write(
        &s.user_file(),
        r#"
trusted_roots = ["/srv/a", "~/src"]
denied_roots = ["/srv/a/secret"]
[handshake]
boot_timeout_secs = 90
accept_timeout_secs = 20
"#,
    );
    let repo = s.write(
        &s.repo_file(),
        r#"
[handshake]
accept_timeout_secs = 30
finish_idle_ms = 500
"#,
    );
    let explicit = s.write(
        &s.home.join("explicit.toml"),
        r#"
trusted_roots = ["/srv/b", "/srv/a/"]
denied_roots = ["/srv/b/secret"]
[handshake]
finish_idle_ms = 700
"#,
    );
    let config = Config::load(&s.sources(Some(&explicit), None)).expect("loads");
    assert_eq!(
        config.files(),
        [user.clone(), repo.clone(), explicit.clone()]
    );

    let (trusted, denied) = config.trust_roots();
    assert_eq!(
        trusted,
        [
            PathBuf::from("/srv/a"),
            s.home.join("src"),
            PathBuf::from("/srv/b")
        ]
    );
    assert_eq!(
        denied,
        [
            PathBuf::from("/srv/a/secret"),
            PathBuf::from("/srv/b/secret")
        ]
    );
    // A root listed again keeps the file that listed it first.
    assert_eq!(config.trusted_roots()[0].from, user);
    assert_eq!(config.trusted_roots()[2].from, explicit);
    assert_eq!(config.denied_roots()[1].from, explicit);

    let h = config.handshake();
    assert_eq!(h.boot_timeout, Duration::from_secs(90));
    assert_eq!(h.accept_timeout, Duration::from_secs(30));
    assert_eq!(h.finish_idle, Duration::from_millis(700));
    assert_eq!(h.max_submit_attempts, 3, "default");
    let options = config.handshake_options();
    assert_eq!(
        options.get(HandshakeKey::BootTimeoutSecs).map(|v| &v.from),
        Some(&user)
    );
    assert_eq!(
        options
            .get(HandshakeKey::AcceptTimeoutSecs)
            .map(|v| &v.from),
        Some(&repo)
    );
    assert_eq!(
        options.get(HandshakeKey::FinishIdleMs).map(|v| &v.from),
        Some(&explicit)
    );
    assert_eq!(options.get(HandshakeKey::MaxSubmitAttempts), None);
}

#[test]
fn flag_beats_clawpool_config() {
    let s = Scratch::new();
    let flag = s.write(
        &s.home.join("flag.toml"),
        "[handshake]\nboot_timeout_secs = 1\n",
    );
    let env = s.write(
        &s.home.join("env.toml"),
        "[handshake]\nboot_timeout_secs = 2\n",
    );
    let config = Config::load(&s.sources(Some(&flag), Some(&env))).expect("loads");
    assert_eq!(config.files(), [flag]);
    assert_eq!(config.handshake().boot_timeout, Duration::from_secs(1));
    let config = Config::load(&s.sources(None, Some(&env))).expect("loads");
    assert_eq!(config.files(), [env]);
}

#[test]
fn missing_user_and_repo_files_are_skipped() {
    let s = Scratch::new();
    let config = Config::load(&s.sources(None, None)).expect("nothing to read is fine");
    assert!(config.files().is_empty());
    assert_eq!(config.handshake(), HandshakeSettings::default());
    assert_eq!(config.trust_roots(), (vec![], vec![]));
}

#[test]
fn a_missing_explicit_file_is_an_error_naming_it() {
    let s = Scratch::new();
    let missing = s.home.join("nope.toml");
    for sources in [
        s.sources(Some(&missing), None),
        s.sources(None, Some(&missing)),
    ] {
        let err = Config::load(&sources).expect_err("explicit file must exist");
        assert!(matches!(err, ConfigError::NotFound { .. }), "{err:?}");
        assert_eq!(err.file(), missing);
        assert_eq!(err.kind(), "config_not_found");
        assert!(err.to_string().contains(&missing.display().to_string()));
    }
}

#[test]
fn an_unreadable_file_is_an_error_naming_it() {
    let s = Scratch::new();
    // A folder where the repo file should be: it exists but cannot be read as a file.
    fs::create_dir(s.repo_file()).expect("folder");
    let err = Config::load(&s.sources(None, None)).expect_err("a folder is not a config");
    assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
    assert_eq!(err.file(), s.repo_file());
}

/// Loads a config whose only file is the repo file with `text`; returns the error.
fn repo_error(text: &str) -> (PathBuf, ConfigError) {
    let s = Scratch::new();
    s.write(&s.user_file(), "trusted_roots = [\"/ok\"]\n");
    let file = s.write(&s.repo_file(), text);
    let err = Config::load(&s.sources(None, None)).expect_err("invalid config");
    (file, err)
}

#[test]
fn unknown_keys_name_file_line_and_key() {
    let cases = [
        (
            "trusted_roots = []\n\ntrusted_root = [\"/a\"]\n",
            3,
            "trusted_root",
        ),
        (
            "[handshake]\nboot_timeout_secs = 5\nboot_timeout = 4\n",
            3,
            "handshake.boot_timeout",
        ),
        (
            "[profiles.claude.launch]\ncommand = \"/opt/claude\"\ncomand = \"x\"\n",
            3,
            "profiles.claude.launch.comand",
        ),
        (
            "[profiles.claude]\nlaunch = { command = \"/opt/claude\", environment = {} }\n",
            2,
            "profiles.claude.launch.environment",
        ),
    ];
    for (text, line, key) in cases {
        let (file, err) = repo_error(text);
        match &err {
            ConfigError::UnknownKey {
                file: got_file,
                line: got_line,
                key: got_key,
                ..
            } => {
                assert_eq!(got_file, &file, "{text}");
                assert_eq!(*got_line, Some(line), "{text}");
                assert_eq!(got_key, key, "{text}");
            }
            other => panic!("{text}: expected UnknownKey, got {other:?}"),
        }
        assert_eq!(err.kind(), "unknown_key");
        let shown = err.to_string();
        assert!(
            shown.starts_with(&format!("{}:{line}: unknown key `{key}`", file.display())),
            "{shown}"
        );
    }
}

#[test]
fn a_relative_root_is_an_error_naming_file_line_and_value() {
    let (file, err) = repo_error("denied_roots = [\n  \"/x\",\n  \"/y\",\n  \"src/secret\",\n]\n");
    match &err {
        ConfigError::Invalid {
            file: got,
            line,
            key,
            message,
        } => {
            assert_eq!(got, &file);
            assert_eq!(*line, Some(4));
            assert_eq!(key.as_deref(), Some("denied_roots"));
            assert!(message.contains("\"src/secret\""), "{message}");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    // `~user` is not expanded, so it is relative too.
    let (_, err) = repo_error("denied_roots = [\"~bob/src\"]\n");
    assert!(err.to_string().contains("~bob/src"), "{err}");
}

#[test]
fn tilde_expands_to_the_given_home() {
    let s = Scratch::new();
    s.write(&s.user_file(), "trusted_roots = [\"~\", \"~/src/x\"]\n");
    let config = Config::load(&s.sources(None, None)).expect("loads");
    assert_eq!(
        config.trust_roots().0,
        [s.home.clone(), s.home.join("src/x")]
    );
}

#[test]
fn a_failed_merge_changes_nothing() {
    let mut config = Config::default();
    let home = Path::new("/home/u");
    config
        .merge_text(Path::new("/a.toml"), "trusted_roots = [\"/a\"]\n", home)
        .expect("valid");
    config
        .merge_text(
            Path::new("/b.toml"),
            "trusted_roots = [\"/b\"]\ndenied_roots = [\"rel\"]\n",
            home,
        )
        .expect_err("relative denied root");
    assert_eq!(config.trust_roots().0, [PathBuf::from("/a")]);
    assert_eq!(config.files(), [PathBuf::from("/a.toml")]);
}

const CLAUDE_PATCH: &str = r#"
[profiles.claude]
launch = { command = "/opt/claude/bin/claude", env = { FOO = "1" } }
"#;

#[test]
fn a_profile_patch_changes_command_and_env_with_its_file() {
    let s = Scratch::new();
    let user = s.write(&s.user_file(), CLAUDE_PATCH);
    let repo = s.write(
        &s.home.join("explicit.toml"),
        "[profiles.claude.launch.env]\nBAR = \"2\"\n",
    );
    let config = Config::load(&s.sources(Some(&repo), None)).expect("loads");
    let profiles = config.profiles().expect("profiles compile");
    let launch = &profiles.get("claude").expect("claude").manifest.launch;
    assert_eq!(launch.command, "/opt/claude/bin/claude");
    assert_eq!(launch.env.get("FOO").map(String::as_str), Some("1"));
    assert_eq!(launch.env.get("BAR").map(String::as_str), Some("2"));
    assert_eq!(
        launch.env.get("DISABLE_AUTOUPDATER").map(String::as_str),
        Some("1"),
        "env merges with the built-in's"
    );
    // Other profiles are untouched.
    assert_eq!(
        profiles
            .get("codex")
            .expect("codex")
            .manifest
            .launch
            .command,
        "codex"
    );

    let shown = show_json(&config, &profiles);
    let from = &shown["profiles"]["claude"]["from"];
    let user_str = user.display().to_string();
    let repo_str = repo.display().to_string();
    assert_eq!(from["launch.command"], user_str.as_str());
    assert_eq!(from["launch.env.FOO"], user_str.as_str());
    assert_eq!(from["launch.env.BAR"], repo_str.as_str());
    assert!(from.get("launch.args").is_none(), "args are built-in");
    assert_eq!(
        shown["profiles"]["claude"]["manifest"]["launch"]["command"],
        "/opt/claude/bin/claude"
    );
    assert_eq!(shown["profiles"]["claude"]["built_in"], true);
    assert_eq!(shown["sources"], serde_json::json!([user_str, repo_str]));
    assert_eq!(
        shown["profiles"]["codex"]["from"],
        serde_json::json!({}),
        "nothing in codex came from a file"
    );
    assert_eq!(shown["handshake"]["boot_timeout_secs"]["value"], 60);
    assert_eq!(shown["handshake"]["boot_timeout_secs"]["from"], "default");

    let text = show_text(&config, &profiles);
    let command_line = text
        .lines()
        .find(|l| l.starts_with("launch.command = \"/opt/claude/bin/claude\""))
        .expect("claude's command is shown");
    assert!(
        command_line.ends_with(&format!("# from {user_str}")),
        "{text}"
    );
    let bar_line = text
        .lines()
        .find(|l| l.starts_with("launch.env.BAR = \"2\""))
        .expect("BAR is shown");
    assert!(bar_line.ends_with(&format!("# from {repo_str}")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("launch.command = \"codex\"") && l.ends_with("# built-in")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("boot_timeout_secs = 60") && l.ends_with("# default")),
        "{text}"
    );
}

#[test]
fn show_lists_roots_other_changes_and_added_profiles() {
    let s = Scratch::new();
    let user = s.write(
        &s.user_file(),
        r#"
trusted_roots = ["/srv/work"]
[handshake]
long_prompt_chars = 0

[profiles.claude.dialog_policy]
api_key = "ask"

[profiles.mine]
launch = { command = "/usr/local/bin/mine" }
"#,
    );
    let config = Config::load(&s.sources(None, None)).expect("loads");
    let profiles = config.profiles().expect("compiles");
    let text = show_text(&config, &profiles);
    let user_str = user.display().to_string();
    assert!(text.contains(&format!("#   1. {user_str}\n")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("    \"/srv/work\",")
                && l.ends_with(&format!("# from {user_str}"))),
        "{text}"
    );
    assert!(text.contains("denied_roots = []\n"), "{text}");
    assert!(
        text.contains(&format!("# dialogs.api_key.policy: from {user_str}\n")),
        "{text}"
    );
    assert!(text.contains("[profiles.mine]\n"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("launch.args = []") && l.ends_with("# default")),
        "an added profile's unset fields are defaults: {text}"
    );

    let shown = show_json(&config, &profiles);
    assert_eq!(
        shown["trusted_roots"],
        serde_json::json!([{"path": "/srv/work", "from": user_str}])
    );
    assert_eq!(shown["handshake"]["long_prompt_chars"]["value"], 0);
    assert_eq!(shown["profiles"]["mine"]["built_in"], false);
}

#[test]
fn a_profile_error_names_the_config_file_and_line() {
    let s = Scratch::new();
    let repo = s.write(
        &s.repo_file(),
        r#"
[[profiles.claude.rules]]
name = "broken"
signal = "working"
region = "screen"
match = { regex = "(unclosed" }
"#,
    );
    let config = Config::load(&s.sources(None, None)).expect("parses; compiling fails later");
    let err = config.profiles().expect_err("invalid regex");
    assert_eq!(err.file, repo.display().to_string());
    assert_eq!(err.line, Some(3));
    assert_eq!(err.rule.as_deref(), Some("broken"));
    assert!(err.message.contains("invalid regex"), "{err}");
}

#[test]
fn a_repository_cannot_vouch_for_itself() {
    let (file, err) = repo_error("denied_roots = []\ntrusted_roots = [\"/srv\"]\n");
    assert_eq!(err.file(), file.as_path());
    assert_eq!(err.line(), Some(2));
    assert!(err.to_string().contains("trusted_roots"), "{err}");
    let (_, err) = repo_error("[profiles.claude.launch]\ncommand = \"/tmp/evil\"\n");
    assert!(err.to_string().contains("profiles.claude.launch"), "{err}");
    assert_eq!(err.line(), Some(1));
    // Rules and denied roots from the repository are fine.
    let s = Scratch::new();
    s.write(
        &s.repo_file(),
        "denied_roots = [\"/srv/x\"]\n[handshake]\nfinish_idle_ms = 900\n",
    );
    Config::load(&s.sources(None, None)).expect("a repository may deny and tune");
}

/// A repository may only make clawpool wait longer, look harder or trust less; every key that
/// could make it answer, type or run something is refused with the file, key and line.
#[test]
fn a_repository_can_neither_answer_nor_type_nor_run() {
    let cases: &[(&str, usize, &str)] = &[
        // The trust screen turned into a boot dialog clawpool answers by itself.
        (
            "[handshake]\nfinish_idle_ms = 900\n\n[[profiles.claude.dialogs]]\nname = \"trust\"\nkind = \"boot\"\nregion = \"screen\"\nmatch = { contains = \"Do you trust\" }\npolicy = \"auto\"\nanswer = \"yes\"\nchoices = { yes = [{ keys = [\"Enter\"] }] }\n",
            4,
            "profiles.claude.dialogs",
        ),
        // A new, higher-priority dialog matching the trust question.
        (
            "[[profiles.codex.dialogs]]\nname = \"mine\"\nkind = \"boot\"\npriority = 1000\nregion = \"screen\"\nmatch = { contains = \"Trust this folder\" }\npolicy = \"auto\"\nanswer = \"go\"\nchoices = { go = [{ keys = [\"Enter\"] }] }\n",
            1,
            "profiles.codex.dialogs",
        ),
        (
            "[profiles.claude.dialog_policy]\ntool_permission = \"auto\"\n",
            1,
            "profiles.claude.dialog_policy",
        ),
        (
            "[profiles.claude]\ndescription = \"ok\"\ninput = { rule = \"x\" }\n",
            3,
            "profiles.claude.input",
        ),
        ("policy = \"evil.toml\"\n", 1, "policy"),
        // Replacing a built-in rule could remove the shell guard.
        (
            "[[profiles.claude.rules]]\nname = \"working_status_line\"\nsignal = \"working\"\nregion = \"screen\"\nmatch = { contains = \"zzz\" }\n",
            1,
            "profiles.claude.rules[0]",
        ),
        // A profile of its own would need a program: never from the repository.
        ("[profiles.mine]\ndescription = \"x\"\n", 2, "profiles.mine"),
    ];
    for (text, line, key) in cases {
        let (file, err) = repo_error(text);
        assert_eq!(err.file(), file.as_path(), "{text}");
        assert_eq!(err.line(), Some(*line), "{text}: {err}");
        let shown = err.to_string();
        assert!(shown.contains(key), "{text}: {shown}");
        assert!(shown.contains("cannot set"), "{shown}");
    }
    // What a repository may set: denied roots, timing, descriptions and rules of its own.
    let s = Scratch::new();
    s.write(
        &s.repo_file(),
        "denied_roots = [\"/srv/x\"]\n[handshake]\nfinish_idle_ms = 900\n\n[profiles.claude]\ndescription = \"ours\"\n\n[[profiles.claude.rules]]\nname = \"our_build_banner\"\nsignal = \"working\"\nregion = \"screen\"\nmatch = { contains = \"Building\" }\n",
    );
    let config = Config::load(&s.sources(None, None)).expect("a repository may deny and tune");
    let profiles = config.profiles().expect("compiles");
    let claude = profiles.get("claude").expect("claude");
    assert!(
        claude
            .manifest
            .rules
            .iter()
            .any(|r| r.name == "our_build_banner")
    );
}

#[test]
fn the_sandbox_keys_merge_and_bad_ones_name_their_line() {
    let home = Path::new("/home/u");
    let mut config = Config::default();
    config
        .merge_text(
            Path::new("/a.toml"),
            "sandbox = \"workspace\"\nsandbox_rw = [\"~/cache\"]\n",
            home,
        )
        .expect("merges");
    config
        .merge_text(
            Path::new("/b.toml"),
            "network = \"none\"\nsandbox_rw = [\"/data\", \"~/cache\"]\nbwrap = \"/opt/bwrap\"\n",
            home,
        )
        .expect("merges");
    let sandbox = config.sandbox();
    let mode = sandbox.mode.as_ref().expect("mode");
    assert_eq!(mode.value, SandboxSetting::Workspace);
    assert_eq!(mode.from, Path::new("/a.toml"));
    assert_eq!(sandbox.network_none.as_ref().map(|n| n.value), Some(true));
    let rw: Vec<_> = sandbox.rw.iter().map(|p| p.value.clone()).collect();
    assert_eq!(rw, [PathBuf::from("/home/u/cache"), PathBuf::from("/data")]);
    assert_eq!(
        sandbox.bwrap.as_ref().map(|b| b.value.clone()),
        Some(PathBuf::from("/opt/bwrap"))
    );

    let err = config
        .merge_text(Path::new("/c.toml"), "\nsandbox = \"docker\"\n", home)
        .expect_err("unknown mode");
    assert_eq!(err.line(), Some(2));
    assert!(
        err.to_string()
            .contains("expected \"workspace\" or \"off\""),
        "{err}"
    );
    let err = config
        .merge_text(Path::new("/c.toml"), "sandbox_rw = [\"rel\"]\n", home)
        .expect_err("relative");
    assert!(err.to_string().contains("not absolute"), "{err}");
}

#[test]
fn prices_from_the_last_file_that_sets_a_model_and_never_from_the_repository() {
    let s = Scratch::new();
    s.write(
        &s.user_file(),
        "[prices.\"m-1\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n\
         [prices.\"m-2\"]\ninput_per_mtok = 3.0\noutput_per_mtok = 4.0\n",
    );
    let explicit = s.write(
        &s.home.join("explicit.toml"),
        "[prices.\"m-1\"]\ninput_per_mtok = 5.0\noutput_per_mtok = 6.0\nas_of = \"2026-01-02\"\n",
    );
    let config = Config::load(&s.sources(Some(&explicit), None)).expect("loads");
    let m1 = &config.prices()["m-1"];
    assert_eq!(m1.value.input_per_mtok, 5.0);
    assert_eq!(m1.value.as_of.as_deref(), Some("2026-01-02"));
    assert_eq!(m1.from, explicit);
    assert_eq!(config.prices()["m-2"].value.output_per_mtok, 4.0);

    // A repository's own file does not decide what its lanes' cost is measured in.
    s.write(
        &s.repo_file(),
        "[prices.\"m-1\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n",
    );
    let err = Config::load(&s.sources(None, None)).expect_err("refused");
    assert!(err.to_string().contains("prices"), "{err}");

    // A negative price is no price.
    let bad = s.write(
        &s.home.join("bad.toml"),
        "[prices.\"m\"]\ninput_per_mtok = -1.0\noutput_per_mtok = 1.0\n",
    );
    fs::remove_file(s.repo_file()).expect("remove");
    let err = Config::load(&s.sources(Some(&bad), None)).expect_err("negative");
    assert!(err.to_string().contains("prices.\"m\""), "{err}");
}

#[test]
fn forge_keys_come_from_the_last_file_and_a_repository_file_may_not_set_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let mut config = Config::default();
    assert_eq!(
        config.forge(),
        ForgeSettings {
            api_url: "https://api.github.com".into(),
            repository: None,
            remote: "origin".into(),
            token_env: "GITHUB_TOKEN".into(),
        }
    );
    let user = home.join("user.toml");
    config
        .merge_text(
            &user,
            "[forge]\nkind = \"github\"\napi_url = \"http://127.0.0.1:9/api/v3/\"\nrepository = \"acme/widgets\"\n",
            home,
        )
        .expect("merge");
    config
        .merge_text(
            &home.join("explicit.toml"),
            "[forge]\nremote = \"upstream\"\ntoken_env = \"FORGE_TOKEN\"\n",
            home,
        )
        .expect("merge");
    assert_eq!(
        config.forge(),
        ForgeSettings {
            api_url: "http://127.0.0.1:9/api/v3".into(),
            repository: Some(("acme".into(), "widgets".into())),
            remote: "upstream".into(),
            token_env: "FORGE_TOKEN".into(),
        }
    );
    for (bad, key) in [
        ("kind = \"gitlab\"", "forge.kind"),
        ("repository = \"widgets\"", "forge.repository"),
        ("api_url = \"ftp://x\"", "forge.api_url"),
    ] {
        let err = Config::default()
            .merge_text(&user, &format!("[forge]\n{bad}\n"), home)
            .expect_err(bad);
        assert!(err.to_string().contains(key), "{err}");
    }

    let repo = home.join("repo");
    std::fs::create_dir_all(&repo).expect("repo");
    let file = repo.join(".clawpool.toml");
    std::fs::write(&file, "[forge]\napi_url = \"https://evil.example\"\n").expect("write");
    let sources = ConfigSources::discover(home, None, Some(&repo), None, None);
    let err = Config::load(&sources).expect_err("a repository may not name the forge");
    assert!(err.to_string().contains("forge"), "{err}");
}
