//! `xtimer cron preview`: its arguments ([`PreviewArgs`]) and, without a
//! server, the next fire times worked out here by the code the server's
//! `previewCron` runs (the same checks, [`PreviewAsk::plan`], and the same
//! times, [`when::noted_times`] with the run limit's [`when::last_run`]),
//! so both print the same. Only `--exclude-calendars` needs a server: the
//! calendars are the app's, kept in its database.

use clap::Args;
use serde_json::Value;
use xtimer_core::spec::{PreviewAsk, PreviewPlan, PreviewQuery, DEFAULT_PREVIEW_COUNT};
use xtimer_core::when::{self, Exclusions};
use xtimer_webserver::routes::timers::preview::Preview;
use xtimer_webserver::ApiError;

/// `xtimer cron preview`: the fields of `previewCron`.
#[derive(Debug, Args)]
pub struct PreviewArgs {
    /// The expression (5, 6 or 7 fields, or a macro such as @daily); give
    /// it or `--every-ms`.
    #[arg(required_unless_present = "every_ms", conflicts_with = "every_ms")]
    pub expr: Option<String>,
    /// An interval instead of the expression, ms (at least 1000): times at
    /// `anchor + k * every`.
    #[arg(long)]
    pub every_ms: Option<i64>,
    /// The interval's anchor (RFC 3339 or Unix ms); default `--start-at`,
    /// else `--from`.
    #[arg(long, conflicts_with = "expr")]
    pub anchor_at: Option<String>,
    /// No time before this (RFC 3339 or Unix ms).
    #[arg(long)]
    pub start_at: Option<String>,
    /// No time at or after this (RFC 3339 or Unix ms).
    #[arg(long)]
    pub end_at: Option<String>,
    /// Only the first this many times (counted from `--start-at`, else `--from`).
    #[arg(long)]
    pub max_fires: Option<i64>,
    /// The app whose calendars `--exclude-calendars` names.
    #[arg(long)]
    pub app: Option<String>,
    /// The app's calendars, comma-separated: their times are listed with
    /// the note `excluded:<calendar>`. The calendars are read from the
    /// server (`--server`); the rest of a preview needs none.
    #[arg(long, value_delimiter = ',', requires = "app")]
    pub exclude_calendars: Vec<String>,
    /// IANA time zone.
    #[arg(long, default_value = "UTC")]
    pub tz: String,
    /// How many fire times (1 to 1000).
    #[arg(long, default_value_t = DEFAULT_PREVIEW_COUNT as u32)]
    pub count: u32,
    /// Start from this time (RFC 3339 or Unix ms); default now.
    #[arg(long)]
    pub from: Option<String>,
}

/// What `args` ask `previewCron`: its query, each field named as the
/// spec names it.
pub fn asked(args: &PreviewArgs) -> PreviewQuery {
    let calendars: Vec<&str> = args.exclude_calendars.iter().map(|c| c.trim()).filter(|c| !c.is_empty()).collect();
    PreviewQuery {
        cron: args.expr.clone(),
        every_ms: args.every_ms,
        anchor_at: args.anchor_at.clone(),
        start_at: args.start_at.clone(),
        end_at: args.end_at.clone(),
        max_fires: args.max_fires,
        app: args.app.clone(),
        exclude_calendars: (!calendars.is_empty()).then(|| calendars.join(",")),
        timezone: Some(args.tz.clone()),
        from: args.from.clone(),
        count: Some(i64::from(args.count)),
    }
}

/// The query string of `previewCron` for `args`: [`asked`] as names and
/// values.
pub fn query(args: &PreviewArgs) -> Vec<(String, String)> {
    let Ok(Value::Object(fields)) = serde_json::to_value(asked(args)) else { return Vec::new() };
    fields.into_iter().map(|(name, value)| (name, super::table::text(&value))).collect()
}

/// Whether `args` can be previewed here: everything but the app's
/// calendars (`--exclude-calendars`), which only a server has.
pub fn is_local(args: &PreviewArgs) -> bool {
    args.exclude_calendars.iter().all(|c| c.trim().is_empty())
}

/// The preview `previewCron` answers for `args` (without calendars) when
/// its clock reads `now_ms`, or the same 400.
pub fn compute(args: &PreviewArgs, now_ms: i64) -> Result<Preview, ApiError> {
    let query = asked(args);
    let ask = PreviewAsk { exclude_calendars: Vec::new(), ..query.ask() };
    let PreviewPlan { schedule, cron, mut timing, zone, from_ms, count } = ask.plan(now_ms)?;
    // As `TimerService::preview` with no calendars: the run limit counted
    // from the first time asked for, then the times it leaves.
    let from_ms = from_ms + 1;
    let exclusions = Exclusions::none();
    timing.last_run = when::last_run(&schedule, &timing, &exclusions, from_ms);
    let times = when::noted_times(&schedule, &timing, &exclusions, from_ms, i64::MAX, count, true);
    Ok(Preview::of(times, cron.as_ref(), zone))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        preview: PreviewArgs,
    }

    fn args(line: &[&str]) -> PreviewArgs {
        Cli::try_parse_from([&["preview"], line].concat()).expect("a valid command line").preview
    }

    #[test]
    fn a_spring_forward_gap_is_noted() {
        // Europe/Berlin skips 02:00-03:00 on 2030-03-31: 02:30 fires at 03:00 CEST, the end of the gap.
        let preview = compute(
            &args(&["0 30 2 * * ?", "--tz", "Europe/Berlin", "--from", "2030-03-29T12:00:00Z", "--count", "3"]),
            0,
        )
        .unwrap();
        let seen: Vec<(&str, Option<&str>)> =
            preview.list.iter().map(|f| (f.run_time.as_str(), f.note.as_deref())).collect();
        assert_eq!(
            seen,
            [
                ("2030-03-30T02:30:00+01:00", None),
                ("2030-03-31T03:00:00+02:00", Some("gap")),
                ("2030-04-01T02:30:00+02:00", None)
            ]
        );
    }

    #[test]
    fn now_is_the_default_start_and_errors_name_the_field() {
        let now = 1_893_456_000_000; // 2030-01-01T00:00:00Z
        let preview = compute(&args(&["0 0 9 * * ?", "--count", "1"]), now).unwrap();
        assert_eq!(preview.list[0].run_timer, now + 9 * 3_600_000);
        let err = |line: &[&str]| compute(&args(line), now).unwrap_err().to_string();
        assert_eq!(err(&["--every-ms", "999"]), "everyMs: must be at least 1000 ms, got 999");
        assert!(err(&["0 9 * * *", "--tz", "Mars/Olympus"]).starts_with("timezone: "));
        assert!(err(&["61 * * * *"]).contains("cron"));
        assert!(err(&["0 9 * * *", "--from", "soon"]).starts_with("from: `soon` is neither"));
        assert_eq!(err(&["0 9 * * *", "--count", "0"]), "count: must be 1 to 1000, got 0");
        assert!(!is_local(&args(&["0 9 * * *", "--app", "a", "--exclude-calendars", "holidays"])));
        assert!(is_local(&args(&["0 9 * * *", "--app", "a"])));
    }
}
