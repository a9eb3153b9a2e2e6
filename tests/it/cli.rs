//! The client commands (`xtimer timer ...`), run as the binary against a
//! live node: tables for people, `--json` for scripts, and exit codes.

use std::process::Output;

use serde_json::Value;
use xtimer::cli::client::exit;
use xtimer::receiver::Receiver;

use crate::helpers::{wait_for, Stack, TestNode};

/// Runs `xtimer ARGS --server BASE` to its end.
async fn xtimer(base: &str, args: &[&str]) -> Output {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(["--server".into(), base.into()]);
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_xtimer"))
            .args(&all)
            .env_remove("XTIMER_TOKEN")
            .env_remove("XTIMER_SERVER")
            .output()
            .expect("xtimer runs")
    })
    .await
    .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn code(out: &Output) -> u8 {
    out.status.code().expect("exited") as u8
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_through_its_life_from_the_command_line() {
    let node = TestNode::spawn(Stack::Embedded).await;
    let rx = Receiver::start(false).await.unwrap();
    let base = node.base.clone();
    let url = rx.url("/hook");

    let out = xtimer(
        &base,
        &[
            "timer",
            "create",
            "--app",
            "cli",
            "--name",
            "every-second",
            "--cron",
            "* * * * * *",
            "--url",
            &url,
            "--enable",
        ],
    )
    .await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let id: String = stdout(&out).trim().strip_prefix("created timer ").expect("created timer N").to_owned();

    let out = xtimer(&base, &["timer", "list", "--app", "cli"]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let table = stdout(&out);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("ID") && lines[0].contains("SCHEDULE"), "{table}");
    assert!(lines[1].starts_with(&id) && lines[1].contains("every-second") && lines[1].contains("enabled"), "{table}");
    assert!(table.contains("1 of 1 timers"), "{table}");

    let out = xtimer(&base, &["timer", "get", &id, "--app", "cli", "--json"]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let timer: Value = serde_json::from_str(&stdout(&out)).expect("--json prints JSON");
    assert_eq!(timer["name"], "every-second");
    assert_eq!(timer["notifyHTTPParam"]["url"], url.as_str());

    rx.wait_until(crate::helpers::PATIENCE, |hits| !hits.is_empty()).await;
    let fires = wait_for("a succeeded fire listed", || async {
        let out = xtimer(&base, &["timer", "fires", &id, "--app", "cli", "--status", "2"]).await;
        let text = stdout(&out);
        text.contains("succeeded").then_some(text)
    })
    .await;
    assert!(fires.lines().next().unwrap().contains("LATE MS"), "{fires}");
    assert!(fires.contains("200"), "the output column shows the answer: {fires}");

    let out = xtimer(&base, &["timer", "disable", &id, "--app", "cli"]).await;
    assert_eq!((code(&out), stdout(&out)), (exit::OK, format!("timer {id} disabled\n")));
    let out = xtimer(&base, &["timer", "get", &id, "--app", "cli"]).await;
    assert!(stdout(&out).lines().any(|l| l.starts_with("status") && l.ends_with("disabled")), "{}", stdout(&out));
    let out = xtimer(&base, &["timer", "enable", &id, "--app", "cli"]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));

    let out = xtimer(&base, &["timer", "update", &id, "--app", "cli", "--name", "renamed"]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert!(stdout(&out).contains("renamed"), "{}", stdout(&out));
    let out = xtimer(&base, &["timer", "trigger", &id, "--app", "cli"]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert!(stdout(&out).starts_with(&format!("timer {id} fires now")), "{}", stdout(&out));
    // Ten seconds of last minute, before the timer existed: none has a record.
    let minute_ago = (crate::helpers::now_ms() / 1_000 - 60) * 1_000;
    let (from, to) = (minute_ago.to_string(), (minute_ago + 10_000).to_string());
    let args = ["timer", "backfill", &id, "--app", "cli", "--from", &from, "--to", &to, "--max-fires", "4"];
    let out = xtimer(&base, &args).await;
    assert_eq!((code(&out), stdout(&out)), (exit::OK, format!("timer {id}: 4 fires backfilled\n")), "{}", stderr(&out));
    let out = xtimer(&base, &["timer", "backfill", &id, "--app", "cli", "--from", &to, "--to", &from]).await;
    assert_eq!(code(&out), exit::INVALID, "an empty window is refused: {}", stderr(&out));
    let out = xtimer(&base, &["timer", "delete", &id, "--app", "cli"]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));

    // Gone: a 404, exit code NOT_FOUND, the server's message on stderr.
    let out = xtimer(&base, &["timer", "get", &id, "--app", "cli"]).await;
    assert_eq!(code(&out), exit::NOT_FOUND);
    assert!(stderr(&out).contains("not found") && stderr(&out).contains("HTTP 404"), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_unreachable_servers_and_bulk_imports() {
    let node = TestNode::spawn(Stack::Embedded).await;
    let base = node.base.clone();

    let out = xtimer(
        &base,
        &["timer", "create", "--app", "cli", "--name", "bad", "--cron", "61 * * * *", "--url", "http://127.0.0.1:9/x"],
    )
    .await;
    assert_eq!(code(&out), exit::INVALID, "{}", stderr(&out));
    assert!(stderr(&out).contains("cron") && stderr(&out).contains("HTTP 400"), "{}", stderr(&out));

    let out = xtimer("http://127.0.0.1:1", &["timer", "list", "--app", "cli"]).await;
    assert_eq!(code(&out), exit::UNREACHABLE);
    assert!(stderr(&out).contains("cannot reach"), "{}", stderr(&out));

    // No such flag: clap's usage error.
    let out = xtimer(&base, &["timer", "list", "--app", "cli", "--frobnicate"]).await;
    assert_eq!(code(&out), exit::USAGE);

    // 2,500 timers from a file: three batches.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("timers.json");
    let timers: Vec<Value> = (0..2500)
        .map(|n| {
            serde_json::json!({"app": "bulk", "name": format!("t{n}"), "cron": "0 0 * * *",
                "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook"}})
        })
        .collect();
    std::fs::write(&file, serde_json::to_string(&serde_json::json!({ "timers": timers })).unwrap()).unwrap();
    let out = xtimer(&base, &["timer", "create", "--file", file.to_str().unwrap(), "--json"]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let reply: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(reply["ids"].as_array().unwrap().len(), 2500);
    let out = xtimer(&base, &["timer", "list", "--app", "bulk", "--page-size", "1"]).await;
    assert!(stdout(&out).contains("1 of 2500 timers"), "{}", stdout(&out));

    // Importing the same names again: the first batch is refused as taken.
    let out = xtimer(&base, &["timer", "create", "--file", file.to_str().unwrap()]).await;
    assert_eq!(code(&out), exit::CONFLICT, "{}", stderr(&out));
    assert!(stderr(&out).contains("batch 1"), "{}", stderr(&out));

    let out = xtimer(&base, &["cron", "preview", "0 9 * * *", "--tz", "Europe/Berlin", "--json"]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let preview: Value = serde_json::from_str(&stdout(&out)).expect("--json prints JSON");
    assert_eq!(preview["list"].as_array().map(Vec::len), Some(10), "{preview}");
    assert!(preview["list"][0]["runTime"].as_str().unwrap().contains("T09:00:00+0"), "{preview}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_preview_takes_an_interval_a_window_a_limit_and_calendars() {
    let node = TestNode::spawn(Stack::Embedded).await;
    let base = node.base.clone();

    // Every 90 minutes from midnight; the window starts at 03:00 and ends
    // at 12:00, and only the first four times of it are left.
    let args = [
        "cron",
        "preview",
        "--every-ms",
        "5400000",
        "--anchor-at",
        "2030-01-01T00:00:00Z",
        "--from",
        "2030-01-01T00:00:00Z",
        "--start-at",
        "2030-01-01T03:00:00Z",
        "--end-at",
        "2030-01-01T12:00:00Z",
        "--max-fires",
        "4",
        "--tz",
        "Europe/Berlin",
    ];
    let out = xtimer(&base, &args).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let table = stdout(&out);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("RUN TIME") && lines[0].ends_with("NOTE"), "{table}");
    let times: Vec<&str> = lines[1..].iter().map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(
        times,
        [
            "2030-01-01T04:00:00+01:00",
            "2030-01-01T05:30:00+01:00",
            "2030-01-01T07:00:00+01:00",
            "2030-01-01T08:30:00+01:00"
        ],
        "{table}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = xtimer(&base, &json_args).await;
    let preview: Value = serde_json::from_str(&stdout(&out)).expect("--json prints JSON");
    assert_eq!(preview["list"][0]["runTimer"], 1_893_466_800_000i64, "{preview}");

    // Exactly one of an expression and --every-ms; calendars need their app.
    for bad in [
        vec!["cron", "preview"],
        vec!["cron", "preview", "0 9 * * *", "--every-ms", "60000"],
        vec!["cron", "preview", "0 9 * * *", "--anchor-at", "0"],
        vec!["cron", "preview", "--anchor-at", "0"],
        vec!["cron", "preview", "0 9 * * *", "--exclude-calendars", "holidays"],
    ] {
        let out = xtimer(&base, &bad).await;
        assert_eq!(code(&out), exit::USAGE, "{bad:?}: {}", stderr(&out));
    }
    let out = xtimer(&base, &["cron", "preview", "--every-ms", "999"]).await;
    assert_eq!(code(&out), exit::INVALID, "previewCron's minimum: {}", stderr(&out));
    assert!(stderr(&out).contains("everyMs"), "{}", stderr(&out));

    // A day of the app's calendar: listed, with the calendar that excludes it.
    let put: Value = node
        .http
        .post(format!("{base}/api/xtimer/putCalendar"))
        .json(&serde_json::json!({"app": "cli", "name": "holidays", "dates": ["2030-12-25"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(put["code"], 0, "{put}");
    let daily = ["cron", "preview", "0 0 9 * * ?", "--from", "2030-12-23T12:00:00Z", "--count", "3", "--app", "cli"];
    let out = xtimer(&base, &[&daily[..], &["--exclude-calendars", "holidays"]].concat()).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let table = stdout(&out);
    let rows: Vec<Vec<&str>> = table.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    let notes: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[2])).collect();
    assert_eq!(
        notes,
        [
            ("2030-12-24T09:00:00+00:00", "-"),
            ("2030-12-25T09:00:00+00:00", "excluded:holidays"),
            ("2030-12-26T09:00:00+00:00", "-")
        ],
        "{table}"
    );
    // Two calendars, comma-separated; one the app does not have is refused.
    let out = xtimer(&base, &[&daily[..], &["--exclude-calendars", "holidays,nope"]].concat()).await;
    assert_eq!(code(&out), exit::INVALID, "{}", stderr(&out));
    assert!(stderr(&out).contains("no calendar `nope`"), "{}", stderr(&out));
    node.stop().await;
}

/// Runs `xtimer ARGS` (no `--server` added) with `envs` set, to its end.
async fn xtimer_with(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let envs: Vec<(String, String)> = envs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_xtimer"));
        command.args(&args);
        for var in ["XTIMER_TOKEN", "XTIMER_SERVER", "XTIMER_CONFIG", "XTIMER_DATABASE_URL", "XTIMER_REDIS_URL"] {
            command.env_remove(var);
        }
        command.envs(envs).output().expect("xtimer runs")
    })
    .await
    .unwrap()
}

/// `timers` as a bulk-import file in `dir`; its path.
fn import_file(dir: &std::path::Path, timers: &[Value]) -> String {
    let file = dir.join("timers.json");
    std::fs::write(&file, serde_json::to_string(&serde_json::json!({ "timers": timers })).unwrap()).unwrap();
    file.to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_import_names_the_timer_by_its_place_in_the_file() {
    let node = TestNode::spawn(Stack::Embedded).await;
    let base = node.base.clone();
    // 1,500 timers: the second batch holds the file's timers[1000] to
    // timers[1499], and the file's timers[1200] has a bad cron.
    let timers: Vec<Value> = (0..1500)
        .map(|n| {
            let cron = if n == 1200 { "61 * * * *" } else { "0 0 * * *" };
            serde_json::json!({"app": "bulk", "name": format!("t{n}"), "cron": cron,
                "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook"}})
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let out = xtimer(&base, &["timer", "create", "--file", &import_file(dir.path(), &timers)]).await;
    assert_eq!(code(&out), exit::INVALID, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("timers[1200].cron"), "the file's number: {err}");
    assert!(!err.contains("timers[200]"), "not the batch's: {err}");
    assert!(
        err.contains(
            "(batch 2 of 2: the file's timers[1000] to timers[1499], refused whole; the 1000 before it were created)"
        ),
        "{err}"
    );
    let out = xtimer(&base, &["timer", "list", "--app", "bulk", "--page-size", "1"]).await;
    assert!(stdout(&out).contains("1 of 1000 timers"), "the first batch stays: {}", stdout(&out));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_longer_than_its_page_says_how_to_get_the_next() {
    let node = TestNode::spawn(Stack::Embedded).await;
    let base = node.base.clone();
    let timers: Vec<Value> = (0..60)
        .map(|n| {
            serde_json::json!({"app": "paged", "name": format!("t{n}"), "cron": "0 0 * * *",
                "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook"}})
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let out = xtimer(&base, &["timer", "create", "--file", &import_file(dir.path(), &timers)]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));

    let out = xtimer(&base, &["timer", "list", "--app", "paged"]).await;
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1 + 50 + 1, "50 a page by default: {text}");
    assert!(text.ends_with("50 of 60 timers (page 1 of 2; the next: --page 2)\n"), "{text}");
    let out = xtimer(&base, &["timer", "list", "--app", "paged", "--page", "2"]).await;
    assert!(stdout(&out).ends_with("10 of 60 timers (page 2 of 2, the last)\n"), "{}", stdout(&out));
    let out = xtimer(&base, &["timer", "list", "--app", "paged", "--page-size", "100"]).await;
    assert!(stdout(&out).ends_with("60 of 60 timers\n"), "all on one page, no hint: {}", stdout(&out));
    // --json prints the reply as it is.
    let out = xtimer(&base, &["timer", "list", "--app", "paged", "--json"]).await;
    let reply: Value = serde_json::from_str(&stdout(&out)).expect("--json prints JSON");
    assert_eq!(reply["total"], 60);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_preview_needs_no_server() {
    // Nothing listens on port 1.
    let nowhere = "http://127.0.0.1:1";
    let args = ["cron", "preview", "0 30 2 * * ?", "--tz", "Europe/Berlin", "--from", "2030-03-29T12:00:00Z"];
    let out = xtimer(nowhere, &[&args[..], &["--count", "3"]].concat()).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let rows: Vec<Vec<String>> =
        stdout(&out).lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect();
    assert_eq!(rows[0], ["RUN", "TIME", "UNIX", "MS", "NOTE"], "{}", stdout(&out));
    let seen: Vec<(&str, &str)> = rows[1..].iter().map(|r| (r[0].as_str(), r[2].as_str())).collect();
    assert_eq!(
        seen,
        [("2030-03-30T02:30:00+01:00", "-"), ("2030-03-31T03:00:00+02:00", "gap"), ("2030-04-01T02:30:00+02:00", "-")],
        "the spring-forward day is noted: {}",
        stdout(&out)
    );
    // Today on: ten times by default.
    let out = xtimer(nowhere, &["cron", "preview", "*/5 * * * *", "--json"]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let preview: Value = serde_json::from_str(&stdout(&out)).expect("--json prints JSON");
    let first = preview["list"][0]["runTimer"].as_i64().unwrap();
    assert_eq!(preview["list"].as_array().map(Vec::len), Some(10), "{preview}");
    assert!(first > crate::helpers::now_ms() - 5_000 && first % 300_000 == 0, "{preview}");
    // Bad input: previewCron's words and exit code, with no HTTP.
    let out = xtimer(nowhere, &["cron", "preview", "--every-ms", "999"]).await;
    assert_eq!(
        (code(&out), stderr(&out)),
        (exit::INVALID, "error: everyMs: must be at least 1000 ms, got 999\n".into())
    );
    let out = xtimer(nowhere, &["cron", "preview", "0 9 * * *", "--tz", "Mars/Olympus"]).await;
    assert_eq!(code(&out), exit::INVALID, "{}", stderr(&out));
    assert!(stderr(&out).starts_with("error: timezone: unknown time zone `Mars/Olympus`"), "{}", stderr(&out));
    // The app's calendars are on a server: without one, it says so.
    let out = xtimer(nowhere, &["cron", "preview", "0 9 * * *", "--app", "a", "--exclude-calendars", "holidays"]).await;
    assert_eq!(code(&out), exit::UNREACHABLE, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--exclude-calendars reads the app's calendars from a running server"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_preview_here_answers_as_the_servers_preview_cron() {
    let node = TestNode::spawn(Stack::Embedded).await;
    let base = node.base.clone();
    let cases: [&[&str]; 5] = [
        &["0 30 2 * * ?", "--tz", "Europe/Berlin", "--from", "2030-03-29T12:00:00Z", "--count", "40"],
        &["0 30 2 * * ?", "--tz", "Europe/Berlin", "--from", "2030-10-25T12:00:00Z", "--count", "4"],
        &[
            "0 0 9 * * MON-FRI",
            "--tz",
            "America/New_York",
            "--from",
            "1893456000000",
            "--start-at",
            "2030-01-10T00:00:00Z",
            "--end-at",
            "2030-02-01T00:00:00Z",
            "--max-fires",
            "7",
            "--count",
            "20",
        ],
        &[
            "--every-ms",
            "5400000",
            "--anchor-at",
            "2030-01-01T00:00:00Z",
            "--from",
            "2030-01-01T00:00:00Z",
            "--start-at",
            "2030-01-01T03:00:00Z",
            "--max-fires",
            "4",
            "--tz",
            "Europe/Berlin",
        ],
        &["--every-ms", "3600000", "--from", "2030-03-31T00:30:00Z", "--tz", "Europe/Berlin", "--count", "3"],
    ];
    for case in cases {
        let out = xtimer(&base, &[&["cron", "preview", "--json"], case].concat()).await;
        assert_eq!(code(&out), exit::OK, "{case:?}: {}", stderr(&out));
        let here: Value = serde_json::from_str(&stdout(&out)).expect("--json prints JSON");
        // The same fields as the server's query string.
        let mut query: Vec<(String, String)> = Vec::new();
        let mut words = case.iter();
        while let Some(word) = words.next() {
            let key = match *word {
                "--tz" => "timezone",
                "--count" => "count",
                "--from" => "from",
                "--start-at" => "startAt",
                "--end-at" => "endAt",
                "--max-fires" => "maxFires",
                "--every-ms" => "everyMs",
                "--anchor-at" => "anchorAt",
                expr => {
                    query.push(("cron".into(), expr.into()));
                    continue;
                }
            };
            query.push((key.into(), words.next().unwrap().to_string()));
        }
        let reply: Value = node
            .http
            .get(format!("{base}/api/xtimer/previewCron"))
            .query(&query)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(reply["code"], 0, "{case:?}: {reply}");
        assert_eq!(here, reply["result"], "{case:?}");
        assert!(!here["list"].as_array().unwrap().is_empty(), "{case:?}");
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_cannot_be_reached_is_said_once() {
    for (url, cause) in [
        ("postgres://xtimer:hunter2@127.0.0.1:1/xtimer", "Connection refused"),
        ("mysql://xtimer:hunter2@127.0.0.1:1/xtimer", "Connection refused"),
    ] {
        let args = ["serve", "--listen", "127.0.0.1:0", "--database-url", url];
        // A backtrace asked for or not, the error is one line.
        let out = xtimer_with(&args, &[("RUST_BACKTRACE", "1"), ("XTIMER_LOG", "warn")]).await;
        assert_ne!(code(&out), 0, "{url}");
        let err = stderr(&out);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{url}: one line:\n{err}");
        assert!(
            lines[0]
                .starts_with(&format!("Error: cannot connect to {} (database.url): ", url.replace("hunter2", "***"))),
            "{err}"
        );
        assert_eq!(err.matches(cause).count(), 1, "{url}: the cause once:\n{err}");
        assert!(!err.contains("hunter2") && !err.contains("Caused by"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_start_logs_no_notice_of_the_migrations_table() {
    let storage = crate::helpers::Storage::new(Stack::PostgresRedis).await;
    let url = storage.config.database.url.clone();
    for start in ["first", "second"] {
        let out = xtimer_with(&["migrate", "--database-url", &url], &[("XTIMER_LOG", "info")]).await;
        let log = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(code(&out), 0, "{start}: {log}");
        assert!(log.contains("Schema is up to date."), "{start}: {log}");
        assert!(!log.contains("_sqlx_migrations") && !log.contains("notice"), "{start} start: {log}");
    }
}

/// The `xtimer cron preview` lines of the command line's page
/// (`docs/cli.md`) that show their output print that output, with no
/// server (those with `--exclude-calendars` ask one, and are left out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_previews_print_what_it_shows() {
    let page = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md")).unwrap();
    let lines: Vec<&str> = page.split("\n## ").next().unwrap().lines().collect();
    let mut checked = 0;
    for (i, line) in lines.iter().enumerate() {
        let Some(command) = line.strip_prefix("xtimer cron preview ") else { continue };
        let shown: Vec<&str> = lines[i + 1..].iter().map_while(|l| l.strip_prefix("# ")).collect();
        if shown.is_empty() || command.contains("--exclude-calendars") {
            continue;
        }
        let words = shell_words(command);
        let args: Vec<&str> = ["cron", "preview"].into_iter().chain(words.iter().map(String::as_str)).collect();
        let out = xtimer("http://127.0.0.1:1", &args).await;
        assert_eq!(code(&out), exit::OK, "{line}: {}", stderr(&out));
        assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), shown, "docs/cli.md: {line}");
        checked += 1;
    }
    assert!(checked >= 1, "no preview with its output in docs/cli.md");
}

/// `line` split as a shell splits it: words, `'quoted words'`, and no
/// `# comment`.
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut in_word) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            '\'' => (quoted, in_word) = (!quoted, true),
            '#' if !quoted && !in_word => break,
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}
