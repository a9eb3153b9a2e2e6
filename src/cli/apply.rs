//! Timers as code: `xtimer apply -f FILE|DIR [--prune] [--dry-run]` makes
//! a server's timers match YAML or JSON files (one `applyTimers` call per
//! app, each all or nothing) and prints the diff; `xtimer export --app A
//! [--selector S]` prints an app's timers as YAML (or JSON) that `apply`
//! reads back unchanged.
//!
//! A file holds a list of timers, `{"timers": [...]}` or one timer, each
//! as `createTimer` takes it; a YAML file may hold several documents. A
//! folder is read with its subfolders, its `.yaml`, `.yml` and `.json`
//! files in path order (names starting with `.` left out).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};
use xtimer_core::spec::TimerSpec;

use super::client::{Client, Failure};
use super::{finish, list_of, Remote};

/// The owner of applied timers when `--owner` is not given.
pub const DEFAULT_OWNER: &str = "apply";
/// Timers per page `export` reads (the API's most).
const EXPORT_PAGE: usize = 500;

/// `xtimer apply` and `xtimer export`.
#[derive(Debug, Subcommand)]
pub enum CodeCommand {
    /// Make a server's timers match YAML or JSON files (timers as code);
    /// prints what changed.
    ///
    /// Each timer, matched by app and name, is created, updated or left
    /// unchanged, and with `--prune` the owner's timers the files no longer
    /// list are deleted. Each app's change is all or nothing.
    Apply {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        args: ApplyArgs,
    },
    /// Print an app's timers as YAML (`--json`: JSON) that `apply` reads
    /// back unchanged.
    Export {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        args: ExportArgs,
    },
}

/// `xtimer apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A YAML or JSON file of timers (a list, `{"timers": [...]}` or one
    /// timer), a folder of such files (`.yaml`, `.yml`, `.json`, subfolders
    /// too, in path order), or `-` for standard input; may be repeated.
    #[arg(short = 'f', long = "file", visible_alias = "filename", value_name = "FILE|DIR", required = true)]
    pub files: Vec<PathBuf>,
    /// Delete the timers of each app applied that carry the label
    /// `managed-by: <owner>` and that the files do not list.
    #[arg(long)]
    pub prune: bool,
    /// Print what would change, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Whose timers these are: the value of the `managed-by` label each
    /// applied timer carries, which `--prune` deletes by.
    #[arg(long, default_value = DEFAULT_OWNER)]
    pub owner: String,
    /// The app of the timers that name none; with it, a timer of another
    /// app is refused, and this app is applied (and pruned) even if the
    /// files list none of its timers.
    #[arg(long)]
    pub app: Option<String>,
}

/// `xtimer export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The app whose timers to export.
    #[arg(long)]
    pub app: String,
    /// Only the timers whose labels meet this selector (`team=billing`,
    /// `managed-by=apply`).
    #[arg(long)]
    pub selector: Option<String>,
}

/// Runs `xtimer apply` or `xtimer export`; returns the exit code.
pub async fn run(command: CodeCommand) -> u8 {
    let (remote, outcome) = match command {
        CodeCommand::Apply { remote, args } => {
            let outcome = match remote.client() {
                Ok(client) => apply(&client, args).await,
                Err(failure) => Err(failure),
            };
            (remote, outcome)
        }
        CodeCommand::Export { remote, args } => {
            let outcome = match remote.client() {
                Ok(client) => export(&client, args).await,
                Err(failure) => Err(failure),
            };
            (remote, outcome)
        }
    };
    finish(&remote, outcome)
}

/// Where a timer came from: its file and its place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Source {
    file: String,
    item: usize,
}

/// The timers of one app, each with where it came from.
type Group = Vec<(Value, Source)>;

async fn apply(client: &Client, args: ApplyArgs) -> Result<(Value, String), Failure> {
    let mut items = Vec::new();
    for path in &args.files {
        items.extend(read_path(path)?);
    }
    let groups = by_app(items, args.app.as_deref())?;
    if groups.is_empty() {
        let files: Vec<String> = args.files.iter().map(|p| p.display().to_string()).collect();
        return Err(Failure::usage(format!(
            "no timers in {}: a file holds a list of timers or {{\"timers\": [...]}}",
            files.join(", ")
        )));
    }
    let body = |app: &str, group: &Group, dry_run: bool| {
        let timers: Vec<&Value> = group.iter().map(|(t, _)| t).collect();
        json!({"app": app, "timers": timers, "prune": args.prune, "owner": args.owner, "dryRun": dry_run})
    };
    if !args.dry_run && groups.len() > 1 {
        // Each app's apply is all or nothing on its own: try them all dry
        // first, so that a refused one leaves every app as it was.
        for (app, group) in &groups {
            client
                .call(Method::POST, "applyTimers", &[], Some(&body(app, group, true)))
                .await
                .map_err(|f| in_files(f, app, group, &[]))?;
        }
    }
    let mut results = Vec::with_capacity(groups.len());
    let mut out = String::new();
    let mut totals = [0usize; 4];
    let mut done: Vec<&str> = Vec::new();
    for (app, group) in &groups {
        let result = client
            .call(Method::POST, "applyTimers", &[], Some(&body(app, group, args.dry_run)))
            .await
            .map_err(|f| in_files(f, app, group, &done))?;
        for (n, word) in ["created", "updated", "unchanged", "deleted"].into_iter().enumerate() {
            for name in list_of_names(&result[word]) {
                out.push_str(&format!("{word:<9} {app}/{name}\n"));
                totals[n] += 1;
            }
        }
        let mut entry = json!({ "app": app });
        if let (Value::Object(entry), Value::Object(result)) = (&mut entry, result) {
            entry.extend(result);
        }
        results.push(entry);
        done.push(app);
    }
    let [created, updated, unchanged, deleted] = totals;
    let apps = if groups.len() > 1 { format!(" in {} apps", groups.len()) } else { String::new() };
    out.push_str(&format!("{created} created, {updated} updated, {unchanged} unchanged, {deleted} deleted{apps}"));
    out.push_str(if args.dry_run { " (dry run: nothing changed)\n" } else { "\n" });
    Ok((Value::Array(results), out))
}

fn list_of_names(value: &Value) -> Vec<String> {
    value.as_array().map(|l| l.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

/// A failed apply of `app`: its message with each `timers[N]` followed by
/// the file and item it came from, and what was applied before it.
fn in_files(failure: Failure, app: &str, group: &Group, done: &[&str]) -> Failure {
    let mut msg = format!("app `{app}`: {}", locate(&failure.msg, group));
    if !done.is_empty() {
        msg.push_str(&format!(" (applied before it: {})", done.join(", ")));
    }
    Failure { msg, code: failure.code }
}

/// `msg` with each `timers[N]` (the server's index in `group`) followed by
/// where that timer is: `timers[3] (a.yaml: item 1)`.
fn locate(msg: &str, group: &Group) -> String {
    super::each_item(msg, |i| group.get(i).map(|(_, source)| format!("{i}] ({}: item {})", source.file, source.item)))
}

/// The timers grouped by app, in app order: a timer naming no app is
/// `default_app`'s; with `default_app`, a timer of another app is refused
/// and that app is there even with no timer.
fn by_app(items: Vec<(Value, Source)>, default_app: Option<&str>) -> Result<BTreeMap<String, Group>, Failure> {
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    if let Some(app) = default_app {
        groups.insert(app.to_owned(), Vec::new());
    }
    for (mut timer, source) in items {
        let at = || format!("{}: item {}", source.file, source.item);
        let Some(fields) = timer.as_object_mut() else {
            return Err(Failure::usage(format!("{}: a timer must be a mapping of its fields", at())));
        };
        let app = match (fields.get("app"), default_app) {
            (Some(Value::String(app)), Some(want)) if app != want => {
                return Err(Failure::usage(format!("{}: is of app `{app}`, not of --app `{want}`", at())))
            }
            (Some(Value::String(app)), _) => app.clone(),
            (None, Some(app)) => {
                fields.insert("app".into(), Value::String(app.to_owned()));
                app.to_owned()
            }
            (None, None) => return Err(Failure::usage(format!("{}: names no app: give it `app`, or --app", at()))),
            (Some(other), _) => return Err(Failure::usage(format!("{}: `app` must be a string, got {other}", at()))),
        };
        groups.entry(app).or_default().push((timer, source));
    }
    Ok(groups)
}

/// The timers of `path`: a file, a folder or `-` (standard input).
fn read_path(path: &Path) -> Result<Vec<(Value, Source)>, Failure> {
    if path.as_os_str() == "-" {
        let text = std::io::read_to_string(std::io::stdin())
            .map_err(|e| Failure::usage(format!("reading standard input: {e}")))?;
        return read_text("-", &text, false);
    }
    let mut files = Vec::new();
    if path.is_dir() {
        files_in(path, &mut files)?;
    } else {
        files.push(path.to_owned());
    }
    let mut items = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| Failure::usage(format!("reading {}: {e}", file.display())))?;
        let json = file.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        items.extend(read_text(&file.display().to_string(), &text, json)?);
    }
    Ok(items)
}

/// The `.yaml`, `.yml` and `.json` files under `dir`, subfolders
/// included, in path order; names starting with `.` are left out.
fn files_in(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Failure> {
    let read = std::fs::read_dir(dir).map_err(|e| Failure::usage(format!("reading {}: {e}", dir.display())))?;
    let mut entries: Vec<PathBuf> = read
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| Failure::usage(format!("reading {}: {e}", dir.display())))?;
    entries.sort();
    for path in entries {
        if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
            continue;
        }
        if path.is_dir() {
            files_in(&path, out)?;
        } else if path.extension().is_some_and(|e| ["yaml", "yml", "json"].iter().any(|x| e.eq_ignore_ascii_case(x))) {
            out.push(path);
        }
    }
    Ok(())
}

/// The timers of a file's `text`: JSON (a `.json` file, or a text that
/// reads as JSON) or YAML, each document a list of timers,
/// `{"timers": [...]}` or one timer.
fn read_text(file: &str, text: &str, json: bool) -> Result<Vec<(Value, Source)>, Failure> {
    let trimmed = text.trim_start();
    let documents = if json || trimmed.starts_with('{') || trimmed.starts_with('[') {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => vec![value],
            Err(e) if json => return Err(Failure::usage(format!("{file}: not JSON: {e}"))),
            Err(_) => yaml_documents(file, text)?,
        }
    } else {
        yaml_documents(file, text)?
    };
    let mut items = Vec::new();
    for document in documents {
        let timers = match document {
            Value::Null => continue,
            Value::Array(list) => list,
            Value::Object(mut map) if map.contains_key("timers") => match map.remove("timers") {
                Some(Value::Array(list)) if map.is_empty() => list,
                Some(Value::Array(_)) => {
                    let extra: Vec<&String> = map.keys().collect();
                    return Err(Failure::usage(format!(
                        "{file}: beside `timers`, unknown keys {extra:?}: a file holds a list of timers or \
                         {{\"timers\": [...]}}"
                    )));
                }
                _ => return Err(Failure::usage(format!("{file}: `timers` must be a list"))),
            },
            one @ Value::Object(_) => vec![one],
            _ => {
                return Err(Failure::usage(format!(
                    "{file}: expected a list of timers, {{\"timers\": [...]}} or one timer"
                )))
            }
        };
        let first = items.len();
        items.extend(
            timers.into_iter().enumerate().map(|(i, timer)| (timer, Source { file: file.to_owned(), item: first + i })),
        );
    }
    Ok(items)
}

fn yaml_documents(file: &str, text: &str) -> Result<Vec<Value>, Failure> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).map_err(|e| Failure::usage(format!("{file}: not YAML: {e}"))))
        .collect()
}

async fn export(client: &Client, args: ExportArgs) -> Result<(Value, String), Failure> {
    let mut timers = Vec::new();
    for page in 1.. {
        let mut query = vec![("app", args.app.clone()), ("pageIndex", page.to_string())];
        query.push(("pageSize", EXPORT_PAGE.to_string()));
        if let Some(selector) = &args.selector {
            query.push(("selector", selector.clone()));
        }
        let result = client.call(Method::GET, "getAppTimers", &query, None).await?;
        let list = list_of(&result);
        let total = result["total"].as_u64().unwrap_or(0) as usize;
        let last = list.len() < EXPORT_PAGE;
        for view in list {
            timers.push(exported(&view)?);
        }
        if last || timers.len() >= total {
            break;
        }
    }
    let yaml = if timers.is_empty() {
        "[]\n".to_owned()
    } else {
        serde_yaml_ng::to_string(&timers).map_err(|e| Failure::usage(format!("writing YAML: {e}")))?
    };
    let json = serde_json::to_value(&timers).expect("timers serialize");
    Ok((json, yaml))
}

/// A timer as `getAppTimers` shows it, as `apply` takes it back: its
/// spec, every default left out ([`TimerSpec::minimal`]).
pub fn exported(view: &Value) -> Result<TimerSpec, Failure> {
    TimerSpec::from_shown(view)
        .map(TimerSpec::minimal)
        .map_err(|invalid| Failure::usage(format!("a timer the server showed cannot be read back: {invalid}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use xtimer_core::spec::{NotifyHttpParam, RetryParam};
    use xtimer_webserver::routes::timers::view::{TimerFacts, TimerView};

    use super::*;

    fn src(file: &str, item: usize) -> Source {
        Source { file: file.into(), item }
    }

    #[test]
    fn yaml_json_lists_and_documents_are_read() {
        let yaml = "- name: a\n  cron: '* * * * *'\n- name: b\n---\ntimers:\n  - name: c\n---\nname: d\n";
        let items = read_text("t.yaml", yaml, false).unwrap();
        let names: Vec<&str> = items.iter().map(|(t, _)| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(items[2].1, src("t.yaml", 2));
        let json = r#"{"timers": [{"name": "a", "status": 2}]}"#;
        let items = read_text("t.json", json, true).unwrap();
        assert_eq!(items[0].0, json!({"name": "a", "status": 2}));
        assert!(read_text("t.json", "name: a", true).unwrap_err().msg.contains("not JSON"));
        assert!(read_text("t.yaml", "timers: 3", false).unwrap_err().msg.contains("must be a list"));
        assert!(read_text("t.yaml", "", false).unwrap().is_empty());
    }

    #[test]
    fn timers_group_by_app_and_app_fills_in_the_missing() {
        let items = vec![
            (json!({"app": "b", "name": "x"}), src("f", 0)),
            (json!({"name": "y"}), src("f", 1)),
            (json!({"app": "a", "name": "z"}), src("f", 2)),
        ];
        let err = by_app(items.clone(), None).unwrap_err();
        assert_eq!(err.msg, "f: item 1: names no app: give it `app`, or --app");
        let err = by_app(items.clone(), Some("a")).unwrap_err();
        assert_eq!(err.msg, "f: item 0: is of app `b`, not of --app `a`");
        let groups = by_app(items[1..].to_vec(), Some("a")).unwrap();
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(groups["a"][0].0["app"], "a");
        assert!(by_app(Vec::new(), Some("a")).unwrap()["a"].is_empty(), "--app is applied even with no timer");
    }

    #[test]
    fn a_refusal_names_the_file_and_item() {
        let group = vec![(json!({}), src("a.yaml", 0)), (json!({}), src("b.yaml", 4))];
        assert_eq!(
            locate("timers: timers[0] and timers[1] are both named `x`", &group),
            "timers: timers[0] (a.yaml: item 0) and timers[1] (b.yaml: item 4) are both named `x`"
        );
        assert_eq!(locate("timers[7].cron: bad; timers[x]", &group), "timers[7].cron: bad; timers[x]");
    }

    #[test]
    fn a_view_is_exported_as_the_create_input() {
        // A completed timer as `getTimer` shows it, its defaults spelled out.
        let spec = TimerSpec {
            app: "billing".into(),
            name: "nightly".into(),
            status: Some(json!(4)),
            cron: Some("0 30 2 * * ?".into()),
            timezone: Some("Asia/Shanghai".into()),
            notify_http_param: Some(NotifyHttpParam {
                url: "http://h/p".into(),
                method: Some("POST".into()),
                header: Some(BTreeMap::new()),
                ..NotifyHttpParam::default()
            }),
            retry: Some(RetryParam { max_attempts: Some(3), backoff_ms: Some(1000), no_retry_statuses: None }),
            misfire: Some("fire_once".into()),
            labels: Some(BTreeMap::from([("managed-by".into(), "apply".into())])),
            spread_ms: Some(0),
            ..TimerSpec::default()
        };
        let facts = TimerFacts {
            id: 7,
            run_at_ms: None,
            pause_reason: None,
            next_run_timer: Some(1),
            next_run_time: Some("x".into()),
            fires_left: None,
            stats: None,
            create_time: "x".into(),
            modify_time: "x".into(),
        };
        let view = serde_json::to_value(TimerView { spec, facts }).unwrap();
        let yaml = serde_yaml_ng::to_string(&exported(&view).unwrap()).unwrap();
        assert_eq!(
            yaml,
            "app: billing\nname: nightly\nstatus: 2\ncron: 0 30 2 * * ?\ntimezone: Asia/Shanghai\n\
             notifyHTTPParam:\n  url: http://h/p\n  method: POST\nlabels:\n  managed-by: apply\n"
        );
        let once = json!({"app": "a", "name": "o", "status": 1, "runAtMs": 1_767_225_600_123_i64,
                          "timezone": "UTC", "retry": {"maxAttempts": 1, "backoffMs": 0}});
        let t = serde_json::to_value(exported(&once).unwrap()).unwrap();
        assert_eq!(t["runAt"], json!("2026-01-01T00:00:00.123Z"));
        assert_eq!((&t["timezone"], &t["retry"]), (&Value::Null, &json!({"maxAttempts": 1, "backoffMs": 0})));
    }
}
