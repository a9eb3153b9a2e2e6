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
    std::thread::sleep(Duration::from_millis(100));
    let files: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(files, vec!["xtimer.db".to_string()], "a clean stop leaves no -wal or -shm file");
}
