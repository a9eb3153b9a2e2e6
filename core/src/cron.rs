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
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("test instant").to_utc()
    }

    /// A fixed "now" for parsing: 2024-01-01T00:00:00Z.
    fn now() -> DateTime<Utc> {
        utc("2024-01-01T00:00:00Z")
    }

    fn sched(expr: &str, tz: &str) -> CronSchedule {
        CronSchedule::parse(expr, tz, now()).unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    /// The next `n` fires after `after`, as RFC 3339 UTC strings.
    fn next_n(s: &CronSchedule, after: &str, n: usize) -> Vec<String> {
        let mut t = utc(after);
        let mut out = Vec::new();
        for _ in 0..n {
            t = s.next_after(t).expect("a next fire");
            out.push(t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
        }
        out
    }

    fn next(expr: &str, tz: &str, after: &str) -> String {
        next_n(&sched(expr, tz), after, 1).remove(0)
    }

    fn error(expr: &str) -> String {
        match CronSchedule::parse(expr, "UTC", now()) {
            Ok(_) => panic!("`{expr}` should not parse"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn five_fields_have_second_zero() {
        let s = sched("30 2 * * *", "UTC");
        assert_eq!(next_n(&s, "2024-05-01T02:30:00Z", 2), ["2024-05-02T02:30:00Z", "2024-05-03T02:30:00Z"]);
    }

    #[test]
    fn six_fields_start_with_seconds() {
        let s = sched("*/5 * * ? * *", "UTC");
        assert_eq!(
            next_n(&s, "2024-05-01T12:00:01Z", 3),
            ["2024-05-01T12:00:05Z", "2024-05-01T12:00:10Z", "2024-05-01T12:00:15Z"]
        );
        assert_eq!(next("0 30 2 * * ?", "UTC", "2024-05-01T03:00:00Z"), "2024-05-02T02:30:00Z");
        assert_eq!(next("15 0/20 * * * ?", "UTC", "2024-05-01T03:00:00Z"), "2024-05-01T03:00:15Z");
    }

    #[test]
    fn seven_fields_restrict_the_year() {
        let s = sched("0 0 12 1 1 ? 2030", "UTC");
        assert_eq!(next_n(&s, "2024-05-01T00:00:00Z", 1), ["2030-01-01T12:00:00Z"]);
        assert_eq!(s.next_after(utc("2030-01-01T12:00:00Z")), None);

        let s = sched("0 0 0 1 1 ? 2030,2035-2036,2040/10", "UTC");
        assert_eq!(
            next_n(&s, "2024-01-01T00:00:00Z", 5),
            [
                "2030-01-01T00:00:00Z",
                "2035-01-01T00:00:00Z",
                "2036-01-01T00:00:00Z",
                "2040-01-01T00:00:00Z",
                "2050-01-01T00:00:00Z"
            ]
        );
        assert_eq!(next("0 0 0 1 1 ? *", "UTC", "2024-05-01T00:00:00Z"), "2025-01-01T00:00:00Z");
        assert_eq!(next("0 0 0 1 1 ? */10", "UTC", "2024-05-01T00:00:00Z"), "2030-01-01T00:00:00Z");
    }

    #[test]
    fn far_year_is_reached_by_jumping() {
        // A per-second schedule 120 years out: found without walking seconds.
        let started = std::time::Instant::now();
        assert_eq!(next("* * * * * ? 2150", "Asia/Tokyo", "2024-05-01T00:00:00Z"), "2149-12-31T15:00:00Z");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn question_mark_in_either_day_field() {
        assert_eq!(next("0 0 9 15 * ?", "UTC", "2024-05-01T00:00:00Z"), "2024-05-15T09:00:00Z");
        assert_eq!(next("0 0 9 ? * MON", "UTC", "2024-05-01T00:00:00Z"), "2024-05-06T09:00:00Z");
        assert_eq!(next("0 9 ? * ?", "UTC", "2024-05-01T00:00:00Z"), "2024-05-01T09:00:00Z");
    }

    #[test]
    fn last_day_and_last_weekday() {
        assert_eq!(next("0 0 0 L * ?", "UTC", "2024-02-01T00:00:00Z"), "2024-02-29T00:00:00Z");
        assert_eq!(next("0 0 0 L * ?", "UTC", "2023-02-01T00:00:00Z"), "2023-02-28T00:00:00Z");
        // Last weekday of June 2024: the 30th is a Sunday, so Friday the 28th.
        assert_eq!(next("0 0 0 LW * ?", "UTC", "2024-06-01T00:00:00Z"), "2024-06-28T00:00:00Z");
        // Last Friday of May 2024 is the 31st: Quartz 6L, POSIX 5L, names.
        assert_eq!(next("0 0 0 ? * 6L", "UTC", "2024-05-01T00:00:00Z"), "2024-05-31T00:00:00Z");
        assert_eq!(next("0 0 * * 5L", "UTC", "2024-05-01T00:00:00Z"), "2024-05-31T00:00:00Z");
        assert_eq!(next("0 0 * * FRIL", "UTC", "2024-05-01T00:00:00Z"), "2024-05-31T00:00:00Z");
        // A bare L in the Quartz day-of-week is Saturday.
        assert_eq!(next("0 0 0 ? * L", "UTC", "2024-05-01T00:00:00Z"), "2024-05-04T00:00:00Z");
    }

    #[test]
    fn nearest_weekday() {
        // 2024-06-15 is a Saturday: fires Friday the 14th.
        assert_eq!(next("0 0 0 15W * ?", "UTC", "2024-06-01T00:00:00Z"), "2024-06-14T00:00:00Z");
        // 2024-06-01 is a Saturday: 1W stays in the month, Monday the 3rd.
        assert_eq!(next("0 0 1W * *", "UTC", "2024-05-31T00:00:00Z"), "2024-06-03T00:00:00Z");
    }

    #[test]
    fn nth_weekday() {
        // Second Monday of May 2024 is the 13th.
        assert_eq!(next("0 0 0 ? * 2#2", "UTC", "2024-05-01T00:00:00Z"), "2024-05-13T00:00:00Z");
        assert_eq!(next("0 0 0 ? * MON#2", "UTC", "2024-05-01T00:00:00Z"), "2024-05-13T00:00:00Z");
        assert_eq!(next("0 0 * * 1#2", "UTC", "2024-05-01T00:00:00Z"), "2024-05-13T00:00:00Z");
        // Fifth Friday: May 2024 has one (31st), June 2024 none, next is August 30th.
        assert_eq!(next("0 0 * * FRI#5", "UTC", "2024-06-01T00:00:00Z"), "2024-08-30T00:00:00Z");
    }

    #[test]
    fn month_and_day_names_in_any_case() {
        assert_eq!(next("0 0 9 ? JAN-MAR MON-FRI", "UTC", "2024-03-29T10:00:00Z"), "2025-01-01T09:00:00Z");
        assert_eq!(next("0 9 * jul,Dec sun", "UTC", "2024-05-01T00:00:00Z"), "2024-07-07T09:00:00Z");
        // POSIX `MON-SUN` is every day.
        assert_eq!(next("0 9 * * MON-SUN", "UTC", "2024-05-04T10:00:00Z"), "2024-05-05T09:00:00Z");
    }

    #[test]
    fn weekday_numbering_posix_and_quartz() {
        // 2024-05-05 is a Sunday, 2024-05-04 a Saturday.
        assert_eq!(next("0 0 * * 0", "UTC", "2024-05-01T00:00:00Z"), "2024-05-05T00:00:00Z");
        assert_eq!(next("0 0 * * 7", "UTC", "2024-05-01T00:00:00Z"), "2024-05-05T00:00:00Z");
        assert_eq!(next("0 0 * * 6", "UTC", "2024-05-01T00:00:00Z"), "2024-05-04T00:00:00Z");
        assert_eq!(next("0 0 0 ? * 1", "UTC", "2024-05-01T00:00:00Z"), "2024-05-05T00:00:00Z");
        assert_eq!(next("0 0 0 ? * 7", "UTC", "2024-05-01T00:00:00Z"), "2024-05-04T00:00:00Z");
        assert_eq!(next("0 0 0 ? * 2-6", "UTC", "2024-05-04T00:00:00Z"), "2024-05-06T00:00:00Z");
        assert_eq!(next("0 0 0 ? * SUN", "UTC", "2024-05-01T00:00:00Z"), "2024-05-05T00:00:00Z");
        // Quartz */2 is 1,3,5,7: SUN, TUE, THU, SAT.
        assert_eq!(
            next_n(&sched("0 0 0 ? * */2", "UTC"), "2024-05-04T00:00:00Z", 2),
            ["2024-05-05T00:00:00Z", "2024-05-07T00:00:00Z"]
        );
        let e = error("0 0 0 ? * 0");
        assert!(e.contains("day-of-week field: value 0 is out of range 1-7") && e.contains("1 = SUN"), "{e}");
    }

    #[test]
    fn both_day_fields_match_either() {
        // The 1st or any Monday: 2024-05-06 is the first Monday after the 1st.
        let s = sched("0 0 1 * MON", "UTC");
        assert_eq!(next_n(&s, "2024-04-30T00:00:00Z", 2), ["2024-05-01T00:00:00Z", "2024-05-06T00:00:00Z"]);
    }

    #[test]
    fn macros() {
        let after = "2024-05-15T10:20:30Z";
        assert_eq!(next("@yearly", "UTC", after), "2025-01-01T00:00:00Z");
        assert_eq!(next("@annually", "UTC", after), "2025-01-01T00:00:00Z");
        assert_eq!(next("@monthly", "UTC", after), "2024-06-01T00:00:00Z");
        assert_eq!(next("@weekly", "UTC", after), "2024-05-19T00:00:00Z");
        assert_eq!(next("@daily", "UTC", after), "2024-05-16T00:00:00Z");
        assert_eq!(next("@midnight", "UTC", after), "2024-05-16T00:00:00Z");
        assert_eq!(next("@hourly", "UTC", after), "2024-05-15T11:00:00Z");
        assert_eq!(next("@Daily", "Europe/Berlin", after), "2024-05-15T22:00:00Z");
        assert!(error("@reboot").contains("unknown macro `@reboot`; use one of @yearly"));
    }

    #[test]
    fn next_after_is_strict_and_ignores_subseconds() {
        let s = sched("* * * * * *", "UTC");
        assert_eq!(next_n(&s, "2024-05-01T12:00:00Z", 1), ["2024-05-01T12:00:01Z"]);
        assert_eq!(next_n(&s, "2024-05-01T12:00:00.500Z", 1), ["2024-05-01T12:00:01Z"]);
        assert_eq!(next_n(&s, "2024-05-01T11:59:59.999Z", 1), ["2024-05-01T12:00:00Z"]);
    }

    #[test]
    fn fires_between_per_second() {
        let s = sched("* * * * * ?", "America/New_York");
        let from = utc("2024-05-01T12:00:00Z").timestamp_millis();
        let fires = s.fires_between(from, from + 10_000, 1000);
        assert_eq!(fires, (0..10).map(|i| from + i * 1000).collect::<Vec<_>>());
        assert_eq!(s.fires_between(from, from + 10_000, 3).len(), 3);
        assert_eq!(s.fires_between(from, from, 10), Vec::<i64>::new());
        assert_eq!(s.fires_between(from + 1, from + 1000, 10), Vec::<i64>::new());
        assert_eq!(s.fires_between(from + 1, from + 1001, 10), vec![from + 1000]);
        assert_eq!(s.fires_between(from, from + 10_000, 0), Vec::<i64>::new());
    }

    #[test]
    fn fires_between_matches_next_after() {
        // Windows around DST switches take the general path; others the fast
        // one. Both must agree with repeated `next_after`.
        let cases = [
            ("0 */15 * * * *", "America/New_York", "2024-11-03T04:40:00Z"),
            ("0 */15 * * * *", "America/New_York", "2024-03-10T06:10:00Z"),
            ("*/20 * * * * *", "Europe/Berlin", "2024-10-27T00:58:00Z"),
            ("0 30 2 * * *", "Europe/Berlin", "2024-03-30T00:00:00Z"),
            ("0 * * * *", "Australia/Sydney", "2024-04-06T13:00:00Z"),
            ("*/7 * * * * *", "Asia/Kolkata", "2024-05-01T00:00:00Z"),
        ];
        for (expr, tz, start) in cases {
            let s = sched(expr, tz);
            let from = utc(start).timestamp_millis() + 250;
            for hours in [1, 4, 30] {
                let to = from + hours * 3_600_000;
                let mut expected = Vec::new();
                let mut t = DateTime::from_timestamp_millis(from - 1).unwrap();
                while let Some(n) = s.next_after(t).filter(|n| n.timestamp_millis() < to) {
                    expected.push(n.timestamp_millis());
                    t = n;
                }
                assert_eq!(s.fires_between(from, to, usize::MAX), expected, "{expr} {tz} {start} +{hours}h");
            }
        }
    }

    #[test]
    fn new_york_spring_forward() {
        // 2024-03-10: 02:00 EST (07:00Z) jumps to 03:00 EDT.
        let tz = "America/New_York";
        let fixed = sched("0 30 2 * * *", tz);
        assert_eq!(
            next_n(&fixed, "2024-03-09T12:00:00Z", 3),
            ["2024-03-10T07:00:00Z", "2024-03-11T06:30:00Z", "2024-03-12T06:30:00Z"]
        );
        // Several gap times, and a regular 03:00 fire, collapse into one.
        let collapsed = sched("0 0,30 2,3 * * *", tz);
        assert_eq!(
            next_n(&collapsed, "2024-03-10T06:00:00Z", 3),
            ["2024-03-10T07:00:00Z", "2024-03-10T07:30:00Z", "2024-03-11T06:00:00Z"]
        );
        // Interval schedules keep their real spacing across the gap.
        let quarter = sched("0 */15 * * * *", tz);
        assert_eq!(
            next_n(&quarter, "2024-03-10T06:40:00Z", 3),
            ["2024-03-10T06:45:00Z", "2024-03-10T07:00:00Z", "2024-03-10T07:15:00Z"]
        );
        let hourly = sched("0 30 * * * *", tz);
        assert_eq!(next_n(&hourly, "2024-03-10T06:00:00Z", 2), ["2024-03-10T06:30:00Z", "2024-03-10T07:30:00Z"]);
    }

    #[test]
    fn new_york_fall_back() {
        // 2024-11-03: 02:00 EDT (06:00Z) goes back to 01:00 EST.
        let tz = "America/New_York";
        let fixed = sched("0 30 1 * * *", tz);
        assert_eq!(next_n(&fixed, "2024-11-02T12:00:00Z", 2), ["2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"]);
        // Asked from inside the repeated hour, it still does not fire again.
        assert_eq!(next_n(&fixed, "2024-11-03T06:10:00Z", 1), ["2024-11-04T06:30:00Z"]);
        // An interval schedule fires every real 15 minutes through both hours.
        let quarter = sched("0 */15 * * * *", tz);
        let from = utc("2024-11-03T04:45:00Z").timestamp_millis();
        let fires = quarter.fires_between(from, from + 3 * 3_600_000, 100);
        assert_eq!(fires, (0..12).map(|i| from + i * 900_000).collect::<Vec<_>>());
        // From the first 01:40 (EDT) the next is 01:45 EDT, then 01:00 EST.
        assert_eq!(next_n(&quarter, "2024-11-03T05:40:00Z", 2), ["2024-11-03T05:45:00Z", "2024-11-03T06:00:00Z"]);
        // From the second 01:20 (EST) the next is 01:30 EST.
        assert_eq!(next_n(&quarter, "2024-11-03T06:20:00Z", 1), ["2024-11-03T06:30:00Z"]);
        // A once-an-hour interval fires at both 01:30s.
        let hourly = sched("0 30 * * * *", tz);
        assert_eq!(
            next_n(&hourly, "2024-11-03T05:00:00Z", 3),
            ["2024-11-03T05:30:00Z", "2024-11-03T06:30:00Z", "2024-11-03T07:30:00Z"]
        );
        // A fixed-time schedule over the repeated hour fires once per wall minute.
        let per_minute = sched("0 0-59 1 * * *", tz);
        let from = utc("2024-11-03T05:00:00Z").timestamp_millis();
        assert_eq!(per_minute.fires_between(from, from + 2 * 3_600_000, 1000).len(), 60);
    }

    #[test]
    fn berlin_spring_forward_and_fall_back() {
        let tz = "Europe/Berlin";
        let fixed = sched("0 30 2 * * *", tz);
        // 2024-03-31: 02:00 CET (01:00Z) jumps to 03:00 CEST.
        assert_eq!(next_n(&fixed, "2024-03-30T12:00:00Z", 2), ["2024-03-31T01:00:00Z", "2024-04-01T00:30:00Z"]);
        // 2024-10-27: 03:00 CEST (01:00Z) goes back to 02:00 CET; 02:30 fires once.
        assert_eq!(next_n(&fixed, "2024-10-26T12:00:00Z", 2), ["2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"]);
        let minutely = sched("0 * * * * *", tz);
        let from = utc("2024-10-27T00:00:00Z").timestamp_millis();
        let fires = minutely.fires_between(from, from + 3 * 3_600_000, 1000);
        assert_eq!(fires, (0..180).map(|i| from + i * 60_000).collect::<Vec<_>>());
        let from = utc("2024-03-31T00:00:00Z").timestamp_millis();
        let fires = minutely.fires_between(from, from + 3 * 3_600_000, 1000);
        assert_eq!(fires, (0..180).map(|i| from + i * 60_000).collect::<Vec<_>>());
    }

    #[test]
    fn sydney_southern_hemisphere() {
        let tz = "Australia/Sydney";
        let fixed = sched("0 30 2 * * *", tz);
        // 2024-10-06: 02:00 AEST (16:00Z on the 5th) jumps to 03:00 AEDT.
        assert_eq!(next_n(&fixed, "2024-10-05T00:00:00Z", 2), ["2024-10-05T16:00:00Z", "2024-10-06T15:30:00Z"]);
        // 2024-04-07: 03:00 AEDT (16:00Z on the 6th) goes back to 02:00 AEST.
        assert_eq!(next_n(&fixed, "2024-04-06T00:00:00Z", 2), ["2024-04-06T15:30:00Z", "2024-04-07T16:30:00Z"]);
        let hourly = sched("@hourly", tz);
        assert_eq!(
            next_n(&hourly, "2024-04-06T14:30:00Z", 4),
            ["2024-04-06T15:00:00Z", "2024-04-06T16:00:00Z", "2024-04-06T17:00:00Z", "2024-04-06T18:00:00Z"]
        );
        assert_eq!(next_n(&hourly, "2024-10-05T14:30:00Z", 2), ["2024-10-05T15:00:00Z", "2024-10-05T16:00:00Z"]);
    }

    /// The DST rules applied minute by minute, for minute-level schedules.
    fn brute_force(s: &CronSchedule, from: i64, to: i64) -> Vec<i64> {
        let matches = |wall: NaiveDateTime| s.cron.is_time_matching(&wall).unwrap();
        let mut out = Vec::new();
        let mut x = from;
        while x < to {
            let wall = s.wall_at(x).unwrap();
            let prev = s.wall_at(x - 60).unwrap();
            let first_time = match s.local(wall) {
                LocalResult::Ambiguous(earlier, _) => earlier.timestamp() == x,
                _ => true,
            };
            let mut fires = matches(wall) && (first_time || !s.fixed_time);
            // Wall minutes skipped just before `x` fire at `x` when fixed-time.
            let mut skipped = prev + chrono::Duration::minutes(1);
            while s.fixed_time && skipped < wall {
                fires |= matches(skipped);
                skipped += chrono::Duration::minutes(1);
            }
            if fires {
                out.push(x * 1000);
            }
            x += 60;
        }
        out
    }

    #[test]
    fn matches_brute_force_reference() {
        // The switch days of 2024, and of 2150, past the zone data.
        let zones = [
            ("America/New_York", ["2024-03-10", "2024-11-03", "2150-03-08", "2150-11-01"]),
            ("Europe/Berlin", ["2024-03-31", "2024-10-27", "2150-03-29", "2150-10-25"]),
            ("Australia/Sydney", ["2024-04-07", "2024-10-06", "2150-04-05", "2150-10-04"]),
            ("Australia/Lord_Howe", ["2024-04-07", "2024-10-06", "2150-04-05", "2150-10-04"]),
        ];
        let exprs = [
            "0 30 2 * * *",
            "0 0 2 * * *",
            "0 */15 * * * *",
            "0 0,30 1-3 * * *",
            "0 * 2 * * *",
            "0 10-50/20 1,2 * * *",
            "0 45 * * * *",
            "@daily",
        ];
        for (tz, days) in zones {
            for expr in exprs {
                let s = sched(expr, tz);
                for day in days {
                    let from = utc(&format!("{day}T00:00:00Z")).timestamp() - 86_400;
                    let to = from + 3 * 86_400;
                    let want = brute_force(&s, from, to);
                    assert_eq!(s.fires_between(from * 1000, to * 1000, usize::MAX), want, "{expr} {tz} {day}");
                    // From instants all over the window, `next_after` agrees.
                    for t in (from..to).step_by(97) {
                        let got = s.next_after(DateTime::from_timestamp(t, 0).unwrap()).unwrap().timestamp() * 1000;
                        match want.iter().find(|w| **w > t * 1000) {
                            Some(w) => assert_eq!(got, *w, "{expr} {tz} after {t}"),
                            None => assert!(got >= to * 1000, "{expr} {tz} after {t}"),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn midnight_gap_keeps_the_day() {
        // America/Havana skipped 00:00-01:00 on 2024-03-10 (05:00Z).
        assert_eq!(next("@daily", "America/Havana", "2024-03-09T12:00:00Z"), "2024-03-10T05:00:00Z");
    }

    #[test]
    fn error_messages_name_field_value_and_range() {
        let cases = [
            ("61 * * * *", "minute field: value 61 is out of range 0-59"),
            ("0 24 * * *", "hour field: value 24 is out of range 0-23"),
            ("0 0 32 * *", "day-of-month field: value 32 is out of range 1-31"),
            ("0 0 * 13 *", "month field: value 13 is out of range 1-12"),
            ("0 0 * * 8", "day-of-week field: value 8 is out of range 0-7 (0 or 7 = SUN"),
            ("60 * * * * *", "second field: value 60 is out of range 0-59"),
            ("0 0 0 1 1 ? 1969", "year field: value 1969 is out of range 1970-2199"),
            ("0 0 0 1 1 ? 2200", "year field: value 2200 is out of range 1970-2199"),
            ("0 0 0 1 1 ? 2024-2300", "year field: value 2300 is out of range 1970-2199"),
            ("* * * *", "expected 5 fields (minute hour day-of-month month day-of-week)"),
            ("* * * * * * * *", "found 8"),
            ("*/0 * * * *", "minute field: step in `*/0` must be at least 1"),
            ("*/x * * * *", "minute field: step `X` in `*/x` is not a number"),
            ("0 20-3 * * *", "hour field: range `20-3` runs backwards"),
            ("? * * * *", "minute field: `?` is only allowed alone"),
            ("0 0 * FOO *", "month field: `FOO` is not a valid value (allowed: 1-12; names JAN-DEC"),
            ("0 0 * * FUNDAY", "day-of-week field: `FUNDAY` is not a valid value"),
            ("1,,2 * * * *", "minute field: empty list entry in `1,,2`"),
            ("0 0 L-3 * *", "day-of-month field: `L-3` (days before the last) is not supported"),
            ("0 0 * * L", "day-of-week field: a bare `L` needs a weekday"),
            ("0 0 * * 1#6", "day-of-week field: `#6` in `1#6` must be #1 to #5"),
            ("5L * * * *", "minute field: `5L` is not a valid value (allowed: 0-59)"),
            ("0 0 * * 1-", "day-of-week field: a value is missing (allowed: 0-7"),
            ("", "the expression is empty"),
        ];
        for (expr, want) in cases {
            let got = error(expr);
            assert!(got.contains(want), "`{expr}`: got {got:?}, want {want:?}");
            assert!(got.starts_with(&format!("cron `{expr}` is invalid: ")), "{got}");
        }
        let long = format!("0 0 * * * {}", "1,".repeat(200));
        let got = error(&long);
        assert!(got.contains("characters long; at most 256 are allowed"), "{got}");
        assert!(got.len() < 200, "the error echoes the whole expression: {got}");
    }

    #[test]
    fn never_firing_crons_are_rejected() {
        for expr in ["0 0 0 30 2 ?", "0 0 31 4 *", "0 0 0 1 1 ? 2000", "0 0 0 1 1 ? 1970-2023"] {
            let got = CronSchedule::parse(expr, "UTC", now()).unwrap_err();
            assert_eq!(got, Error::CronNeverFires(expr.to_string()), "{expr}");
        }
        // Fires once more, in the current year: accepted.
        assert!(CronSchedule::parse("0 0 0 31 12 ? 2024", "UTC", now()).is_ok());
        // Feb 29 on a leap year four years out: accepted.
        assert!(CronSchedule::parse("0 0 0 29 2 ?", "UTC", utc("2024-03-01T00:00:00Z")).is_ok());
    }

    #[test]
    fn posix_weekday_seven_steps_start_on_sunday() {
        // 2024-05-05 is a Sunday.
        let s = sched("0 12 * * 7/2", "UTC");
        assert_eq!(
            next_n(&s, "2024-05-05T00:00:00Z", 4),
            ["2024-05-05T12:00:00Z", "2024-05-07T12:00:00Z", "2024-05-09T12:00:00Z", "2024-05-11T12:00:00Z"]
        );
        // `7/1` in a list is every day, Sunday included.
        let s = sched("0 12 * * 1-5,7/1", "UTC");
        assert_eq!(next_n(&s, "2024-05-04T00:00:00Z", 2), ["2024-05-04T12:00:00Z", "2024-05-05T12:00:00Z"]);
        assert_eq!(canonical("0 12 * * 7/1").unwrap(), "0 0 12 * * SUN-SAT *");
    }

    #[test]
    fn years_past_the_zone_data_keep_the_last_daylight_saving_rules() {
        // Explicit years after 2099 are accepted in every zone.
        assert_eq!(next("0 0 0 1 * ? 2120", "UTC", "2024-01-01T00:00:00Z"), "2120-01-01T00:00:00Z");
        assert_eq!(next("0 0 0 1 * ? 2120", "Asia/Shanghai", "2024-01-01T00:00:00Z"), "2119-12-31T16:00:00Z");
        assert_eq!(next("0 0 0 1 * ? 2120", "America/New_York", "2024-01-01T00:00:00Z"), "2120-01-01T05:00:00Z");
        // April is EDT (UTC-4) in 2099 and after it.
        let s = sched("0 0 0 1 4 ? 2099,2150", "America/New_York");
        assert_eq!(next_n(&s, "2024-01-01T00:00:00Z", 2), ["2099-04-01T04:00:00Z", "2150-04-01T04:00:00Z"]);
        // Any year: the monthly fires go on through 2100, an hour apart in
        // winter and summer.
        let s = sched("0 0 0 1 * ?", "America/New_York");
        assert_eq!(
            next_n(&s, "2099-11-15T00:00:00Z", 9)[..],
            [
                "2099-12-01T05:00:00Z",
                "2100-01-01T05:00:00Z",
                "2100-02-01T05:00:00Z",
                "2100-03-01T05:00:00Z",
                "2100-04-01T04:00:00Z",
                "2100-05-01T04:00:00Z",
                "2100-06-01T04:00:00Z",
                "2100-07-01T04:00:00Z",
                "2100-08-01T04:00:00Z",
            ]
        );
        // The southern hemisphere: Sydney is on AEDT (UTC+11) in January and
        // AEST (UTC+10) in July, in 2150 as in 2024.
        let s = sched("0 0 12 1 1,7 ?", "Australia/Sydney");
        assert_eq!(next_n(&s, "2149-12-01T00:00:00Z", 2), ["2150-01-01T01:00:00Z", "2150-07-01T02:00:00Z"]);
        // The last fire is at the end of 2199, as in UTC.
        let s = sched("0 0 0 L 12 ?", "Europe/Berlin");
        assert_eq!(next_n(&s, "2199-01-01T00:00:00Z", 1), ["2199-12-30T23:00:00Z"]);
        assert_eq!(s.next_after(utc("2199-12-30T23:00:00Z")), None);
    }

    #[test]
    fn a_dst_zone_cron_fires_after_2099() {
        // February 29th at midnight EST (05:00Z); 2100 is no leap year.
        let s = sched("0 0 29 2 *", "America/New_York");
        assert_eq!(
            next_n(&s, "2095-01-01T00:00:00Z", 4),
            ["2096-02-29T05:00:00Z", "2104-02-29T05:00:00Z", "2108-02-29T05:00:00Z", "2112-02-29T05:00:00Z"]
        );
        let from = utc("2096-03-01T00:00:00Z").timestamp_millis();
        let to = utc("2110-01-01T00:00:00Z").timestamp_millis();
        let want = [utc("2104-02-29T05:00:00Z"), utc("2108-02-29T05:00:00Z")].map(|t| t.timestamp_millis());
        assert_eq!(s.fires_between(from, to, 10), want);
        // Parsed after 2099, it still fires.
        assert!(CronSchedule::parse("0 0 29 2 *", "America/New_York", utc("2150-01-01T00:00:00Z")).is_ok());

        // The US rules go on: in 2100 EDT starts on March 14th (the second
        // Sunday) at 02:00 and ends on November 7th (the first Sunday) at 02:00.
        let tz = "America/New_York";
        let fixed = sched("0 30 2 * * *", tz);
        assert_eq!(next_n(&fixed, "2100-03-13T12:00:00Z", 2), ["2100-03-14T07:00:00Z", "2100-03-15T06:30:00Z"]);
        assert_eq!(fixed.note(utc("2100-03-14T07:00:00Z")), Some(FireNote::Gap));
        let quarter = sched("0 */15 * * * *", tz);
        assert_eq!(
            next_n(&quarter, "2100-03-14T06:40:00Z", 3),
            ["2100-03-14T06:45:00Z", "2100-03-14T07:00:00Z", "2100-03-14T07:15:00Z"]
        );
        let from = utc("2100-11-07T04:45:00Z").timestamp_millis();
        let fires = quarter.fires_between(from, from + 3 * 3_600_000, 100);
        assert_eq!(fires, (0..12).map(|i| from + i * 900_000).collect::<Vec<_>>());
        let fall = sched("0 30 1 * * ?", tz);
        assert_eq!(next_n(&fall, "2100-11-06T12:00:00Z", 2), ["2100-11-07T05:30:00Z", "2100-11-08T06:30:00Z"]);
        assert_eq!(fall.note(utc("2100-11-07T05:30:00Z")), Some(FireNote::Overlap));
    }

    #[test]
    fn years_past_the_zone_data_change_offset_like_the_tz_rules() {
        // The offset changes the tz database's rules for later years give
        // (Python's zoneinfo), as UTC seconds and the new offset.
        let cases: [(&str, [(i64, i32); 4]); 5] = [
            // US: second Sunday in March, first Sunday in November, 02:00.
            (
                "America/New_York",
                [
                    (4_108_690_800, -14_400),
                    (4_129_250_400, -18_000),
                    (7_232_482_800, -14_400),
                    (7_253_042_400, -18_000),
                ],
            ),
            // EU: last Sunday in March and October, 01:00Z.
            (
                "Europe/Berlin",
                [(4_109_878_800, 7_200), (4_128_627_600, 3_600), (7_234_275_600, 7_200), (7_252_419_600, 3_600)],
            ),
            // Australia: first Sunday in April and October.
            (
                "Australia/Sydney",
                [(4_110_451_200, 36_000), (4_126_176_000, 39_600), (7_234_848_000, 36_000), (7_250_572_800, 39_600)],
            ),
            // Lord Howe: half an hour.
            (
                "Australia/Lord_Howe",
                [(4_110_447_600, 37_800), (4_126_174_200, 39_600), (7_234_844_400, 37_800), (7_250_571_000, 39_600)],
            ),
            // Palestine: its last rules, not a year with Ramadan breaks (up to 2086).
            (
                "Asia/Gaza",
                [(4_109_788_800, 10_800), (4_128_534_000, 7_200), (7_234_185_600, 10_800), (7_252_326_000, 7_200)],
            ),
        ];
        for (tz, changes) in cases {
            let s = sched("@daily", tz);
            for (at, offset) in changes {
                assert_eq!(s.offset_at(at), Some(offset), "{tz} at {at}");
                assert_ne!(s.offset_at(at - 1), Some(offset), "{tz} before {at}");
            }
        }
    }

    #[test]
    fn dow_7_step_matches_sunday_on_like_croniter() {
        // Weekdays fired in one week, as croniter 7.0 expands each item.
        let cases = [
            ("7/1", "Sun,Mon,Tue,Wed,Thu,Fri,Sat"),
            ("7/2", "Sun,Tue,Thu,Sat"),
            ("7/3", "Sun,Wed,Sat"),
            ("7/4", "Sun,Thu"),
            ("7/5", "Sun,Fri"),
            ("7/6", "Sun,Sat"),
            ("7/7", "Sun"),
            ("7/8", "Sun"),
            ("7-7/1", "Sun,Mon,Tue,Wed,Thu,Fri,Sat"),
            ("7-7/2", "Sun,Tue,Thu,Sat"),
            ("7-7/3", "Sun,Wed,Sat"),
            ("7-7/4", "Sun,Thu"),
            ("7-7/5", "Sun,Fri"),
            ("7-7/6", "Sun,Sat"),
            ("7-7/7", "Sun"),
            ("7-7/8", "Sun"),
            ("7-7", "Sun,Mon,Tue,Wed,Thu,Fri,Sat"),
            ("7-SUN", "Sun,Mon,Tue,Wed,Thu,Fri,Sat"),
            ("7-3", "Sun,Mon,Tue,Wed"),
            ("7-WED/2", "Sun,Tue"),
            ("7-6/4", "Sun,Thu"),
            ("7-1/2", "Sun"),
            ("SUN-7", "Sun,Mon,Tue,Wed,Thu,Fri,Sat"),
            ("sun-sun/3", "Sun,Wed,Sat"),
            ("0-7/2", "Sun,Tue,Thu,Sat"),
            ("5-7/2", "Sun,Fri"),
            ("1-7/3", "Sun,Mon,Thu"),
            ("1-5,7/2", "Sun,Mon,Tue,Wed,Thu,Fri,Sat"),
            ("7,7/3", "Sun,Wed,Sat"),
        ];
        // 2024-05-05 is a Sunday.
        let week = |expr: &str| {
            let s = sched(expr, "UTC");
            let from = utc("2024-05-05T00:00:00Z").timestamp_millis();
            let fires = s.fires_between(from, from + 7 * 86_400_000, 10);
            let days: Vec<String> =
                fires.iter().map(|&ms| DateTime::from_timestamp_millis(ms).unwrap().format("%a").to_string()).collect();
            days.join(",")
        };
        for (dow, want) in cases {
            assert_eq!(week(&format!("0 12 * * {dow}")), want, "{dow}");
            // The canonical form fires on the same days.
            let printed = canonical(&format!("0 12 * * {dow}")).unwrap();
            assert_eq!(week(&printed), want, "{dow} printed as {printed}");
        }
        // Quartz weekdays (1 = SUN ... 7 = SAT) are untouched: 7 is Saturday.
        for (dow, want) in [
            ("7", "Sat"),
            ("7/2", "Sat"),
            ("7-7", "Sat"),
            ("7-7/2", "Sat"),
            ("1/2", "Sun,Tue,Thu,Sat"),
            ("SUN/2", "Sun,Tue,Thu,Sat"),
            ("1-7/3", "Sun,Wed,Sat"),
            ("SUN-SUN", "Sun"),
        ] {
            assert_eq!(week(&format!("0 0 12 ? * {dow}")), want, "Quartz {dow}");
        }
    }

    #[test]
    fn nearest_weekday_to_the_31st_skips_short_months() {
        let s = sched("0 0 12 31W * ?", "UTC");
        assert_eq!(
            next_n(&s, "2024-01-01T00:00:00Z", 4),
            // March 31 2024 is a Sunday: the Friday before; no February, April or June.
            ["2024-01-31T12:00:00Z", "2024-03-29T12:00:00Z", "2024-05-31T12:00:00Z", "2024-07-31T12:00:00Z"]
        );
    }

    #[test]
    fn notes_name_moved_and_repeated_fires() {
        let ny = sched("0 30 2 * * ?", "America/New_York");
        // 2024-03-10 02:30 does not exist: moved to 03:00 EDT.
        assert_eq!(ny.note(utc("2024-03-10T07:00:00Z")), Some(FireNote::Gap));
        assert_eq!(ny.note(utc("2024-03-11T06:30:00Z")), None);
        let fall = sched("0 30 1 * * ?", "America/New_York");
        // 2024-11-03 01:30 happens twice; the fixed-time fire is the first.
        assert_eq!(fall.note(utc("2024-11-03T05:30:00Z")), Some(FireNote::Overlap));
        let every = sched("0 */30 * * * *", "America/New_York");
        assert_eq!(every.note(utc("2024-11-03T05:30:00Z")), Some(FireNote::Overlap));
        assert_eq!(every.note(utc("2024-11-03T06:30:00Z")), None);
        // An interval schedule skips gap times: 03:00 EDT is a regular fire.
        assert_eq!(every.note(utc("2024-03-10T07:00:00Z")), None);
        // A regular fire at the gap's end is no move either.
        let three = sched("0 0 3 * * ?", "America/New_York");
        assert_eq!(three.note(utc("2024-03-10T07:00:00Z")), None);
    }

    #[test]
    fn unknown_timezone() {
        let got = CronSchedule::parse("* * * * *", "Mars/Olympus", now()).unwrap_err();
        assert_eq!(got, Error::UnknownTimezone("Mars/Olympus".to_string()));
        assert!(parse_timezone("Europe/Berlin").is_ok());
    }

    #[test]
    fn accessors() {
        let s = sched("  0 9 * * MON-FRI ", "Europe/Berlin");
        assert_eq!(s.expr(), "0 9 * * MON-FRI");
        assert_eq!(s.timezone(), chrono_tz::Europe::Berlin);
    }

    #[test]
    fn garbage_never_panics() {
        let stars = vec!["*"; 1000].join(" ");
        let huge = "99999999999999999999999999 * * * *".to_string();
        let long_star = "*".repeat(1000);
        let inputs = [
            "",
            " ",
            long_star.as_str(),
            stars.as_str(),
            huge.as_str(),
            "0 0 0 1 1 ? 99999999999999999999",
            "*/99999999999999999999 * * * *",
            "1-99999999999999999999 * * * *",
            "ünïcödé * * * *",
            "* * * * ☃",
            "0 0 ＊ * *",
            "@",
            "@@daily",
            "# # # # #",
            "L W L W L",
            "0 0 1W-5 * *",
            "0 0 * * #",
            "0 0 * * 1#",
            "0 0 * * ##1",
            "- - - - -",
            "/ / / / /",
            "*/ * * * *",
            ",,,, * * * *",
            "0 0 0 ? * 1-7/0",
            "0 0 * * +1",
        ];
        for input in inputs {
            let got = CronSchedule::parse(input, "UTC", now());
            assert!(got.is_err(), "`{input}` parsed");
        }
    }

    #[test]
    fn canonical_forms() {
        for (expr, want) in [
            ("*/15 9-17 * * MON-FRI", "0 */15 9-17 * * MON-FRI *"),
            ("0 30 2 * * ?", "0 30 2 * * * *"),
            ("0 0 12 ? * 2#1,6L 2030", "0 0 12 * * FRIL,MON#1 2030"),
            ("0 0 * * 0,7", "0 0 0 * * SUN *"),
            ("5/20 0,1,2,3 1 L,15W jan-mar ?", "5,25,45 0-3 1 15W,L 1-3 * *"),
            ("@weekly", "0 0 0 * * SUN *"),
            ("0 0 * * 1-7", "0 0 0 * * SUN-SAT *"),
        ] {
            assert_eq!(canonical(expr).unwrap(), want, "{expr}");
        }
        assert!(canonical("61 * * * *").is_err());
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        const ZONES: [&str; 5] = ["UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "Europe/Berlin"];

        fn base() -> DateTime<Utc> {
            DateTime::parse_from_rfc3339("2024-03-01T00:00:00Z").unwrap().to_utc()
        }

        /// One list item of a field with range `lo..=hi` and these names.
        fn item(
            lo: u32,
            hi: u32,
            names: &'static [&'static str],
            specials: &'static [&'static str],
        ) -> BoxedStrategy<String> {
            let num = lo..=hi;
            prop_oneof![
                Just("*".to_string()),
                num.clone().prop_map(|v| v.to_string()),
                (num.clone(), num.clone()).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
                (1..=hi - lo + 1).prop_map(|n| format!("*/{n}")),
                (num.clone(), 1..=hi - lo + 1).prop_map(|(a, n)| format!("{a}/{n}")),
                (num.clone(), num.clone(), 1u32..=7).prop_map(|(a, b, n)| format!("{}-{}/{n}", a.min(b), a.max(b))),
                proptest::sample::select(if names.is_empty() { &["*"][..] } else { names }).prop_map(str::to_string),
                proptest::sample::select(if specials.is_empty() { &["*"][..] } else { specials })
                    .prop_map(str::to_string),
            ]
            .boxed()
        }

        fn field(
            lo: u32,
            hi: u32,
            names: &'static [&'static str],
            specials: &'static [&'static str],
        ) -> BoxedStrategy<String> {
            prop_oneof![
                4 => proptest::collection::vec(item(lo, hi, names, specials), 1..=3).prop_map(|v| v.join(",")),
                1 => Just("?".to_string()),
            ]
            .boxed()
        }

        /// Cron expressions in the grammar: 5, 6 or 7 fields, or a macro.
        fn expression() -> impl Strategy<Value = String> {
            let s = field(0, 59, &[], &[]);
            let m = field(0, 59, &[], &[]);
            let h = field(0, 23, &[], &[]);
            let dom = field(1, 31, &[], &["L", "LW", "15W", "1W", "31W"]);
            let mon = field(1, 12, &["JAN", "feb", "DEC", "MAR-MAY"], &[]);
            let dow = field(0, 7, &["MON", "sun", "MON-FRI", "SAT"], &["5L", "2#1", "6#5", "L", "MON#2"]);
            let year = field(2024, 2199, &[], &[]);
            prop_oneof![
                (m.clone(), h.clone(), dom.clone(), mon.clone(), dow.clone())
                    .prop_map(|(a, b, c, d, e)| format!("{a} {b} {c} {d} {e}")),
                (s.clone(), m.clone(), h.clone(), dom.clone(), mon.clone(), dow.clone())
                    .prop_map(|(a, b, c, d, e, f)| format!("{a} {b} {c} {d} {e} {f}")),
                (s, m, h, dom, mon, dow, year).prop_map(|(a, b, c, d, e, f, g)| format!("{a} {b} {c} {d} {e} {f} {g}")),
                proptest::sample::select(&["@yearly", "@monthly", "@weekly", "@daily", "@hourly", "@midnight"][..])
                    .prop_map(str::to_string),
            ]
        }

        fn fires(s: &CronSchedule, n: usize) -> Vec<i64> {
            let mut t = base();
            let mut out = Vec::new();
            while out.len() < n {
                match s.next_after(t) {
                    Some(next) => {
                        out.push(next.timestamp());
                        t = next;
                    }
                    None => break,
                }
            }
            out
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

            /// No input makes parsing, printing or expanding panic.
            #[test]
            fn any_text_parses_or_fails_without_panicking(
                text in prop_oneof![any::<String>(), "[0-9*/,?LW#@a-zA-Z -]{0,40}"],
                zone in proptest::sample::select(&ZONES[..]),
                secs in -62_000_000_000i64..7_300_000_000i64,
            ) {
                let now = DateTime::from_timestamp(secs, 0).unwrap();
                if let Ok(s) = CronSchedule::parse(&text, zone, now) {
                    let _ = s.next_after(now);
                    let _ = s.fires_between(secs * 1000, secs * 1000 + 86_400_000, 100);
                }
                let _ = canonical(&text);
            }

            /// Expressions of the grammar never panic either, whatever `now`.
            #[test]
            fn grammar_expressions_parse_or_fail_without_panicking(
                expr in expression(),
                zone in proptest::sample::select(&ZONES[..]),
                secs in 0i64..7_258_000_000i64,
            ) {
                let now = DateTime::from_timestamp(secs, 0).unwrap();
                if let Ok(s) = CronSchedule::parse(&expr, zone, now) {
                    let _ = s.fires_between(secs * 1000, secs * 1000 + 3_600_000, 100);
                }
            }

            /// Parse then print then parse gives the same fire times, and
            /// the canonical form is its own canonical form.
            #[test]
            fn canonical_form_round_trips(expr in expression(), zone in proptest::sample::select(&ZONES[..])) {
                let Ok(original) = CronSchedule::parse(&expr, zone, base()) else { return Ok(()) };
                let printed = canonical(&expr).unwrap();
                prop_assume!(printed.chars().count() <= MAX_EXPR_LEN);
                let reparsed = CronSchedule::parse(&printed, zone, base())
                    .unwrap_or_else(|e| panic!("`{expr}` printed as `{printed}` does not parse: {e}"));
                prop_assert_eq!(fires(&original, 40), fires(&reparsed, 40), "`{}` printed as `{}`", expr, printed);
                prop_assert_eq!(canonical(&printed).unwrap(), printed.clone(), "`{}`", expr);
            }
        }
    }
}
