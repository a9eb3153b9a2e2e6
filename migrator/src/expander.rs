//! [`Expander`]: expands timers into fires, stores them, and indexes them
//! into the shards; what a migrator step, a request that enables a timer,
//! `triggerTimer`, a backfill and an index rebuild share.

use std::collections::HashSet;
use std::sync::Arc;

use xtimer_core::config::MigratorConfig;
use xtimer_core::fire::{FireFeed, FireKey};
use xtimer_core::handover::Handover;
use xtimer_core::node::NodeContext;
use xtimer_core::shard::{minute_of, MINUTE_MS};
use xtimer_core::timer::{Schedule, Timer};
use xtimer_core::SharedClock;
use xtimer_store::{BackfillFire, FireRepo, NewFire, NextRun, PlannedFire, ShardStore, Stores, TimerRepo};

use crate::calendars::CalendarBook;
use crate::error::{Error, Result};
use crate::{expand, spread};

/// Expands timers into fires and indexes them into shards. Clones share
/// everything.
#[derive(Clone)]
pub struct Expander {
    step_ms: u64,
    max_fires_per_timer: usize,
    timers: Arc<dyn TimerRepo>,
    pub(crate) fires: Arc<dyn FireRepo>,
    shards: Arc<dyn ShardStore>,
    pub(crate) clock: SharedClock,
    feed: Option<FireFeed>,
    /// Where expanded one-shot timers' definitions are left for their fire.
    pub(crate) handover: Arc<Handover>,
    /// Places the fires of timers that spread them.
    placer: spread::Placer,
    /// The calendars timers exclude.
    pub(crate) calendars: CalendarBook,
}

impl Expander {
    /// An expander over `stores` for `ctx`'s node, as `config` sets its
    /// window; every indexed fire is published to `feed` as well, when
    /// given.
    pub fn new(config: &MigratorConfig, stores: &Stores, ctx: &NodeContext, feed: Option<FireFeed>) -> Self {
        Self {
            step_ms: config.step_ms,
            max_fires_per_timer: config.max_fires_per_timer,
            timers: stores.timers.clone(),
            fires: stores.fires.clone(),
            shards: stores.shards.clone(),
            clock: ctx.clock.clone(),
            feed,
            handover: ctx.handover.clone(),
            placer: spread::Placer::new(
                stores.fires.clone(),
                stores.locks.clone(),
                format!("{}:lock:spread", ctx.key_prefix),
                ctx.node_id.clone(),
            ),
            calendars: CalendarBook::new(stores.calendars.clone(), ctx.clock.clone()),
        }
    }
}

/// Orders fires by run time (then timer), the order they are inserted in:
/// on SQLite their rows then lie in that order, so the claim and the
/// result of one second's fires (a thousand crons due together) touch a
/// few pages of the table instead of one page each.
pub(crate) fn by_run_time(fires: &mut [PlannedFire]) {
    fires.sort_unstable_by_key(|f| (f.fire.key.run_ms, f.fire.key.timer_id));
}

/// `timer`'s fire scheduled at `scheduled_ms` and sent at `run_ms`,
/// planned from its definition as read.
fn planned(timer: &Timer, scheduled_ms: i64, run_ms: i64) -> PlannedFire {
    PlannedFire {
        fire: new_fire(timer, run_ms),
        timer_modified: timer.modify_time,
        scheduled_ms: (run_ms != scheduled_ms).then_some(scheduled_ms),
    }
}

/// `timer`'s fire at `run_ms`.
fn new_fire(timer: &Timer, run_ms: i64) -> NewFire {
    NewFire { key: FireKey { timer_id: timer.id, run_ms }, app: timer.app.clone() }
}

/// Where `timer`'s next expansion starts once it is expanded up to `to`,
/// planned from its definition as read.
pub(crate) fn next_run(timer: &Timer, to: i64) -> NextRun {
    NextRun { timer_id: timer.id, run_ms: expand::next_fire_at_or_after(timer, to), timer_modified: timer.modify_time }
}

/// Whether no scheduled fire of `timer` can be sent at `run_ms`, so a
/// manual fire there never takes a scheduled one's key: never a whole
/// second (a cron's fires are, spread or not), nor on an interval's grid
/// (its times, or with a spread any whole second after one).
fn off_schedule(timer: &Timer, run_ms: i64) -> bool {
    if run_ms.rem_euclid(1000) == 0 {
        return false;
    }
    match &timer.schedule {
        Schedule::Every { every_ms, anchor_ms, .. } => {
            let grid = if timer.timing.spread_ms > 0 { gcd(*every_ms, 1000) } else { *every_ms };
            (run_ms - anchor_ms).rem_euclid(grid.max(2)) != 0
        }
        _ => true,
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// Run times `fire_now` tries before giving up (each taken by a fire made
/// in the same millisecond).
const MANUAL_KEY_TRIES: usize = 16;

impl Expander {
    /// The calendars timers exclude, as this expander reads them.
    pub fn calendars(&self) -> &CalendarBook {
        &self.calendars
    }

    /// End of the window a step started at `now_ms` covers.
    pub fn horizon(&self, now_ms: i64) -> i64 {
        now_ms + 2 * self.step_ms as i64
    }

    /// Expands one timer from now to the current horizon and indexes its
    /// fires; called when a timer is enabled or updated, so it fires on time.
    /// `timer` is the definition as stored (its `modify_time` included):
    /// if the stored one has changed since, nothing is written.
    pub async fn expand_timer(&self, timer: &Timer) -> Result<u64> {
        self.expand(std::slice::from_ref(timer), false).await
    }

    /// Expands timers just created (stored with their first fire as
    /// `next_run`), in one insert, and indexes their fires; returns how many
    /// fires it indexed. A timer with no fire before the horizon costs
    /// nothing: its stored `next_run` is already right. A one-shot timer
    /// created enabled after its time still fires, once, now.
    pub async fn expand_created(&self, timers: &[Timer]) -> Result<u64> {
        self.expand(timers, true).await
    }

    async fn expand(&self, timers: &[Timer], created: bool) -> Result<u64> {
        let now = self.clock.now_ms();
        let to = self.horizon(now);
        let (mut fires, had_fires) = self.plan(timers, now, to, true).await?;
        // Created with no fire before the horizon: its stored first fire
        // is at or after the horizon, which is what would be written.
        let next: Vec<NextRun> = timers
            .iter()
            .zip(had_fires)
            .filter(|(_, had)| *had || !created)
            .map(|(timer, _)| next_run(timer, to))
            .collect();
        by_run_time(&mut fires);
        self.fires.insert_planned_fires(&fires, now).await?;
        self.timers.set_planned_next_runs(&next).await?;
        // New fires are pending; a key that existed already, or one not
        // written because its timer changed meanwhile, is added harmlessly
        // (its claim is a compare-and-set on a pending row).
        let keys: Vec<FireKey> = fires.into_iter().map(|f| f.fire.key).collect();
        if !keys.is_empty() {
            self.shards.add(&keys).await?;
            if let Some(feed) = &self.feed {
                let _ = feed.send(keys.clone().into());
            }
        }
        Ok(keys.len() as u64)
    }

    /// Makes one manual fire of `timer` due now (`triggerTimer`) and
    /// indexes it; returns its run time. The run time is never a whole
    /// second (no cron fire is at one, so a manual fire and a scheduled one
    /// never share a key) and never that of a fire the timer has already.
    pub async fn fire_now(&self, timer: &Timer) -> Result<i64> {
        let now = self.clock.now_ms();
        let mut run_ms = now;
        for _ in 0..MANUAL_KEY_TRIES {
            while !off_schedule(timer, run_ms) {
                run_ms += 1;
            }
            let fire = new_fire(timer, run_ms);
            if self.fires.insert_manual_fire(&fire, now).await? {
                self.shards.add(&[fire.key]).await?;
                if let Some(feed) = &self.feed {
                    let _ = feed.send(vec![fire.key].into());
                }
                return Ok(run_ms);
            }
            run_ms += 1;
        }
        Err(Error::ManualFireTaken { timer_id: timer.id })
    }

    /// Backfills `timer` over `[from_ms, to_ms)`: each scheduled time there
    /// without a fire record gets one, the oldest first, at most
    /// `max_fires`. Returns how many were made. The fires are past due; the
    /// reconciler sends them, whatever the timer's misfire policy, from now
    /// on at `per_second` (one after another, oldest first): a backfill
    /// stored is a backfill done, on this node or, after a crash, another.
    pub async fn backfill(
        &self,
        timer: &Timer,
        from_ms: i64,
        to_ms: i64,
        max_fires: usize,
        per_second: u32,
    ) -> Result<u64> {
        /// Scheduled times expanded and checked against the records at once.
        const CHUNK: usize = 10_000;
        let now = self.clock.now_ms();
        let exclusions = self.calendars.exclusions(timer).await?;
        let mut missing = Vec::new();
        let mut cursor = from_ms;
        while cursor < to_ms && missing.len() < max_fires {
            let times = expand::fire_times(timer, &exclusions, cursor, to_ms, CHUNK, false);
            let Some(&last) = times.last() else { break };
            let known: HashSet<i64> =
                self.fires.run_times_between(timer.id, cursor, last + 1).await?.into_iter().collect();
            let room = max_fires - missing.len();
            missing.extend(times.iter().copied().filter(|t| !known.contains(t)).take(room));
            if times.len() < CHUNK {
                break;
            }
            cursor = last + 1;
        }
        let gap_ms = 1_000.0 / f64::from(per_second.max(1));
        let fires: Vec<BackfillFire> = missing
            .into_iter()
            .enumerate()
            .map(|(i, run_ms)| BackfillFire {
                fire: new_fire(timer, run_ms),
                send_at_ms: now + (i as f64 * gap_ms) as i64,
            })
            .collect();
        Ok(self.fires.insert_backfill(&fires, now).await?)
    }

    /// The fires of `timers` scheduled in `[from, to)`, spread fires
    /// placed, and whether each timer had any. A one-shot's definition is
    /// left in the [`Handover`] for its fire (before the fire is indexed,
    /// so that a fire due at once finds it).
    pub(crate) async fn plan(
        &self,
        timers: &[Timer],
        from: i64,
        to: i64,
        enabling: bool,
    ) -> Result<(Vec<PlannedFire>, Vec<bool>)> {
        let mut scheduled = Vec::with_capacity(timers.len());
        let mut candidates = Vec::new();
        for timer in timers {
            let exclusions = self.calendars.exclusions(timer).await?;
            let times = expand::fire_times(timer, &exclusions, from, to, self.max_fires_per_timer, enabling);
            if timer.timing.spread_ms > 0 {
                candidates.extend(times.iter().map(|t| spread::Candidate::of(timer, *t)));
            }
            scheduled.push(times);
        }
        let placed = self.placer.place(candidates).await?;
        let mut fires = Vec::new();
        let mut had = Vec::with_capacity(timers.len());
        for (timer, times) in timers.iter().zip(scheduled) {
            had.push(!times.is_empty());
            if times.is_empty() {
                continue;
            }
            self.handover.give(timer);
            fires
                .extend(times.into_iter().map(|t| planned(timer, t, placed.get(&(timer.id, t)).copied().unwrap_or(t))));
        }
        Ok((fires, had))
    }

    /// Indexes pending fires in `[from, to)` minute by minute.
    pub(crate) async fn index(&self, from: i64, to: i64) -> Result<u64> {
        let mut indexed = 0;
        let mut minute = minute_of(from);
        while minute < to {
            let start = minute.max(from);
            let end = (minute + MINUTE_MS).min(to);
            let keys = self.fires.pending_between(None, start, end, u32::MAX).await?;
            if !keys.is_empty() {
                self.shards.add(&keys).await?;
                indexed += keys.len() as u64;
                if let Some(feed) = &self.feed {
                    // No receiver is fine: the trigger's re-poll finds them too.
                    let _ = feed.send(keys.into());
                }
            }
            minute += MINUTE_MS;
        }
        Ok(indexed)
    }
}
