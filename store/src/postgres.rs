//! The repositories over PostgreSQL, for clusters. (Being written.)

use async_trait::async_trait;
use sqlx::PgPool;
use xtimer_core::config::DatabaseConfig;
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};
use xtimer_core::timer::{NewTimer, Timer, TimerStatus};

use crate::repo::{ClaimOutcome, FireRepo, FireResult, NewFire, Overdue, TimerRepo};
use crate::Result;

/// Timers and fires in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgRepo {
    pool: PgPool,
}

impl PgRepo {
    /// Connects and applies `migrations/postgres`; with `schema`, every
    /// connection uses (and the migration creates) that schema: tests get a
    /// fresh one each.
    pub async fn connect(config: &DatabaseConfig, schema: Option<&str>) -> Result<Self> {
        let _ = (config, schema);
        todo!()
    }
    /// The pool, for tests and tools that inspect the database.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl TimerRepo for PgRepo {
    async fn create_timer(&self, _t: &NewTimer, _now_ms: i64) -> Result<Timer> { todo!() }
    async fn create_timers(&self, _t: &[NewTimer], _now_ms: i64) -> Result<Vec<i64>> { todo!() }
    async fn get_timer(&self, _id: i64) -> Result<Option<Timer>> { todo!() }
    async fn get_timers(&self, _ids: &[i64]) -> Result<Vec<Timer>> { todo!() }
    async fn list_app_timers(&self, _app: &str, _o: u64, _l: u64) -> Result<(Vec<Timer>, u64)> { todo!() }
    async fn set_timer_status(&self, _id: i64, _s: TimerStatus, _now_ms: i64) -> Result<bool> { todo!() }
    async fn enabled_timers(&self, _after: i64, _limit: u32) -> Result<Vec<Timer>> { todo!() }
}

#[async_trait]
impl FireRepo for PgRepo {
    async fn insert_fires(&self, _f: &[NewFire], _now_ms: i64) -> Result<u64> { todo!() }
    async fn pending_between(&self, _t: Option<i64>, _f: i64, _to: i64, _l: u32) -> Result<Vec<FireKey>> { todo!() }
    async fn claim(&self, _k: &[FireKey], _o: &str, _l: i64, _n: i64) -> Result<ClaimOutcome> { todo!() }
    async fn reclaim(&self, _i: &[i64], _o: &str, _l: i64, _n: i64) -> Result<ClaimOutcome> { todo!() }
    async fn record(&self, _r: &[FireResult], _n: i64) -> Result<u64> { todo!() }
    async fn release(&self, _c: &[ClaimedFire], _n: i64) -> Result<u64> { todo!() }
    async fn mark_missed(&self, _i: &[i64], _o: &str, _n: i64) -> Result<u64> { todo!() }
    async fn overdue(&self, _p: i64, _n: i64, _l: u32) -> Result<Vec<Overdue>> { todo!() }
    async fn list_fires(&self, _t: i64, _s: Option<FireStatus>, _o: u64, _l: u64) -> Result<(Vec<Fire>, u64)> { todo!() }
}
