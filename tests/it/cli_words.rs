//! The command line tells the truth and names the fix (issue 52): `timer
//! list` and `timer get` show every kind of schedule and every field, in
//! words that count right ("1 attempt"); `--status` takes a name; no
//! server, or a port in use, is said with what to do.

use std::process::Output;

use serde_json::{json, Value};
use xtimer::cli::client::exit;

use crate::helpers::{Stack, TestNode};

async fn xtimer(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_xtimer"));
        command.args(&args);
        for var in ["XTIMER_TOKEN", "XTIMER_SERVER", "XTIMER_CONFIG", "XTIMER_DATABASE_URL", "XTIMER_LISTEN"] {
            command.env_remove(var);
        }
        command.env("XTIMER_LOG", "warn").output().expect("xtimer runs")
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

/// The value of `key` in `timer get`'s `key  value` lines.
fn field<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|line| line.strip_prefix(key).filter(|rest| rest.starts_with("  ")).map(str::trim))
        .unwrap_or_else(|| panic!("no `{key}` line in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_schedule_and_every_field_is_shown() {
    let node = TestNode::spawn(Stack::Embedded).await;
    let base = node.base.clone();
    let http = reqwest::Client::new();
    let calendar = json!({"app": "words", "name": "holidays", "dates": ["2099-12-25"]});
    let reply: Value =
        http.post(format!("{base}/api/xtimer/putCalendar")).json(&calendar).send().await.unwrap().json().await.unwrap();
    assert_eq!(reply["code"], 0, "{reply}");
    let hook = json!({"url": "http://127.0.0.1:9/hook"});
    let interval = node
        .create_ok(json!({
            "app": "words", "name": "interval", "everyMs": 300_000, "notifyHTTPParam": hook,
            "labels": {"team": "billing"}, "spreadMs": 30_000, "excludeCalendars": ["holidays"],
            "maxFires": 10, "retry": {"maxAttempts": 1}, "misfireThresholdMs": 60_000,
            "startAt": "2099-01-01T00:00:00Z", "endAt": "2099-12-31T00:00:00Z",
        }))
        .await;
    node.create_ok(json!({"app": "words", "name": "daily", "cron": "0 9 * * *", "notifyHTTPParam": hook})).await;
    node.create_ok(json!({"app": "words", "name": "once", "runAt": "2099-06-01T00:00:00Z", "notifyHTTPParam": hook}))
        .await;

    let out = xtimer(&["timer", "list", "--app", "words", "--server", &base]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let table = stdout(&out);
    let row = |name: &str| table.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{name}:\n{table}"));
    assert!(row("interval").contains("every 5m"), "{table}");
    assert!(row("daily").contains("0 9 * * *"), "{table}");
    assert!(row("once").contains("once at 2099-06-01T00:00:00.000Z"), "{table}");
    assert!(!table.contains("once at -"), "{table}");

    let out = xtimer(&["timer", "get", &interval.to_string(), "--app", "words", "--server", &base]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(field(&text, "every").starts_with("5m (300000 ms), counted from 2099-01-01T00:00:00.000Z"), "{text}");
    assert_eq!(field(&text, "starts"), "2099-01-01T00:00:00.000Z");
    assert_eq!(field(&text, "ends"), "2099-12-31T00:00:00.000Z (excluded)");
    assert!(field(&text, "max fires").starts_with("10 fires"), "{text}");
    assert!(field(&text, "spread").contains("30s"), "{text}");
    assert_eq!(field(&text, "excluded"), "calendars holidays");
    assert!(field(&text, "misfire").ends_with("within 1m (60000 ms)"), "{text}");
    assert!(field(&text, "retry").starts_with("1 attempt,"), "{text}");
    assert_eq!(field(&text, "labels"), "team=billing");
    assert!(field(&text, "next fire").contains("disabled"), "{text}");
    assert!(!text.contains("run at") && !text.contains("attempts"), "{text}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fires_status_is_taken_by_name() {
    let node = TestNode::spawn(Stack::Embedded).await;
    let base = node.base.clone();
    let id = node
        .create_ok(json!({"app": "words", "name": "t", "cron": "0 9 * * *",
            "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook"}}))
        .await
        .to_string();
    let out = xtimer(&["timer", "fires", &id, "--app", "words", "--status", "succeeded", "--server", &base]).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert!(stdout(&out).contains("0 of 0 fires"), "{}", stdout(&out));
    let out = xtimer(&["timer", "fires", &id, "--app", "words", "--status", "done", "--server", &base]).await;
    assert_eq!(code(&out), exit::INVALID, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("status: must be one of 0-5 or pending, running, succeeded, failed, skipped, missed"),
        "{}",
        stderr(&out)
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_and_a_port_in_use_say_what_to_do() {
    // Nothing listens there.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = format!("http://{}", free.local_addr().unwrap());
    drop(free);
    let out = xtimer(&["timer", "list", "--app", "a", "--server", &nobody]).await;
    assert_eq!(code(&out), exit::UNREACHABLE);
    let err = stderr(&out);
    assert!(err.contains(&format!("no xtimer server answers at {nobody}")), "{err}");
    assert!(err.contains("start one with `xtimer serve`") && err.contains("--server"), "{err}");

    // A port some other program holds.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("x.db").display());
    let out = xtimer(&["serve", "--listen", &addr, "--database-url", &db]).await;
    assert_ne!(code(&out), 0);
    let err = stderr(&out);
    assert!(err.contains(&format!("cannot listen on {addr}")) && err.contains("the port is taken"), "{err}");
    assert!(err.contains("--listen") && err.contains("XTIMER_LISTEN"), "{err}");
    drop(taken);
}
