//! What a preview of fire times asks for (`previewCron`, `xtimer cron
//! preview`): a cron expression or an interval in a time zone, with the
//! bounds and run limit a timer would have, each given as text, checked
//! here once for both.

use chrono::DateTime;
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use super::check::parse_cron;
use super::wire::{Invalid, MAX_FIRES_FIELD, MAX_FIRES_LIMIT, MIN_EVERY_MS};
use crate::cron::{parse_timezone, CronSchedule};
use crate::timer::{Schedule, Timing};

/// Fire times listed when `count` is not given.
pub const DEFAULT_PREVIEW_COUNT: i64 = 10;
/// Most fire times one preview lists.
pub const MAX_PREVIEW_COUNT: i64 = 1000;

/// Query of `previewCron` (and what `xtimer cron preview` sends it): a
/// preview's question on the wire, each field as text or a number.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PreviewQuery {
    /// The expression, as `createTimer` takes it (or `everyMs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// An interval instead of `cron`, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<i64>,
    /// The interval's anchor (RFC 3339 or ms); `startAt`, else `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_at: Option<String>,
    /// No time before this (RFC 3339 or ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// No time at or after this (RFC 3339 or ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
    /// Only the first this many times (counted from `startAt`, else `from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fires: Option<i64>,
    /// The app whose calendars `excludeCalendars` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// Calendars, comma-separated: their times are listed with
    /// `note: "excluded:<calendar>"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_calendars: Option<String>,
    /// IANA time zone; UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// List fire times after this instant: RFC 3339 with offset, or Unix
    /// ms; now when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// How many, 1 to [`MAX_PREVIEW_COUNT`]; [`DEFAULT_PREVIEW_COUNT`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
}

impl PreviewQuery {
    /// The question it asks: each field as given, the calendars split at
    /// their commas (blank names left out).
    pub fn ask(&self) -> PreviewAsk<'_> {
        let calendars = self.exclude_calendars.as_deref().unwrap_or_default();
        PreviewAsk {
            cron: self.cron.as_deref(),
            every_ms: self.every_ms,
            anchor_at: self.anchor_at.as_deref(),
            start_at: self.start_at.as_deref(),
            end_at: self.end_at.as_deref(),
            max_fires: self.max_fires,
            timezone: self.timezone.as_deref(),
            from: self.from.as_deref(),
            count: self.count,
            exclude_calendars: calendars
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// A preview's question, each field as given.
#[derive(Debug, Clone, Default)]
pub struct PreviewAsk<'a> {
    /// The cron expression (or `every_ms`).
    pub cron: Option<&'a str>,
    /// An interval instead of `cron`, ms.
    pub every_ms: Option<i64>,
    /// The interval's anchor (RFC 3339 or ms); `start_at`, else `from`.
    pub anchor_at: Option<&'a str>,
    /// No time before this (RFC 3339 or ms).
    pub start_at: Option<&'a str>,
    /// No time at or after this (RFC 3339 or ms).
    pub end_at: Option<&'a str>,
    /// Only the first this many times.
    pub max_fires: Option<i64>,
    /// IANA time zone; UTC when absent.
    pub timezone: Option<&'a str>,
    /// Times after this instant (RFC 3339 or ms); `now_ms` when absent.
    pub from: Option<&'a str>,
    /// How many, 1 to [`MAX_PREVIEW_COUNT`]; [`DEFAULT_PREVIEW_COUNT`] when absent.
    pub count: Option<i64>,
    /// The calendars whose times are noted as excluded.
    pub exclude_calendars: Vec<String>,
}

/// A preview's question, checked: what to list and how.
#[derive(Debug, Clone)]
pub struct PreviewPlan {
    /// The schedule.
    pub schedule: Schedule,
    /// The cron, parsed (for its daylight saving notes); none for an interval.
    pub cron: Option<CronSchedule>,
    /// The bounds, run limit and calendars.
    pub timing: Timing,
    /// The zone times are shown in.
    pub zone: Tz,
    /// Times after this instant, Unix ms.
    pub from_ms: i64,
    /// How many.
    pub count: usize,
}

impl PreviewAsk<'_> {
    /// The plan, or the first problem (as `createTimer` words a field's).
    pub fn plan(&self, now_ms: i64) -> Result<PreviewPlan, Invalid> {
        let count = self.count.unwrap_or(DEFAULT_PREVIEW_COUNT);
        if !(1..=MAX_PREVIEW_COUNT).contains(&count) {
            return Err(Invalid::field("count", format!("must be 1 to {MAX_PREVIEW_COUNT}, got {count}")));
        }
        let from_ms = self.from.map(|text| parse_instant("from", text)).transpose()?.unwrap_or(now_ms);
        let instant = |field: &str, text: Option<&str>| text.map(|t| parse_instant(field, t)).transpose();
        let timing = Timing {
            start_at: instant("startAt", self.start_at)?,
            end_at: instant("endAt", self.end_at)?,
            max_fires: match self.max_fires {
                Some(n) if !(1..=MAX_FIRES_LIMIT as i64).contains(&n) => {
                    return Err(Invalid::field(MAX_FIRES_FIELD, format!("must be 1 to {MAX_FIRES_LIMIT}, got {n}")))
                }
                n => n.map(|n| n as u64),
            },
            exclude_calendars: self.exclude_calendars.clone(),
            ..Timing::default()
        };
        let name = self.timezone.unwrap_or("UTC");
        let zone = parse_timezone(name).map_err(|err| Invalid::field("timezone", err))?;
        let (schedule, cron) = match (self.cron, self.every_ms) {
            (Some(expr), None) => {
                let cron = parse_cron(expr, self.timezone, from_ms)?;
                (Schedule::Cron { expr: expr.to_owned(), timezone: name.to_owned() }, Some(cron))
            }
            (None, Some(every_ms)) if every_ms >= MIN_EVERY_MS => {
                let anchor_ms = instant("anchorAt", self.anchor_at)?.or(timing.start_at).unwrap_or(from_ms);
                (Schedule::Every { every_ms, anchor_ms, timezone: name.to_owned() }, None)
            }
            (None, Some(every_ms)) => {
                return Err(Invalid::field("everyMs", format!("must be at least {MIN_EVERY_MS} ms, got {every_ms}")))
            }
            _ => return Err(Invalid::field("cron, everyMs", "give exactly one of them")),
        };
        Ok(PreviewPlan { schedule, cron, timing, zone, from_ms, count: count as usize })
    }
}

/// An instant given as Unix ms (digits) or RFC 3339 with an offset; a
/// refusal naming `field` otherwise.
pub fn parse_instant(field: &str, text: &str) -> Result<i64, Invalid> {
    let parsed = match text.parse::<i64>() {
        Ok(ms) => DateTime::from_timestamp_millis(ms).map(|t| t.timestamp_millis()),
        Err(_) => DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp_millis()),
    };
    parsed.ok_or_else(|| {
        Invalid::field(
            field,
            format!("`{text}` is neither Unix milliseconds nor an RFC 3339 time such as `2026-12-01T09:00:00Z`"),
        )
    })
}
