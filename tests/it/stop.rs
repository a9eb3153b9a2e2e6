//! `xtimer serve` as a process: a clean stop on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn sigterm_stops_cleanly_leaving_one_sqlite_file_and_stopped_as_the_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("xtimer.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtimer"))
        .arg("serve")
        .env("XTIMER_LISTEN", "127.0.0.1:0")
        .env("XTIMER_DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("XTIMER_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    let listening = lines.by_ref().take(50).any(|l| l.contains("xtimer is listening"));
    assert!(listening, "the node did not start");
    assert!(dir.path().join("xtimer.db-wal").exists(), "a running node keeps a WAL");

    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let rest: Vec<String> = lines.collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status}: {rest:?}");
    let last = rest.iter().rev().find(|l| !l.trim().is_empty()).cloned().unwrap_or_default();
    assert!(last.contains("xtimer stopped"), "last line: {last:?} of {rest:?}");
    let list = || -> Vec<String> {
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut files = list();
    while files != ["xtimer.db"] && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        files = list();
    }
    assert_eq!(files, vec!["xtimer.db".to_string()], "a clean stop leaves no -wal or -shm file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_fires_are_logged_at_warn_once_a_minute_per_timer() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtimer"))
        .arg("serve")
        .env("XTIMER_LISTEN", format!("127.0.0.1:{port}"))
        .env("XTIMER_DATABASE_URL", format!("sqlite://{}", dir.path().join("xtimer.db").display()))
        .env("XTIMER_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = crate::helpers::stdout_lines(&mut child);
    // A per-second timer whose receiver refuses connections (nothing listens on port 1).
    let body = serde_json::json!({
        "app": "warned", "name": "t", "cron": "* * * * * *", "status": 2,
        "notifyHTTPParam": {"url": "http://127.0.0.1:1/hook"}, "retry": {"maxAttempts": 1},
    });
    let http = reqwest::Client::new();
    let mut created = false;
    for _ in 0..100 {
        let url = format!("http://127.0.0.1:{port}/api/xtimer/createTimer");
        if let Ok(resp) = http.post(url).json(&body).send().await {
            let reply: serde_json::Value = resp.json().await.unwrap();
            assert_eq!(reply["code"], 0, "{reply}");
            created = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(created, "the node did not answer");
    // About five failed fires; one warning. Time passes on purpose: the
    // point is the warnings that do not come.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let _ = child.kill();
    let _ = child.wait();
    let lines: Vec<String> = rx.try_iter().collect();
    let warned: Vec<&String> = lines.iter().filter(|l| l.contains("A fire failed after its attempts")).collect();
    assert_eq!(warned.len(), 1, "one warning for the timer's failures: {lines:?}");
    assert!(warned[0].contains("WARN") && warned[0].contains("app=warned"), "{}", warned[0]);
}
