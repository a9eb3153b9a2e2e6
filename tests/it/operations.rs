//! `xtimer migrate` and `xtimer backup`, run as the binary, on real SQLite
//! files (the backup while a node is running and firing on the database).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;
use xtimer::receiver::Receiver;
use xtimer_core::config::DatabaseConfig;
use xtimer_store::Database;
use xtimer_store::TimerRepo;

use crate::helpers::{every_second, test_config, TestNode, PATIENCE};

/// Runs `xtimer ARGS` to its end, logging at info, without a config file.
fn xtimer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtimer"))
        .args(args)
        .env("XTIMER_LOG", "info")
        .env_remove("XTIMER_DATABASE_URL")
        .env_remove("XTIMER_CONFIG")
        .output()
        .expect("xtimer runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_creates_the_schema_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fresh.db");
    let url = sqlite_url(&db);
    let out = xtimer(&["migrate", "--database-url", &url]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("Schema is up to date."), "{}", text(&out.stdout));
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    for table in ["t_timer", "t_timer_task"] {
        assert!(tables.iter().any(|t| t == table), "{table} in {tables:?}");
    }
    // Again: nothing to do, still success.
    let again = xtimer(&["migrate", "--database-url", &url]);
    assert!(again.status.success(), "{}", text(&again.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_copies_a_running_nodes_database_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("xtimer.db");
    let node = TestNode::spawn_with(test_config(&db)).await;
    let rx = Receiver::start(false).await.unwrap();
    let mut names = Vec::new();
    for i in 0..3 {
        let name = format!("kept-{i}");
        node.create_ok(json!({"app": "bk", "name": name, "cron": "0 0 * * * *",
                              "notifyHTTPParam": {"url": rx.url("/hook")}}))
            .await;
        names.push(name);
    }
    // One timer fires every second, so the node writes while the copy is taken.
    node.create_ok(every_second("busy", &rx, json!({"app": "bk"}))).await;
    names.push("busy".into());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while rx.hits().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the busy timer fired");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let target = dir.path().join("backup.db");
    let out = xtimer(&["backup", "--to", target.to_str().unwrap(), "--database-url", &sqlite_url(&db)]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("Backup written."), "{}", text(&out.stdout));
    let size = std::fs::metadata(&target).unwrap().len();
    assert!(size > 0);

    // The node went on working during and after the copy.
    node.create_ok(json!({"app": "bk", "name": "after", "cron": "0 0 * * * *",
                          "notifyHTTPParam": {"url": rx.url("/hook")}}))
        .await;

    // A second backup to the same file is refused, and the file is left alone.
    let again = xtimer(&["backup", "--to", target.to_str().unwrap(), "--database-url", &sqlite_url(&db)]);
    assert!(!again.status.success());
    let err = text(&again.stderr);
    assert!(
        err.contains(&format!("backup target {} already exists", target.display()))
            && err.contains("never overwrites a file"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&target).unwrap().len(), size);
    node.stop().await;

    // The copy opens as a database of its own, with the timers of the moment it was taken.
    let copy = Database::connect(&DatabaseConfig { url: sqlite_url(&target), max_connections: 2 }).await.unwrap();
    let (timers, total) = copy.list_app_timers("bk", 0, 100).await.unwrap();
    let mut got: Vec<String> = timers.into_iter().map(|t| t.def.name).collect();
    got.sort();
    names.sort();
    assert_eq!((got, total), (names, 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_refuses_servers_and_a_missing_database_saying_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("backup.db");
    let to = target.to_str().unwrap();

    let out = xtimer(&["backup", "--to", to, "--database-url", "postgres://xtimer:s3cret@db:5432/xtimer"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("is PostgreSQL") && err.contains("pg_dump"), "{err}");
    assert!(!err.contains("s3cret"), "the password stays out: {err}");

    let out = xtimer(&["backup", "--to", to, "--database-url", "mysql://xtimer:s3cret@db:3306/xtimer"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("is MySQL") && err.contains("mysqldump"), "{err}");
    assert!(!err.contains("s3cret"), "the password stays out: {err}");

    let missing = dir.path().join("nowhere.db");
    let out = xtimer(&["backup", "--to", to, "--database-url", &sqlite_url(&missing)]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(&format!("no SQLite database at {}", sqlite_url(&missing))), "{err}");
    assert!(!missing.exists(), "no database was created by mistake");
    assert!(!target.exists(), "no backup file was left behind");
}

#[tokio::test]
async fn a_misspelt_setting_variable_stops_the_start_and_names_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir.path().join("never.db"));
    let out = Command::new(env!("CARGO_BIN_EXE_xtimer"))
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url", &url])
        .env("XTIMER_REDIS_URL", "redis://10.0.0.5:6379")
        .env_remove("XTIMER_CONFIG")
        .output()
        .expect("xtimer runs");
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "a node meant for a cluster must not start alone: {stderr}");
    assert!(stderr.contains("XTIMER_REDIS_URL names no setting"), "{stderr}");
    assert!(stderr.contains("did you mean XTIMER_REDIS__URL?"), "{stderr}");
    assert!(!dir.path().join("never.db").exists(), "nothing was started");
}
