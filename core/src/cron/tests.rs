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
            [(4_108_690_800, -14_400), (4_129_250_400, -18_000), (7_232_482_800, -14_400), (7_253_042_400, -18_000)],
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
            proptest::sample::select(if specials.is_empty() { &["*"][..] } else { specials }).prop_map(str::to_string),
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
