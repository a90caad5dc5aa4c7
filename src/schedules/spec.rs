//! When a schedule is due: a cron expression read in a time zone.

use std::str::FromStr;

use chrono::TimeZone;
use croner::Cron;
use croner::parser::{CronParser, Seconds};

/// The longest cron expression taken.
const MAX_CRON: usize = 120;

/// A schedule's cron expression and time zone, checked.
#[derive(Debug, Clone)]
pub struct Spec {
    cron: Cron,
    tz: chrono_tz::Tz,
}

/// What a due time missed while every node was down does.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Missed {
    /// Nothing: the schedule goes on from its next time.
    Skip,
    /// One run, for the first time missed, then on from the next time.
    RunOnce,
}

impl Missed {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::RunOnce => "run_once",
        }
    }

    /// The stored name read back (`skip` for anything else).
    pub fn parse(text: &str) -> Self {
        match text {
            "run_once" => Self::RunOnce,
            _ => Self::Skip,
        }
    }
}

impl Spec {
    /// Reads `cron` (five fields, or six with seconds first) in the IANA
    /// time zone `tz` (`Europe/Berlin`, `UTC`).
    ///
    /// # Errors
    /// What is wrong with either, in words.
    pub fn parse(cron: &str, tz: &str) -> Result<Self, String> {
        if cron.len() > MAX_CRON {
            return Err(format!("`cron`: at most {MAX_CRON} characters"));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(cron.trim())
            .map_err(|e| format!("`cron`: {e}"))?;
        let tz = chrono_tz::Tz::from_str(tz.trim()).map_err(|_| {
            format!("`time_zone`: `{tz}` is not an IANA time zone (such as Europe/Berlin or UTC)")
        })?;
        Ok(Self { cron, tz })
    }

    /// The first due time strictly after `after` (unix ms), if any.
    pub fn next_after(&self, after: i64) -> Option<i64> {
        // From the whole second: due times fall on whole seconds.
        let second = after.div_euclid(1000) * 1000;
        let after = self.tz.timestamp_millis_opt(second).single()?;
        let next = self.cron.find_next_occurrence(&after, false).ok()?;
        Some(next.timestamp_millis())
    }

    /// The shortest time between two of the next few due times after
    /// `after`, in ms (`None`: fewer than two more).
    pub fn shortest_gap(&self, after: i64) -> Option<i64> {
        let mut at = self.next_after(after)?;
        let mut shortest = i64::MAX;
        for _ in 0..8 {
            let Some(next) = self.next_after(at) else {
                break;
            };
            shortest = shortest.min(next - at);
            at = next;
        }
        (shortest != i64::MAX).then_some(shortest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_times_follow_the_time_zone_and_its_summer_time() {
        // 08:00 in Berlin: 07:00 UTC in winter, 06:00 UTC in summer.
        let spec = Spec::parse("0 8 * * *", "Europe/Berlin").unwrap();
        let jan = chrono::Utc.with_ymd_and_hms(2027, 1, 10, 12, 0, 0).unwrap();
        let next = spec.next_after(jan.timestamp_millis()).unwrap();
        let next = chrono::DateTime::from_timestamp_millis(next).unwrap();
        assert_eq!(next.to_rfc3339(), "2027-01-11T07:00:00+00:00");
        let jul = chrono::Utc.with_ymd_and_hms(2027, 7, 10, 12, 0, 0).unwrap();
        let next = spec.next_after(jul.timestamp_millis()).unwrap();
        let next = chrono::DateTime::from_timestamp_millis(next).unwrap();
        assert_eq!(next.to_rfc3339(), "2027-07-11T06:00:00+00:00");
        assert_eq!(spec.shortest_gap(jan.timestamp_millis()), Some(86_400_000));
    }

    #[test]
    fn seconds_are_optional_and_bad_input_is_named() {
        let every_two = Spec::parse("*/2 * * * * *", "UTC").unwrap();
        assert_eq!(every_two.shortest_gap(0), Some(2000));
        // Due times are whole seconds, whatever the time asked from.
        assert_eq!(every_two.next_after(1_234), Some(2_000));
        assert_eq!(every_two.next_after(2_000), Some(4_000));
        assert!(
            Spec::parse("0 8 * * *", "Mars/Olympus")
                .unwrap_err()
                .contains("time_zone")
        );
        assert!(
            Spec::parse("61 * * * *", "UTC")
                .unwrap_err()
                .contains("cron")
        );
        assert!(Spec::parse("* * *", "UTC").is_err());
        assert!(Spec::parse(&"1,".repeat(100), "UTC").is_err());
    }
}
