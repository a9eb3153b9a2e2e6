//! `XTIMER_LOG_FORMAT=json`: the binary's log lines are JSON objects.

use std::process::Command;

use serde_json::Value;

#[test]
fn json_log_lines_parse_and_carry_message_and_fields() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("x.db").display());
    let out = Command::new(env!("CARGO_BIN_EXE_xtimer"))
        .args(["migrate", "--database-url", &url])
        .env("XTIMER_LOG", "info")
        .env("XTIMER_LOG_FORMAT", "json")
        .env_remove("XTIMER_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    let done = lines.iter().find(|l| l["fields"]["message"] == "Schema is up to date.").expect("the migrate line");
    assert_eq!(done["level"], "INFO");
    assert!(done["fields"]["storage"].as_str().unwrap().contains("SQLite"), "{done}");
    assert!(done["timestamp"].is_string(), "{done}");
}

#[test]
fn an_unknown_log_format_stops_the_start_naming_the_choices() {
    let out = Command::new(env!("CARGO_BIN_EXE_xtimer"))
        .args(["migrate", "--database-url", "sqlite::memory:"])
        .env("XTIMER_LOG_FORMAT", "yaml")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("XTIMER_LOG_FORMAT is `yaml`; it must be `text` or `json`"), "{err}");
}
