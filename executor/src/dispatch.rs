//! Dispatch: claimed fires leave at their time, late ones in run-time
//! order per timer, and failed ones come back at their retry's time. Its
//! entry is [`ExecutorHandle::dispatch`] (and [`ExecutorHandle::dispatch_at`]
//! for paced fires); each attempt goes on to the attempt room.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use xtimer_core::fire::{ClaimedFire, FireStatus};
use xtimer_core::timer::TimerStatus;

use crate::error::Result;
use crate::handle::{CachedTimer, Due, ExecutorHandle, FireOutcome, Held};

impl ExecutorHandle {
    /// Fires claimed fires, each at its run time (at once when past), in
    /// any order they come.
    ///
    /// Fires already due (late: an outage, a takeover, the reconciler)
    /// leave in run-time order per timer: several late fires of one timer
    /// go out one after another, oldest first, each once the one before it
    /// has its answer, so a receiver sees `:30` before `:35`. A retry of
    /// one of them waits on its own and holds up none of the later ones.
    ///
    /// `held`: when the claims were taken ([`ExecutorHandle::held_now`],
    /// read before the claim's statement). A fire this node held across a
    /// stall of its own is checked again before it is sent.
    pub async fn dispatch(&self, claimed: Vec<ClaimedFire>, held: Held) -> Result<()> {
        if claimed.is_empty() {
            return Ok(());
        }
        let timers = self.load_timers(&claimed).await?;
        self.dispatch_loaded(claimed, timers, held);
        Ok(())
    }

    /// [`Self::dispatch`] for paced fires (backfilled, replayed): each is
    /// sent at its time in `send_at` (by task id; at once when absent or past).
    pub async fn dispatch_at(&self, claimed: Vec<ClaimedFire>, send_at: &HashMap<i64, i64>, held: Held) -> Result<()> {
        if claimed.is_empty() {
            return Ok(());
        }
        self.note_paced(claimed.iter().map(|c| c.task_id));
        let timers = self.load_timers(&claimed).await?;
        self.dispatch_timed(claimed, timers, held, |fire| send_at.get(&fire.task_id).copied().unwrap_or(i64::MIN));
        Ok(())
    }

    /// [`Self::dispatch`] with the fires' timers already read.
    pub(crate) fn dispatch_loaded(
        &self,
        claimed: Vec<ClaimedFire>,
        timers: HashMap<i64, Arc<CachedTimer>>,
        held: Held,
    ) {
        self.dispatch_timed(claimed, timers, held, |fire| fire.key.run_ms);
    }

    /// Sends each fire at `at(fire)`: those already due in run-time order
    /// per timer, the others in groups by that time.
    fn dispatch_timed(
        &self,
        claimed: Vec<ClaimedFire>,
        timers: HashMap<i64, Arc<CachedTimer>>,
        held: Held,
        at: impl Fn(&ClaimedFire) -> i64,
    ) {
        let now = self.inner.clock.now_ms();
        let mut groups: BTreeMap<i64, Vec<Due>> = BTreeMap::new();
        let mut late: BTreeMap<i64, Vec<Due>> = BTreeMap::new();
        for fire in claimed {
            let timer = timers.get(&fire.key.timer_id).cloned();
            let send_at = at(&fire);
            if send_at <= now {
                late.entry(fire.key.timer_id).or_default().push((fire, timer));
            } else {
                groups.entry(send_at).or_default().push((fire, timer));
            }
        }
        for (_, mut fires) in late {
            fires.sort_by_key(|(f, _)| f.key.run_ms);
            let this = self.clone();
            self.inner.tracker.spawn(async move { this.fire_in_order(fires, held).await });
        }
        for (send_at, group) in groups {
            let this = self.clone();
            self.inner.tracker.spawn(async move { this.fire_group_at(send_at, group, held).await });
        }
    }

    async fn fire_group_at(&self, send_at: i64, group: Vec<Due>, held: Held) {
        let wait = send_at - self.inner.clock.now_ms();
        if wait > 0 {
            tokio::select! {
                _ = self.inner.hard_stop.cancelled() => {
                    let group: Vec<ClaimedFire> = group.into_iter().map(|(fire, _)| fire).collect();
                    self.release(&group).await;
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(wait as u64)) => {}
            }
        }
        let mut group = group.into_iter().peekable();
        while let Some((fire, timer)) = group.next() {
            if self.inner.hard_stop.is_cancelled() {
                self.release(std::slice::from_ref(&fire)).await;
                continue;
            }
            // Each fire waits for its own slots (host, app, executor) in its
            // own task, so a hung host's queue holds up no other fire; the
            // last one has none behind it and goes in this task (one spawn,
            // and one wake-up of another worker, fewer per group).
            let this = self.clone();
            let work = async move {
                let mut held = held;
                let (outcome, timer) = this.attempt_with(&fire, fire.attempt + 1, timer, &mut held).await;
                if let FireOutcome::RetryAt(at) = outcome {
                    this.retry_at(fire, at, timer, held).await;
                }
            };
            if group.peek().is_none() {
                work.await;
            } else {
                self.inner.tracker.spawn(work);
            }
        }
    }

    /// Fires `fires` (due, of one timer, oldest first) one after another:
    /// each first attempt waits for the one before to end, so they leave in
    /// run-time order. Retries go on in their own tasks.
    async fn fire_in_order(&self, fires: Vec<Due>, held: Held) {
        for (fire, timer) in fires {
            if self.inner.hard_stop.is_cancelled() {
                self.release(std::slice::from_ref(&fire)).await;
                continue;
            }
            let mut held = held;
            let (outcome, timer) = self.attempt_with(&fire, fire.attempt + 1, timer, &mut held).await;
            if let FireOutcome::RetryAt(at) = outcome {
                let this = self.clone();
                self.inner.tracker.spawn(async move { this.retry_at(fire, at, timer, held).await });
            }
        }
    }

    /// Waits for a retry's time, then tries again (and again, per policy).
    async fn retry_at(&self, fire: ClaimedFire, mut at: i64, mut timer: Option<Arc<CachedTimer>>, mut held: Held) {
        let mut attempt = fire.attempt + 2;
        loop {
            let wait = (at - self.inner.clock.now_ms()).max(0) as u64;
            tokio::select! {
                _ = self.inner.stop_claiming.cancelled() => {
                    self.release(std::slice::from_ref(&fire)).await;
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
            // A retry reads the timer's status afresh: disabling stops
            // retries too, except a replay's (sent whatever the status,
            // unless deleted). A failed read retries anyway (at-least-once).
            let enabled = match self.inner.statuses.status(fire.key.timer_id).await {
                Ok(Some(TimerStatus::Enabled)) => true,
                Ok(Some(TimerStatus::Deleted) | None) => false,
                Ok(Some(_)) => fire.replay,
                Err(_) => true,
            };
            if !enabled {
                self.send_result(&fire, FireStatus::Skipped, attempt - 1, "skipped: the timer is not enabled", 0, None)
                    .await;
                return;
            }
            let claimed = ClaimedFire { attempt: attempt - 1, ..fire.clone() };
            let (outcome, used) = self.attempt_with(&claimed, attempt, timer, &mut held).await;
            timer = used;
            match outcome {
                FireOutcome::RetryAt(next) => {
                    at = next;
                    attempt += 1;
                }
                _ => return,
            }
        }
    }

    /// Makes attempt number `attempt` (1-based) of a claimed fire with its
    /// timer's definition (`timer`, else the kept one, else read now);
    /// returns how it ended and the definition, for the next attempt. Its
    /// lateness is recorded; the store keeps the first attempt's.
    async fn attempt_with(
        &self,
        fire: &ClaimedFire,
        attempt: u32,
        timer: Option<Arc<CachedTimer>>,
        held: &mut Held,
    ) -> (FireOutcome, Option<Arc<CachedTimer>>) {
        let inner = &self.inner;
        let cached = match timer.or_else(|| inner.cache.get(&fire.key.timer_id)) {
            Some(cached) => cached,
            None => match inner.timers.get_timer(fire.key.timer_id).await {
                Ok(Some(timer)) => {
                    let cached = CachedTimer::new(timer, &inner.callbacks);
                    self.keep(&cached);
                    cached
                }
                _ => {
                    self.send_result(fire, FireStatus::Skipped, attempt - 1, "skipped: the timer is gone", 0, None)
                        .await;
                    return (FireOutcome::Skipped, None);
                }
            },
        };
        let outcome = self.attempt_of(fire, attempt, &cached, held).await;
        (outcome, Some(cached))
    }
}
