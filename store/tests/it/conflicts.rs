//! Conflicts retried inside the store (`xtimer_store::conflict`), on the
//! real servers: a transaction made a deadlock's victim (two transactions
//! locking two rows in opposite order) runs again through
//! `conflict::retry` and succeeds; each side's writes land once. The
//! error it lost with counts as a conflict and as transient (a conflict
//! that outlasts the retries answers 503, not 500).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use xtimer_core::config::DatabaseConfig;
use xtimer_store::{conflict, mysql, postgres, Database, Error};

use crate::backend_pg::chain;

/// What the light side (the one under test) saw: its tries, and whether
/// the error of its lost try was a conflict and transient.
#[derive(Default)]
struct Seen {
    tries: AtomicU32,
    lost: Mutex<Vec<(bool, bool, String)>>,
}

impl Seen {
    fn note<T>(&self, out: &xtimer_store::Result<T>) {
        if let Err(err) = out {
            let detail = format!("{err:?}");
            self.lost.lock().unwrap().push((conflict::is_conflict(err), err.is_transient(), detail));
        }
    }

    fn check(&self) {
        assert_eq!(self.tries.load(Ordering::SeqCst), 2, "the victim ran twice");
        let lost = self.lost.lock().unwrap();
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(lost[0].0 && lost[0].1, "a conflict, transient: {:?}", lost[0]);
    }
}

#[tokio::test]
async fn mysql_a_deadlock_victim_runs_again_through_the_retry_helper() {
    let url = crate::backend_mysql::database_url();
    let database = format!("t_{:016x}", rand::random::<u64>());
    let db = mysql::connect(&DatabaseConfig { url, max_connections: 4 }, Some(&database))
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    let Database::Mysql(pool) = db else { unreachable!() };
    for sql in [
        "CREATE TABLE lock_pair (id INT PRIMARY KEY, v INT NOT NULL)",
        "CREATE TABLE ballast (id INT PRIMARY KEY)",
        "INSERT INTO lock_pair VALUES (1, 0), (2, 0)",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    // The heavy side holds row 1 and has written much: InnoDB rolls back
    // the lighter side of a deadlock, the one under test.
    let mut heavy = pool.begin().await.unwrap();
    sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 1").execute(&mut *heavy).await.unwrap();
    let rows: Vec<String> = (0..500).map(|i| format!("({i})")).collect();
    sqlx::query(&format!("INSERT INTO ballast VALUES {}", rows.join(","))).execute(&mut *heavy).await.unwrap();

    let (seen, holds_2) = (Seen::default(), tokio::sync::Notify::new());
    let light = conflict::retry(|| async {
        seen.tries.fetch_add(1, Ordering::SeqCst);
        let out: xtimer_store::Result<()> = async {
            let mut tx = pool.begin().await?;
            sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 2").execute(&mut *tx).await?;
            holds_2.notify_one();
            sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 1").execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        }
        .await;
        seen.note(&out);
        out
    });
    let closing = async {
        holds_2.notified().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 2").execute(&mut *heavy).await.unwrap();
        heavy.commit().await.unwrap();
    };
    let (light, ()) = tokio::join!(light, closing);
    light.unwrap_or_else(|e| panic!("runs again after the deadlock: {e:?}"));
    seen.check();
    let v: Vec<i32> = sqlx::query_scalar("SELECT v FROM lock_pair ORDER BY id").fetch_all(&pool).await.unwrap();
    assert_eq!(v, [2, 2], "both transactions' writes, once each");
}

#[tokio::test]
async fn postgres_a_deadlock_victim_runs_again_through_the_retry_helper() {
    let url = crate::backend_pg::database_url();
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let db = postgres::connect(&DatabaseConfig { url, max_connections: 4 }, Some(&schema))
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    let Database::Postgres(pool) = db else { unreachable!() };
    for sql in
        ["CREATE TABLE lock_pair (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO lock_pair VALUES (1, 0), (2, 0)"]
    {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    let mut heavy = pool.begin().await.unwrap();
    sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 1").execute(&mut *heavy).await.unwrap();

    // PostgreSQL aborts the waiter whose deadlock check runs first: the
    // light side, which waits first.
    let (seen, holds_2) = (Seen::default(), tokio::sync::Notify::new());
    let light = conflict::retry(|| async {
        seen.tries.fetch_add(1, Ordering::SeqCst);
        let out: xtimer_store::Result<()> = async {
            let mut tx = pool.begin().await?;
            sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 2").execute(&mut *tx).await?;
            holds_2.notify_one();
            sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 1").execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        }
        .await;
        seen.note(&out);
        out
    });
    let closing = async {
        holds_2.notified().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 2").execute(&mut *heavy).await.unwrap();
        heavy.commit().await.unwrap();
    };
    let (light, ()) = tokio::join!(light, closing);
    light.unwrap_or_else(|e| panic!("runs again after the deadlock: {e:?}"));
    seen.check();
    assert!(seen.lost.lock().unwrap()[0].2.contains("40P01"), "deadlock_detected");
    let v: Vec<i32> = sqlx::query_scalar("SELECT v FROM lock_pair ORDER BY id").fetch_all(&pool).await.unwrap();
    assert_eq!(v, [2, 2], "both transactions' writes, once each");
}

/// What is not a conflict is answered at once, not retried.
#[tokio::test]
async fn a_statement_the_server_refuses_is_not_retried() {
    let url = crate::backend_mysql::database_url();
    let database = format!("t_{:016x}", rand::random::<u64>());
    let db = mysql::connect(&DatabaseConfig { url, max_connections: 2 }, Some(&database))
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    let Database::Mysql(pool) = db else { unreachable!() };
    let tries = AtomicU32::new(0);
    let out: xtimer_store::Result<()> = conflict::retry(|| async {
        tries.fetch_add(1, Ordering::SeqCst);
        sqlx::query("SELECT * FROM no_such_table").execute(&pool).await?;
        Ok(())
    })
    .await;
    assert!(matches!(out, Err(Error::Database(_))), "{out:?}");
    assert_eq!(tries.load(Ordering::SeqCst), 1);
}

/// A lock wait timeout (1205) already waited the server's whole timeout:
/// it is run again once, not six times, and then answered as unavailable.
#[tokio::test]
async fn mysql_a_lock_wait_timeout_runs_again_once_only() {
    let url = crate::backend_mysql::database_url();
    let database = format!("t_{:016x}", rand::random::<u64>());
    let db = mysql::connect(&DatabaseConfig { url, max_connections: 4 }, Some(&database))
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    let Database::Mysql(pool) = db else { unreachable!() };
    for sql in ["CREATE TABLE held (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO held VALUES (1, 0)"] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    // Held for the whole test: every try waits for it and times out.
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("UPDATE held SET v = v + 1 WHERE id = 1").execute(&mut *holder).await.unwrap();

    let seen = Seen::default();
    let out: xtimer_store::Result<()> = conflict::retry(|| async {
        seen.tries.fetch_add(1, Ordering::SeqCst);
        let out: xtimer_store::Result<()> = async {
            let mut tx = pool.begin().await?;
            sqlx::query("SET SESSION innodb_lock_wait_timeout = 1").execute(&mut *tx).await?;
            sqlx::query("UPDATE held SET v = v + 1 WHERE id = 1").execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        }
        .await;
        seen.note(&out);
        out
    })
    .await;
    holder.rollback().await.unwrap();
    let err = out.expect_err("the row stayed held");
    assert!(conflict::is_conflict(&err) && err.is_transient(), "a conflict, transient (503): {err:?}");
    assert_eq!(seen.tries.load(Ordering::SeqCst), 2, "run again once only");
    for (conflict, transient, detail) in seen.lost.lock().unwrap().iter() {
        assert!(*conflict && *transient && detail.contains("1205"), "a lock wait timeout: {detail}");
    }
}
