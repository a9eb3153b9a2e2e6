//! Repository traits: what the rest of xtimer may ask of SQL.
//!
//! Every method takes `now_ms` from the caller's clock, so tests drive time.

use std::collections::HashMap;

use async_trait::async_trait;
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};
use xtimer_core::labels::Selector;
use xtimer_core::node::NodeInfo;
use xtimer_core::timer::{NewTimer, Timer, TimerStatus};

use crate::change::{status_action, Change, HistoryEntry};
use crate::{Error, Result};

pub use crate::error::Refusal;

/// Which of an app's timers a search or a bulk action takes (API 1f).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimerQuery {
    /// The name contains this, any case.
    pub q: Option<String>,
    /// In this status.
    pub status: Option<TimerStatus>,
    /// Their labels meet it.
    pub selector: Selector,
    /// One of these ids.
    pub ids: Option<Vec<i64>>,
}

/// Timers (`t_timer`).
#[async_trait]
pub trait TimerRepo: Send + Sync {
    /// Stores timers in one transaction, each checked against `quota` and
    /// its app's usage (the timers before it in the call included); the
    /// outcome of each in input order. A refused timer is not stored; the
    /// others are (group commit of independent creates).
    async fn create_each(
        &self,
        timers: &[NewTimer],
        now_ms: i64,
        quota: &Quota,
    ) -> Result<Vec<std::result::Result<i64, Refusal>>>;
    /// Stores timers in one transaction, all or none, checked against
    /// `quota`; their ids in input order, or [`Error::NameTaken`] /
    /// [`Error::Refused`] naming the first refused one.
    async fn create_timers_within(&self, timers: &[NewTimer], now_ms: i64, quota: &Quota) -> Result<Vec<i64>>;
    /// Sets a timer's status, keeping its app's usage; enabling is checked
    /// against `quota` ([`Error::Refused`]). False when the id does not
    /// exist or is deleted. Enabling marks it for expansion at the next
    /// migrator step. A change of status is noted in the timer's history
    /// as `change` in the same transaction.
    async fn set_status_within(
        &self,
        id: i64,
        status: TimerStatus,
        now_ms: i64,
        quota: &Quota,
        change: Change<'_>,
    ) -> Result<bool>;
    /// Forgets the one-shot counts of minutes before `before_minute` (Unix minutes).
    async fn forget_minutes(&self, before_minute: i64) -> Result<u64>;

    /// Stores a new timer, no quota, and returns it with its id.
    async fn create_timer(&self, timer: &NewTimer, now_ms: i64) -> Result<Timer> {
        let outcome = self.create_each(std::slice::from_ref(timer), now_ms, &Quota::default()).await?;
        match outcome.into_iter().next() {
            Some(Ok(id)) => Ok(timer.stored(id, now_ms)),
            Some(Err(Refusal::NameTaken)) => Err(Error::NameTaken { app: timer.app.clone(), name: timer.name.clone() }),
            Some(Err(refusal)) => Err(Error::Refused { app: timer.app.clone(), index: 0, refusal }),
            None => Err(Error::Corrupt("t_timer: an insert returned no id".into())),
        }
    }
    /// Stores many timers in one transaction, all or none, no quota;
    /// returns their ids in order.
    async fn create_timers(&self, timers: &[NewTimer], now_ms: i64) -> Result<Vec<i64>> {
        self.create_timers_within(timers, now_ms, &Quota::default()).await
    }
    /// [`TimerRepo::set_status_within`] without a quota, noted as xtimer's
    /// own change.
    async fn set_timer_status(&self, id: i64, status: TimerStatus, now_ms: i64) -> Result<bool> {
        self.set_status_within(id, status, now_ms, &Quota::default(), Change::system(status_action(status))).await
    }
    /// One timer by id, deleted ones included.
    async fn get_timer(&self, id: i64) -> Result<Option<Timer>>;
    /// Several timers by id; missing ids are left out.
    async fn get_timers(&self, ids: &[i64]) -> Result<Vec<Timer>>;
    /// A page of an app's timers that are not deleted, by id, and their total.
    async fn list_app_timers(&self, app: &str, offset: u64, limit: u64) -> Result<(Vec<Timer>, u64)> {
        self.find_timers(app, &TimerQuery::default(), offset, limit).await
    }
    /// A page of an app's timers that are not deleted and match `query`,
    /// by id, and how many match in all.
    async fn find_timers(&self, app: &str, query: &TimerQuery, offset: u64, limit: u64) -> Result<(Vec<Timer>, u64)>;
    /// The ids and statuses of an app's timers that are not deleted and
    /// match `query`, with ids above `after_id`, by id, at most `limit`:
    /// a bulk action's pages.
    async fn find_timer_ids(
        &self,
        app: &str,
        query: &TimerQuery,
        after_id: i64,
        limit: u32,
    ) -> Result<Vec<(i64, TimerStatus)>>;
    /// `app`'s timers that are not deleted and say something beyond their
    /// schedule (`timing`): those a calendar change concerns.
    /// The default knows of none.
    async fn timers_with_timing(&self, _app: &str) -> Result<Vec<Timer>> {
        Ok(Vec::new())
    }
    /// Enabled timers (of `app`, or every app) whose next unexpanded fire
    /// is before `before_ms`, by id after `after_id`, at most `limit`: the
    /// forecast's timers beyond what is planned.
    /// Each with its next unexpanded fire time (`next_run`).
    /// The default knows of none.
    async fn enabled_due_before(
        &self,
        _app: Option<&str>,
        _before_ms: i64,
        _after_id: i64,
        _limit: u32,
    ) -> Result<Vec<(Timer, i64)>> {
        Ok(Vec::new())
    }
    /// Replaces a timer's definition (all but its id, app and create
    /// time) with `timer`; false when the id does not exist or is deleted.
    /// An enabled timer is marked for expansion at the next migrator step;
    /// its fires already made are left alone (see
    /// [`FireRepo::delete_pending_from`]).
    /// The new definition's load is checked against `quota` and the
    /// app's usage kept ([`Error::Refused`]). `changes` (the changed
    /// fields, `{"field": [old, new]}`) are noted in the timer's history as
    /// `change` in the same transaction, unless there are none.
    async fn update_timer(
        &self,
        id: i64,
        timer: &NewTimer,
        now_ms: i64,
        quota: &Quota,
        change: Change<'_>,
        changes: &serde_json::Value,
    ) -> Result<bool>;
    /// Frees the `dedupeKey` of timer `timer_id` before the timer ends (its
    /// one-shot's fire is already under way, so the key is no longer held
    /// by a pending one-shot); false when it held none. The default holds
    /// no keys.
    async fn release_dedupe_key(&self, _timer_id: i64) -> Result<bool> {
        Ok(false)
    }
    /// Disables enabled timer `timer_id` and records `reason` if fire
    /// `task_id` (counted as failed, whatever its row says yet) and the
    /// `n - 1` fires that ended before it since `since_ms` all failed;
    /// true when it did (the timer's pause after failures). The disable is
    /// noted in the timer's history as `change` (with its reason) in the
    /// same transaction.
    #[allow(clippy::too_many_arguments)]
    async fn pause_if_failing_as(
        &self,
        timer_id: i64,
        task_id: i64,
        n: u32,
        since_ms: i64,
        reason: &str,
        now_ms: i64,
        change: Change<'_>,
    ) -> Result<bool>;
    /// [`TimerRepo::pause_if_failing_as`], noted as a `disable` by xtimer
    /// itself (its pause after failures).
    async fn pause_if_failing(
        &self,
        timer_id: i64,
        task_id: i64,
        n: u32,
        since_ms: i64,
        reason: &str,
        now_ms: i64,
    ) -> Result<bool> {
        let change = Change::system("disable");
        self.pause_if_failing_as(timer_id, task_id, n, since_ms, reason, now_ms, change).await
    }
    /// Writes changes to timers (`getTimerHistory`). The default keeps none.
    async fn record_history(&self, _entries: &[HistoryEntry]) -> Result<()> {
        Ok(())
    }
    /// Timer `timer_id`'s changes, newest first, at most `limit`.
    async fn timer_history(&self, _timer_id: i64, _limit: u32) -> Result<Vec<HistoryEntry>> {
        Ok(Vec::new())
    }
    /// `app`'s app-wide changes (`pauseApp`, `resumeApp`, timer id 0)
    /// since `since_ms`, newest first, at most `limit`.
    async fn app_history(&self, _app: &str, _since_ms: i64, _limit: u32) -> Result<Vec<HistoryEntry>> {
        Ok(Vec::new())
    }
    /// Forgets the changes before `before_ms` of deleted timers; how many.
    async fn forget_history(&self, _before_ms: i64) -> Result<u64> {
        Ok(0)
    }
    /// Disables enabled timer `timer_id`, recording `reason` (its
    /// receiver asked, `X-Xtimer-Pause`, noted as a `pause` by the
    /// receiver); true when it did.
    async fn pause_with_reason(&self, timer_id: i64, reason: &str, now_ms: i64) -> Result<bool> {
        // One failed fire in a row of one: always, for an enabled timer.
        let change = Change { action: "pause", by: "receiver" };
        self.pause_if_failing_as(timer_id, 0, 1, i64::MAX, reason, now_ms, change).await
    }
    /// Enabled timers with id > `after_id`, by id, at most `limit`.
    async fn enabled_timers(&self, after_id: i64, limit: u32) -> Result<Vec<Timer>>;
    /// Enabled timers whose next unexpanded fire is before `before_ms`,
    /// soonest first, at most `limit` (the next-fire index).
    async fn due_timers(&self, before_ms: i64, limit: u32) -> Result<Vec<Timer>>;
    /// Sets each timer's next unexpanded fire (`None`: nothing left to
    /// expand), whatever its definition now: for positions of no plan
    /// (fixtures, tools). A plan's go through
    /// [`TimerRepo::set_planned_next_runs`].
    async fn set_next_runs(&self, next: &[(i64, Option<i64>)]) -> Result<()>;
    /// Sets each timer's next unexpanded fire as planned, only if the timer
    /// still has the `modify_time` the plan was made from: a plan made from
    /// a definition that an update (or a status change) replaced meanwhile
    /// moves nothing, so it cannot move the new definition's next fire.
    /// Checked under the row's lock, one statement per batch.
    ///
    /// The default sets them unchecked ([`TimerRepo::set_next_runs`]):
    /// enough for a store nothing else writes meanwhile (a test fake); the
    /// database checks.
    async fn set_planned_next_runs(&self, next: &[NextRun]) -> Result<()> {
        let next: Vec<(i64, Option<i64>)> = next.iter().map(|n| (n.timer_id, n.run_ms)).collect();
        self.set_next_runs(&next).await
    }
    /// Marks completed every enabled one-shot timer with nothing left to
    /// expand whose fire has ended; returns how many.
    async fn complete_fired_once(&self, now_ms: i64) -> Result<u64>;
    /// [`TimerRepo::complete_fired_once`] for `timers` only (those whose
    /// fires just ended): a primary-key probe each, not a read of every
    /// timer with nothing left. The default reads them all.
    async fn complete_ended(&self, timers: &[i64], now_ms: i64) -> Result<u64> {
        let _ = timers;
        self.complete_fired_once(now_ms).await
    }
    /// How many timers have each status, deleted ones left out.
    async fn count_timers_by_status(&self) -> Result<Vec<(TimerStatus, u64)>>;
}

/// A fire to insert (idempotent on (timer_id, run_ms)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFire {
    pub key: FireKey,
    pub app: String,
}

/// A fire planned from a timer's definition as it was read: inserted only
/// while the timer still has that definition (see
/// [`FireRepo::insert_planned_fires`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFire {
    pub fire: NewFire,
    /// The timer's `modify_time` in the definition the fire was planned
    /// from: every change of a timer (update, status) writes a new one.
    pub timer_modified: i64,
    /// Its scheduled time when it is sent later (`fire.key.run_ms`), the
    /// timer spreading its fires; `None`: sent when scheduled.
    pub scheduled_ms: Option<i64>,
}

/// A timer's next unexpanded fire, planned from its definition as it was
/// read: written only while the timer still has that definition (see
/// [`TimerRepo::set_planned_next_runs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextRun {
    pub timer_id: i64,
    /// Its next fire at or after the plan's horizon; `None`: nothing left to expand.
    pub run_ms: Option<i64>,
    /// The timer's `modify_time` in the definition the plan was made from.
    pub timer_modified: i64,
}

/// What a claim got.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ClaimOutcome {
    /// Fires now leased to the caller.
    pub claimed: Vec<ClaimedFire>,
    /// Fires marked skipped because their timer is not enabled.
    pub skipped: u64,
}

/// The result of one attempt, written only under the claim's owner token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireResult {
    pub task_id: i64,
    /// The fire's run time (its key's): lets PostgreSQL find the row in
    /// its run time's partition only.
    pub run_ms: i64,
    pub owner: String,
    /// Succeeded or Failed ends the fire; Running keeps the lease for a retry.
    pub status: FireStatus,
    /// Attempts made, this one included.
    pub attempt: u32,
    pub output: String,
    /// Lateness of this attempt, ms; the store keeps the first attempt's.
    pub cost_time: i64,
    /// New lease end while a retry is pending.
    pub lease_until: Option<i64>,
}

/// A fire the reconciler found overdue: pending past its time, or running
/// with an expired lease or a dead owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overdue {
    pub task_id: i64,
    pub key: FireKey,
    pub status: FireStatus,
    /// Made by `backfillTimer`: it fires whatever its timer's misfire policy.
    pub backfill: bool,
}

/// A fire `backfillTimer` makes: past due, sent by the reconciler once
/// `send_at_ms` has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillFire {
    pub fire: NewFire,
    /// When the reconciler may send it, Unix ms.
    pub send_at_ms: i64,
}

/// Which of a timer's fires a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireWindow {
    /// Every fire, newest first.
    All,
    /// Fires due by this time (Unix ms), newest first.
    DueBy(i64),
    /// Pending fires after this time (Unix ms), soonest first.
    UpcomingAfter(i64),
}

/// One fire as `explainFire` reads it: the row and what only the row
/// keeps beyond a [`Fire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireDetail {
    /// The fire.
    pub fire: Fire,
    /// Its last claim's token (`{node_id}:{seq}`): the node that holds or
    /// held it last. `None` while it was never claimed, or after a release.
    pub owner: Option<String>,
    /// While running: when its lease (or its pending retry) ends, Unix ms.
    pub lease_until: Option<i64>,
    /// When its last attempt was sent, Unix ms (unknown for a fire
    /// recorded before this was kept).
    pub sent_at: Option<i64>,
    /// Made by `backfillTimer` (or paced by a replay): when it was to be sent.
    pub backfill_at: Option<i64>,
}

/// An earlier attempt of a fire, as the fire row held it before it was
/// overwritten ([`FireRepo::fire_log`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// Its number, 1 first.
    pub attempt: u32,
    /// The claim that made it (`{node_id}:{seq}`).
    pub owner: Option<String>,
    /// When it was sent, Unix ms (unknown for records made before it was kept).
    pub sent_at: Option<i64>,
    /// When its answer (or its end) was recorded, Unix ms.
    pub answered_at: i64,
    /// The fire's status it left: running (a retry was due), or the end.
    pub status: FireStatus,
    /// Its answer, as recorded.
    pub output: String,
}

/// A claim that took a fire over from another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRecord {
    /// The new claim's token.
    pub owner: String,
    /// The claim it took over.
    pub taken_over_from: Option<String>,
    /// When, Unix ms.
    pub at_ms: i64,
}

/// A fire's kept attempts and takeovers, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FireLog {
    pub attempts: Vec<AttemptRecord>,
    pub claims: Vec<ClaimRecord>,
}

/// A fire's status and lateness, as the per-timer figures read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FireOutcome {
    /// Its status.
    pub status: FireStatus,
    /// How late its first attempt was sent (or its miss was noted), ms.
    pub cost_time: i64,
}

/// Upper bounds, ms (inclusive), of the buckets of the per-timer lateness
/// histogram ([`TimerFigures::late`]); one bucket more takes every fire
/// later than the last bound.
pub const LATE_BUCKET_BOUNDS_MS: [i64; 26] = [
    0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1_000, 1_500, 2_000, 3_000, 5_000, 10_000,
    30_000, 60_000,
];
/// Buckets of the per-timer lateness histogram: one per bound of
/// [`LATE_BUCKET_BOUNDS_MS`], and the last, unbounded one.
pub const LATE_BUCKETS: usize = LATE_BUCKET_BOUNDS_MS.len() + 1;
/// The hours the per-timer figures are rolled up by, ms.
pub const STATS_HOUR_MS: i64 = 3_600_000;

/// One timer's fires in a window, counted ([`FireRepo::timer_figures`]):
/// the hours rolled up summed, and the fires of the others counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerFigures {
    /// Fires run in the window, every status.
    pub fires: u64,
    /// Of them, succeeded.
    pub succeeded: u64,
    /// Failed (every attempt).
    pub failed: u64,
    /// Missed (the misfire policy).
    pub missed: u64,
    /// Paced: backfilled or replayed, whatever their status. Late by
    /// design, they are left out of [`Self::late`].
    pub paced: u64,
    /// The lateness (`cost_time`) of the fires sent (succeeded or failed)
    /// that were not paced, by bucket of [`LATE_BUCKET_BOUNDS_MS`].
    pub late: [u64; LATE_BUCKETS],
    /// The largest of those latenesses, ms.
    pub late_max: Option<i64>,
    /// What the read cost: rolled-up hours read.
    pub rolled_hours: u64,
    /// What the read cost: fire rows counted (those of the hours not
    /// rolled up, or whose roll-up a change made stale).
    pub raw_fires: u64,
}

impl TimerFigures {
    /// The nearest-rank `p`th percentile (1-100) of [`Self::late`]: the
    /// upper bound of the bucket the fire of that rank falls in, never more
    /// than the largest lateness seen ([`Self::late_max`], which also
    /// answers for the unbounded bucket). `None` when no fire was sent.
    pub fn late_percentile(&self, p: u64) -> Option<i64> {
        let sent: u64 = self.late.iter().sum();
        if sent == 0 {
            return None;
        }
        let rank = (sent * p.clamp(1, 100)).div_ceil(100).max(1);
        let mut seen = 0;
        let bucket = self.late.iter().position(|n| {
            seen += n;
            seen >= rank
        })?;
        let max = self.late_max.unwrap_or(i64::MAX).max(0);
        Some(LATE_BUCKET_BOUNDS_MS.get(bucket).map_or(max, |bound| (*bound).min(max)))
    }

    /// The bucket of [`Self::late`] a lateness of `late_ms` falls in.
    pub fn bucket_of(late_ms: i64) -> usize {
        LATE_BUCKET_BOUNDS_MS.partition_point(|bound| *bound < late_ms)
    }
}

/// What [`FireRepo::maintain_partitions`] did, by partition name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PartitionReport {
    /// Daily partitions made.
    pub created: Vec<String>,
    /// Expired daily partitions dropped whole, with their fires.
    pub dropped: Vec<String>,
    /// Expired daily partitions kept because they still hold a pending or
    /// running fire; the batched delete takes their ended fires.
    pub kept: Vec<String>,
}

/// Fires (`t_timer_task`).
#[async_trait]
pub trait FireRepo: Send + Sync {
    /// Inserts fires, ignoring ones that exist; returns how many were new.
    /// Unchecked against the timers' definitions: for fires of no plan
    /// (fixtures, tools). A plan's go through
    /// [`FireRepo::insert_planned_fires`].
    async fn insert_fires(&self, fires: &[NewFire], now_ms: i64) -> Result<u64>;
    /// Inserts fires planned from timers' definitions, ignoring ones that
    /// exist, each only if its timer still has the `modify_time` the plan
    /// read; returns how many were new. Checked under the timer row's
    /// (shared) lock in the same statement, so a fire planned from a
    /// definition that an update replaced is never inserted once the update
    /// committed: either it is in before the update (whose
    /// [`FireRepo::delete_pending_from`] then takes it) or it is not
    /// inserted. One statement per batch.
    ///
    /// The default inserts them unchecked ([`FireRepo::insert_fires`]):
    /// enough for a store nothing else writes meanwhile (a test fake); the
    /// database checks.
    async fn insert_planned_fires(&self, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
        let fires: Vec<NewFire> = fires.iter().map(|p| p.fire.clone()).collect();
        self.insert_fires(&fires, now_ms).await
    }
    /// Inserts one manual fire (`triggerTimer`); false when a fire with
    /// its key exists already. Unchecked against the timer's definition: a
    /// manual fire is of no schedule, and an update leaves it alone.
    async fn insert_manual_fire(&self, fire: &NewFire, now_ms: i64) -> Result<bool>;
    /// Inserts backfilled fires, ignoring ones whose key exists; returns how
    /// many were new. Unchecked against the timers' definitions: backfilled
    /// fires are past ones, which an update leaves alone.
    async fn insert_backfill(&self, fires: &[BackfillFire], now_ms: i64) -> Result<u64>;
    /// The ended fires of `timer_ids` in one of `statuses`, scheduled in
    /// `[from_ms, to_ms)`, oldest first, at most `limit`: `(task_id, timer_id, run_timer)`.
    /// The default finds none.
    async fn replayable(
        &self,
        _timer_ids: &[i64],
        _statuses: &[FireStatus],
        _from_ms: i64,
        _to_ms: i64,
        _limit: u32,
    ) -> Result<Vec<(i64, i64, i64)>> {
        Ok(Vec::new())
    }
    /// Makes each fire `(task_id, send_at_ms)` still in one of `statuses`
    /// pending again, to be sent by the reconciler from its send time as a
    /// backfilled fire is (so a replay stored is a replay done, on any
    /// node), marked replayed; how many. The default replays none.
    async fn replay(&self, _fires: &[(i64, i64)], _statuses: &[FireStatus], _now_ms: i64) -> Result<u64> {
        Ok(0)
    }
    /// How many fires of `app`'s deleted timers (of `timer_id` only, when
    /// given) in one of `statuses` were scheduled in `[from_ms, to_ms)`:
    /// those a replay leaves out. The default finds none.
    async fn count_of_deleted(
        &self,
        _app: &str,
        _timer_id: Option<i64>,
        _statuses: &[FireStatus],
        _from_ms: i64,
        _to_ms: i64,
    ) -> Result<u64> {
        Ok(0)
    }
    /// Pending paced fires (backfilled or replayed) the overdue scan leaves
    /// to this: those whose send time falls in `(after_ms, until_ms]`, and
    /// those whose send time has come but that ran at or after
    /// `pending_before_ms`: `(task_id, send_at)`, soonest first, at most `limit`. The reconciler claims them
    /// a pass ahead and sends each at its own time, so a pace of 2 a second
    /// leaves 500 ms apart, not a pass's worth at once. The default finds none.
    async fn paced_soon(
        &self,
        _pending_before_ms: i64,
        _after_ms: i64,
        _until_ms: i64,
        _limit: u32,
    ) -> Result<Vec<(i64, i64)>> {
        Ok(Vec::new())
    }
    /// The scheduled times of every fire of `timer_id` scheduled in
    /// `[from_ms, to_ms)`, whatever its status, ascending.
    async fn run_times_between(&self, timer_id: i64, from_ms: i64, to_ms: i64) -> Result<Vec<i64>>;
    /// Records the proposed send time of each spread fire `(timer_id,
    /// scheduled_ms, run_ms)` not placed yet and returns every one's send
    /// time by `(timer_id, scheduled_ms)`: the proposed one, or the one
    /// chosen first (so a scheduled time planned twice is one fire).
    ///
    /// The default takes every proposal (a store with one planner: a test fake).
    async fn place_spread(&self, placements: &[(i64, i64, i64)]) -> Result<HashMap<(i64, i64), i64>> {
        Ok(placements.iter().map(|(timer, scheduled, run)| ((*timer, *scheduled), *run)).collect())
    }
    /// Pending fires (of `app`, or every app) sent in each second of
    /// `[from_ms, to_ms)`: `(second's start, fires)`, ascending; seconds
    /// with none left out.
    /// The default knows of none.
    async fn planned_per_second(&self, _app: Option<&str>, _from_ms: i64, _to_ms: i64) -> Result<Vec<(i64, u64)>> {
        Ok(Vec::new())
    }
    /// Fires planned (every app) in each second of `[from_ms, to_ms)`, as
    /// spread fires are placed by: every placement recorded (whether its
    /// fire row is stored yet or not), and every pending fire without one;
    /// `(second's start, fires)`, ascending; seconds with none left out.
    /// The default: the pending fires ([`Self::planned_per_second`]).
    async fn spread_load(&self, from_ms: i64, to_ms: i64) -> Result<Vec<(i64, u64)>> {
        self.planned_per_second(None, from_ms, to_ms).await
    }
    /// Deletes at most `limit` spread placements of scheduled times before
    /// `before_ms`; returns how many.
    /// The default keeps none.
    async fn forget_placements(&self, _before_ms: i64, _limit: u32) -> Result<u64> {
        Ok(0)
    }
    /// How many fires of `timer_id` due before `run_ms`, other than
    /// `task_id`, are running (claimed and not ended): the fires a fire
    /// at `run_ms` overlaps.
    async fn running_before(&self, timer_id: i64, task_id: i64, run_ms: i64) -> Result<u64>;
    /// Deletes a timer's scheduled fires that are still pending and due at
    /// or after `from_ms` (its definition changed: they are made again
    /// from the new one); manual fires stay. The spread placements of
    /// those times go too, so they are placed anew. Returns how many.
    async fn delete_pending_from(&self, timer_id: i64, from_ms: i64) -> Result<u64>;
    /// Pending fires with run time in `[from_ms, to_ms)`, by run time, at most `limit`,
    /// optionally of one timer.
    async fn pending_between(
        &self,
        timer_id: Option<i64>,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<FireKey>>;
    /// Claims pending fires by key in one transaction: those whose timer is
    /// enabled (or that were replayed, unless their timer was deleted)
    /// become running under `owner` with a lease to run time + `lease_ms`;
    /// the others become skipped; the rest (someone else's, final, or
    /// paced: backfilled or replayed, which the reconciler sends at their
    /// pace) are left alone.
    async fn claim(&self, keys: &[FireKey], owner: &str, lease_ms: i64, now_ms: i64) -> Result<ClaimOutcome>;
    /// Claims overdue fires by task id: pending ones, and running ones whose
    /// lease ended before `now_ms` or whose owner's node has not
    /// heartbeated since `alive_since_ms` (it died). Same rules as
    /// [`FireRepo::claim`]; the lease runs to `now_ms + lease_ms`. With
    /// `alive_since_ms` at `i64::MIN` (the caller's own heartbeats are not
    /// steady) no running fire is taken: neither owner nor lease is judged.
    async fn reclaim(
        &self,
        task_ids: &[i64],
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
    ) -> Result<ClaimOutcome>;
    /// Writes results in one transaction, each only if the fire is still
    /// running under its owner (fencing). A final fire keeps its last owner
    /// token, which names the node that fired it. Returns how many were written.
    async fn record(&self, results: &[FireResult], now_ms: i64) -> Result<u64>;
    /// Gives claimed fires back (running -> pending) when their owner stops
    /// before firing them.
    async fn release(&self, claims: &[ClaimedFire], now_ms: i64) -> Result<u64>;
    /// Of `claims` (fires this node claimed, then held across a stall of
    /// its own: a pause, a cut from the database), the task ids still
    /// running under their owner token: those another node took over
    /// meanwhile are left out. Writes `node_id`'s heartbeat at `now_ms`
    /// first and extends the confirmed leases to `now_ms + lease_ms`, in one
    /// transaction, so none of them can be taken over before it is sent.
    async fn confirm_claims(
        &self,
        node_id: &str,
        claims: &[ClaimedFire],
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<i64>>;
    /// Marks pending fires missed and, in the same transaction, owes the
    /// `onMissed` ([`OwedKind::Missed`]) of each one marked whose timer has
    /// one: held by no one, for any node's sweep to take at once.
    async fn mark_missed(&self, task_ids: &[i64], output: &str, now_ms: i64) -> Result<u64>;
    /// Fire `task_id`'s earlier attempts and takeovers, oldest first. The
    /// default keeps none.
    async fn fire_log(&self, _task_id: i64) -> Result<FireLog> {
        Ok(FireLog::default())
    }
    /// Forgets the kept attempts and takeovers of fires run before
    /// `before_ms`, at most `limit` rows of each; how many. The default
    /// keeps none to forget.
    async fn forget_fire_log(&self, _before_ms: i64, _limit: u32) -> Result<u64> {
        Ok(0)
    }
    /// Overdue fires: pending with run time before `pending_before_ms`, or
    /// running past their run time with a lease that ended before `now_ms`
    /// or an owner whose node has not heartbeated since `alive_since_ms`;
    /// newest first (so a sweep meets each timer's latest overdue fire
    /// before its older ones). With `alive_since_ms` at `i64::MIN` no
    /// running fire is overdue (see [`FireRepo::reclaim`]).
    async fn overdue(
        &self,
        pending_before_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
        limit: u32,
    ) -> Result<Vec<Overdue>>;
    /// Deletes at most `limit` ended fires (not pending, not running) that
    /// ran before `before_ms`; returns how many.
    async fn delete_ended_before(&self, before_ms: i64, limit: u32) -> Result<u64>;
    /// PostgreSQL, whose `t_timer_task` is partitioned by UTC day: makes
    /// the partitions of today and the next few days if missing, and drops
    /// whole every partition that ended at or before `now_ms - keep_ms`
    /// and holds no pending or running fire. One caller at a time across
    /// nodes. Nothing on SQLite and MySQL (an empty report): their
    /// history goes by [`FireRepo::delete_ended_before`] only.
    async fn maintain_partitions(&self, now_ms: i64, keep_ms: i64) -> Result<PartitionReport>;
    /// A page of a timer's fires in `window`, and their total.
    async fn list_fires_in(
        &self,
        timer_id: i64,
        status: Option<FireStatus>,
        window: FireWindow,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Fire>, u64)>;
    /// Fires of every timer that ended succeeded or failed with a run
    /// time at or after `since_ms`, newest first, at most `limit` (the
    /// console's lateness chart and failing timers).
    async fn ended_since(&self, since_ms: i64, limit: u32) -> Result<Vec<Fire>>;
    /// A page of a timer's fires, newest first, and their total.
    async fn list_fires(
        &self,
        timer_id: i64,
        status: Option<FireStatus>,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Fire>, u64)>;
    /// Timer `timer_id`'s fire of scheduled time `scheduled_ms` (sent then,
    /// or later when spread), with its owner token and lease. The default
    /// keeps none.
    async fn fire_at(&self, _timer_id: i64, _scheduled_ms: i64) -> Result<Option<FireDetail>> {
        Ok(None)
    }
    /// The status and lateness of timer `timer_id`'s fires run in
    /// `[from_ms, to_ms]`, newest first, at most `limit`: one range of the
    /// `(timer_id, run_timer)` index. The default keeps none.
    async fn outcomes_between(
        &self,
        _timer_id: i64,
        _from_ms: i64,
        _to_ms: i64,
        _limit: u32,
    ) -> Result<Vec<FireOutcome>> {
        Ok(Vec::new())
    }
    /// Fires of every timer that ended succeeded or failed since
    /// `since_ms`, as [`Self::ended_since`], each with whether it was paced
    /// (backfilled or replayed), so lateness figures can leave those out.
    /// The default knows replayed ones only.
    async fn ended_since_paced(&self, since_ms: i64, limit: u32) -> Result<Vec<(Fire, bool)>> {
        let fires = self.ended_since(since_ms, limit).await?;
        Ok(fires
            .into_iter()
            .map(|f| {
                let paced = f.replayed;
                (f, paced)
            })
            .collect())
    }
    /// Timer `timer_id`'s figures from the start of the hour of `from_ms`
    /// to `to_ms` (run times, both ends in): the rows of its hours rolled
    /// up ([`Self::roll_up_hour`]) summed, and its fires counted in the
    /// hours that are not (the last hour or two), or whose roll-up a
    /// replay or a backfill made stale. One statement (a second while an
    /// hour is stale); it reads at most an hour row per hour of the window
    /// and the fires of the hours not rolled up. The default knows no fire.
    async fn timer_figures(&self, _timer_id: i64, _from_ms: i64, _to_ms: i64) -> Result<TimerFigures> {
        Ok(TimerFigures::default())
    }
    /// Rolls up the next hour of fires (every timer's, by run time) not
    /// rolled up yet, no older than `oldest_hour_ms`, if it ended at or
    /// before `settled_ms`: one row per timer with fires that hour, in one
    /// statement, and the hour marked rolled. Returns the hour rolled, or
    /// `None` when none is due (or another node rolled it meanwhile). The
    /// default rolls none.
    async fn roll_up_hour(&self, _settled_ms: i64, _oldest_hour_ms: i64) -> Result<Option<i64>> {
        Ok(None)
    }
    /// Rolls up again at most `limit` hours of a timer, from
    /// `from_hour_ms` on, whose roll-up is stale: a replay or a backfill
    /// changed its fires, or some were still under way when it was rolled
    /// (one that still has such fires stays stale). Returns how many. The
    /// default has none.
    async fn reroll_stale_hours(&self, _from_hour_ms: i64, _limit: u32) -> Result<u64> {
        Ok(0)
    }
    /// Forgets at most `limit` rows of the oldest rolled-up hour that
    /// began before `before_ms` (0: none left); returns how many. The
    /// default keeps none.
    async fn forget_rolled_hours(&self, _before_ms: i64, _limit: u32) -> Result<u64> {
        Ok(0)
    }
}

/// Nodes (`t_node`): who is in the cluster and what each holds.
#[async_trait]
pub trait NodeRepo: Send + Sync {
    /// Creates or refreshes a node's row.
    async fn heartbeat(&self, node: &NodeInfo) -> Result<()>;
    /// Every node that reported since `since_ms`, by id.
    async fn list_nodes(&self, since_ms: i64) -> Result<Vec<NodeInfo>>;
    /// Removes a node's row (it stopped cleanly).
    async fn remove_node(&self, id: &str) -> Result<()>;
    /// The database server's clock now, in Unix ms, where several nodes
    /// share the database (PostgreSQL, MySQL): the one clock every node
    /// sets its own to, so heartbeats and leases are judged alike. `None`
    /// on SQLite (one node; its own clock is the only one).
    async fn database_now_ms(&self) -> Result<Option<i64>>;
}

/// Which notification a fire owes. Stored as its code (`t_notify_owed.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OwedKind {
    /// The timer's `onFailure`: the fire ended failed.
    Failure = 1,
    /// The timer's `onMissed`: the fire was recorded missed or skipped.
    Missed = 2,
    /// The timer's `onLate`: the fire's first callback left later than
    /// the timer's threshold (owed with that attempt's result).
    Late = 3,
}

impl OwedKind {
    /// The stored code.
    pub fn code(self) -> i64 {
        self as i64
    }

    /// The kind of a stored code.
    pub fn from_code(code: i64) -> Option<Self> {
        match code {
            1 => Some(Self::Failure),
            2 => Some(Self::Missed),
            3 => Some(Self::Late),
            _ => None,
        }
    }

    /// Its field on a timer (`onFailure`, `onMissed`, `onLate`).
    pub fn field(self) -> &'static str {
        match self {
            Self::Failure => "onFailure",
            Self::Missed => "onMissed",
            Self::Late => "onLate",
        }
    }

    /// What ends its message's `Idempotency-Key`, after the fire's key and
    /// `_`: `failure`, `missed`, `late`.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Failure => "failure",
            Self::Missed => "missed",
            Self::Late => "late",
        }
    }
}

/// A notification a fire owes (`t_notify_owed`), with what its message
/// says of the fire, held by `owner` while it is being sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwedNotification {
    pub task_id: i64,
    pub kind: OwedKind,
    pub key: FireKey,
    /// The fire was made by `triggerTimer` (its idempotency key says so).
    pub manual: bool,
    /// The fire's attempts.
    pub attempt: u32,
    /// The fire's last output.
    pub output: String,
    /// Sends tried so far, by any node.
    pub sends: u32,
    /// The sender's token: the fire's claim owner for the node that
    /// recorded it, a fresh token for one that took it over.
    pub owner: String,
}

/// What [`NotifyRepo::record_owing`] wrote.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Results written (as [`FireRepo::record`] counts them).
    pub written: u64,
    /// The notifications stored: those whose fire's result was written
    /// under their owner (see [`NotifyRepo::record_owing`]).
    pub owed: Vec<OwedNotification>,
}

/// Notifications fires owe (`t_notify_owed`): stored with the result that
/// makes them owed, held under a lease by the node sending them, deleted
/// once sent or given up. A node that stops or crashes owing one leaves it
/// for another to take once its lease lapses.
#[async_trait]
pub trait NotifyRepo: Send + Sync {
    /// Writes `results` as [`FireRepo::record`] does and, in the same
    /// transaction, each of `owed` whose fire's result was written under
    /// the notification's owner and says what its kind is owed for:
    /// [`OwedKind::Failure`] a fire ended failed, [`OwedKind::Missed`] one
    /// missed or skipped, [`OwedKind::Late`] any result of the fire (its
    /// first attempt). Each is held by that owner until `lease_until`. A
    /// notification already owed is left as it is.
    async fn record_owing(
        &self,
        results: &[FireResult],
        owed: &[OwedNotification],
        lease_until: i64,
        now_ms: i64,
    ) -> Result<Recorded>;
    /// Takes at most `limit` notifications whose lease ended by `now_ms`,
    /// oldest first: each is held by `owner` until `lease_until`; returns
    /// them as taken. Concurrent callers never take the same one.
    async fn take_owed(&self, owner: &str, lease_until: i64, now_ms: i64, limit: u32) -> Result<Vec<OwedNotification>>;
    /// Sets the sends tried of a notification its `owner` holds and its
    /// lease end (`send_at`: its next send's time plus a lease, or now to
    /// give it up to any node); false when that owner no longer holds it.
    async fn reschedule_owed(&self, owed: &OwedNotification, sends: u32, send_at: i64) -> Result<bool>;
    /// Deletes a notification its `owner` holds: it was sent or given up;
    /// false when that owner no longer holds it.
    async fn settle_owed(&self, owed: &OwedNotification) -> Result<bool>;
}

/// The create-time limits of every app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Timers that are not deleted (`limits.timers_per_app`).
    pub timers_per_app: u64,
    /// Fires in any one minute (`limits.fires_per_minute_per_app`).
    pub fires_per_minute_per_app: u64,
}

impl Default for Quota {
    fn default() -> Self {
        Self { timers_per_app: u64::MAX, fires_per_minute_per_app: u64::MAX }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(latenesses: &[i64]) -> TimerFigures {
        let mut f = TimerFigures::default();
        for late in latenesses {
            f.late[TimerFigures::bucket_of(*late)] += 1;
        }
        f.late_max = latenesses.iter().copied().max();
        f
    }

    #[test]
    fn lateness_percentiles_are_nearest_rank_by_bucket_bound() {
        assert_eq!(figures(&[]).late_percentile(50), None);
        assert_eq!(figures(&[7]).late_percentile(99), Some(7));
        // 4 falls in (3, 5]: reported 5, unless nothing later was seen.
        assert_eq!(figures(&[4]).late_percentile(50), Some(4), "never past the largest seen");
        assert_eq!(figures(&[4, 9]).late_percentile(50), Some(5));
        let hundred: Vec<i64> = (1..=100).collect();
        let f = figures(&hundred);
        // The 50th is 50, in (30, 50]; the 99th is 99, in (70, 100].
        assert_eq!((f.late_percentile(50), f.late_percentile(99)), (Some(50), Some(100)));
        assert_eq!(figures(&[1, 2, 3]).late_percentile(50), Some(2));
        // Past the last bound: the largest seen.
        assert_eq!(figures(&[10, 90_000]).late_percentile(99), Some(90_000));
        assert_eq!(figures(&[-5]).late_percentile(50), Some(0), "early counts as on time");
    }

    #[test]
    fn each_lateness_falls_in_the_bucket_of_the_first_bound_not_below_it() {
        assert_eq!(TimerFigures::bucket_of(-1), 0);
        assert_eq!(TimerFigures::bucket_of(0), 0);
        assert_eq!(TimerFigures::bucket_of(1), 1);
        assert_eq!(TimerFigures::bucket_of(4), 4);
        assert_eq!(TimerFigures::bucket_of(5), 4);
        assert_eq!(TimerFigures::bucket_of(60_000), LATE_BUCKETS - 2);
        assert_eq!(TimerFigures::bucket_of(60_001), LATE_BUCKETS - 1);
    }
}
