//! Cron parsing and fire-time expansion in a time zone.
//!
//! # Syntax
//!
//! - 5 fields: `minute hour day-of-month month day-of-week` (POSIX); the
//!   second is 0.
//! - 6 fields: `second minute hour day-of-month month day-of-week`
//!   (Quartz/Spring style, e.g. `*/5 * * ? * *`, `0 30 2 * * ?`).
//! - 7 fields: the 6 above plus `year`, 1970-2199.
//! - Macros: `@yearly` (`@annually`), `@monthly`, `@weekly` (Sunday),
//!   `@daily` (`@midnight`), `@hourly`.
//!
//! Each field takes `*`, values, names (`JAN`-`DEC`, `SUN`-`SAT`, any case),
//! lists `a,b`, ranges `a-b` and steps `*/n`, `a-b/n`, `a/n` (`a` to the
//! field's maximum). Day-of-month and day-of-week take `?` (same as `*`, also
//! accepted in the year field). Day-of-month takes `L` (last day), `LW` (last
//! weekday) and `nW` (weekday nearest day `n`, within the month). Day-of-week
//! takes `nL` (last weekday `n` of the month) and `n#k` (`k`-th weekday `n`,
//! `k` = 1-5). When both day fields are restricted, a day matching either
//! fires (POSIX rule). Expressions longer than 256 characters are rejected.
//!
//! # Weekday numbers
//!
//! - 5 fields (POSIX): 0-7, where 0 and 7 are Sunday, 1 is Monday.
//! - 6 and 7 fields (Quartz): 1-7, where 1 is Sunday, 2 Monday, 7 Saturday;
//!   a bare `L` means Saturday. Spring numbers weekdays like POSIX, so
//!   prefer names (`MON-FRI`), which mean the same in every form.
//!
//! # Time zones and daylight saving time
//!
//! Fields match the wall clock of the schedule's IANA time zone. A schedule
//! is *fixed-time* when neither its minute nor its hour field starts with
//! `*` (`0 30 2 * * ?`, `@daily`), and *interval* otherwise (`0 */15 * * * *`,
//! `@hourly`); this is the distinction Vixie cron makes.
//!
//! - Spring-forward gap (e.g. 02:00-03:00 does not exist): a fixed-time
//!   schedule whose wall time falls in the gap fires once, at the first
//!   instant after the gap (02:30 America/New_York becomes 03:00 EDT); all
//!   gap times of one day collapse into that one fire, also with a regular
//!   fire at that instant. An interval schedule skips the missing wall times
//!   and keeps its real spacing (01:45 EST, then 03:00 EDT).
//! - Fall-back overlap (e.g. 01:00-02:00 happens twice): a fixed-time
//!   schedule fires once, in the first occurrence. An interval schedule
//!   fires in both, so `0 */15 * * * *` keeps firing every real 15 minutes.
//!
//! Fire times are whole seconds. The search ends at the end of 2199, in
//! every zone: a schedule with no fire after `now` up to then is rejected
//! as never firing.
//!
//! # Years past the time zone data
//!
//! The zone data lists offset changes up to [`DST_LAST_YEAR`] (2099) and
//! keeps its last offset after that. A zone that still changes its offset
//! in 2099 (America/New_York, Europe/Berlin, Australia/Sydney) keeps its
//! last rules instead, as the tz database's own rule for later years does:
//! a month after 2099 changes its offset like the latest month of the same
//! name up to 2099 that starts on the same weekday, in a year that follows
//! those rules. So `0 0 1 7 *` in America/New_York fires at 04:00Z (EDT) in
//! 2150 as in 2024.
//!
//! # Corner cases
//!
//! - `nW` fires only in months that have day `n`: `31W` fires on the weekday
//!   nearest the 31st (the 29th when the 31st is a Sunday), and not at all
//!   in February, April, June, September and November. Use `LW` for the
//!   last weekday of every month.
//! - In 5-field crons, weekday `7` is Sunday, so `7/2` means Sunday, Tuesday,
//!   Thursday, Saturday (`0/2`), and `7/1` every day. A range from `7`
//!   starts on Sunday too, as croniter reads it: `7-3` is `0-3`, `7-7/2` is
//!   `0/2`, and `7-7` is every day, like `SUN-SUN`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

use crate::{Error, Result};

/// Longest accepted expression, in characters.
pub const MAX_EXPR_LEN: usize = 256;
/// First year a schedule can fire in.
pub const MIN_YEAR: u32 = 1970;
/// Last year a schedule can fire in.
pub const MAX_YEAR: u32 = 2199;
/// Last year whose daylight saving rules the time zone data holds.
pub const DST_LAST_YEAR: i32 = 2099;

/// The widest window `fires_between` expands at a fixed UTC offset.
const FAST_WINDOW_SECS: i64 = 6 * 3600;
/// Farther than any UTC offset, so bisection bounds around a wall time hold.
const DAY_SECS: i64 = 86_400;

const MACROS: &[(&str, &str)] = &[
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Parses an IANA time zone name.
pub fn parse_timezone(name: &str) -> Result<Tz> {
    name.parse::<Tz>().map_err(|_| Error::UnknownTimezone(name.to_string()))
}

/// Expressions kept parsed, at most: a timer's cron is parsed when it is
/// checked, when its peak is counted and when it is expanded, and many
/// timers share an expression. The cache is emptied when it is full.
const PARSED_CAPACITY: usize = 4096;

/// Parsed expressions by `"{zone} {expression}"`.
fn parsed_cache() -> std::sync::MutexGuard<'static, HashMap<String, Arc<CronSchedule>>> {
    static PARSED: OnceLock<Mutex<HashMap<String, Arc<CronSchedule>>>> = OnceLock::new();
    PARSED.get_or_init(Mutex::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A parsed cron expression bound to a time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    expr: String,
    tz: Tz,
    /// The normalized 7-field pattern, matched against local wall time.
    cron: Cron,
    /// Fixed-time (see the module doc): gap times move past the gap, and
    /// repeated times fire only in their first occurrence.
    fixed_time: bool,
    /// The zone changes its offset in [`DST_LAST_YEAR`]: later years take
    /// their offsets from an earlier year (see the module doc).
    dst_repeats: bool,
    /// The years whose offset changes later years repeat; found on first use.
    repeated: OnceLock<Repeated>,
}

/// Why a fire time is not simply the wall time the expression names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireNote {
    /// Moved to the end of a spring-forward gap: the wall time it names
    /// does not exist that day.
    Gap,
    /// The first of a wall time that happens twice (fall-back overlap).
    Overlap,
}

impl FireNote {
    /// The wire name: `gap` or `overlap`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gap => "gap",
            Self::Overlap => "overlap",
        }
    }
}

impl CronSchedule {
    /// Parses `expr` (5, 6 or 7 fields, or a macro) in time zone `tz`.
    /// Fails when it is malformed, or when it never fires after `now`.
    pub fn parse(expr: &str, tz: &str, now: DateTime<Utc>) -> Result<Self> {
        let schedule = Self::parsed(expr, tz)?;
        match schedule.next_after(now) {
            Some(_) => Ok(Self::clone(&schedule)),
            None => Err(Error::CronNeverFires(expr.trim().to_string())),
        }
    }

    /// Parses `expr` in `tz` like [`CronSchedule::parse`] but without
    /// asking whether it fires again, sharing the result: for expressions
    /// checked when their timer was made, evaluated again and again.
    pub fn parsed(expr: &str, tz: &str) -> Result<Arc<Self>> {
        let tz = parse_timezone(tz)?;
        let expr = expr.trim();
        let key = format!("{tz} {expr}");
        let cached = parsed_cache().get(&key).cloned();
        if let Some(schedule) = cached {
            return Ok(schedule);
        }
        let schedule = Arc::new(Self::parse_pattern(expr, tz)?);
        let mut cache = parsed_cache();
        if cache.len() >= PARSED_CAPACITY {
            cache.clear();
        }
        cache.insert(key, schedule.clone());
        Ok(schedule)
    }

    /// Parses `expr` (trimmed) in `tz`, without the never-fires check.
    fn parse_pattern(expr: &str, tz: Tz) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidCron { expr: shorten(expr), reason };
        let (pattern, fixed_time, quartz) = normalize(expr).map_err(invalid)?;
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Required)
            .alternative_weekdays(quartz)
            .build()
            .parse(&pattern)
            .map_err(|e| {
                // The normalized pattern is the library's input, never the
                // user's: name the expression only.
                tracing::debug!(expr, error = %e, "A normalized cron pattern did not parse.");
                invalid("this combination of fields is not supported".to_string())
            })?;
        let dst_repeats = changes_offset_in(tz, DST_LAST_YEAR);
        Ok(Self { expr: expr.to_string(), tz, cron, fixed_time, dst_repeats, repeated: OnceLock::new() })
    }

    /// Why fire time `t` (one this schedule gave) is not plainly the wall
    /// time the expression names: moved past a spring-forward gap, or the
    /// first of a repeated wall time.
    pub fn note(&self, t: DateTime<Utc>) -> Option<FireNote> {
        let wall = self.wall(t);
        if let LocalResult::Ambiguous(earlier, _) = self.local(wall) {
            return (earlier == t).then_some(FireNote::Overlap);
        }
        if !self.fixed_time {
            return None;
        }
        // `t` ends a gap when the wall clock jumped to it from more than a
        // second before; the fire was moved if the expression names a wall
        // time inside the jump.
        let before = self.wall(t - chrono::Duration::seconds(1));
        if wall - before <= chrono::Duration::seconds(1) {
            return None;
        }
        let named = self.cron.find_next_occurrence(&before, false).ok()?;
        (named < wall).then_some(FireNote::Gap)
    }

    /// The expression as given (trimmed).
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The time zone the expression is evaluated in.
    pub fn timezone(&self) -> Tz {
        self.tz
    }

    /// Fires in any minute it fires in: the seconds it names (every such
    /// minute matches the same seconds; fire times are whole seconds).
    pub fn fires_per_minute(&self) -> u64 {
        // 1: croner's bit for "this value matches" (its `ALL_BIT`, not exported).
        self.cron.pattern.seconds.count_set_values(1) as u64
    }

    /// The first fire time strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let start = self.wall(after).with_nanosecond(0)?;
        let first = self.scan(start, after);
        if self.fixed_time {
            return first;
        }
        // An interval schedule also fires in the repeated half of an overlap
        // that `after` has not reached yet, at wall times before `start`.
        let LocalResult::Ambiguous(_, later) = self.local(start) else { return first };
        if after >= later {
            return first;
        }
        let switch = self.transition(after.timestamp(), later.timestamp())?;
        if first.is_some_and(|t| t < switch) {
            return first;
        }
        let overlap_start = self.wall(switch);
        let repeated =
            self.cron.find_next_occurrence(&overlap_start, true).ok().and_then(|wall| match self.local(wall) {
                LocalResult::Ambiguous(_, later) => Some(later),
                _ => None,
            });
        match (first, repeated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fire times in `[from_ms, to_ms)`, Unix milliseconds, at most `limit`.
    pub fn fires_between(&self, from_ms: i64, to_ms: i64, limit: usize) -> Vec<i64> {
        if limit == 0 || from_ms >= to_ms {
            return Vec::new();
        }
        if let Some(fires) = self.fires_at_fixed_offset(from_ms, to_ms, limit) {
            return fires;
        }
        let mut out = Vec::new();
        let Some(mut t) = DateTime::from_timestamp_millis(from_ms - 1) else { return out };
        while out.len() < limit {
            match self.next_after(t) {
                Some(next) if next.timestamp_millis() < to_ms => {
                    out.push(next.timestamp_millis());
                    t = next;
                }
                _ => break,
            }
        }
        out
    }

    /// Walks matching wall times after `start` and returns the first
    /// instant after `after` that the DST rules let fire.
    fn scan(&self, start: NaiveDateTime, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut cursor = start;
        loop {
            let wall = self.cron.find_next_occurrence(&cursor, false).ok()?;
            let fire = match self.local(wall) {
                LocalResult::Single(t) => Some(t),
                LocalResult::Ambiguous(earlier, later) => {
                    if earlier > after || self.fixed_time {
                        Some(earlier)
                    } else {
                        Some(later)
                    }
                }
                LocalResult::None if self.fixed_time => self.gap_end(wall),
                LocalResult::None => None,
            };
            if let Some(t) = fire.filter(|t| *t > after) {
                return Some(t);
            }
            cursor = wall;
        }
    }

    /// Expands a short window that one UTC offset covers, with the second
    /// before it: there every wall time is one instant, so no DST rule
    /// applies and wall times map to instants by subtraction. `None` when
    /// the window does not qualify.
    fn fires_at_fixed_offset(&self, from_ms: i64, to_ms: i64, limit: usize) -> Option<Vec<i64>> {
        let first = from_ms.div_euclid(1000) + i64::from(from_ms.rem_euclid(1000) != 0);
        let last = (to_ms - 1).div_euclid(1000);
        if last - first > FAST_WINDOW_SECS {
            return None;
        }
        let offset = self.offset_at(first - 1)?;
        if self.offset_at(last)? != offset {
            return None;
        }
        for secs in [first - 1, last] {
            if !matches!(self.local(self.wall_at(secs)?), LocalResult::Single(_)) {
                return None;
            }
        }
        let mut out = Vec::new();
        let mut wall = self.wall_at(first)?;
        let mut inclusive = true;
        while out.len() < limit {
            let Ok(next) = self.cron.find_next_occurrence(&wall, inclusive) else { break };
            let secs = next.and_utc().timestamp() - i64::from(offset);
            if secs > last {
                break;
            }
            out.push(secs * 1000);
            wall = next;
            inclusive = false;
        }
        Some(out)
    }

    /// The first instant after the DST gap that skips `wall`.
    fn gap_end(&self, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
        let base = wall.and_utc().timestamp();
        let (mut lo, mut hi) = (base - DAY_SECS, base + DAY_SECS);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.wall_at(mid)? > wall {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        DateTime::from_timestamp(hi, 0)
    }

    /// The first second in `(lo, hi]` with the UTC offset of `hi`.
    fn transition(&self, mut lo: i64, mut hi: i64) -> Option<DateTime<Utc>> {
        let target = self.offset_at(hi)?;
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.offset_at(mid)? == target {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        DateTime::from_timestamp(hi, 0)
    }

    /// The wall clock at instant `t`.
    fn wall(&self, t: DateTime<Utc>) -> NaiveDateTime {
        let shift = self.month_shift(t.date_naive());
        t.checked_sub_signed(shift)
            .and_then(|same| same.with_timezone(&self.tz).naive_local().checked_add_signed(shift))
            .unwrap_or_else(|| t.with_timezone(&self.tz).naive_local())
    }

    /// The instants at which the wall clock reads `wall`: none in a
    /// spring-forward gap, two in a fall-back overlap.
    fn local(&self, wall: NaiveDateTime) -> LocalResult<DateTime<Utc>> {
        let shift = self.month_shift(wall.date());
        let plain = || self.tz.from_local_datetime(&wall).map(|t| t.to_utc());
        let Some(same) = wall.checked_sub_signed(shift) else { return plain() };
        let back = |t: DateTime<Tz>| t.to_utc().checked_add_signed(shift);
        match self.tz.from_local_datetime(&same) {
            LocalResult::None => LocalResult::None,
            LocalResult::Single(t) => back(t).map_or_else(plain, LocalResult::Single),
            LocalResult::Ambiguous(a, b) => match (back(a), back(b)) {
                (Some(a), Some(b)) => LocalResult::Ambiguous(a, b),
                _ => plain(),
            },
        }
    }

    /// How far the month of `date` lies after the month whose offset
    /// changes it repeats (see the module doc); zero in the zone data's years.
    fn month_shift(&self, date: NaiveDate) -> TimeDelta {
        if !self.dst_repeats || date.year() <= DST_LAST_YEAR {
            return TimeDelta::zero();
        }
        let month = date.month();
        let row = &self.repeated.get_or_init(|| repeated_years(self.tz))[month as usize - 1];
        // A February with a 29th may lack a repeated year; no zone's rules
        // change the offset in February, so a February without one does.
        let same = month_layout(date.year(), month).and_then(|layout| row[layout].or(row[layout ^ 1]));
        same.and_then(|year| Some(date.with_day(1)? - NaiveDate::from_ymd_opt(year, month, 1)?))
            .unwrap_or_else(TimeDelta::zero)
    }

    fn wall_at(&self, secs: i64) -> Option<NaiveDateTime> {
        Some(self.wall(DateTime::from_timestamp(secs, 0)?))
    }

    /// UTC offset in seconds at Unix second `secs`.
    fn offset_at(&self, secs: i64) -> Option<i32> {
        let t = DateTime::from_timestamp(secs, 0)?;
        i32::try_from((self.wall(t) - t.naive_utc()).num_seconds()).ok()
    }
}

/// The canonical 7-field form of `expr`: macros expanded, a 5-field
/// expression given second `0` and year `*`, each field's values written
/// as sorted, merged ranges, and weekdays written as names (which mean the
/// same in POSIX and Quartz numbering). A minute or hour field that starts
/// with `*` is kept as written, so a schedule stays interval or fixed-time
/// (see the module doc). Parsing the canonical form gives the same fire
/// times, and it is its own canonical form.
pub fn canonical(expr: &str) -> Result<String> {
    let expr = expr.trim();
    let invalid = |reason: String| Error::InvalidCron { expr: shorten(expr), reason };
    normalize(expr).map_err(invalid)?;
    let expanded = match MACROS.iter().find(|(name, _)| name.eq_ignore_ascii_case(expr)) {
        Some((_, body)) => *body,
        None => expr,
    };
    let parts: Vec<&str> = expanded.split_whitespace().collect();
    let (fields, quartz): (Vec<&str>, bool) = match parts.len() {
        5 => (["0"].iter().chain(&parts).copied().chain(["*"]).collect(), false),
        6 => (parts.iter().copied().chain(["*"]).collect(), true),
        _ => (parts, true),
    };
    let mut out = Vec::with_capacity(7);
    for (text, kind) in fields.iter().zip(Kind::ALL) {
        let field = Field::new(kind, quartz);
        if matches!(kind, Kind::Minute | Kind::Hour) && text.starts_with('*') {
            out.push(text.to_ascii_uppercase());
            continue;
        }
        let normalized = field.normalize(text).map_err(invalid)?;
        out.push(field.print(&normalized));
    }
    Ok(out.join(" "))
}

impl Field {
    /// Prints a normalized field canonically (see [`canonical`]).
    fn print(&self, normalized: &str) -> String {
        if normalized == "*" || (self.kind == Kind::Year && normalized == format!("{MIN_YEAR}-{MAX_YEAR}")) {
            return "*".to_string();
        }
        let dow = self.kind == Kind::DayOfWeek;
        // Quartz numbering (1 = SUN ... 7 = SAT) for weekdays.
        let q = |v: u32| if dow && !self.quartz { v % 7 + 1 } else { v };
        let mut values = std::collections::BTreeSet::new();
        let mut specials = Vec::new();
        // Empty items (none are written today) are skipped.
        for item in normalized.split(',').filter(|item| !item.is_empty()) {
            if let Some((a, b)) = item.split_once('-') {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    values.extend((a..=b).map(q));
                    continue;
                }
            }
            match item.parse::<u32>() {
                Ok(v) => {
                    values.insert(q(v));
                }
                Err(_) if dow => {
                    // `nL` or `n#k`: the weekday as a name.
                    let digits: String = item.chars().take_while(char::is_ascii_digit).collect();
                    let rest = &item[digits.len()..];
                    let name = digits.parse::<u32>().map(|v| WEEKDAYS[(q(v) - 1) as usize]).unwrap_or_default();
                    specials.push(format!("{name}{rest}"));
                }
                Err(_) => specials.push(item.to_string()),
            }
        }
        let show = |v: u32| if dow { WEEKDAYS[(v - 1) as usize].to_string() } else { v.to_string() };
        let mut items = Vec::new();
        let values: Vec<u32> = values.into_iter().collect();
        let mut i = 0;
        while i < values.len() {
            let mut j = i;
            while j + 1 < values.len() && values[j + 1] == values[j] + 1 {
                j += 1;
            }
            items.push(if j == i { show(values[i]) } else { format!("{}-{}", show(values[i]), show(values[j])) });
            i = j + 1;
        }
        specials.sort();
        specials.dedup();
        items.extend(specials);
        let printed = items.join(",");
        if self.kind == Kind::Year && printed == format!("{MIN_YEAR}-{MAX_YEAR}") {
            return "*".to_string();
        }
        printed
    }
}

/// Whether `tz` has two UTC offsets in `year` (daylight saving time).
fn changes_offset_in(tz: Tz, year: i32) -> bool {
    let offset = |month| {
        Utc.with_ymd_and_hms(year, month, 1, 0, 0, 0)
            .single()
            .map(|t| tz.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc())
    };
    offset(1) != offset(7)
}

/// Per month (0-11) and [`month_layout`], the latest year up to
/// [`DST_LAST_YEAR`] that follows the zone's last rules and lays that month
/// out so: the year whose offset changes that month repeats in later years.
type Repeated = [[Option<i32>; 14]; 12];

/// How a month lies, 0-13: the weekday of its 1st and, for February, whether
/// it has a 29th. Months laid out alike have each date on the same weekday.
fn month_layout(year: i32, month: u32) -> Option<usize> {
    let first = NaiveDate::from_ymd_opt(year, month, 1)?;
    let leap_february = month == 2 && first.leap_year();
    Some(first.weekday().num_days_from_monday() as usize * 2 + usize::from(leap_february))
}

/// The [`Repeated`] years of `tz`, from the years [`last_rule_years`] gives.
fn repeated_years(tz: Tz) -> Repeated {
    let mut out = [[None; 14]; 12];
    for year in last_rule_years(tz).rev() {
        for (month, row) in (1..=12).zip(out.iter_mut()) {
            if let Some(layout) = month_layout(year, month) {
                row[layout].get_or_insert(year);
            }
        }
    }
    out
}

/// The years back from [`DST_LAST_YEAR`] (28 at most) that follow the
/// zone's last rules, as far as the data shows: each changes its offset in
/// the same months, on the same weekdays, at the same wall times and to the
/// same offsets as [`DST_LAST_YEAR`], and each change's dates stay within
/// one week. Years with changes of their own end it (Asia/Gaza's Ramadan
/// breaks, up to 2086).
fn last_rule_years(tz: Tz) -> std::ops::RangeInclusive<i32> {
    let kind = |wall: &NaiveDateTime, offset: i32| (wall.month(), wall.weekday(), wall.time(), offset);
    let last = offset_changes(tz, DST_LAST_YEAR);
    let mut days: Vec<(u32, u32)> = last.iter().map(|(wall, _)| (wall.day(), wall.day())).collect();
    let mut first = DST_LAST_YEAR;
    for year in (DST_LAST_YEAR - 27..DST_LAST_YEAR).rev() {
        let changes = offset_changes(tz, year);
        if changes.len() != last.len() || changes.iter().zip(&last).any(|((a, x), (b, y))| kind(a, *x) != kind(b, *y)) {
            break;
        }
        for ((wall, _), (lo, hi)) in changes.iter().zip(days.iter_mut()) {
            (*lo, *hi) = ((*lo).min(wall.day()), (*hi).max(wall.day()));
        }
        if days.iter().any(|(lo, hi)| hi - lo > 6) {
            break;
        }
        first = year;
    }
    first..=DST_LAST_YEAR
}

/// The offset changes of `tz` in `year`, found day by day (at noon UTC):
/// the last wall second before each (`01:59:59` for New York in March, also
/// for a change at `24:00`) and the new offset.
fn offset_changes(tz: Tz, year: i32) -> Vec<(NaiveDateTime, i32)> {
    let offset = |secs: i64| {
        DateTime::from_timestamp(secs, 0)
            .map_or(0, |t| tz.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc())
    };
    let mut out = Vec::new();
    let Some(noon) = NaiveDate::from_ymd_opt(year, 1, 1).and_then(|d| d.and_hms_opt(12, 0, 0)) else { return out };
    let mut secs = noon.and_utc().timestamp();
    let mut before = offset(secs);
    while DateTime::from_timestamp(secs + DAY_SECS, 0).is_some_and(|t| t.year() == year) {
        secs += DAY_SECS;
        let after = offset(secs);
        if after == before {
            continue;
        }
        let (mut lo, mut hi) = (secs - DAY_SECS, secs);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if offset(mid) == after {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        if let Some(wall) = DateTime::from_timestamp(hi - 1 + i64::from(before), 0) {
            out.push((wall.naive_utc(), after));
        }
        before = after;
    }
    out
}

/// The expression for an error message, cut when it is very long.
fn shorten(expr: &str) -> String {
    if expr.chars().count() <= MAX_EXPR_LEN {
        return expr.to_string();
    }
    let head: String = expr.chars().take(40).collect();
    format!("{head}...")
}

/// Checks `expr` and rewrites it as the 7-field pattern croner evaluates
/// (numbers only, Quartz or POSIX weekdays). Returns the pattern, whether
/// it is fixed-time, and whether weekdays are Quartz-numbered.
fn normalize(expr: &str) -> Result<(String, bool, bool), String> {
    let len = expr.chars().count();
    if len > MAX_EXPR_LEN {
        return Err(format!("it is {len} characters long; at most {MAX_EXPR_LEN} are allowed"));
    }
    if expr.is_empty() {
        return Err("the expression is empty".to_string());
    }
    let expr = if expr.starts_with('@') {
        MACROS.iter().find(|(name, _)| name.eq_ignore_ascii_case(expr)).map(|(_, body)| *body).ok_or_else(|| {
            let names: Vec<&str> = MACROS.iter().map(|(name, _)| *name).collect();
            format!("unknown macro `{expr}`; use one of {}", names.join(", "))
        })?
    } else {
        expr
    };
    let parts: Vec<&str> = expr.split_whitespace().collect();
    let (fields, quartz): (Vec<&str>, bool) = match parts.len() {
        5 => (["0"].iter().chain(&parts).copied().chain(["*"]).collect(), false),
        6 => (parts.iter().copied().chain(["*"]).collect(), true),
        7 => (parts.clone(), true),
        n => {
            return Err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), 6 (second first) \
                 or 7 (second first, year last), found {n}"
            ))
        }
    };
    let mut out = Vec::with_capacity(7);
    for (text, kind) in fields.iter().zip(Kind::ALL) {
        let field = Field::new(kind, quartz);
        out.push(field.normalize(text).map_err(|e| format!("{} field: {e}", field.name))?);
    }
    let fixed_time = !fields[1].starts_with('*') && !fields[2].starts_with('*');
    Ok((out.join(" "), fixed_time, quartz))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    Year,
}

impl Kind {
    const ALL: [Kind; 7] =
        [Kind::Second, Kind::Minute, Kind::Hour, Kind::DayOfMonth, Kind::Month, Kind::DayOfWeek, Kind::Year];
}

/// One field's rules: its name, range and weekday numbering.
struct Field {
    kind: Kind,
    name: &'static str,
    min: u32,
    max: u32,
    quartz: bool,
}

impl Field {
    fn new(kind: Kind, quartz: bool) -> Self {
        let (name, min, max) = match kind {
            Kind::Second => ("second", 0, 59),
            Kind::Minute => ("minute", 0, 59),
            Kind::Hour => ("hour", 0, 23),
            Kind::DayOfMonth => ("day-of-month", 1, 31),
            Kind::Month => ("month", 1, 12),
            Kind::DayOfWeek if quartz => ("day-of-week", 1, 7),
            Kind::DayOfWeek => ("day-of-week", 0, 7),
            Kind::Year => ("year", MIN_YEAR, MAX_YEAR),
        };
        Self { kind, name, min, max, quartz }
    }

    /// The values `*` covers (POSIX weekdays stop at 6, as 7 is Sunday again).
    fn full(&self) -> (u32, u32) {
        match self.kind {
            Kind::DayOfWeek if !self.quartz => (0, 6),
            _ => (self.min, self.max),
        }
    }

    /// The whole field, rewritten for croner.
    fn normalize(&self, text: &str) -> Result<String, String> {
        let is_day = matches!(self.kind, Kind::DayOfMonth | Kind::DayOfWeek);
        match text {
            "*" | "?" if self.kind == Kind::Year => return Ok(format!("{MIN_YEAR}-{MAX_YEAR}")),
            "*" => return Ok("*".to_string()),
            "?" if is_day => return Ok("*".to_string()),
            _ if text.contains('?') => {
                return Err("`?` is only allowed alone, in the day-of-month, day-of-week or year field".to_string())
            }
            _ => {}
        }
        let items = text.split(',').map(|item| self.item(item, text)).collect::<Result<Vec<_>, _>>()?;
        Ok(items.join(","))
    }

    /// One list item: a value, range, step or special day token.
    fn item(&self, item: &str, text: &str) -> Result<String, String> {
        if item.is_empty() {
            return Err(format!("empty list entry in `{text}`"));
        }
        let up = item.to_ascii_uppercase();
        if let Some((base, step)) = up.split_once('/') {
            let step = match number(step) {
                Some(0) => return Err(format!("step in `{item}` must be at least 1")),
                Some(n) if n <= u64::from(self.max - self.min + 1) => n as usize,
                Some(_) => return Err(format!("step in `{item}` must be at most {}", self.max - self.min + 1)),
                None => return Err(format!("step `{step}` in `{item}` is not a number")),
            };
            let (lo, hi) = match base {
                "*" => self.full(),
                _ if base.contains('-') => self.range(base, item)?,
                // POSIX weekday 7 is Sunday, the start of the week: `7/2` is `0/2`.
                _ => match self.value(base)? {
                    7 if self.kind == Kind::DayOfWeek && !self.quartz => (0, 6),
                    lo => (lo, self.full().1),
                },
            };
            let values: Vec<String> = (lo..=hi).step_by(step).map(|v| v.to_string()).collect();
            return Ok(values.join(","));
        }
        if up == "*" {
            let (lo, hi) = self.full();
            return Ok(format!("{lo}-{hi}"));
        }
        match self.kind {
            Kind::DayOfMonth => {
                if up == "L" || up == "LW" {
                    return Ok(up);
                }
                if up.starts_with("L-") {
                    return Err(format!("`{item}` (days before the last) is not supported; use `L` or `LW`"));
                }
                if let Some(day) = up.strip_suffix('W') {
                    return Ok(format!("{}W", self.value(day)?));
                }
            }
            Kind::DayOfWeek => {
                if up == "L" && self.quartz {
                    return Ok("7".to_string());
                }
                if up == "L" {
                    return Err(
                        "a bare `L` needs a weekday in 5-field crons, e.g. `5L` for the last Friday".to_string()
                    );
                }
                if let Some(day) = up.strip_suffix('L') {
                    return Ok(format!("{}L", self.value(day)?));
                }
                if let Some((day, nth)) = up.split_once('#') {
                    return match number(nth) {
                        Some(n @ 1..=5) => Ok(format!("{}#{n}", self.value(day)?)),
                        _ => Err(format!("`#{nth}` in `{item}` must be #1 to #5 (which weekday of the month)")),
                    };
                }
            }
            _ => {}
        }
        if up.contains('-') {
            let (lo, hi) = self.range(&up, item)?;
            return Ok(format!("{lo}-{hi}"));
        }
        Ok(self.value(&up)?.to_string())
    }

    /// A range `a-b`, checked in order.
    fn range(&self, range: &str, item: &str) -> Result<(u32, u32), String> {
        let (a, b) = range.split_once('-').unwrap_or((range, ""));
        let posix_weekday = self.kind == Kind::DayOfWeek && !self.quartz;
        // A POSIX range from Sunday 7 starts the week, as one from `SUN`
        // does: `7-3` is `0-3`, `7-7` every day, `7-7/2` is `0/2` (croniter's
        // reading).
        let lo = match self.value(a)? {
            7 if posix_weekday => 0,
            lo => lo,
        };
        // `MON-SUN` in POSIX ends on Sunday, 7.
        let hi = if posix_weekday && b == "SUN" { 7 } else { self.value(b)? };
        if lo > hi {
            return Err(format!("range `{item}` runs backwards; write the smaller value first"));
        }
        Ok((lo, hi))
    }

    /// A single number or name, checked against the field's range.
    fn value(&self, token: &str) -> Result<u32, String> {
        let named = match self.kind {
            Kind::Month => MONTHS.iter().position(|m| *m == token).map(|i| i as u32 + 1),
            Kind::DayOfWeek => WEEKDAYS.iter().position(|d| *d == token).map(|i| i as u32 + u32::from(self.quartz)),
            _ => None,
        };
        if let Some(v) = named {
            return Ok(v);
        }
        let hint = match self.kind {
            Kind::Month => "; names JAN-DEC are accepted too",
            Kind::DayOfWeek if self.quartz => " (6- and 7-field crons number weekdays Quartz-style: 1 = SUN ... 7 = SAT; names SUN-SAT are accepted too)",
            Kind::DayOfWeek => " (0 or 7 = SUN, 1 = MON ... 6 = SAT; names SUN-SAT are accepted too)",
            _ => "",
        };
        match number(token) {
            Some(v) if (u64::from(self.min)..=u64::from(self.max)).contains(&v) => Ok(v as u32),
            Some(_) => Err(format!("value {token} is out of range {}-{}{hint}", self.min, self.max)),
            None if token.is_empty() => Err(format!("a value is missing (allowed: {}-{}{hint})", self.min, self.max)),
            None => Err(format!("`{token}` is not a valid value (allowed: {}-{}{hint})", self.min, self.max)),
        }
    }
}

/// Parses ASCII digits; values too big for `u64` become `u64::MAX`.
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.parse().unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
