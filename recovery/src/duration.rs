//! Durations as people write them in configuration: `"30s"`, `"10m"`, `"1h30m"`, `"500ms"`.
//!
//! This module owns the one duration syntax every recovery setting uses (policy conditions,
//! recipe waits and windows, restart backoff, hook timeouts), its parser and its printer.

use std::time::Duration;

/// Why a duration could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad duration {text:?}: {problem} (write e.g. \"30s\", \"10m\", \"1h30m\", \"500ms\")")]
pub struct DurationError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// Reads a duration: one or more `<integer><unit>` parts, largest unit first, with units `d`,
/// `h`, `m`, `s` and `ms` (`"90s"`, `"10m"`, `"1h30m"`, `"2m 30s"`, `"500ms"`). A bare
/// number has no unit and is refused, as is an empty text.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let err = |problem| DurationError {
        text: text.to_owned(),
        problem,
    };
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.is_empty() {
        return Err(err("empty"));
    }
    let mut total = Duration::ZERO;
    let mut rest = compact.as_str();
    let mut last_unit_rank = usize::MAX;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(err("expected a number"));
        }
        let value: u64 = rest[..digits]
            .parse()
            .map_err(|_| err("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let (unit, per_unit, rank) = match &rest[..unit_len] {
            "d" => ("d", Duration::from_secs(86_400), 4),
            "h" => ("h", Duration::from_secs(3_600), 3),
            "m" => ("m", Duration::from_secs(60), 2),
            "s" => ("s", Duration::from_secs(1), 1),
            "ms" => ("ms", Duration::from_millis(1), 0),
            "" => return Err(err("a number needs a unit (d, h, m, s, ms)")),
            _ => return Err(err("unknown unit (use d, h, m, s, ms)")),
        };
        if rank >= last_unit_rank {
            return Err(err("units must go from largest to smallest, each once"));
        }
        last_unit_rank = rank;
        rest = &rest[unit.len()..];
        let part = u32::try_from(value)
            .ok()
            .and_then(|v| per_unit.checked_mul(v))
            .ok_or_else(|| err("number too large"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| err("number too large"))?;
    }
    Ok(total)
}

/// Writes a duration the way [`parse_duration`] reads it, shortest form first: `2s`, `5m`,
/// `1h30m`, `1m30s`, `500ms`, `0s`.
pub fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 {
        return "0s".to_owned();
    }
    if !millis.is_multiple_of(1000) {
        return format!("{millis}ms");
    }
    let mut secs = duration.as_secs();
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_usual_forms() {
        let cases = [
            ("30s", 30_000),
            ("10m", 600_000),
            ("1h30m", 5_400_000),
            ("2m 30s", 150_000),
            ("500ms", 500),
            ("1d", 86_400_000),
            ("0s", 0),
        ];
        for (text, millis) in cases {
            assert_eq!(
                parse_duration(text).map(|d| d.as_millis()),
                Ok(millis),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_what_is_ambiguous() {
        for text in ["", "10", "m", "10x", "5s10m", "1m1m", "-3s", "1.5m"] {
            assert!(parse_duration(text).is_err(), "{text:?} should be refused");
        }
        let err = parse_duration("10").expect_err("no unit");
        assert!(err.to_string().contains("needs a unit"), "{err}");
    }

    #[test]
    fn prints_what_it_reads() {
        for text in ["2s", "5m", "1h30m", "1m30s", "500ms", "0s", "15m"] {
            let parsed = parse_duration(text).expect("parses");
            assert_eq!(format_duration(parsed), text);
        }
    }
}
