//! Calendars: an app's named sets of excluded days and times, and the
//! compiled form timers query ([`CompiledCalendar::excludes`]).
//!
//! A calendar excludes dates, weekdays and all-day iCalendar events as days
//! **in the timer's zone**, and ranges and timed iCalendar events as
//! instants, `[from, to)` (a date-time with a `TZID` in that IANA zone, a
//! floating one in UTC). The `ics` text is parsed by `icalendar` and its
//! `RRULE`s expanded by `rrule` once, at compile time, into sorted merged
//! spans: repeats starting before [`HORIZON_YEAR`] (where cron schedules end
//! too), at most [`MAX_OCCURRENCES`] in all, from at most
//! [`MAX_RECURRING_EVENTS`] repeating events, within [`EXPAND_BUDGET`] when
//! checked. Compiling a large calendar takes up to some hundred ms: keep
//! the result. A query is two binary searches and a bit test.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeZone, Utc, Weekday};
use icalendar::parser::{Component, Property};
use icalendar::{CalendarDateTime, DatePerhapsTime};
use serde::{Deserialize, Serialize};

/// Most entries a calendar has: dates, ranges, weekdays and `VEVENT`s together.
pub const MAX_ENTRIES: usize = 10_000;

/// Repeats of `RRULE`s are expanded up to (not including) the start of this year.
pub const HORIZON_YEAR: i32 = 2200;

/// Most repeats of all `RRULE`s of a calendar before [`HORIZON_YEAR`].
pub const MAX_OCCURRENCES: usize = 500_000;

/// Most `VEVENT`s with an `RRULE` or `RDATE` in one calendar.
pub const MAX_RECURRING_EVENTS: usize = 1_000;

/// The most [`CalendarSpec::from_wire`] spends expanding repeats: a rule
/// that never matches costs `rrule` up to 100,000 empty periods (some ms).
pub const EXPAND_BUDGET: Duration = Duration::from_secs(5);

const DAY_MS: i64 = 86_400_000;

/// Why a calendar is refused; the message names the field as the API does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    /// `dates[index]` is not `YYYY-MM-DD`.
    #[error("dates[{index}]: not a date (YYYY-MM-DD): {value:?}")]
    Date { index: usize, value: String },
    /// `ranges[index]` ends at or before its start.
    #[error("ranges[{index}]: to must be after from")]
    Range { index: usize },
    /// `weekdays[index]` names no weekday.
    #[error("weekdays[{index}]: unknown weekday {value:?}")]
    Weekday { index: usize, value: String },
    /// The `ics` text, at its 1-based `line`.
    #[error("ics: line {line}: {reason}")]
    Ics { line: usize, reason: String },
    /// More than [`MAX_ENTRIES`] entries.
    #[error("calendar has {} entries; at most {}", thousands(*.count), thousands(MAX_ENTRIES))]
    TooManyEntries { count: usize },
}

/// An excluded range of instants, `[from_ms, to_ms)`, Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CalendarRange {
    pub from_ms: i64,
    pub to_ms: i64,
}

/// What a calendar excludes, as the app gave it (stored as JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CalendarSpec {
    /// Whole days, in the zone of the timer asking.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dates: Vec<NaiveDate>,
    /// Ranges of instants.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<CalendarRange>,
    /// Weekdays, in the zone of the timer asking.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub weekdays: Vec<Weekday>,
    /// iCalendar text whose `VEVENT`s are excluded, kept as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ics: Option<String>,
}

/// A calendar as stored: its app, name and spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calendar {
    pub app: String,
    pub name: String,
    pub spec: CalendarSpec,
    /// Unix ms of the first put.
    pub create_time: i64,
    /// Unix ms of the last put.
    pub modify_time: i64,
}

/// The API's name of a weekday: `MON` ... `SUN`.
pub fn weekday_code(day: Weekday) -> &'static str {
    ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"][day.num_days_from_monday() as usize]
}

impl CalendarSpec {
    /// A spec from the API's fields, checked entirely (the `ics` text is
    /// parsed and expanded): `dates` as `YYYY-MM-DD`, `ranges` as
    /// `(from, to)` ms, `weekdays` as `SAT`, `sun`, `Saturday`...; an `ics`
    /// of only white space is none.
    pub fn from_wire(
        dates: &[String],
        ranges: &[(i64, i64)],
        weekdays: &[String],
        ics: Option<String>,
    ) -> Result<Self, CalendarError> {
        let dates = dates
            .iter()
            .enumerate()
            .map(|(index, value)| parse_date(value).ok_or_else(|| CalendarError::Date { index, value: value.clone() }))
            .collect::<Result<Vec<_>, _>>()?;
        let ranges = ranges
            .iter()
            .enumerate()
            .map(|(index, &(from_ms, to_ms))| {
                if to_ms > from_ms {
                    Ok(CalendarRange { from_ms, to_ms })
                } else {
                    Err(CalendarError::Range { index })
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let weekdays = weekdays
            .iter()
            .enumerate()
            .map(|(index, value)| {
                value.trim().parse::<Weekday>().map_err(|_| CalendarError::Weekday { index, value: value.clone() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ics = ics.filter(|text| !text.trim().is_empty());
        let spec = Self { dates, ranges, weekdays, ics };
        CompiledCalendar::build(&spec, Some(Instant::now() + EXPAND_BUDGET))?;
        Ok(spec)
    }

    /// The compiled calendar (see [`CompiledCalendar::new`]).
    pub fn compile(&self) -> Result<CompiledCalendar, CalendarError> {
        CompiledCalendar::new(self)
    }
}

/// A calendar ready to answer queries: sorted, merged spans of excluded
/// days and instants, and a weekday mask. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct CompiledCalendar {
    inner: Arc<Compiled>,
}

#[derive(Debug, Default)]
struct Compiled {
    /// Bit `n`: the weekday `n` days from Monday is excluded.
    weekdays: u8,
    /// Excluded days, `[from, to)`, sorted and disjoint.
    days: Vec<(NaiveDate, NaiveDate)>,
    /// Excluded instants (ms), `[from, to)`, sorted and disjoint.
    ranges: Vec<(i64, i64)>,
}

impl CompiledCalendar {
    /// Compiles `spec`: checks the entry count and parses and expands its
    /// `ics` text (the errors [`CalendarSpec::from_wire`] reports for it).
    pub fn new(spec: &CalendarSpec) -> Result<Self, CalendarError> {
        Self::build(spec, None)
    }

    /// [`CompiledCalendar::new`], giving up on expanding repeats past `deadline`.
    fn build(spec: &CalendarSpec, deadline: Option<Instant>) -> Result<Self, CalendarError> {
        let events = match &spec.ics {
            Some(text) => parse_ics(text)?,
            None => Vec::new(),
        };
        let count = spec.dates.len() + spec.ranges.len() + spec.weekdays.len() + events.len();
        if count > MAX_ENTRIES {
            return Err(CalendarError::TooManyEntries { count });
        }
        let mut days: Vec<(NaiveDate, NaiveDate)> = spec.dates.iter().map(|&d| (d, add_days(d, 1))).collect();
        let mut ranges: Vec<(i64, i64)> =
            spec.ranges.iter().filter(|r| r.to_ms > r.from_ms).map(|r| (r.from_ms, r.to_ms)).collect();
        expand(&events, deadline, &mut days, &mut ranges)?;
        let weekdays = spec.weekdays.iter().fold(0_u8, |mask, day| mask | 1 << day.num_days_from_monday());
        Ok(Self { inner: Arc::new(Compiled { weekdays, days: merge(days), ranges: merge(ranges) }) })
    }

    /// Whether the instant `t_ms` is excluded for a timer in zone `tz`: on
    /// an excluded date, weekday or all-day event's day there, or within
    /// an excluded range or timed event.
    pub fn excludes(&self, t_ms: i64, tz: chrono_tz::Tz) -> bool {
        let c = &self.inner;
        if covers(&c.ranges, &t_ms) {
            return true;
        }
        if c.weekdays == 0 && c.days.is_empty() {
            return false;
        }
        let Some(local) = tz.timestamp_millis_opt(t_ms).single() else {
            return false;
        };
        let day = local.date_naive();
        c.weekdays & (1 << day.weekday().num_days_from_monday()) != 0 || covers(&c.days, &day)
    }

    /// Whether the calendar excludes nothing.
    pub fn is_empty(&self) -> bool {
        self.inner.weekdays == 0 && self.inner.days.is_empty() && self.inner.ranges.is_empty()
    }
}

/// Whether sorted disjoint `[from, to)` `spans` hold `x`.
fn covers<T: Ord>(spans: &[(T, T)], x: &T) -> bool {
    let after = spans.partition_point(|(from, _)| from <= x);
    after > 0 && spans[after - 1].1 > *x
}

/// `spans` sorted, empty ones dropped, overlapping and touching ones joined.
fn merge<T: Ord + Copy>(mut spans: Vec<(T, T)>) -> Vec<(T, T)> {
    spans.retain(|(from, to)| to > from);
    spans.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(spans.len());
    for (from, to) in spans {
        match out.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => out.push((from, to)),
        }
    }
    out
}

fn add_days(day: NaiveDate, days: i64) -> NaiveDate {
    u64::try_from(days).ok().and_then(|n| day.checked_add_days(chrono::Days::new(n))).unwrap_or(NaiveDate::MAX)
}

/// `YYYY-MM-DD`, exactly.
fn parse_date(value: &str) -> Option<NaiveDate> {
    let b = value.as_bytes();
    let shape = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() });
    if !shape {
        return None;
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d").ok()
}

/// `n` with `,` between thousands.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------
// iCalendar

/// When a `VEVENT` starts.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// All day (`VALUE=DATE`): the days in the timer's zone.
    Day(NaiveDate),
    /// A date-time: an instant, with the zone its repeats follow.
    At(DateTime<rrule::Tz>),
}

/// One `VEVENT`, read.
#[derive(Debug)]
struct Event {
    /// Its `BEGIN:VEVENT` line.
    line: usize,
    start: Start,
    /// Days (all-day) or milliseconds (timed).
    length: i64,
    /// Its `RRULE`s, checked against its start, and the line of the first.
    rules: Vec<rrule::RRule>,
    rule_line: usize,
    rdates: Vec<DateTime<rrule::Tz>>,
    exdates: Vec<DateTime<rrule::Tz>>,
    uid: Option<String>,
    /// The start (ms) of the repeat of the event with this `UID` it replaces.
    recurrence_id: Option<i64>,
    cancelled: bool,
}

impl Event {
    fn repeats(&self) -> bool {
        !self.rules.is_empty() || !self.rdates.is_empty()
    }
}

/// `ics` text unfolded (RFC 5545 3.1), each logical line with the line of
/// the text it starts on.
struct Unfolded {
    text: String,
    /// Byte offset in `text` of each logical line.
    starts: Vec<usize>,
    /// 1-based line of the given text of each logical line.
    lines: Vec<usize>,
    /// Lines of the given text.
    total: usize,
}

impl Unfolded {
    fn new(input: &str) -> Self {
        let mut out =
            Self { text: String::with_capacity(input.len()), starts: Vec::new(), lines: Vec::new(), total: 0 };
        for (i, raw) in input.split('\n').enumerate() {
            let raw = raw.strip_suffix('\r').unwrap_or(raw);
            out.total = i + 1;
            if (raw.starts_with(' ') || raw.starts_with('\t')) && !out.starts.is_empty() {
                out.text.push_str(&raw[1..]);
                continue;
            }
            if !out.starts.is_empty() {
                // CRLF: the parser looks for it to end each value.
                out.text.push_str("\r\n");
            }
            out.starts.push(out.text.len());
            out.lines.push(i + 1);
            out.text.push_str(raw);
        }
        out
    }

    /// The given text's line of logical line `n` (1-based); past the end,
    /// the line after the last.
    fn line(&self, n: usize) -> usize {
        match n.checked_sub(1).and_then(|i| self.lines.get(i)) {
            Some(line) => *line,
            None => self.total + 1,
        }
    }

    /// The given text's line of `part`, a slice of `text`.
    fn line_of(&self, part: &str) -> Option<usize> {
        let base = self.text.as_ptr() as usize;
        let at = (part.as_ptr() as usize).checked_sub(base)?;
        if at > self.text.len() {
            return None;
        }
        let index = self.starts.partition_point(|start| *start <= at).checked_sub(1)?;
        self.lines.get(index).copied()
    }
}

fn ics_error(line: usize, reason: impl Into<String>) -> CalendarError {
    CalendarError::Ics { line, reason: reason.into() }
}

/// The `VEVENT`s of `text`.
fn parse_ics(text: &str) -> Result<Vec<Event>, CalendarError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let unfolded = Unfolded::new(text);
    for (index, start) in unfolded.starts.iter().enumerate() {
        let end = unfolded.starts.get(index + 1).map_or(unfolded.text.len(), |next| next - 2);
        let line = &unfolded.text[*start..end];
        if !line.trim().is_empty() && !line.contains(':') {
            return Err(ics_error(unfolded.lines[index], format!("not a content line (NAME:VALUE): {:?}", clip(line))));
        }
    }
    let parsed = catch_unwind(|| icalendar::parser::read_components(&unfolded.text))
        .map_err(|_| ics_error(1, "the iCalendar parser failed"))?;
    let components = parsed.map_err(|err| parser_error(&unfolded, &err))?;
    let mut events = Vec::new();
    let mut pending = components.iter().collect::<Vec<_>>();
    while let Some(component) = pending.pop() {
        if component.name.as_str().eq_ignore_ascii_case("VEVENT") {
            events.push(read_event(&unfolded, component)?);
        } else {
            pending.extend(component.components.iter());
        }
    }
    events.sort_by_key(|e| e.line);
    Ok(events)
}

/// The icalendar parser's error (`error: 0: at line N, in KIND: ...`,
/// lines of the unfolded text) as the given text's line and a reason.
fn parser_error(unfolded: &Unfolded, err: &str) -> CalendarError {
    let mut at = None;
    let mut kinds = Vec::new();
    for entry in err.split("at line ").skip(1) {
        let digits: String = entry.chars().take_while(char::is_ascii_digit).collect();
        if at.is_none() {
            at = digits.parse::<usize>().ok();
        }
        if let Some(kind) = entry.split_once(", in ").and_then(|(_, rest)| rest.split_once(":\n")) {
            kinds.push(kind.0.to_string());
        }
    }
    let line = at.map_or(unfolded.total + 1, |n| unfolded.line(n));
    let has = |kind: &str| kinds.iter().any(|k| k == kind);
    let reason = if has("mismatching end") {
        "END does not match the BEGIN it closes".to_string()
    } else if kinds.first().is_some_and(|k| k == "Eof") {
        "text after the last END".to_string()
    } else if at.is_none() || line > unfolded.total || kinds.first().is_some_and(|k| k == "Many0") {
        "the text ends before an END closes each BEGIN".to_string()
    } else if kinds.first().is_some_and(|k| k == "Tag") && has("Many1") {
        "expected a BEGIN line".to_string()
    } else {
        format!("not valid iCalendar (parser: {})", kinds.join(", "))
    };
    ics_error(line, reason)
}

fn clip(text: &str) -> String {
    text.chars().take(60).collect()
}

fn param<'a>(prop: &'a Property<'_>, key: &str) -> Option<&'a str> {
    prop.params
        .iter()
        .find(|p| p.key.as_str().eq_ignore_ascii_case(key))
        .and_then(|p| p.val.as_ref())
        .map(|v| v.as_str().trim_matches('"'))
}

/// The IANA zone of a `TZID`, also where a prefix path leads to it
/// (`/example.org/2024/Europe/Berlin`).
fn zone(tzid: &str) -> Option<chrono_tz::Tz> {
    let mut rest = tzid.trim();
    loop {
        if let Ok(tz) = rest.parse::<chrono_tz::Tz>() {
            return Some(tz);
        }
        rest = rest.split_once('/')?.1;
    }
}

/// A wall time in `tz`: the earlier of an overlap, the first instant
/// after a gap.
fn resolve(tz: chrono_tz::Tz, wall: NaiveDateTime) -> Option<DateTime<rrule::Tz>> {
    for minutes in (0..=180).step_by(15) {
        let shifted = wall.checked_add_signed(chrono::Duration::minutes(minutes))?;
        if let Some(at) = tz.from_local_datetime(&shifted).earliest() {
            return Some(at.with_timezone(&rrule::Tz::Tz(tz)));
        }
    }
    None
}

/// A `DTSTART`, `DTEND`, `RDATE`, `EXDATE` or `RECURRENCE-ID` value (one
/// of a list): a date, or an instant (`Z`, a `TZID`, or floating, read as UTC).
fn date_or_time(prop: &Property<'_>, value: &str, line: usize) -> Result<Start, CalendarError> {
    let name = prop.name.as_str().to_ascii_uppercase();
    let one = Property { name: prop.name.clone(), val: value.into(), params: prop.params.clone() };
    let parsed = DatePerhapsTime::try_from(&one)
        .map_err(|_| ics_error(line, format!("{name}: not a date or date-time: {:?}", clip(value))))?;
    let wants_date = param(prop, "VALUE").is_some_and(|v| v.eq_ignore_ascii_case("DATE"));
    match parsed {
        DatePerhapsTime::Date(day) => Ok(Start::Day(day)),
        DatePerhapsTime::DateTime(_) if wants_date => {
            Err(ics_error(line, format!("{name}: VALUE=DATE but a date-time: {:?}", clip(value))))
        }
        DatePerhapsTime::DateTime(CalendarDateTime::Utc(at)) => Ok(Start::At(at.with_timezone(&rrule::Tz::UTC))),
        DatePerhapsTime::DateTime(CalendarDateTime::Floating(wall)) => {
            Ok(Start::At(Utc.from_utc_datetime(&wall).with_timezone(&rrule::Tz::UTC)))
        }
        DatePerhapsTime::DateTime(CalendarDateTime::WithTimezone { date_time, tzid }) => {
            let tz = zone(&tzid).ok_or_else(|| ics_error(line, format!("{name}: unknown TZID {tzid:?}")))?;
            resolve(tz, date_time).map(Start::At).ok_or_else(|| ics_error(line, format!("{name}: no such time")))
        }
    }
}

/// An instant for a repeat set: an all-day event's days at 00:00 UTC.
fn instant(start: Start) -> DateTime<rrule::Tz> {
    match start {
        Start::Day(day) => Utc.from_utc_datetime(&day.and_time(chrono::NaiveTime::MIN)).with_timezone(&rrule::Tz::UTC),
        Start::At(at) => at,
    }
}

/// Milliseconds of a `DURATION` (`P1D`, `PT1H30M`, `P2W`).
fn duration_ms(value: &str) -> Option<i64> {
    let value = value.trim();
    let value = value.strip_prefix('+').unwrap_or(value);
    let secs: i64 = match iso8601::duration(value).ok()? {
        iso8601::Duration::Weeks(w) => i64::from(w) * 7 * 86_400,
        iso8601::Duration::YMDHMS { year, month, day, hour, minute, second, millisecond } => {
            let s = i64::from(year) * 365 * 86_400
                + i64::from(month) * 30 * 86_400
                + i64::from(day) * 86_400
                + i64::from(hour) * 3600
                + i64::from(minute) * 60
                + i64::from(second);
            return s.checked_mul(1000)?.checked_add(i64::from(millisecond));
        }
    };
    secs.checked_mul(1000)
}

/// An `RRULE` value with a date or floating `UNTIL` made UTC (as `rrule`
/// wants it): a date is its event's day (all-day) or that day's end.
fn until_in_utc(rule: &str, start: Start) -> String {
    let zone = match start {
        Start::Day(_) => None,
        Start::At(at) => match at.timezone() {
            rrule::Tz::Tz(tz) => Some(tz),
            rrule::Tz::Local(_) => None,
        },
    };
    let fix = |value: &str| -> Option<String> {
        if value.ends_with(['Z', 'z']) {
            return None;
        }
        let wall = match NaiveDate::parse_from_str(value, "%Y%m%d") {
            Ok(day) if matches!(start, Start::Day(_)) => day.and_time(chrono::NaiveTime::MIN),
            Ok(day) => day.and_hms_opt(23, 59, 59)?,
            Err(_) => NaiveDateTime::parse_from_str(value, "%Y%m%dT%H%M%S").ok()?,
        };
        let utc = match zone {
            Some(tz) => resolve(tz, wall)?.with_timezone(&Utc).naive_utc(),
            None => wall,
        };
        Some(utc.format("%Y%m%dT%H%M%SZ").to_string())
    };
    rule.split(';')
        .map(|part| match part.split_once('=') {
            Some((key, value)) if key.trim().eq_ignore_ascii_case("UNTIL") => match fix(value.trim()) {
                Some(value) => format!("UNTIL={value}"),
                None => part.to_string(),
            },
            _ => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join(";")
}

fn read_event(unfolded: &Unfolded, event: &Component<'_>) -> Result<Event, CalendarError> {
    let begin = unfolded.line_of(event.name.as_str()).unwrap_or(1);
    let line_of = |prop: &Property<'_>| unfolded.line_of(prop.name.as_str()).unwrap_or(begin);
    let find = |name: &str| event.properties.iter().find(|p| p.name.as_str().eq_ignore_ascii_case(name));
    let all = |name: &'static str| event.properties.iter().filter(move |p| p.name.as_str().eq_ignore_ascii_case(name));
    let dtstart = find("DTSTART").ok_or_else(|| ics_error(begin, "VEVENT without DTSTART"))?;
    let start = date_or_time(dtstart, dtstart.val.as_str().trim(), line_of(dtstart))?;
    let length = match (find("DTEND"), find("DURATION")) {
        (Some(dtend), _) => {
            let line = line_of(dtend);
            match (start, date_or_time(dtend, dtend.val.as_str().trim(), line)?) {
                (Start::Day(from), Start::Day(to)) if to >= from => (to - from).num_days().max(1),
                (Start::At(from), Start::At(to)) if to >= from => (to - from).num_milliseconds(),
                (Start::Day(_), Start::Day(_)) | (Start::At(_), Start::At(_)) => {
                    return Err(ics_error(line, "DTEND is before DTSTART"))
                }
                _ => return Err(ics_error(line, "DTEND must be a date or a date-time as DTSTART is")),
            }
        }
        (None, Some(duration)) => {
            let line = line_of(duration);
            let ms = duration_ms(duration.val.as_str()).ok_or_else(|| {
                ics_error(line, format!("DURATION: not a duration: {:?}", clip(duration.val.as_str())))
            })?;
            match start {
                Start::Day(_) => ms.saturating_add(DAY_MS - 1).div_euclid(DAY_MS).max(1),
                Start::At(_) => ms,
            }
        }
        (None, None) => match start {
            Start::Day(_) => 1,
            Start::At(_) => 0,
        },
    };
    let dt_start = instant(start);
    let mut rules = Vec::new();
    let mut rule_line = begin;
    for prop in all("RRULE") {
        let line = line_of(prop);
        if rules.is_empty() {
            rule_line = line;
        }
        let text = until_in_utc(prop.val.as_str().trim(), start);
        let rule = text
            .parse::<rrule::RRule<rrule::Unvalidated>>()
            .and_then(|rule| rule.validate(dt_start))
            .map_err(|err| ics_error(line, format!("RRULE: {err}")))?;
        rules.push(rule);
    }
    let mut list = |name: &'static str| -> Result<Vec<DateTime<rrule::Tz>>, CalendarError> {
        let mut out = Vec::new();
        for prop in all(name) {
            let line = line_of(prop);
            if rule_line == begin && name == "RDATE" {
                rule_line = line;
            }
            for value in prop.val.as_str().split(',').map(str::trim).filter(|v| !v.is_empty()) {
                out.push(instant(date_or_time(prop, value, line)?));
            }
        }
        Ok(out)
    };
    let rdates = list("RDATE")?;
    let exdates = list("EXDATE")?;
    let recurrence_id = match find("RECURRENCE-ID") {
        Some(prop) => Some(instant(date_or_time(prop, prop.val.as_str().trim(), line_of(prop))?).timestamp_millis()),
        None => None,
    };
    Ok(Event {
        line: begin,
        start,
        length,
        rules,
        rule_line,
        rdates,
        exdates,
        uid: find("UID").map(|p| p.val.as_str().trim().to_string()),
        recurrence_id,
        cancelled: find("STATUS").is_some_and(|p| p.val.as_str().trim().eq_ignore_ascii_case("CANCELLED")),
    })
}

/// Adds the spans of `events` (their repeats before [`HORIZON_YEAR`]) to
/// `days` and `ranges`. A `CANCELLED` event adds nothing; an event with a
/// `RECURRENCE-ID` replaces that repeat of the event with its `UID`.
fn expand(
    events: &[Event],
    deadline: Option<Instant>,
    days: &mut Vec<(NaiveDate, NaiveDate)>,
    ranges: &mut Vec<(i64, i64)>,
) -> Result<(), CalendarError> {
    let horizon = Utc.with_ymd_and_hms(HORIZON_YEAR, 1, 1, 0, 0, 0).single().map_or(i64::MAX, |h| h.timestamp_millis());
    let mut replaced: HashMap<&str, HashSet<i64>> = HashMap::new();
    for event in events {
        if let (Some(uid), Some(at)) = (&event.uid, event.recurrence_id) {
            replaced.entry(uid.as_str()).or_default().insert(at);
        }
    }
    let none = HashSet::new();
    let mut recurring = 0;
    let mut budget = MAX_OCCURRENCES;
    for event in events.iter().filter(|e| !e.cancelled) {
        let skip = match (&event.uid, event.recurrence_id) {
            (Some(uid), None) => replaced.get(uid.as_str()).unwrap_or(&none),
            _ => &none,
        };
        let mut add = |at: DateTime<rrule::Tz>| {
            let ms = at.timestamp_millis();
            if skip.contains(&ms) {
                return;
            }
            match event.start {
                Start::Day(_) => {
                    let day = at.with_timezone(&Utc).date_naive();
                    days.push((day, add_days(day, event.length)));
                }
                Start::At(_) => ranges.push((ms, ms.saturating_add(event.length))),
            }
        };
        let first = instant(event.start);
        if !event.exdates.contains(&first) {
            add(first);
        }
        if !event.repeats() {
            continue;
        }
        recurring += 1;
        if deadline.is_some_and(|deadline| Instant::now() > deadline) {
            return Err(ics_error(
                event.rule_line,
                format!("the repeats take more than {} s to compute; simplify the RRULEs", EXPAND_BUDGET.as_secs()),
            ));
        }
        if recurring > MAX_RECURRING_EVENTS {
            return Err(ics_error(
                event.rule_line,
                format!(
                    "more than {} repeating events; at most {}",
                    thousands(MAX_RECURRING_EVENTS),
                    thousands(MAX_RECURRING_EVENTS)
                ),
            ));
        }
        let set = rrule::RRuleSet::new(first)
            .set_rrules(event.rules.clone())
            .set_rdates(event.rdates.clone())
            .set_exdates(event.exdates.clone())
            .limit();
        let mut repeats = Vec::new();
        let walked = catch_unwind(AssertUnwindSafe(|| {
            for at in &set {
                if at.timestamp_millis() >= horizon {
                    break;
                }
                if at == first {
                    continue;
                }
                if repeats.len() >= budget {
                    return false;
                }
                repeats.push(at);
            }
            true
        }));
        match walked {
            Ok(true) => {}
            Ok(false) => {
                return Err(ics_error(
                    event.rule_line,
                    format!(
                        "the events repeat more than {} times before {HORIZON_YEAR}; give this RRULE a COUNT or UNTIL",
                        thousands(MAX_OCCURRENCES)
                    ),
                ))
            }
            Err(_) => return Err(ics_error(event.rule_line, "the repeats of this event cannot be computed")),
        }
        budget -= repeats.len();
        repeats.into_iter().for_each(&mut add);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use chrono_tz::Tz;

    use super::*;

    fn ms(rfc3339: &str) -> i64 {
        DateTime::parse_from_rfc3339(rfc3339).unwrap().timestamp_millis()
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn ics(events: &str) -> CompiledCalendar {
        let text = format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n{events}END:VCALENDAR\r\n");
        CalendarSpec::from_wire(&[], &[], &[], Some(text)).unwrap().compile().unwrap()
    }

    fn ics_err(text: &str) -> String {
        CalendarSpec::from_wire(&[], &[], &[], Some(text.to_string())).unwrap_err().to_string()
    }

    #[test]
    fn dates_are_days_in_the_timers_zone() {
        let cal = CalendarSpec::from_wire(&strings(&["2026-12-25"]), &[], &[], None).unwrap().compile().unwrap();
        // 2026-12-25 01:00 in Shanghai, still 2026-12-24 in UTC.
        let t = ms("2026-12-24T17:00:00Z");
        assert!(cal.excludes(t, Tz::Asia__Shanghai));
        assert!(!cal.excludes(t, Tz::UTC));
        assert!(cal.excludes(ms("2026-12-25T23:59:59.999Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2026-12-26T00:00:00Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2026-12-25T16:00:00Z"), Tz::Asia__Shanghai), "Dec 26 00:00 in Shanghai");
    }

    #[test]
    fn weekdays_take_any_spelling_and_are_days_in_the_zone() {
        let spec = CalendarSpec::from_wire(&[], &[], &strings(&["SAT", "sun", "Saturday"]), None).unwrap();
        assert_eq!(spec.weekdays, [Weekday::Sat, Weekday::Sun, Weekday::Sat]);
        assert_eq!(weekday_code(Weekday::Sat), "SAT");
        let cal = spec.compile().unwrap();
        // Friday 2026-11-27 23:30 UTC is Saturday 00:30 in Berlin.
        let t = ms("2026-11-27T23:30:00Z");
        assert!(!cal.excludes(t, Tz::UTC));
        assert!(cal.excludes(t, Tz::Europe__Berlin));
        assert!(cal.excludes(ms("2026-11-29T12:00:00Z"), Tz::UTC), "Sunday");
        assert!(!cal.excludes(ms("2026-11-30T00:00:00Z"), Tz::UTC), "Monday");
    }

    #[test]
    fn ranges_are_half_open() {
        let cal = CalendarSpec::from_wire(&[], &[(1_000, 2_000), (1_500, 2_500), (5_000, 6_000)], &[], None)
            .unwrap()
            .compile()
            .unwrap();
        assert!(!cal.excludes(999, Tz::UTC));
        assert!(cal.excludes(1_000, Tz::UTC));
        assert!(cal.excludes(2_499, Tz::Asia__Shanghai), "ranges are instants, in any zone");
        assert!(!cal.excludes(2_500, Tz::UTC));
        assert!(cal.excludes(5_999, Tz::UTC));
        assert!(!cal.excludes(6_000, Tz::UTC));
    }

    #[test]
    fn wire_errors_name_the_field() {
        let err = CalendarSpec::from_wire(&strings(&["2026-12-25", "2026-02-28", "x"]), &[], &[], None).unwrap_err();
        assert_eq!(err.to_string(), r#"dates[2]: not a date (YYYY-MM-DD): "x""#);
        for bad in ["2026-02-30", "2026-2-03", "+2026-02-03", " 2026-02-03"] {
            assert!(CalendarSpec::from_wire(&strings(&[bad]), &[], &[], None).is_err(), "{bad}");
        }
        let err = CalendarSpec::from_wire(&[], &[(5, 5)], &[], None).unwrap_err();
        assert_eq!(err.to_string(), "ranges[0]: to must be after from");
        let err = CalendarSpec::from_wire(&[], &[], &strings(&["MON", "FOO"]), None).unwrap_err();
        assert_eq!(err.to_string(), r#"weekdays[1]: unknown weekday "FOO""#);
    }

    #[test]
    fn an_all_day_event_excludes_its_days_dtend_exclusive() {
        let cal = ics(concat!(
            "BEGIN:VEVENT\r\nUID:a\r\nDTSTART;VALUE=DATE:20261001\r\nDTEND;VALUE=DATE:20261004\r\nEND:VEVENT\r\n",
            "BEGIN:VEVENT\r\nUID:b\r\nDTSTART;VALUE=DATE:20261225\r\nEND:VEVENT\r\n",
        ));
        assert!(!cal.excludes(ms("2026-09-30T23:59:59Z"), Tz::UTC));
        assert!(cal.excludes(ms("2026-10-01T00:00:00Z"), Tz::UTC));
        assert!(cal.excludes(ms("2026-10-03T23:59:59Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2026-10-04T00:00:00Z"), Tz::UTC));
        assert!(cal.excludes(ms("2026-10-03T17:00:00Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2026-10-03T17:00:00Z"), Tz::Asia__Shanghai), "Oct 4 in Shanghai");
        assert!(cal.excludes(ms("2026-12-24T17:00:00Z"), Tz::Asia__Shanghai), "no DTEND: one day");
        assert!(!cal.excludes(ms("2026-12-26T00:00:00Z"), Tz::UTC));
    }

    #[test]
    fn timed_events_exclude_their_instants() {
        let cal = ics(concat!(
            "BEGIN:VEVENT\r\nDTSTART:20261110T090000Z\r\nDTEND:20261110T100000Z\r\nEND:VEVENT\r\n",
            "BEGIN:VEVENT\r\nDTSTART;TZID=America/New_York:20261111T090000\r\nDURATION:PT30M\r\nEND:VEVENT\r\n",
            "BEGIN:VEVENT\r\nDTSTART:20261112T090000\r\nDTEND:20261112T091500\r\nEND:VEVENT\r\n",
        ));
        assert!(!cal.excludes(ms("2026-11-10T08:59:59Z"), Tz::UTC));
        assert!(cal.excludes(ms("2026-11-10T09:00:00Z"), Tz::UTC));
        assert!(cal.excludes(ms("2026-11-10T09:59:59.999Z"), Tz::Asia__Shanghai));
        assert!(!cal.excludes(ms("2026-11-10T10:00:00Z"), Tz::UTC));
        // 09:00 EST is 14:00 UTC.
        assert!(!cal.excludes(ms("2026-11-11T09:00:00Z"), Tz::UTC));
        assert!(cal.excludes(ms("2026-11-11T14:29:00Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2026-11-11T14:30:00Z"), Tz::UTC));
        // Floating: read as UTC.
        assert!(cal.excludes(ms("2026-11-12T09:10:00Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2026-11-12T12:00:00Z"), Tz::UTC), "a timed event excludes no whole day");
    }

    #[test]
    fn a_yearly_rrule_excludes_the_date_every_year() {
        let cal = ics("BEGIN:VEVENT\r\nUID:xmas\r\nDTSTART;VALUE=DATE:20251225\r\nRRULE:FREQ=YEARLY\r\nEND:VEVENT\r\n");
        for year in [2025, 2026, 2027, 2035, 2199] {
            assert!(cal.excludes(ms(&format!("{year}-12-25T12:00:00Z")), Tz::UTC), "{year}");
            assert!(!cal.excludes(ms(&format!("{year}-12-26T12:00:00Z")), Tz::UTC), "{year}");
        }
        assert!(!cal.excludes(ms("2024-12-25T12:00:00Z"), Tz::UTC), "before DTSTART");
        assert!(cal.excludes(ms("2035-12-24T17:00:00Z"), Tz::Asia__Shanghai));

        let cal = ics(concat!(
            "BEGIN:VEVENT\r\nUID:y\r\nDTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=YEARLY;UNTIL=20280101\r\nEND:VEVENT\r\n",
            "BEGIN:VEVENT\r\nUID:z\r\nDTSTART;VALUE=DATE:20260704\r\nRRULE:FREQ=YEARLY;COUNT=3;INTERVAL=2\r\n",
            "EXDATE;VALUE=DATE:20280704\r\nEND:VEVENT\r\n",
        ));
        assert!(cal.excludes(ms("2028-01-01T12:00:00Z"), Tz::UTC), "UNTIL is inclusive");
        assert!(!cal.excludes(ms("2029-01-01T12:00:00Z"), Tz::UTC));
        assert!(cal.excludes(ms("2026-07-04T12:00:00Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2027-07-04T12:00:00Z"), Tz::UTC), "INTERVAL=2");
        assert!(!cal.excludes(ms("2028-07-04T12:00:00Z"), Tz::UTC), "EXDATE");
        assert!(cal.excludes(ms("2030-07-04T12:00:00Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2032-07-04T12:00:00Z"), Tz::UTC), "COUNT=3");
    }

    #[test]
    fn a_weekly_timed_rrule_follows_its_zone_and_overrides_replace_repeats() {
        let cal = ics(concat!(
            "BEGIN:VEVENT\r\nUID:w\r\nDTSTART;TZID=Europe/Berlin:20260306T130000\r\n",
            "DTEND;TZID=Europe/Berlin:20260306T170000\r\nRRULE:FREQ=WEEKLY\r\nEND:VEVENT\r\n",
            "BEGIN:VEVENT\r\nUID:w\r\nRECURRENCE-ID;TZID=Europe/Berlin:20260313T130000\r\n",
            "DTSTART;TZID=Europe/Berlin:20260313T150000\r\nDTEND;TZID=Europe/Berlin:20260313T160000\r\nEND:VEVENT\r\n",
        ));
        // CET (UTC+1) on March 6, CEST (UTC+2) from March 29.
        assert!(cal.excludes(ms("2026-03-06T12:00:00Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2026-03-06T16:00:00Z"), Tz::UTC));
        assert!(cal.excludes(ms("2026-04-03T11:00:00Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2026-04-03T15:00:00Z"), Tz::UTC));
        assert!(!cal.excludes(ms("2026-03-13T12:30:00Z"), Tz::UTC), "the replaced repeat");
        assert!(cal.excludes(ms("2026-03-13T14:30:00Z"), Tz::UTC), "its replacement");
    }

    #[test]
    fn broken_ics_reports_its_line() {
        // Line 7 (the folded DESCRIPTION counts two lines).
        let text = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nDESCRIPTION:a long\r\n  text\r\n\
                    DTSTART;VALUE=DATE:20261225\r\nthis is not a property\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        assert_eq!(ics_err(text), r#"ics: line 7: not a content line (NAME:VALUE): "this is not a property""#);
        let text = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20261225\nEND:VEVENX\nEND:VCALENDAR\n";
        assert_eq!(ics_err(text), "ics: line 4: END does not match the BEGIN it closes");
        let text = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20261225\nEND:VEVENT\n";
        assert!(ics_err(text).starts_with("ics: line 5: "), "{}", ics_err(text));
        let text = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20261225\nRRULE:FREQ=SOMETIMES\nEND:VEVENT\nEND:VCALENDAR";
        let err = ics_err(text);
        assert!(err.starts_with("ics: line 4: RRULE: ") && err.contains("SOMETIMES"), "{err}");
        let text = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:2026-12-25\nEND:VEVENT\nEND:VCALENDAR";
        assert_eq!(ics_err(text), r#"ics: line 3: DTSTART: not a date or date-time: "2026-12-25""#);
        let text =
            "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;TZID=Mars/Olympus:20261225T100000\nEND:VEVENT\nEND:VCALENDAR";
        assert_eq!(ics_err(text), r#"ics: line 3: DTSTART: unknown TZID "Mars/Olympus""#);
        let text = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:x\nEND:VEVENT\nEND:VCALENDAR";
        assert_eq!(ics_err(text), "ics: line 2: VEVENT without DTSTART");
        let text = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20261225T100000Z\nDTEND:20261225T090000Z\nEND:VEVENT\nEND:VCALENDAR";
        assert_eq!(ics_err(text), "ics: line 4: DTEND is before DTSTART");
    }

    #[test]
    fn empty_ics_has_no_entries() {
        for text in ["", "  \r\n", "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n"] {
            let spec = CalendarSpec::from_wire(&[], &[], &[], Some(text.to_string())).unwrap();
            assert!(spec.compile().unwrap().is_empty(), "{text:?}");
        }
    }

    #[test]
    fn at_most_ten_thousand_entries() {
        let day = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let dates: Vec<String> = (0..9_999).map(|i| add_days(day, i).format("%Y-%m-%d").to_string()).collect();
        let one = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20261225\nEND:VEVENT\nEND:VCALENDAR\n";
        assert!(CalendarSpec::from_wire(&dates, &[], &[], Some(one.into())).is_ok());
        let err = CalendarSpec::from_wire(&dates, &[(1, 2)], &[], Some(one.into())).unwrap_err();
        assert_eq!(err.to_string(), "calendar has 10,001 entries; at most 10,000");
        assert_eq!(err, CalendarError::TooManyEntries { count: 10_001 });
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn repeats_are_bounded() {
        let text =
            "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20260101T000000Z\nRRULE:FREQ=MINUTELY\nEND:VEVENT\nEND:VCALENDAR";
        let err = ics_err(text);
        assert!(err.starts_with("ics: line 4: the events repeat more than 500,000 times"), "{err}");
        // A rule that never matches ends (rrule's loop limit).
        let text =
            "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20260101\nRRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30\n\
                    END:VEVENT\nEND:VCALENDAR";
        assert!(CalendarSpec::from_wire(&[], &[], &[], Some(text.into())).is_ok());
    }

    #[test]
    fn never_panics_on_odd_instants() {
        let spec =
            CalendarSpec::from_wire(&strings(&["2026-12-25"]), &[(i64::MIN, i64::MIN + 1)], &strings(&["MON"]), None)
                .unwrap();
        let cal = spec.compile().unwrap();
        for t in [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX] {
            for tz in [Tz::UTC, Tz::Pacific__Kiritimati, Tz::America__St_Johns] {
                let _ = cal.excludes(t, tz);
            }
        }
        assert!(cal.excludes(i64::MIN, Tz::UTC));
        assert!(!CompiledCalendar::default().excludes(0, Tz::UTC));
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// Whatever the text, an answer, never a panic.
        #[test]
        fn any_ics_text_is_an_answer(lines in proptest::collection::vec(proptest::prop_oneof![
            proptest::sample::select(&[
                "BEGIN:VCALENDAR", "END:VCALENDAR", "BEGIN:VEVENT", "END:VEVENT", "BEGIN:VALARM", "END:VALARM",
                "DTSTART;VALUE=DATE:20261225", "DTSTART:20261225T100000Z", "DTSTART;TZID=Europe/Berlin:20260329T023000",
                "DTEND;VALUE=DATE:20261224", "DTEND:20261225T110000", "DURATION:PT1H", "DURATION:P1W", "DURATION:-P1D",
                "RRULE:FREQ=YEARLY", "RRULE:FREQ=DAILY;COUNT=3", "RRULE:FREQ=WEEKLY;UNTIL=20270101",
                "RRULE:FREQ=MONTHLY;BYMONTHDAY=31;BYSETPOS=-1", "EXDATE:20271225T100000Z", "RDATE;VALUE=DATE:20300101",
                "RECURRENCE-ID:20271225T100000Z", "UID:a", "STATUS:CANCELLED", " folded", "",
            ][..]).prop_map(str::to_string),
            "[A-Z;=:/0-9TZ -]{0,24}",
        ], 0..16)) {
            let text = lines.join("\r\n");
            if let Ok(spec) = CalendarSpec::from_wire(&[], &[], &[], Some(text)) {
                let cal = spec.compile().unwrap();
                let _ = cal.excludes(1_798_000_000_000, Tz::Asia__Shanghai);
            }
        }
    }

    #[test]
    fn the_spec_round_trips_as_json() {
        let spec = CalendarSpec::from_wire(
            &strings(&["2026-12-25"]),
            &[(1, 2)],
            &strings(&["sat"]),
            Some("BEGIN:VCALENDAR\nEND:VCALENDAR\n".into()),
        )
        .unwrap();
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(
            json,
            r#"{"dates":["2026-12-25"],"ranges":[{"fromMs":1,"toMs":2}],"weekdays":["Sat"],"ics":"BEGIN:VCALENDAR\nEND:VCALENDAR\n"}"#
        );
        assert_eq!(serde_json::from_str::<CalendarSpec>(&json).unwrap(), spec);
        assert_eq!(serde_json::from_str::<CalendarSpec>("{}").unwrap(), CalendarSpec::default());
    }
}
