//! Claim: the first room of a fire's path. [`ExecutorHandle::claim_and_dispatch`]
//! takes due fires (compare-and-set pending -> running, in one statement),
//! reads their timers, and lets those past their catch-up window follow
//! their misfire policy; [`ExecutorHandle::still_ours`] is how the later
//! rooms make sure a claim held across a stall of this node is still its own.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use xtimer_core::error::error_chain;
use xtimer_core::fire::{ClaimedFire, FireKey, FireStatus};
use xtimer_core::timer::MisfirePolicy;

use crate::error::Result;
use crate::handle::{CachedTimer, ExecutorHandle, Held, NotSent};

/// What a claim's lease is trusted for less, by this node's clock: a fifth
/// of it, at least 2 s (other nodes judge it by their own clocks).
fn lease_margin_ms(lease_ms: i64) -> i64 {
    (lease_ms / 5).max(2_000).min(lease_ms / 2)
}

/// How long a batch of claim checks waits for more checks to join it.
const CONFIRM_LINGER: Duration = Duration::from_millis(5);

/// First wait before a failed claim check is tried again; it doubles up to
/// [`CONFIRM_BACKOFF_MAX_MS`].
const CONFIRM_BACKOFF_MS: u64 = 100;
const CONFIRM_BACKOFF_MAX_MS: u64 = 2_000;

/// Longest wait for one batch of claim checks.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);

impl ExecutorHandle {
    /// Claims `keys` and dispatches what was won; returns how many were won.
    /// Claims nothing while the recorder holds its cap of results not yet
    /// written ([`ExecutorHandle::backlogged`]): the fires stay pending for
    /// the reconciler.
    pub async fn claim_and_dispatch(&self, keys: &[FireKey]) -> Result<usize> {
        let inner = &self.inner;
        if self.backlogged() {
            return Ok(0);
        }
        let owner = self.owner_token();
        let held = self.held_now();
        let outcome = inner.fires.claim(keys, &owner, inner.config.lease_ms as i64, inner.clock.now_ms()).await?;
        let won = outcome.claimed.len();
        inner.metrics.fires_ended(FireStatus::Skipped, outcome.skipped);
        let timers = self.load_timers(&outcome.claimed).await?;
        let claimed = self.past_their_window(outcome.claimed, &timers).await;
        self.dispatch_loaded(claimed, timers, held);
        Ok(won)
    }

    /// Of fires just claimed from the index (found late: the node was down,
    /// a shard was taken over), those later than their catch-up window
    /// (the timer's `misfireThresholdMs`, else the node's) follow their
    /// timer's misfire policy, as the reconciler's do: `skip` marks them
    /// missed, `fire_all` fires them, `fire_once` fires only one whose next
    /// scheduled time has not come. The fires that go out.
    async fn past_their_window(
        &self,
        claimed: Vec<ClaimedFire>,
        timers: &HashMap<i64, Arc<CachedTimer>>,
    ) -> Vec<ClaimedFire> {
        let now = self.inner.clock.now_ms();
        let narrowest = xtimer_core::when::MIN_MISFIRE_THRESHOLD_MS as i64;
        if claimed.iter().all(|f| f.manual || now - f.key.run_ms < narrowest) {
            return claimed;
        }
        let default = self.inner.misfire_threshold_ms.load(Ordering::Relaxed);
        let mut going = Vec::with_capacity(claimed.len());
        for fire in claimed {
            let late = now - fire.key.run_ms;
            let missed = timers.get(&fire.key.timer_id).filter(|_| !fire.manual).and_then(|cached| {
                let timer = &cached.timer;
                let window = timer.timing.misfire_threshold_or(default) as i64;
                let next_has_come = || {
                    timer
                        .timing
                        .next_at_or_after(&timer.schedule, fire.scheduled_ms + 1)
                        .is_some_and(|next| next <= now)
                };
                let missed = late >= window
                    && match timer.misfire {
                        MisfirePolicy::FireAll => false,
                        MisfirePolicy::Skip => true,
                        MisfirePolicy::FireOnce => next_has_come(),
                    };
                missed.then_some((window, cached))
            });
            match missed {
                Some((window, cached)) => {
                    let output =
                        format!("missed: {late} ms late, past its catch-up window of {window} ms (misfire policy)");
                    self.send_missed(&cached.timer, &fire, FireStatus::Missed, &output, late).await;
                }
                None => going.push(fire),
            }
        }
        going
    }

    /// The definitions of the claimed fires' timers: kept ones, one-shots'
    /// handed over by their expansion, and the others read in one query.
    /// Cron timers are kept for their next fires; a one-shot timer's
    /// definition lives as long as its fire's work.
    pub(crate) async fn load_timers(&self, claimed: &[ClaimedFire]) -> Result<HashMap<i64, Arc<CachedTimer>>> {
        let inner = &self.inner;
        let mut found = HashMap::with_capacity(claimed.len());
        let mut missing = Vec::new();
        for c in claimed {
            let id = c.key.timer_id;
            if found.contains_key(&id) {
                continue;
            }
            // A definition from before the timer's last change (updateTimer) is read again.
            if let Some(kept) = inner.cache.get(&id).filter(|t| t.timer.modify_time >= c.timer_modified) {
                found.insert(id, kept);
            } else if let Some(timer) = inner.handover.take(id).filter(|t| t.modify_time >= c.timer_modified) {
                found.insert(id, CachedTimer::new(timer, &inner.callbacks));
            } else {
                missing.push(id);
            }
        }
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            for timer in self.inner.timers.get_timers(&missing).await? {
                let cached = CachedTimer::new(timer, &self.inner.callbacks);
                self.keep(&cached);
                found.insert(cached.timer.id, cached);
            }
        }
        Ok(found)
    }

    /// Whether this node may send `fire`: yes at once unless it may have
    /// stood still since it took the claim (`held`): a stall of the
    /// process, or a gap in its heartbeats. Then the claim is checked in
    /// the database (in a batch with the other checks of the moment, which
    /// also writes this node's heartbeat and extends the lease, so no other
    /// node can take it from here): still its own, go on; taken over, not
    /// sent. A check that fails is tried again until it answers: the
    /// fire is not sent meanwhile, and if the claim lapses another node
    /// sends it.
    pub(crate) async fn still_ours(&self, fire: &ClaimedFire, held: &mut Held) -> Result<(), NotSent> {
        let inner = &self.inner;
        let now = inner.clock.now_ms();
        let gap = inner.liveness.steady_since(now).is_none_or(|since| since > held.at_ms) || inner.liveness.stale();
        if !gap && !inner.pause.crossed(held.mark) && !self.lease_may_have_lapsed(fire, held) {
            return Ok(());
        }
        let checked = self.held_now();
        let mut backoff = CONFIRM_BACKOFF_MS;
        loop {
            match self.confirm(fire).await {
                Some(true) => {
                    *held = checked.renewed();
                    return Ok(());
                }
                Some(false) => {
                    tracing::info!(
                        task_id = fire.task_id,
                        timer_id = fire.key.timer_id,
                        run_ms = fire.key.run_ms,
                        "Not sent: another node took this fire over while this one stood still."
                    );
                    return Err(NotSent::TakenOver);
                }
                None => {
                    let wait = rand::random_range(backoff / 2..=backoff);
                    tokio::select! {
                        _ = inner.hard_stop.cancelled() => return Err(NotSent::Stopped),
                        _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                    }
                    backoff = (backoff * 2).min(CONFIRM_BACKOFF_MAX_MS);
                }
            }
        }
    }

    /// Whether the claim's lease could have lapsed by now, by this node's
    /// monotonic clock (which a stop of the process does not stop),
    /// less a margin for other nodes' clocks: measured from when the claim
    /// was taken (its lease runs from the later of the run time and then)
    /// or last renewed by a check.
    fn lease_may_have_lapsed(&self, fire: &ClaimedFire, held: &Held) -> bool {
        let lease = self.inner.config.lease_ms as i64;
        let head_start = if held.renewed { 0 } else { (fire.key.run_ms - held.at_ms).max(0) };
        let valid_for = head_start + lease - lease_margin_ms(lease);
        held.at.elapsed().as_millis() as i64 >= valid_for
    }

    /// Checks one claim in the database, in a batch with the checks asked
    /// within [`CONFIRM_LINGER`]: the first asker waits the linger, then
    /// checks them all. `None` when the check failed.
    pub(crate) async fn confirm(&self, fire: &ClaimedFire) -> Option<bool> {
        let inner = &self.inner;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let leader = {
            let mut waiting = inner.confirming.lock().expect("confirm lock");
            waiting.push((fire.clone(), tx));
            waiting.len() == 1
        };
        if leader {
            tokio::time::sleep(CONFIRM_LINGER).await;
            let batch = std::mem::take(&mut *inner.confirming.lock().expect("confirm lock"));
            let claims: Vec<ClaimedFire> = batch.iter().map(|(c, _)| c.clone()).collect();
            let lease_ms = inner.config.lease_ms as i64;
            let check = inner.fires.confirm_claims(&inner.node_id, &claims, lease_ms, inner.clock.now_ms());
            // A silent cut would hold the check (and these fires) until TCP gives up.
            match tokio::time::timeout(CONFIRM_TIMEOUT, check).await {
                Ok(Ok(held)) => {
                    let held: std::collections::HashSet<i64> = held.into_iter().collect();
                    for (claim, answer) in batch {
                        let _ = answer.send(held.contains(&claim.task_id));
                    }
                }
                Ok(Err(err)) => tracing::warn!(
                    claims = claims.len(),
                    "Checking claims held across a stall failed: {}; retrying.",
                    error_chain(&err)
                ),
                Err(_) => tracing::warn!(
                    claims = claims.len(),
                    timeout_ms = CONFIRM_TIMEOUT.as_millis() as u64,
                    "Checking claims held across a stall timed out; retrying."
                ),
            }
        }
        rx.await.ok()
    }
}
