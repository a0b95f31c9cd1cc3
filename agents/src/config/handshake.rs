//! The `[handshake]` settings: the deadlines and thresholds that drive a worker from "process
//! started" to "prompt accepted" and on to "finished".
//!
//! Files hold each key as an optional integer; the last file that sets a key wins. Values are
//! range-checked when a file is loaded (a zero deadline would fail every lane at once, and an
//! enormous one would overflow `Instant + Duration`), so resolving never fails.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::time::Duration;

use super::provenance::Sourced;

/// A week: the longest deadline accepted, far beyond any sane boot or prompt, and far from
/// overflowing an `Instant`.
const WEEK_SECS: u64 = 7 * 24 * 60 * 60;

/// A `[handshake]` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HandshakeKey {
    /// `boot_timeout_secs`: spawning → ready deadline.
    BootTimeoutSecs,
    /// `accept_timeout_secs`: prompt acceptance deadline.
    AcceptTimeoutSecs,
    /// `max_submit_attempts`: submits of a draft still in the input line.
    MaxSubmitAttempts,
    /// `long_prompt_chars`: longer (or multi-line) prompts go to `.claw/task.md`.
    LongPromptChars,
    /// `provider_block_secs`: provider retry text visible this long means blocked.
    ProviderBlockSecs,
    /// `finish_idle_ms`: idle input this long after working means finished.
    FinishIdleMs,
    /// `start_timeout_secs`: idle input this long after the prompt was accepted, with no
    /// work and no reply seen, means the turn never started: blocked on prompt delivery.
    StartTimeoutSecs,
    /// `freshness_check_secs`: How often a running lane's branch freshness is checked.
    FreshnessCheckSecs,
    /// `fetch_interval_secs`: The least time between two fetches of a base's remote (0: every check).
    FetchIntervalSecs,
    /// `unknown_screen_secs`: a running lane showing a screen no rule knows, without progress,
    /// this long is blocked on an unknown dialog.
    UnknownScreenSecs,
    /// `trust_apply_secs`: an agent still booting this long after clawpool answered its trust
    /// dialog is restarted once, so that it applies the trust its store now holds.
    TrustApplySecs,
    /// `hook_grace_ms`: how long the screen's proof that a prompt was taken waits for the
    /// agent's own report of it (a hook's UserPromptSubmit, the app server's thread turning
    /// active) once that channel works.
    HookGraceMs,
}

impl HandshakeKey {
    /// Every key, in the order they are documented and shown.
    pub const ALL: [HandshakeKey; 12] = [
        HandshakeKey::BootTimeoutSecs,
        HandshakeKey::AcceptTimeoutSecs,
        HandshakeKey::MaxSubmitAttempts,
        HandshakeKey::LongPromptChars,
        HandshakeKey::ProviderBlockSecs,
        HandshakeKey::FinishIdleMs,
        HandshakeKey::StartTimeoutSecs,
        HandshakeKey::FreshnessCheckSecs,
        HandshakeKey::FetchIntervalSecs,
        HandshakeKey::UnknownScreenSecs,
        HandshakeKey::TrustApplySecs,
        HandshakeKey::HookGraceMs,
    ];

    /// The key as written in a file.
    pub fn name(self) -> &'static str {
        match self {
            HandshakeKey::BootTimeoutSecs => "boot_timeout_secs",
            HandshakeKey::AcceptTimeoutSecs => "accept_timeout_secs",
            HandshakeKey::MaxSubmitAttempts => "max_submit_attempts",
            HandshakeKey::LongPromptChars => "long_prompt_chars",
            HandshakeKey::ProviderBlockSecs => "provider_block_secs",
            HandshakeKey::FinishIdleMs => "finish_idle_ms",
            HandshakeKey::StartTimeoutSecs => "start_timeout_secs",
            HandshakeKey::FreshnessCheckSecs => "freshness_check_secs",
            HandshakeKey::FetchIntervalSecs => "fetch_interval_secs",
            HandshakeKey::UnknownScreenSecs => "unknown_screen_secs",
            HandshakeKey::TrustApplySecs => "trust_apply_secs",
            HandshakeKey::HookGraceMs => "hook_grace_ms",
        }
    }

    /// The value used when no file sets the key.
    pub fn default_value(self) -> u64 {
        match self {
            HandshakeKey::BootTimeoutSecs => 60,
            HandshakeKey::AcceptTimeoutSecs => 15,
            HandshakeKey::MaxSubmitAttempts => 3,
            HandshakeKey::LongPromptChars => 200,
            HandshakeKey::ProviderBlockSecs => 10,
            HandshakeKey::FinishIdleMs => 1500,
            HandshakeKey::StartTimeoutSecs => 60,
            HandshakeKey::FreshnessCheckSecs => 60,
            HandshakeKey::FetchIntervalSecs => 300,
            HandshakeKey::UnknownScreenSecs => 5,
            HandshakeKey::TrustApplySecs => 15,
            HandshakeKey::HookGraceMs => 2000,
        }
    }

    /// The values a file may set.
    pub fn allowed(self) -> RangeInclusive<u64> {
        match self {
            HandshakeKey::BootTimeoutSecs
            | HandshakeKey::AcceptTimeoutSecs
            | HandshakeKey::ProviderBlockSecs
            | HandshakeKey::StartTimeoutSecs => 1..=WEEK_SECS,
            HandshakeKey::FinishIdleMs => 1..=WEEK_SECS * 1000,
            HandshakeKey::MaxSubmitAttempts => 1..=1000,
            // 0 is meaningful: every prompt goes through the file.
            HandshakeKey::LongPromptChars => 0..=u64::from(u32::MAX),
            HandshakeKey::FreshnessCheckSecs => 1..=WEEK_SECS,
            HandshakeKey::FetchIntervalSecs => 0..=WEEK_SECS,
            // Seconds, not minutes: the point is to say "blocked" long before a stall would.
            HandshakeKey::UnknownScreenSecs => 1..=3600,
            HandshakeKey::TrustApplySecs => 1..=3600,
            // 0 would let the screen decide before any report could arrive.
            HandshakeKey::HookGraceMs => 1..=600_000,
        }
    }
}

/// The merged `[handshake]` keys, each with the file that set it last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandshakeOptions {
    values: BTreeMap<HandshakeKey, Sourced<u64>>,
}

impl HandshakeOptions {
    /// The value a file set for `key`, with that file; `None` means the default applies.
    pub fn get(&self, key: HandshakeKey) -> Option<&Sourced<u64>> {
        self.values.get(&key)
    }

    /// Sets `key` (a later file replaces an earlier one's value).
    pub fn set(&mut self, key: HandshakeKey, value: Sourced<u64>) {
        self.values.insert(key, value);
    }

    /// The effective value of `key`: the file's, else the default.
    pub fn value(&self, key: HandshakeKey) -> u64 {
        self.get(key)
            .map_or_else(|| key.default_value(), |sourced| sourced.value)
    }

    /// The settings the handshake uses.
    pub fn resolve(&self) -> HandshakeSettings {
        let value = |key| self.value(key);
        HandshakeSettings {
            boot_timeout: Duration::from_secs(value(HandshakeKey::BootTimeoutSecs)),
            accept_timeout: Duration::from_secs(value(HandshakeKey::AcceptTimeoutSecs)),
            // Loading checked the range, so the conversions cannot saturate in practice.
            max_submit_attempts: u32::try_from(value(HandshakeKey::MaxSubmitAttempts))
                .unwrap_or(u32::MAX),
            long_prompt_chars: usize::try_from(value(HandshakeKey::LongPromptChars))
                .unwrap_or(usize::MAX),
            provider_block: Duration::from_secs(value(HandshakeKey::ProviderBlockSecs)),
            finish_idle: Duration::from_millis(value(HandshakeKey::FinishIdleMs)),
            start_timeout: Duration::from_secs(value(HandshakeKey::StartTimeoutSecs)),
            freshness_check: Duration::from_secs(value(HandshakeKey::FreshnessCheckSecs)),
            fetch_interval: Duration::from_secs(value(HandshakeKey::FetchIntervalSecs)),
            unknown_screen: Duration::from_secs(value(HandshakeKey::UnknownScreenSecs)),
            trust_apply: Duration::from_secs(value(HandshakeKey::TrustApplySecs)),
            hook_grace: Duration::from_millis(value(HandshakeKey::HookGraceMs)),
        }
    }
}

/// The handshake's deadlines and thresholds, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeSettings {
    /// How long a worker may take from spawning to ready for a prompt.
    pub boot_timeout: Duration,
    /// How long a submitted prompt may take to be accepted.
    pub accept_timeout: Duration,
    /// How many times a draft still sitting in the input line is submitted.
    pub max_submit_attempts: u32,
    /// Prompts longer than this (or with several lines) are written to `.claw/task.md` and
    /// the agent is pointed at the file instead.
    pub long_prompt_chars: usize,
    /// How long provider retry text may stay visible before the lane is blocked on the
    /// provider.
    pub provider_block: Duration,
    /// How long the input line must be idle after working for the turn to count as finished.
    pub finish_idle: Duration,
    /// How long the input line may stay idle under the prompt's echo, the agent never seen
    /// working and no reply drawn, before the turn counts as never started (the lane is
    /// blocked on prompt delivery, never finished without a sign of work): an agent slow to
    /// start its turn (many starting at once on few cores) shows exactly that for a while.
    pub start_timeout: Duration,
    /// How often a running lane's branch freshness is checked.
    pub freshness_check: Duration,
    /// The least time between two fetches of a base's remote.
    pub fetch_interval: Duration,
    /// How long a running lane may show a screen no rule knows, without progress, before it
    /// is blocked on an unknown dialog.
    pub unknown_screen: Duration,
    /// How long after clawpool answered the agent's trust dialog the agent may still show
    /// that it does not trust the folder (its profile's `booting` signal) before it is
    /// restarted, once: gemini-cli can save the trust and lose the relaunch that applies it.
    pub trust_apply: Duration,
    /// How long the screen's proof that the prompt was taken (its echo, a working indicator)
    /// waits for the agent's own report once the agent's channel is known to work: the
    /// channel decides what it covers, the screen after this when the report does not come.
    pub hook_grace: Duration,
}

impl Default for HandshakeSettings {
    fn default() -> Self {
        HandshakeOptions::default().resolve()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn defaults_are_the_documented_ones() {
        let s = HandshakeSettings::default();
        assert_eq!(s.boot_timeout, Duration::from_secs(60));
        assert_eq!(s.accept_timeout, Duration::from_secs(15));
        assert_eq!(s.max_submit_attempts, 3);
        assert_eq!(s.long_prompt_chars, 200);
        assert_eq!(s.provider_block, Duration::from_secs(10));
        assert_eq!(s.finish_idle, Duration::from_millis(1500));
        assert_eq!(s.start_timeout, Duration::from_secs(60));
        assert_eq!(s.unknown_screen, Duration::from_secs(5));
    }

    #[test]
    fn set_values_replace_defaults() {
        let mut options = HandshakeOptions::default();
        options.set(
            HandshakeKey::FinishIdleMs,
            Sourced {
                value: 250,
                from: PathBuf::from("/c.toml"),
            },
        );
        let s = options.resolve();
        assert_eq!(s.finish_idle, Duration::from_millis(250));
        assert_eq!(s.boot_timeout, Duration::from_secs(60));
    }

    #[test]
    fn every_default_is_allowed() {
        for key in HandshakeKey::ALL {
            assert!(key.allowed().contains(&key.default_value()), "{key:?}");
        }
    }
}
