//! `xtimer timer ...`: create (one timer from flags, or many from a JSON
//! file: a bulk import in batches, with progress), list, get, update,
//! enable, disable, delete, trigger, backfill and fires.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{json, Map, Value};
use xtimer_webserver::routes::timers::backfill::BackfillTimer;

use super::client::{Client, Failure};
use super::describe::{self, describe, fire_status, timer_status};
use super::{finish, list_of, table, text, Remote};

/// Timers per `createTimers` call of a bulk import (the API's most).
pub const IMPORT_BATCH: usize = 1000;

/// `xtimer timer ...`.
#[derive(Debug, Subcommand)]
pub enum TimerCommand {
    /// Create a timer from flags, or every timer of a JSON file (`--file`).
    Create(CreateArgs),
    /// List an app's timers, a page at a time (`--page`, `--page-size`).
    List {
        #[arg(long)]
        app: String,
        /// Page, from 1.
        #[arg(long, default_value_t = 1)]
        page: u32,
        /// Timers per page, 1 to 500.
        #[arg(long, default_value_t = 50)]
        page_size: u32,
    },
    /// Show one timer.
    Get(TimerRef),
    /// Change some fields of a timer; the others keep their value.
    Update {
        #[command(flatten)]
        timer: TimerRef,
        #[command(flatten)]
        fields: TimerFields,
        /// A JSON object of the fields to change (`-`: standard input).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Enable a timer: it fires from now on.
    Enable(TimerRef),
    /// Disable a timer: its fires are skipped until it is enabled again.
    Disable(TimerRef),
    /// Delete a timer.
    Delete(TimerRef),
    /// Fire a timer once now, besides its schedule.
    Trigger(TimerRef),
    /// Fire every scheduled time in [from, to) that has no fire record,
    /// oldest first, at a bounded pace.
    Backfill {
        #[command(flatten)]
        timer: TimerRef,
        /// Start of the window, included (RFC 3339 or Unix ms).
        #[arg(long)]
        from: String,
        /// End of the window, excluded (RFC 3339 or Unix ms).
        #[arg(long)]
        to: String,
        /// Most fires to make.
        #[arg(long)]
        max_fires: Option<i64>,
    },
    /// A timer's fires: those already due, newest first, or `--upcoming`.
    Fires {
        #[command(flatten)]
        timer: TimerRef,
        /// Only fires of this status: its name (pending, running,
        /// succeeded, failed, skipped, missed) or its code (0 to 5).
        #[arg(long)]
        status: Option<String>,
        /// The planned fires, soonest first.
        #[arg(long)]
        upcoming: bool,
        #[arg(long, default_value_t = 20)]
        page_size: u32,
    },
}

/// One timer: its id and app.
#[derive(Debug, Args)]
pub struct TimerRef {
    /// The timer's id.
    pub id: i64,
    /// The app it belongs to.
    #[arg(long)]
    pub app: String,
}

/// Timer fields as flags.
#[derive(Debug, Default, Args)]
pub struct TimerFields {
    #[arg(long)]
    pub name: Option<String>,
    /// Cron expression (5, 6 or 7 fields).
    #[arg(long, conflicts_with = "run_at")]
    pub cron: Option<String>,
    /// One-shot time (RFC 3339 or Unix ms).
    #[arg(long)]
    pub run_at: Option<String>,
    /// IANA time zone.
    #[arg(long)]
    pub timezone: Option<String>,
    /// Callback URL.
    #[arg(long)]
    pub url: Option<String>,
    /// Callback method.
    #[arg(long)]
    pub method: Option<String>,
    /// Callback body, sent as given.
    #[arg(long)]
    pub body: Option<String>,
}

impl TimerFields {
    fn into_json(self) -> Map<String, Value> {
        let mut out = Map::new();
        let mut put = |key: &str, value: Option<String>| {
            if let Some(v) = value {
                out.insert(key.into(), Value::String(v));
            }
        };
        put("name", self.name);
        put("cron", self.cron);
        put("runAt", self.run_at);
        put("timezone", self.timezone);
        if let Some(url) = self.url {
            let mut notify = json!({"url": url});
            if let Some(method) = self.method {
                notify["method"] = json!(method);
            }
            if let Some(body) = self.body {
                notify["body"] = json!(body);
            }
            out.insert("notifyHTTPParam".into(), notify);
        }
        out
    }
}

/// `xtimer timer create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The app (with flags; a file names its own).
    #[arg(long, required_unless_present = "file")]
    pub app: Option<String>,
    #[command(flatten)]
    pub fields: TimerFields,
    /// Create it enabled (it fires at once on its schedule).
    #[arg(long)]
    pub enable: bool,
    /// A JSON timer, an array of timers or `{"timers": [...]}` (`-`:
    /// standard input); many are created in batches of 1000, all of a
    /// batch or none.
    #[arg(long, conflicts_with = "app")]
    pub file: Option<PathBuf>,
}

/// Runs `xtimer timer ...`; returns the exit code.
pub async fn run(remote: &Remote, command: TimerCommand) -> u8 {
    let outcome = match remote.client() {
        Ok(client) => execute(&client, command).await,
        Err(failure) => Err(failure),
    };
    finish(remote, outcome)
}

async fn execute(client: &Client, command: TimerCommand) -> Result<(Value, String), Failure> {
    let by_ref = |r: &TimerRef| vec![("id", r.id.to_string()), ("app", r.app.clone())];
    match command {
        TimerCommand::Create(args) => create(client, args).await,
        TimerCommand::List { app, page, page_size } => {
            let query = [("app", app), ("pageIndex", page.to_string()), ("pageSize", page_size.to_string())];
            let result = client.call(Method::GET, "getAppTimers", &query, None).await?;
            let rows: Vec<Vec<String>> = list_of(&result).iter().map(timer_row).collect();
            let mut out = table::render(&["ID", "NAME", "STATUS", "SCHEDULE", "TIMEZONE", "NEXT FIRE"], &rows);
            out.push_str(&format!(
                "{} of {} timers{}\n",
                rows.len(),
                text(&result["total"]),
                paging(&result, page, page_size)
            ));
            Ok((result, out))
        }
        TimerCommand::Get(r) => {
            let result = client.call(Method::GET, "getTimer", &by_ref(&r), None).await?;
            let out = describe(&result);
            Ok((result, out))
        }
        TimerCommand::Update { timer, fields, file } => {
            let mut body = match file {
                Some(path) => match read_json(&path)? {
                    Value::Object(map) => map,
                    _ => return Err(Failure::usage(format!("{}: expected a JSON object of fields", path.display()))),
                },
                None => Map::new(),
            };
            body.extend(fields.into_json());
            if body.is_empty() {
                return Err(Failure::usage("nothing to update: give a field flag (--cron, --url, ...) or --file"));
            }
            body.insert("id".into(), json!(timer.id));
            body.insert("app".into(), json!(timer.app));
            let result = client.call(Method::POST, "updateTimer", &[], Some(&Value::Object(body))).await?;
            let out = describe(&result);
            Ok((result, out))
        }
        TimerCommand::Enable(r) => done(client.call(Method::GET, "enableTimer", &by_ref(&r), None).await?, "enabled"),
        TimerCommand::Disable(r) => done(client.call(Method::GET, "unableTimer", &by_ref(&r), None).await?, "disabled"),
        TimerCommand::Delete(r) => done(client.call(Method::DELETE, "delTimer", &by_ref(&r), None).await?, "deleted"),
        TimerCommand::Trigger(r) => {
            let result = client.call(Method::POST, "triggerTimer", &by_ref(&r), None).await?;
            let out = format!("timer {} fires now (run time {} ms)\n", r.id, text(&result["runTimer"]));
            Ok((result, out))
        }
        TimerCommand::Backfill { timer, from, to, max_fires } => {
            let instant = |t: String| t.parse::<i64>().map(Value::from).unwrap_or(Value::String(t));
            let asked = BackfillTimer { id: timer.id, app: timer.app, from: instant(from), to: instant(to), max_fires };
            let body = serde_json::to_value(asked).expect("a backfill serializes");
            let result = client.call(Method::POST, "backfillTimer", &[], Some(&body)).await?;
            let out = format!("timer {}: {} fires backfilled\n", timer.id, text(&result["count"]));
            Ok((result, out))
        }
        TimerCommand::Fires { timer, status, upcoming, page_size } => {
            let mut query = by_ref(&timer);
            query.push(("pageSize", page_size.to_string()));
            if let Some(status) = status {
                query.push(("status", status));
            }
            if upcoming {
                query.push(("upcoming", "true".into()));
            }
            let result = client.call(Method::GET, "getTimerTasks", &query, None).await?;
            let rows: Vec<Vec<String>> = list_of(&result)
                .iter()
                .map(|f| {
                    vec![
                        text(&f["taskId"]),
                        describe::time(&f["runTimer"]),
                        fire_status(&f["status"]).into(),
                        text(&f["attempt"]),
                        text(&f["costTime"]),
                        text(&f["output"]),
                    ]
                })
                .collect();
            let mut out = table::render(&["FIRE", "RUN TIME", "STATUS", "ATTEMPT", "LATE MS", "OUTPUT"], &rows);
            out.push_str(&format!("{} of {} fires\n", rows.len(), text(&result["total"])));
            Ok((result, out))
        }
    }
}

fn done(result: Value, what: &str) -> Result<(Value, String), Failure> {
    let out = format!("timer {} {what}\n", text(&result["id"]));
    Ok((result, out))
}

async fn create(client: &Client, args: CreateArgs) -> Result<(Value, String), Failure> {
    let Some(path) = args.file else {
        let mut body = args.fields.into_json();
        body.insert("app".into(), json!(args.app));
        body.insert("status".into(), json!(if args.enable { 2 } else { 1 }));
        let result = client.call(Method::POST, "createTimer", &[], Some(&Value::Object(body))).await?;
        let out = format!("created timer {}\n", text(&result["id"]));
        return Ok((result, out));
    };
    let timers = match read_json(&path)? {
        Value::Array(list) => list,
        Value::Object(mut map) if map.contains_key("timers") => match map.remove("timers") {
            Some(Value::Array(list)) => list,
            _ => return Err(Failure::usage(format!("{}: `timers` must be an array", path.display()))),
        },
        one @ Value::Object(_) => {
            let result = client.call(Method::POST, "createTimer", &[], Some(&one)).await?;
            let out = format!("created timer {}\n", text(&result["id"]));
            return Ok((result, out));
        }
        _ => {
            return Err(Failure::usage(format!(
                "{}: expected a timer, an array of timers or {{\"timers\": [...]}}",
                path.display()
            )))
        }
    };
    let progress = crate::progress::bar("timers", timers.len() as u64);
    let mut ids = Vec::with_capacity(timers.len());
    let batches = timers.len().div_ceil(IMPORT_BATCH);
    for (n, batch) in timers.chunks(IMPORT_BATCH).enumerate() {
        let body = json!({ "timers": batch });
        let first = n * IMPORT_BATCH;
        let result = client.call(Method::POST, "createTimers", &[], Some(&body)).await.map_err(|f| {
            progress.finish_and_clear();
            let created = match first {
                0 => "none was created".to_owned(),
                done => format!("the {done} before it were created"),
            };
            Failure {
                msg: format!(
                    "{} (batch {} of {batches}: the file's timers[{first}] to timers[{}], refused whole; {created})",
                    in_file(&f.msg, first),
                    n + 1,
                    first + batch.len() - 1,
                ),
                code: f.code,
            }
        })?;
        ids.extend(result["ids"].as_array().cloned().unwrap_or_default());
        progress.inc(batch.len() as u64);
    }
    progress.finish_and_clear();
    let out = format!("created {} timers\n", ids.len());
    Ok((json!({ "ids": ids }), out))
}

/// `msg` of a batch whose first timer is the file's `first`-th, each
/// `timers[i]` in it (the server's index within the batch) renumbered as
/// the file's: `timers[first + i]`.
fn in_file(msg: &str, first: usize) -> String {
    super::each_item(msg, |i| Some(format!("{}]", first + i)))
}

/// After `N of TOTAL timers`: where this page is, and the flag for the
/// next one when there are more.
fn paging(result: &Value, page: u32, page_size: u32) -> String {
    let (Some(total), true) = (result["total"].as_u64(), page_size > 0) else { return String::new() };
    let pages = total.div_ceil(u64::from(page_size)).max(1);
    let page = u64::from(page);
    if page < pages {
        format!(" (page {page} of {pages}; the next: --page {})", page + 1)
    } else if page > pages {
        format!(" (page {page} is past the last, {pages})")
    } else if pages > 1 {
        format!(" (page {page} of {pages}, the last)")
    } else {
        String::new()
    }
}

fn read_json(path: &PathBuf) -> Result<Value, Failure> {
    let text =
        if path.as_os_str() == "-" { std::io::read_to_string(std::io::stdin()) } else { std::fs::read_to_string(path) }
            .map_err(|e| Failure::usage(format!("reading {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Failure::usage(format!("{}: not JSON: {e}", path.display())))
}

fn timer_row(t: &Value) -> Vec<String> {
    vec![
        text(&t["id"]),
        text(&t["name"]),
        timer_status(&t["status"]).into(),
        describe::schedule(t),
        text(&t["timezone"]),
        text(&t["nextRunTime"]),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{in_file, paging};

    #[test]
    fn batch_items_are_renumbered_as_the_files() {
        assert_eq!(
            in_file("timers[200].cron `61 * * * *` is invalid; timers[7]: missing field `name`", 1000),
            "timers[1200].cron `61 * * * *` is invalid; timers[1007]: missing field `name`"
        );
        assert_eq!(in_file("timers[x] timers[] timers[3", 1000), "timers[x] timers[] timers[3");
        assert_eq!(in_file("a timer named `t0` already exists", 2000), "a timer named `t0` already exists");
    }

    #[test]
    fn a_page_says_where_it_is_and_how_to_get_the_next() {
        let total = |n: u64| json!({ "total": n });
        assert_eq!(paging(&total(120), 1, 50), " (page 1 of 3; the next: --page 2)");
        assert_eq!(paging(&total(120), 3, 50), " (page 3 of 3, the last)");
        assert_eq!(paging(&total(120), 4, 50), " (page 4 is past the last, 3)");
        assert_eq!(paging(&total(50), 1, 50), "");
        assert_eq!(paging(&total(0), 1, 50), "");
        assert_eq!(paging(&json!({}), 1, 50), "");
    }
}
