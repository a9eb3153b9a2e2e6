//! The PostgreSQL backend: the repositories on a fresh schema of the server at
//! `XTIMER_TEST_DATABASE_URL`, with the in-process shard index and locks
//! (the Redis half has its own backend). Also the tests only PostgreSQL
//! needs: concurrent claimers, and a clear error for an unreachable server.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use xtimer_core::config::DatabaseConfig;
use xtimer_core::fire::FireKey;
use xtimer_core::timer::TimerStatus;
use xtimer_store::{postgres, Database};
use xtimer_store::{Error, NewFire};

use crate::helpers::{self, timer, Backend, APP, T0};

/// The test server; a throwaway local one by default.
pub fn database_url() -> String {
    std::env::var("XTIMER_TEST_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:15432/postgres".into())
}

/// The repositories on a fresh PostgreSQL schema `t_<random hex>`, migrated, with the embedded
/// shard index and locks on a `ManualClock` at [`T0`].
///
/// The schema is left behind: dropping it needs a guard in
/// `Backend::_keep`, which only `helpers` can set. For the same reason this
/// starts from the embedded backend (whose shard index, locks and clock are
/// the ones wanted) and swaps in the repositories; its SQLite file goes
/// unused.
pub async fn postgres() -> Backend {
    let url = database_url();
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: url.clone(), max_connections: 4 };
    let repo = match postgres::connect(&config, Some(&schema)).await {
        Ok(repo) => Arc::new(repo),
        Err(e) => panic!("PostgreSQL at {url} (set XTIMER_TEST_DATABASE_URL): {}", chain(&e)),
    };
    let mut backend = helpers::embedded().await;
    backend.timers = repo.clone();
    backend.nodes = repo.clone();
    backend.fires = repo;
    backend
}

/// The pool of a PostgreSQL [`Database`].
fn pool(db: &Database) -> &sqlx::PgPool {
    match db {
        Database::Postgres(pool) => pool,
        _ => unreachable!("connected to PostgreSQL"),
    }
}

/// An error and its causes, one line.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[tokio::test]
async fn concurrent_claims_split_the_fires_without_overlap() {
    let b = postgres().await;
    let t = timer(&b, "busy", TimerStatus::Enabled).await;
    for round in 0..3_i64 {
        let base = T0 + round * 10_000_000;
        let keys: Vec<FireKey> = (0..2_000).map(|i| FireKey { timer_id: t.id, run_ms: base + i }).collect();
        let new: Vec<NewFire> = keys.iter().map(|&key| NewFire { key, app: APP.into() }).collect();
        assert_eq!(b.fires.insert_fires(&new, b.now()).await.unwrap(), 2_000);

        // The second claimer takes the keys in the opposite order.
        let reversed: Vec<FireKey> = keys.iter().rev().copied().collect();
        let (a, c) = tokio::join!(
            b.fires.claim(&keys, "node-a:1", 60_000, b.now()),
            b.fires.claim(&reversed, "node-b:1", 60_000, b.now()),
        );
        let (a, c) = (a.unwrap(), c.unwrap());
        assert_eq!((a.skipped, c.skipped), (0, 0));
        assert!(a.claimed.iter().all(|f| f.owner == "node-a:1") && c.claimed.iter().all(|f| f.owner == "node-b:1"));
        let won_a: HashSet<FireKey> = a.claimed.iter().map(|f| f.key).collect();
        let won_c: HashSet<FireKey> = c.claimed.iter().map(|f| f.key).collect();
        assert_eq!((won_a.len(), won_c.len()), (a.claimed.len(), c.claimed.len()), "no fire twice to one claimer");
        assert!(won_a.is_disjoint(&won_c), "round {round}: a fire was claimed by both");
        assert_eq!(won_a.len() + won_c.len(), keys.len(), "round {round}: together they claim every fire");
        assert!(b.fires.pending_between(Some(t.id), base, base + 2_000, 10).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn an_unreachable_server_fails_fast_and_says_which() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://xtimer:secret@127.0.0.1:{port}/xtimer");
    let started = Instant::now();
    let err = postgres::connect(&DatabaseConfig { url, max_connections: 2 }, None).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(matches!(err, Error::Database(_)), "{err:?}");
    let message = chain(&err);
    assert!(message.contains(&format!("postgres://xtimer:***@127.0.0.1:{port}/xtimer")), "{message}");
    assert!(!message.contains("secret"), "{message}");
    assert!(message.to_lowercase().contains("refused"), "{message}");
}

#[tokio::test]
async fn nodes_starting_at_once_create_and_migrate_one_schema() {
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: database_url(), max_connections: 2 };
    let mut nodes = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (config, schema) = (config.clone(), schema.clone());
        nodes.spawn(async move { postgres::connect(&config, Some(&schema)).await });
    }
    let mut repos = Vec::new();
    while let Some(started) = nodes.join_next().await {
        repos.push(started.unwrap().unwrap_or_else(|e| panic!("every node starts: {}", chain(&e))));
    }
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(pool(&repos[0]))
        .await
        .unwrap();
    assert_eq!(applied as usize, sqlx::migrate!("../migrations/postgres").iter().count(), "each migration once");
    let schema_of: String = sqlx::query_scalar("SELECT current_schema()").fetch_one(pool(&repos[3])).await.unwrap();
    assert_eq!(schema_of, schema);
}
