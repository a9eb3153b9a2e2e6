//! Conflicts between transactions, retried inside the store.
//!
//! A transaction the database rolled back whole because it lost to another
//! one is run again, a few times, after a short jittered pause: MySQL's
//! 1213 (a deadlock's victim; on Galera also a certification failure or a
//! brute-force abort, SQLSTATE 40001), PostgreSQL's 40001
//! (`serialization_failure`) and 40P01 (`deadlock_detected`). MySQL's 1205
//! (a lock wait timeout; the caller's transaction is dropped, so rolled
//! back whole, before it runs again) is run again once only
//! ([`LOCK_WAIT_RETRIES`]): the try already waited the server's whole
//! `innodb_lock_wait_timeout` (50 s by default), and six more would hold
//! the caller for minutes. Nothing of the lost try was applied, so nothing
//! is applied twice. A conflict that outlasts the retries stays the
//! store's transient error ([`Error::is_transient`]): the API answers 503
//! with `Retry-After`, never 500.
//!
//! [`retry`] wraps one transaction (begin to commit) or one statement run
//! on its own (autocommit), never work that commits part of itself before
//! a later part can fail.

use std::future::Future;
use std::time::Duration;

use crate::{Error, Result};

/// Times a transaction is run again after losing a conflict.
pub const RETRIES: u32 = 6;

/// Times a transaction is run again after a lock wait timeout (1205): it
/// waited long already.
pub const LOCK_WAIT_RETRIES: u32 = 1;

/// Whether `err` is a conflict the database settled by rolling the
/// transaction back (see the module doc).
pub fn is_conflict(err: &Error) -> bool {
    match err {
        Error::Database(err) => is_conflict_sqlx(err),
        _ => false,
    }
}

/// [`is_conflict`] of a database error.
pub fn is_conflict_sqlx(err: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = err else { return false };
    if let Some(mysql) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return is_conflict_code(Some(mysql.number()), None);
    }
    if db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some() {
        return is_conflict_code(None, db.code().as_deref());
    }
    false
}

/// The classification: a MySQL error by its number, a PostgreSQL one by
/// its SQLSTATE.
fn is_conflict_code(mysql_number: Option<u16>, pg_sqlstate: Option<&str>) -> bool {
    match mysql_number {
        // ER_LOCK_DEADLOCK (deadlock, Galera certification failure),
        // ER_LOCK_WAIT_TIMEOUT.
        Some(number) => matches!(number, 1213 | 1205),
        // serialization_failure, deadlock_detected.
        None => matches!(pg_sqlstate, Some("40001" | "40P01")),
    }
}

/// Whether `err` is MySQL's lock wait timeout (1205).
fn is_lock_wait(err: &Error) -> bool {
    let Error::Database(sqlx::Error::Database(db)) = err else { return false };
    db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>().is_some_and(|mysql| mysql.number() == 1205)
}

/// Whether a try that failed with `err`, after `retries` retries of which
/// `lock_waits` followed a lock wait timeout, is run again.
fn runs_again(err: &Error, retries: u32, lock_waits: u32) -> bool {
    is_conflict(err) && retries < RETRIES && !(is_lock_wait(err) && lock_waits >= LOCK_WAIT_RETRIES)
}

/// Runs `transaction`, and runs it again (after [`backoff`]) while it
/// fails with a conflict ([`is_conflict`]): at most [`RETRIES`] times in
/// all, and a lock wait timeout at most [`LOCK_WAIT_RETRIES`] times.
/// `transaction` must begin and commit a transaction of its own (or run one
/// statement on its own), so that a failed try left nothing behind.
pub async fn retry<T, F, Fut>(mut transaction: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut retries = 0;
    let mut lock_waits = 0;
    loop {
        match transaction().await {
            Err(err) if runs_again(&err, retries, lock_waits) => {
                retries += 1;
                lock_waits += u32::from(is_lock_wait(&err));
                let pause = backoff(retries);
                tracing::debug!(retries, ?pause, error = ?err,
                    "A transaction lost a conflict and was rolled back; running it again.");
                tokio::time::sleep(pause).await;
            }
            Err(err) if is_conflict(&err) => {
                tracing::warn!(retries, error = ?err,
                    "A transaction kept losing conflicts; giving up (answered as unavailable).");
                return Err(err);
            }
            other => return other,
        }
    }
}

/// The pause before the `retry`-th retry: 10 ms doubled each time (up to
/// 320 ms), half of it at random so that the losers do not meet again.
/// Six retries wait about 0.5 s in all: enough for a hot row that every
/// node of a Galera cluster writes at once (each create of an app writes
/// its usage row).
fn backoff(retry: u32) -> Duration {
    let full = 5u64 << retry.clamp(1, 6);
    Duration::from_millis(rand::random_range(full / 2..=full))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_are_deadlocks_certification_failures_lock_timeouts_and_serialization_failures() {
        assert!(is_conflict_code(Some(1213), None), "deadlock / Galera certification failure");
        assert!(is_conflict_code(Some(1205), None), "lock wait timeout");
        assert!(is_conflict_code(None, Some("40001")), "serialization_failure");
        assert!(is_conflict_code(None, Some("40P01")), "deadlock_detected");
        for number in [1062, 1040, 1047, 2013, 1290] {
            assert!(!is_conflict_code(Some(number), None), "{number}");
        }
        for state in ["23505", "57P01", "08006", "40002", "55P03"] {
            assert!(!is_conflict_code(None, Some(state)), "{state}");
        }
        assert!(!is_conflict_code(None, None));
        assert!(!is_conflict(&Error::Corrupt("x".into())));
        assert!(!is_conflict(&Error::Database(sqlx::Error::PoolTimedOut)));
    }

    #[test]
    fn backoff_is_short_and_jittered() {
        for retry in 1..=RETRIES + 2 {
            let pause = backoff(retry);
            assert!(pause >= Duration::from_millis(5) && pause <= Duration::from_millis(320), "{pause:?}");
        }
    }

    #[tokio::test]
    async fn other_errors_are_returned_at_once() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let tries = AtomicU32::new(0);
        let out: Result<()> = retry(|| async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err(Error::Corrupt("not a conflict".into()))
        })
        .await;
        assert!(out.is_err());
        assert_eq!(tries.load(Ordering::SeqCst), 1, "not a conflict: one try");
    }
}
