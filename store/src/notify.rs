//! [`NotifyRepo`] on [`Database`]: `t_notify_owed`, the notifications fires
//! owe (a timer's `onFailure`, `onMissed` and `onLate`; one of each per
//! fire at most, keyed by fire and kind).
//!
//! A notification is stored in the transaction that writes the result
//! making it owed, and only if that result was written (under the
//! notification's owner: fencing, as for results) and is one its kind is
//! owed for ([`owed_for!`]). The reconciler's missed marks owe theirs in
//! their own transaction (`FireRepo::mark_missed`). It is
//! held under a lease (`owner`, `send_at`) by the node sending it: first
//! the node that recorded it, which sends at once; after a crash or a stop,
//! whichever node takes it once the lease lapsed. Sent or given up, it is
//! deleted, so the table holds only what is owed now and the sweep reads
//! it by `send_at` alone.

use async_trait::async_trait;

use crate::backend::on_driver;
use crate::db::on_db;
use crate::db::{on_tx, Tx};
use crate::driver::{Dialect, Driver, TxDriver};
use crate::fires::record_on;
use crate::repo::{FireRepo, FireResult, NotifyRepo, OwedNotification, Recorded};
use crate::sql::notify::{Owing, Taking};
use crate::{Database, Result};

const RESCHEDULE: &str =
    "UPDATE t_notify_owed SET sends = $1, send_at = $2 WHERE task_id = $3 AND kind = $4 AND owner = $5";
const SETTLE: &str = "DELETE FROM t_notify_owed WHERE task_id = $1 AND kind = $2 AND owner = $3";

#[async_trait]
impl NotifyRepo for Database {
    async fn record_owing(
        &self,
        results: &[FireResult],
        owed: &[OwedNotification],
        lease_until: i64,
        now_ms: i64,
    ) -> Result<Recorded> {
        if owed.is_empty() {
            return Ok(Recorded { written: self.record(results, now_ms).await?, owed: Vec::new() });
        }
        let owing = Owing { owed, lease_until, now_ms };
        // One transaction: a conflict's loser runs again.
        let (written, stored) = crate::conflict::retry(|| async {
            let mut tx = Tx::begin(self).await?;
            let written = record_on(&mut tx, results, now_ms).await?;
            let stored = on_tx!(&mut tx, c => c.owe_notifications(&owing).await?);
            tx.commit().await?;
            Ok((written, stored))
        })
        .await?;
        let owed = owed.iter().zip(stored).filter(|(_, stored)| *stored).map(|(n, _)| n.clone()).collect();
        Ok(Recorded { written, owed })
    }

    async fn take_owed(&self, owner: &str, lease_until: i64, now_ms: i64, limit: u32) -> Result<Vec<OwedNotification>> {
        let taking = Taking { owner, lease_until, now_ms, limit: i64::from(limit) };
        let rows = on_driver!(self, d => d.take_owed(&taking).await?);
        rows.into_iter().map(|row| row.owned_by(owner)).collect()
    }

    async fn reschedule_owed(&self, owed: &OwedNotification, sends: u32, send_at: i64) -> Result<bool> {
        let done = on_db!(self, write, pool => sqlx::query(&pool.sql(RESCHEDULE))
            .bind(i64::from(sends))
            .bind(send_at)
            .bind(owed.task_id)
            .bind(owed.kind.code())
            .bind(&owed.owner)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(done == 1)
    }

    async fn settle_owed(&self, owed: &OwedNotification) -> Result<bool> {
        let done = on_db!(self, write, pool => sqlx::query(&pool.sql(SETTLE))
            .bind(owed.task_id)
            .bind(owed.kind.code())
            .bind(&owed.owner)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(done == 1)
    }
}
