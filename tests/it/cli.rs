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
    assert_eq!(code(&out), exit::INVALID, "the server's minimum: {}", stderr(&out));
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
