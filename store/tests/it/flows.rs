//! `FlowRepo` conformance: flows' limits set (created or replaced), listed
//! per app or for every app, and deleted, on every SQL backend.
//!
//! The conformance suite's `Backend` carries no flows, so this file opens
//! each database itself (SQLite through `Stores`, PostgreSQL and MySQL on a
//! fresh schema or database of the servers the other backends use) and runs
//! each body on all three.

use std::sync::Arc;

use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, ShardConfig};
use xtimer_store::{FlowLimit, FlowRepo, Stores};

use crate::backend_pg::chain;
use crate::helpers::T0;

/// A backend's flows, and what keeps its storage alive.
struct Flows {
    repo: Arc<dyn FlowRepo>,
    _keep: Option<tempfile::TempDir>,
}

/// SQLite on a fresh temp file, as `Stores` wires it.
async fn embedded() -> Flows {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = DatabaseConfig { url: format!("sqlite://{}", dir.path().join("xtimer.db").display()), max_connections: 4 };
    let clock = Arc::new(ManualClock::new(T0));
    let stores = Stores::connect(&db, &Default::default(), &ShardConfig::default(), clock).await.expect("stores open");
    Flows { repo: stores.flows, _keep: Some(dir) }
}

/// A fresh schema `t_<random hex>` of the PostgreSQL test server, migrated.
async fn postgres() -> Flows {
    let url = crate::backend_pg::database_url();
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: url.clone(), max_connections: 4 };
    match xtimer_store::postgres::connect(&config, Some(&schema)).await {
        Ok(db) => Flows { repo: Arc::new(db), _keep: None },
        Err(e) => panic!("PostgreSQL at {url} (set XTIMER_TEST_DATABASE_URL): {}", chain(&e)),
    }
}

/// A fresh database `t_<random hex>` of the MySQL (or MariaDB) test server, migrated.
async fn mysql() -> Flows {
    let url = crate::backend_mysql::database_url();
    let database = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: url.clone(), max_connections: 4 };
    match xtimer_store::mysql::connect(&config, Some(&database)).await {
        Ok(db) => Flows { repo: Arc::new(db), _keep: None },
        Err(e) => panic!("MySQL at {url} (set XTIMER_TEST_MYSQL_URL): {}", chain(&e)),
    }
}

/// One `#[tokio::test]` per body and backend: `flows::<backend>::<body>`.
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
                    let flows = super::$backend().await;
                    super::$body(flows.repo.as_ref()).await;
                }
            )*
        }
    };
}

on_every_backend!(
    a_set_limit_reads_back_field_for_field,
    a_second_set_replaces_the_limits,
    flows_are_listed_per_app_or_for_every_app_in_byte_order,
    keys_compare_byte_for_byte,
    a_long_non_ascii_key_round_trips,
    delete_removes_only_the_named_flow,
);

fn limit(app: &str, key: &str, rate: Option<f64>, parallelism: Option<u32>, paused: bool, at: i64) -> FlowLimit {
    FlowLimit { app: app.into(), key: key.into(), rate_per_sec: rate, parallelism, paused, modify_time: at }
}

/// `(app, key)` of each flow listed.
async fn listed(repo: &dyn FlowRepo, app: Option<&str>) -> Vec<(String, String)> {
    repo.flow_limits(app).await.unwrap().into_iter().map(|f| (f.app, f.key)).collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(a, k)| (a.to_string(), k.to_string())).collect()
}

async fn a_set_limit_reads_back_field_for_field(repo: &dyn FlowRepo) {
    assert_eq!(repo.flow_limits(Some("billing")).await.unwrap(), []);
    assert_eq!(repo.flow_limits(None).await.unwrap(), []);
    let flows = [
        limit("billing", "a.example.com:443", Some(0.5), Some(3), false, T0),
        limit("billing", "b.example.com:443", Some(100_000.0), None, true, T0 + 1),
        limit("billing", "c.example.com:80", None, Some(u32::MAX), false, T0 + 2),
        limit("billing", "d.example.com:80", None, None, true, T0 + 3),
        limit("billing", "e.example.com:80", Some(0.001), Some(0), false, T0 + 4),
        limit("billing", "f.example.com:80", Some(1.0 / 3.0), Some(1), true, T0 + 5),
    ];
    for flow in &flows {
        repo.set_flow_limit(flow).await.unwrap();
    }
    assert_eq!(repo.flow_limits(Some("billing")).await.unwrap(), flows);
    assert_eq!(repo.flow_limits(None).await.unwrap(), flows);
}

async fn a_second_set_replaces_the_limits(repo: &dyn FlowRepo) {
    repo.set_flow_limit(&limit("billing", "api:443", Some(0.5), Some(3), false, T0)).await.unwrap();
    let second = limit("billing", "api:443", None, None, true, T0 + 1_000);
    repo.set_flow_limit(&second).await.unwrap();
    assert_eq!(repo.flow_limits(Some("billing")).await.unwrap(), [second], "replaced, not added");
    let third = limit("billing", "api:443", Some(100_000.0), Some(7), false, T0 + 2_000);
    repo.set_flow_limit(&third).await.unwrap();
    assert_eq!(repo.flow_limits(None).await.unwrap(), [third]);
}

async fn flows_are_listed_per_app_or_for_every_app_in_byte_order(repo: &dyn FlowRepo) {
    let items = [("ops", "b"), ("billing", "b"), ("ops", "a"), ("Billing", "z"), ("billing", "é"), ("billing", "C")];
    for (i, (app, key)) in items.into_iter().enumerate() {
        repo.set_flow_limit(&limit(app, key, Some(1.0), None, false, T0 + i as i64)).await.unwrap();
    }
    assert_eq!(listed(repo, Some("billing")).await, pairs(&[("billing", "C"), ("billing", "b"), ("billing", "é")]));
    assert_eq!(listed(repo, Some("ops")).await, pairs(&[("ops", "a"), ("ops", "b")]));
    assert_eq!(listed(repo, Some("Billing")).await, pairs(&[("Billing", "z")]), "apps compare byte for byte");
    assert_eq!(listed(repo, Some("nobody")).await, []);
    assert_eq!(
        listed(repo, None).await,
        pairs(&[("Billing", "z"), ("billing", "C"), ("billing", "b"), ("billing", "é"), ("ops", "a"), ("ops", "b")]),
        "by app, then key, in byte order"
    );
}

async fn keys_compare_byte_for_byte(repo: &dyn FlowRepo) {
    let upper = limit("billing", "Api.example.com:443", Some(2.0), None, false, T0);
    let lower = limit("billing", "api.example.com:443", None, Some(4), true, T0 + 1);
    repo.set_flow_limit(&upper).await.unwrap();
    repo.set_flow_limit(&lower).await.unwrap();
    // Accents too: "ä" is not "a".
    let accented = limit("billing", "api.exämple.com:443", Some(3.0), None, false, T0 + 2);
    repo.set_flow_limit(&accented).await.unwrap();
    assert_eq!(repo.flow_limits(Some("billing")).await.unwrap(), [upper.clone(), lower.clone(), accented.clone()]);
    assert!(!repo.delete_flow_limit("billing", "API.example.com:443").await.unwrap(), "no such flow");
    assert!(repo.delete_flow_limit("billing", "api.example.com:443").await.unwrap());
    assert_eq!(repo.flow_limits(Some("billing")).await.unwrap(), [upper, accented], "only the lower-case flow went");
}

async fn a_long_non_ascii_key_round_trips(repo: &dyn FlowRepo) {
    // The API's limit, 128 characters, of 2-, 3- and 4-byte ones; the app at its 128 too.
    let key: String = "é国🚦".chars().cycle().take(128).collect();
    assert_eq!(key.chars().count(), 128);
    let app = "a".repeat(128);
    let flow = limit(&app, &key, Some(0.25), Some(12), true, T0);
    repo.set_flow_limit(&flow).await.unwrap();
    assert_eq!(repo.flow_limits(None).await.unwrap(), std::slice::from_ref(&flow));
    assert_eq!(repo.flow_limits(Some(&app)).await.unwrap(), [flow]);
    assert!(repo.delete_flow_limit(&app, &key).await.unwrap());
    assert_eq!(repo.flow_limits(None).await.unwrap(), []);
}

async fn delete_removes_only_the_named_flow(repo: &dyn FlowRepo) {
    repo.set_flow_limit(&limit("billing", "a:443", Some(1.0), None, false, T0)).await.unwrap();
    repo.set_flow_limit(&limit("billing", "b:443", Some(1.0), None, false, T0)).await.unwrap();
    repo.set_flow_limit(&limit("ops", "a:443", Some(1.0), None, false, T0)).await.unwrap();
    assert!(repo.delete_flow_limit("billing", "a:443").await.unwrap());
    assert!(!repo.delete_flow_limit("billing", "a:443").await.unwrap(), "gone already");
    assert!(!repo.delete_flow_limit("billing", "nope").await.unwrap());
    assert_eq!(listed(repo, None).await, pairs(&[("billing", "b:443"), ("ops", "a:443")]), "the others stay");
    // Set again after a delete: the flow is back.
    let again = limit("billing", "a:443", None, Some(2), true, T0 + 5);
    repo.set_flow_limit(&again).await.unwrap();
    assert_eq!(repo.flow_limits(Some("billing")).await.unwrap()[0], again);
}
