//! ShedLock's wire for scheduled jobs (docs/jobs.md): the lock key
//! `<prefix>:<env>:<name>` (defaults `job-lock` and `default`, as ShedLock's
//! `RedisLockProvider`) and its value `ADDED:<ISO-8601 instant>@<hostname>:<uuid>`,
//! the instant in UTC with exactly three fractional digits (ShedLock's
//! `Utils.toIsoString`). Older ShedLock versions wrote `ADDED:<instant>@<hostname>`
//! (no uuid, `Instant.toString()`'s variable digits): both are read.
//!
//! Instants are converted by hand (days from the civil date and back, the proleptic
//! Gregorian calendar): the library has no date crate, and this is all it needs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::engine::kinds::listed::{self, Listed, ListedKind};

/// A scheduled job's listing: a string holding ShedLock's value, with a lease; its
/// runs poll (no channel), its holder's host and start are read from the value.
pub(crate) static LISTED: Listed = Listed {
    kind: ListedKind::Job,
    name: "job",
    is: |st, _| st.key_type == "string" && st.holders.iter().any(|(h, _)| parse(h).is_some()),
    part: listed::no_part,
    channels: listed::no_channel,
    holders: listed::hold_counts,
    queued: false,
};

/// The machine's name: the kernel's, else `$HOSTNAME` / `$COMPUTERNAME`, else
/// `unknown`.
pub(crate) fn host_name() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"));
    let name = kernel
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok());
    name.unwrap_or_else(|| "unknown".into())
}

/// ShedLock's default key prefix.
pub(crate) const DEFAULT_PREFIX: &str = "job-lock";
/// ShedLock's default environment.
pub(crate) const DEFAULT_ENV: &str = "default";

/// ShedLock's lock key for job `name`.
pub(crate) fn key(prefix: &str, env: &str, name: &str) -> String {
    format!("{prefix}:{env}:{name}")
}

/// A run's value: `ADDED:<now>@<host>:<uuid>`.
pub(crate) fn value(now: SystemTime, host: &str) -> String {
    format!("ADDED:{}@{host}:{}", iso(now), uuid::Uuid::new_v4())
}

/// What a job lock's value says of its holder: when it was taken and on which host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) since: SystemTime,
    pub(crate) host: String,
}

/// Reads a ShedLock value (either version's); `None` for any other string.
pub(crate) fn parse(value: &str) -> Option<Parsed> {
    let rest = value.strip_prefix("ADDED:")?;
    let (instant, who) = rest.split_once('@')?;
    let since = parse_iso(instant)?;
    // The new format ends in `:<uuid>` (36 characters); a host name has no ':'.
    let host = match who.rsplit_once(':') {
        Some((host, id)) if id.len() == 36 && uuid::Uuid::parse_str(id).is_ok() => host,
        _ => who,
    };
    Some(Parsed {
        since,
        host: host.to_string(),
    })
}

/// `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, three fractional digits).
pub(crate) fn iso(t: SystemTime) -> String {
    let ms = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let (secs, milli) = ((ms / 1000) as i64, ms % 1000);
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// Reads `YYYY-MM-DDTHH:MM:SS[.f…]Z` (what `Instant.toString()` and `iso` write).
pub(crate) fn parse_iso(s: &str) -> Option<SystemTime> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, min, sec) = (t.next()??, t.next()??, t.next()??);
    let valid = (1..=12).contains(&m) && (1..=31).contains(&day) && h < 24 && min < 60 && sec < 61;
    if !valid || !frac.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 9 {
        return None;
    }
    let nanos: u32 = format!("{frac:0<9}").parse().ok()?;
    let secs = days_from_civil(y, m, day) * 86_400 + h * 3600 + min * 60 + sec;
    let secs = u64::try_from(secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

/// The civil date of `days` since 1970-01-01.
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days since 1970-01-01 of a civil date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn instants_are_written_as_shedlock_writes_them() {
        assert_eq!(iso(at(0)), "1970-01-01T00:00:00.000Z");
        // 2018-12-07T12:30:37.810Z, the example of ShedLock's Utils.
        assert_eq!(iso(at(1_544_185_837_810)), "2018-12-07T12:30:37.810Z");
        assert_eq!(iso(at(951_782_400_000)), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn instants_read_back_whatever_their_digits() {
        for ms in [0, 1_544_185_837_810, 951_782_400_000, 4_102_444_800_999] {
            assert_eq!(parse_iso(&iso(at(ms))), Some(at(ms)));
        }
        assert_eq!(
            parse_iso("2018-12-07T12:30:37Z"),
            Some(at(1_544_185_837_000))
        );
        assert_eq!(
            parse_iso("2018-12-07T12:30:37.81Z"),
            Some(at(1_544_185_837_810))
        );
        for bad in [
            "",
            "2018-12-07",
            "2018-13-07T00:00:00Z",
            "2018-12-07T12:30:37.8x1Z",
        ] {
            assert_eq!(parse_iso(bad), None, "{bad}");
        }
    }

    #[test]
    fn both_shedlock_values_name_their_host_and_start() {
        let v = "ADDED:2018-12-07T12:30:37.810Z@build-7:0c1d7a4e-8f9b-4a1e-9a51-2b8e2c7d4f10";
        let p = parse(v).unwrap();
        assert_eq!(
            (p.since, p.host.as_str()),
            (at(1_544_185_837_810), "build-7")
        );
        let old = parse("ADDED:2018-12-07T12:30:37.81Z@build-7").unwrap();
        assert_eq!(old.host, "build-7");
        let ours = value(at(5), "h");
        assert_eq!(
            parse(&ours).unwrap(),
            Parsed {
                since: at(5),
                host: "h".into()
            }
        );
        assert_eq!(parse("0c1d7a4e:1"), None);
        assert_eq!(
            key(DEFAULT_PREFIX, DEFAULT_ENV, "billing"),
            "job-lock:default:billing"
        );
    }
}
