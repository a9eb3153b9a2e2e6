//! `CalendarRepo` conformance: an app's calendars put (created or
//! replaced), read, listed by name and deleted, on every SQL backend.
//!
//! The conformance suite's `Backend` carries no calendars, so this file
//! opens each database itself (SQLite through `Stores`, PostgreSQL and MySQL
//! on a fresh schema or database of the servers the other backends use) and
//! runs each body on all three.

use std::sync::Arc;

use xtimer_core::calendar::{Calendar, CalendarSpec};
use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, ShardConfig};
use xtimer_store::{CalendarRepo, Stores};

use crate::backend_pg::chain;
use crate::helpers::T0;

/// A backend's calendars, and what keeps its storage alive.
struct Calendars {
    repo: Arc<dyn CalendarRepo>,
    _keep: Option<tempfile::TempDir>,
}

/// SQLite on a fresh temp file, as `Stores` wires it.
async fn embedded() -> Calendars {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = DatabaseConfig { url: format!("sqlite://{}", dir.path().join("xtimer.db").display()), max_connections: 4 };
    let clock = Arc::new(ManualClock::new(T0));
    let stores = Stores::connect(&db, &Default::default(), &ShardConfig::default(), clock).await.expect("stores open");
    Calendars { repo: stores.calendars, _keep: Some(dir) }
}

/// A fresh schema `t_<random hex>` of the PostgreSQL test server, migrated.
async fn postgres() -> Calendars {
    let url = crate::backend_pg::database_url();
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: url.clone(), max_connections: 4 };
    match xtimer_store::postgres::connect(&config, Some(&schema)).await {
        Ok(db) => Calendars { repo: Arc::new(db), _keep: None },
        Err(e) => panic!("PostgreSQL at {url} (set XTIMER_TEST_DATABASE_URL): {}", chain(&e)),
    }
}

/// A fresh database `t_<random hex>` of the MySQL (or MariaDB) test server, migrated.
async fn mysql() -> Calendars {
    let url = crate::backend_mysql::database_url();
    let database = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: url.clone(), max_connections: 4 };
    match xtimer_store::mysql::connect(&config, Some(&database)).await {
        Ok(db) => Calendars { repo: Arc::new(db), _keep: None },
        Err(e) => panic!("MySQL at {url} (set XTIMER_TEST_MYSQL_URL): {}", chain(&e)),
    }
}

/// One `#[tokio::test]` per body and backend: `calendars::<backend>::<body>`.
macro_rules! on_every_backend {
    ($($body:ident),* $(,)?) => {
        on_every_backend!(@backend embedded: $($body),*);
        on_every_backend!(@backend postgres: $($body),*);
        on_every_backend!(@backend mysql: $($body),*);
    };
    (@backend $backend:ident: $($body:ident),*) => {
        mod $backend {
            $(
                #[tokio::test]
                async fn $body() {
                    let calendars = super::$backend().await;
                    super::$body(calendars.repo.as_ref()).await;
                }
            )*
        }
    };
}

on_every_backend!(
    a_put_creates_and_a_second_put_replaces_keeping_the_create_time,
    a_calendar_reads_back_field_for_field,
    an_apps_calendars_are_listed_by_name,
    delete_removes_only_the_named_calendar,
    calendars_are_per_app,
);

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A calendar excluding Christmas.
fn christmas() -> CalendarSpec {
    CalendarSpec::from_wire(&strings(&["2026-12-25"]), &[], &[], None).unwrap()
}

/// A calendar of every field, the ICS text with non-ASCII and a folded line.
fn everything() -> CalendarSpec {
    let ics = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nSUMMARY:Fête nationale — 国庆节 🎆\r\n \
               (folded)\r\nDTSTART;VALUE=DATE:20260714\r\nRRULE:FREQ=YEARLY\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    CalendarSpec::from_wire(
        &strings(&["2026-12-25", "2027-01-01"]),
        &[(T0, T0 + 3_600_000), (-5, 5)],
        &strings(&["SAT", "sun"]),
        Some(ics.into()),
    )
    .unwrap()
}

async fn a_put_creates_and_a_second_put_replaces_keeping_the_create_time(repo: &dyn CalendarRepo) {
    let first = repo.put_calendar("billing", "holidays", &christmas(), T0).await.unwrap();
    assert_eq!(
        first,
        Calendar {
            app: "billing".into(),
            name: "holidays".into(),
            spec: christmas(),
            create_time: T0,
            modify_time: T0
        }
    );
    let second = repo.put_calendar("billing", "holidays", &everything(), T0 + 1_000).await.unwrap();
    assert_eq!(second.spec, everything(), "the spec is replaced");
    assert_eq!((second.create_time, second.modify_time), (T0, T0 + 1_000), "the create time is kept");
    assert_eq!(repo.get_calendar("billing", "holidays").await.unwrap(), Some(second));
    assert_eq!(repo.app_calendars("billing").await.unwrap().len(), 1, "replaced, not added");
}

async fn a_calendar_reads_back_field_for_field(repo: &dyn CalendarRepo) {
    assert_eq!(repo.get_calendar("billing", "holidays").await.unwrap(), None);
    let put = repo.put_calendar("billing", "holidays", &everything(), T0).await.unwrap();
    let got = repo.get_calendar("billing", "holidays").await.unwrap().expect("stored");
    assert_eq!(got, put);
    assert_eq!(got.spec, everything());
    assert!(got.spec.compile().unwrap().excludes(
        chrono::DateTime::parse_from_rfc3339("2031-07-14T12:00:00Z").unwrap().timestamp_millis(),
        "UTC".parse().unwrap(),
    ));
    let empty = repo.put_calendar("billing", "empty", &CalendarSpec::default(), T0).await.unwrap();
    assert_eq!(repo.get_calendar("billing", "empty").await.unwrap(), Some(empty));
    // A long name (the API's limit, 256 characters, of 4-byte characters) and app (128).
    let (app, name) = ("a".repeat(128), "🗓".repeat(256));
    let long = repo.put_calendar(&app, &name, &christmas(), T0).await.unwrap();
    assert_eq!(repo.get_calendar(&app, &name).await.unwrap(), Some(long));
}

async fn an_apps_calendars_are_listed_by_name(repo: &dyn CalendarRepo) {
    assert_eq!(repo.app_calendars("billing").await.unwrap(), []);
    for (i, name) in ["b", "a", "C", "aa", "é"].into_iter().enumerate() {
        repo.put_calendar("billing", name, &christmas(), T0 + i as i64).await.unwrap();
    }
    let names: Vec<String> = repo.app_calendars("billing").await.unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["C", "a", "aa", "b", "é"], "byte order");
}

async fn delete_removes_only_the_named_calendar(repo: &dyn CalendarRepo) {
    repo.put_calendar("billing", "holidays", &christmas(), T0).await.unwrap();
    repo.put_calendar("billing", "weekends", &christmas(), T0).await.unwrap();
    assert!(repo.delete_calendar("billing", "holidays").await.unwrap());
    assert!(!repo.delete_calendar("billing", "holidays").await.unwrap(), "gone already");
    assert!(!repo.delete_calendar("billing", "nope").await.unwrap());
    assert_eq!(repo.get_calendar("billing", "holidays").await.unwrap(), None);
    let names: Vec<String> = repo.app_calendars("billing").await.unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["weekends"]);
    // Put again after a delete: a new calendar, with a new create time.
    let again = repo.put_calendar("billing", "holidays", &christmas(), T0 + 5).await.unwrap();
    assert_eq!((again.create_time, again.modify_time), (T0 + 5, T0 + 5));
}

async fn calendars_are_per_app(repo: &dyn CalendarRepo) {
    let billing = repo.put_calendar("billing", "holidays", &christmas(), T0).await.unwrap();
    let ops = repo.put_calendar("ops", "holidays", &everything(), T0 + 1).await.unwrap();
    assert_eq!(billing.create_time, T0, "same name, another app: its own calendar");
    assert_eq!(repo.get_calendar("billing", "holidays").await.unwrap(), Some(billing.clone()));
    assert_eq!(repo.get_calendar("ops", "holidays").await.unwrap(), Some(ops.clone()));
    assert_eq!(repo.get_calendar("Billing", "holidays").await.unwrap(), None, "apps compare byte for byte");
    assert_eq!(repo.app_calendars("billing").await.unwrap(), [billing]);
    assert!(repo.delete_calendar("ops", "holidays").await.unwrap());
    assert!(repo.get_calendar("billing", "holidays").await.unwrap().is_some(), "the other app's calendar stays");
    assert_eq!(repo.app_calendars("ops").await.unwrap(), []);
}
