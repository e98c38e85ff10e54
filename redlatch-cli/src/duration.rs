//! Human durations for the command line: `500ms`, `10s`, `2m`, `1h`, `1.5s`, `1m30s`
//! (humantime's grammar, so `2min`, `1d` or `250us` work too), at most 30 days.

use std::time::Duration;

use humantime::DurationError;

/// The longest duration accepted anywhere on the command line (30 days, the library's
/// longest lease).
const MAX: Duration = redlatch::MAX_LEASE;

/// What a duration looks like, for error messages.
const EXPECTED: &str = "expected e.g. 500ms, 10s, 2m, 1h, 1m30s";

/// Parses a duration: one or more `<number><unit>` parts with no spaces between them,
/// the number may have a fraction (`1.5s`). A bare number is refused: `10` could mean
/// seconds or milliseconds.
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err(format!("empty duration ({EXPECTED})"));
    }
    if s.contains(char::is_whitespace) {
        return Err(format!("space in duration {text:?} ({EXPECTED})"));
    }
    let d = humantime::parse_duration(s).map_err(|e| match e {
        DurationError::UnknownUnit { unit, .. } if unit.is_empty() => {
            format!("missing unit (ms, s, m or h) in {text:?}")
        }
        DurationError::UnknownUnit { unit, .. } => {
            format!("unknown unit {unit:?} in {text:?} (use ms, s, m or h)")
        }
        DurationError::NumberOverflow => format!("duration {text:?} is longer than 30 days"),
        other => format!("{other} in {text:?} ({EXPECTED})"),
    })?;
    if d > MAX {
        return Err(format!("duration {text:?} is longer than 30 days"));
    }
    Ok(d)
}

/// Parses a wait (`-w`, `--wait`) as flock(1) does: a bare number is seconds (`10`,
/// `0.5`), anything else a duration as [`parse`] reads it (`500ms`, `1m30s`).
pub fn parse_wait(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = s.parse().map_err(|_| {
            format!("invalid number of seconds {text:?} ({EXPECTED}, or seconds: 10)")
        })?;
        // 30 days and a bit: from_secs_f64 must not panic, and MAX is the limit.
        if secs > MAX.as_secs_f64() {
            return Err(format!("duration {text:?} is longer than 30 days"));
        }
        return Ok(Duration::from_secs_f64(secs));
    }
    parse(text)
}

/// Parses `--backoff`: `DUR`, a constant back-off, or `MIN..MAX`, an exponential one
/// (each sleep twice the last plus jitter, from MIN up to MAX), as [`parse`] reads each
/// duration; zero, or MAX below MIN, is refused with the library's own reason.
pub fn parse_backoff(text: &str) -> Result<redlatch::BackOff, String> {
    let made = match text.split_once("..") {
        Some((min, max)) => redlatch::BackOff::exponential(parse(min)?, parse(max)?, 2),
        None => redlatch::BackOff::constant(parse(text)?),
    };
    made.map_err(|e| format!("back-off {text:?}: {e}"))
}

/// Formats a duration compactly for humans: `850ms`, `12.3s`, `4m05s`, `2h10m`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_is_constant_or_a_range() {
        let flat = parse_backoff("5ms").unwrap();
        assert_eq!(
            (flat.initial_delay(), flat.max_delay()),
            (Duration::from_millis(5), Duration::from_millis(5))
        );
        let exp = parse_backoff("2ms..50ms").unwrap();
        assert_eq!(
            (exp.initial_delay(), exp.max_delay(), exp.multiplier()),
            (Duration::from_millis(2), Duration::from_millis(50), 2)
        );
        for bad in ["0ms", "50ms..2ms", "5", "..5ms", "1ms..", ""] {
            assert!(parse_backoff(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_garbage() {
        for bad in [
            "", "10", "s", "5x", "-1s", "1.2.3s", "ms", "99999h", "5 s", "31d",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn says_what_is_wrong() {
        let err = |text| parse(text).unwrap_err();
        assert!(err("").starts_with("empty duration"), "{}", err(""));
        assert!(err("10").contains("missing unit"), "{}", err("10"));
        assert!(err("5x").contains("unknown unit \"x\""), "{}", err("5x"));
        assert!(err("5x").contains("\"5x\""), "{}", err("5x"));
        assert!(err("31d").contains("longer than 30 days"), "{}", err("31d"));
        assert!(err("99999999999999999999h").contains("longer than 30 days"));
    }

    #[test]
    fn accepts_up_to_30_days() {
        assert_eq!(parse("30d"), Ok(MAX));
        assert_eq!(parse("720h"), Ok(MAX));
        assert_eq!(parse("250us"), Ok(Duration::from_micros(250)));
    }

    #[test]
    fn a_bare_wait_is_seconds_as_flock_takes_it() {
        assert_eq!(parse_wait("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_wait("0"), Ok(Duration::ZERO));
        assert_eq!(parse_wait("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_wait("2592000"), Ok(MAX));
        assert_eq!(parse_wait("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "1.2.3", ".", "2592001", "-1", "10 s", "10x"] {
            assert!(parse_wait(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_wait("2592001")
            .unwrap_err()
            .contains("longer than 30 days"));
        assert!(parse_wait("1.2.3")
            .unwrap_err()
            .contains("invalid number of seconds"));
    }

    #[test]
    fn formats_for_humans() {
        assert_eq!(human(Duration::from_millis(850)), "850ms");
        assert_eq!(human(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(human(Duration::from_secs(245)), "4m05s");
        assert_eq!(human(Duration::from_secs(7800)), "2h10m");
    }
}
