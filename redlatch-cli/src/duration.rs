//! Human durations for the command line: `500ms`, `10s`, `2m`, `1h`, `1.5s`, `1m30s`.

use std::time::Duration;

/// The longest duration accepted anywhere on the command line (30 days, the library's
/// longest lease).
const MAX: Duration = redlatch::MAX_LEASE;

/// Parses a duration: one or more `<number><unit>` parts, unit one of `ms`, `s`, `m`,
/// `h`; the number may have a fraction (`1.5s`). A bare number is refused: `10` could
/// mean seconds or milliseconds.
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration (expected e.g. 500ms, 10s, 2m, 1h)".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let (part, tail) = next_part(rest).map_err(|why| format!("{why} in {text:?}"))?;
        total = total
            .checked_add(part)
            .filter(|t| *t <= MAX)
            .ok_or_else(|| format!("duration {text:?} is longer than 30 days"))?;
        rest = tail;
    }
    Ok(total)
}

/// Splits off one `<number><unit>` part.
fn next_part(s: &str) -> Result<(Duration, &str), String> {
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, rest) = s.split_at(num_end);
    if num.is_empty() {
        return Err("expected a number".into());
    }
    let value: f64 = num.parse().map_err(|_| format!("bad number {num:?}"))?;
    let unit_end = rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    let (unit, tail) = rest.split_at(unit_end);
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "" => return Err("missing unit (ms, s, m or h)".into()),
        other => return Err(format!("unknown unit {other:?} (use ms, s, m or h)")),
    };
    let secs = value * scale;
    if !secs.is_finite() || secs > MAX.as_secs_f64() {
        return Err("duration longer than 30 days".into());
    }
    Ok((Duration::from_secs_f64(secs), tail))
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
        for bad in ["", "10", "s", "5x", "-1s", "1.2.3s", "ms", "99999h", "5 s"] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn formats_for_humans() {
        assert_eq!(human(Duration::from_millis(850)), "850ms");
        assert_eq!(human(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(human(Duration::from_secs(245)), "4m05s");
        assert_eq!(human(Duration::from_secs(7800)), "2h10m");
    }
}
