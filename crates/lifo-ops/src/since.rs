//! The start of a time window, as an operator types it: `90s`, `15m`,
//! `1h`, `2d` ago, an RFC 3339 time (`2026-11-23T12:00:00Z`) or epoch
//! milliseconds. The one parser of windows for the CLI (`--since`), the
//! console (`since=`) and anything else that takes one: every step is
//! checked, so an input too large is refused with an error that names it
//! instead of wrapping into a different window.

use std::time::Duration;

/// The longest window accepted: 100 years.
pub const MAX_AGO: Duration = Duration::from_secs(100 * 366 * 86_400);

/// A point in time: a duration before now, or an instant (epoch ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    Ago(Duration),
    At(u64),
}

impl Since {
    /// Epoch ms of the point, seen at `now_ms` (0 when it is before 1970).
    pub fn epoch_ms(self, now_ms: u64) -> u64 {
        match self {
            // At most MAX_AGO, so the millis fit in u64.
            Self::Ago(d) => now_ms.saturating_sub(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            Self::At(ms) => ms,
        }
    }

    /// [`Since::epoch_ms`], refused when the point is after `now_ms`: a
    /// window that starts in the future holds nothing, and a time typed
    /// wrong should not look like an empty queue.
    pub fn epoch_ms_checked(self, now_ms: u64) -> Result<u64, String> {
        let at = self.epoch_ms(now_ms);
        if at > now_ms {
            let show = |ms: u64| {
                chrono::DateTime::from_timestamp_millis(i64::try_from(ms).unwrap_or(i64::MAX))
                    .map_or(format!("{ms} (epoch ms)"), |t| {
                        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    })
            };
            return Err(format!(
                "{} is in the future (now is {}): nothing can have happened since",
                show(at),
                show(now_ms)
            ));
        }
        Ok(at)
    }
}

impl std::str::FromStr for Since {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        match chrono::DateTime::parse_from_rfc3339(s) {
            // Since a time before 1970 is since the start: every record.
            Ok(t) => return Ok(Self::At(u64::try_from(t.timestamp_millis()).unwrap_or(0))),
            // A date (`2026-13-45T…`): what is wrong with it, not its
            // "unit".
            Err(e) if looks_like_a_time(s) => {
                return Err(format!(
                    "{s:?} is not an RFC 3339 time ({e}): e.g. 2026-11-23T12:00:00Z"
                ));
            }
            Err(_) => {}
        }
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return s
                .parse::<u64>()
                .map(Self::At)
                .map_err(|_| format!("{s:?} is too large for epoch milliseconds"));
        }
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (n, unit) = s.split_at(split);
        if n.is_empty() {
            return Err(format!(
                "expected 90s, 15m, 1h, 2d, an RFC 3339 time or epoch ms, got {s:?}"
            ));
        }
        let per: u64 = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => {
                return Err(format!(
                    "unknown unit {unit:?} in {s:?}: use s, m, h or d (or an RFC 3339 time)"
                ));
            }
        };
        let too_large = || {
            format!(
                "{s:?} is too far back: a window is at most {} days",
                MAX_AGO.as_secs() / 86_400
            )
        };
        let seconds = n
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(per))
            .filter(|secs| *secs <= MAX_AGO.as_secs())
            .ok_or_else(too_large)?;
        Ok(Self::Ago(Duration::from_secs(seconds)))
    }
}

/// `2026-…`, or anything with a `T` between digits or a `:`: meant as a
/// time, not a duration.
fn looks_like_a_time(s: &str) -> bool {
    let b = s.as_bytes();
    let year = b.len() > 4 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-';
    year || s.contains(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_durations_times_and_epoch_ms() {
        let now = 10_000_000;
        let at = |s: &str| s.parse::<Since>().map(|x| x.epoch_ms(now));
        assert_eq!(at("90s"), Ok(now - 90_000));
        assert_eq!(at("15m"), Ok(now - 900_000));
        assert_eq!(at("1h"), Ok(now - 3_600_000));
        assert_eq!(at("2d"), Ok(0));
        assert_eq!(at("1764547200123"), Ok(1_764_547_200_123));
        assert_eq!(at("2026-12-01T00:00:00Z"), Ok(1_796_083_200_000));
        assert_eq!(
            at("3w").unwrap_err(),
            "unknown unit \"w\" in \"3w\": use s, m, h or d (or an RFC 3339 time)"
        );
        assert!(at("soon").unwrap_err().starts_with("expected 90s, 15m"));
        // A time that is not one is named as such (once "unknown unit
        // \"-13-45T00:00:00Z\"").
        assert_eq!(
            at("2026-13-45T00:00:00Z").unwrap_err(),
            "\"2026-13-45T00:00:00Z\" is not an RFC 3339 time (input is out of range): \
             e.g. 2026-11-23T12:00:00Z"
        );
        assert!(
            at("2026-11-23 12:00")
                .unwrap_err()
                .contains("is not an RFC 3339 time"),
            "{:?}",
            at("2026-11-23 12:00")
        );
        assert!(at("").unwrap_err().starts_with("expected 90s, 15m"));
    }

    /// A point after now was taken silently (an empty list).
    #[test]
    fn a_point_in_the_future_is_refused() {
        let now = 1_764_547_200_000; // 2025-12-01T00:00:00Z
        let future: Since = "2030-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            future.epoch_ms_checked(now).unwrap_err(),
            "2030-01-01T00:00:00Z is in the future (now is 2025-12-01T00:00:00Z): \
             nothing can have happened since"
        );
        assert!(Since::At(now + 1).epoch_ms_checked(now).is_err());
        assert_eq!(Since::At(now).epoch_ms_checked(now), Ok(now));
        assert_eq!(
            "1h".parse::<Since>().unwrap().epoch_ms_checked(now),
            Ok(now - 3_600_000)
        );
    }

    /// Each of these once panicked (`n * 86_400`) or wrapped into another
    /// window ("the last 0.4 s").
    #[test]
    fn windows_too_large_are_refused_naming_the_input() {
        let at = |s: &str| s.parse::<Since>();
        for s in [
            "213503982334602d",
            "18446744073709552s",
            "99999999999999999999999s",
            "36601d",
            "5000000h",
        ] {
            let err = at(s).unwrap_err();
            assert_eq!(
                err,
                format!("\"{s}\" is too far back: a window is at most 36600 days"),
                "{s}"
            );
        }
        assert_eq!(
            at("99999999999999999999999").unwrap_err(),
            "\"99999999999999999999999\" is too large for epoch milliseconds"
        );
        assert_eq!(at("36600d"), Ok(Since::Ago(MAX_AGO)));
        assert_eq!(Since::Ago(MAX_AGO).epoch_ms(5), 0);
        // Any time the document's date-time allows: before 1970 is "any time".
        assert_eq!(at("1969-12-31T23:59:59Z"), Ok(Since::At(0)));
        assert_eq!(at("0001-01-01T00:00:00+00:00"), Ok(Since::At(0)));
    }
}
