//! Admission: what a fire waits for, or is stopped by, before its
//! callback goes out. [`ExecutorHandle::admit`] applies the app's pause
//! (`pauseApp`), the timer's overlap policy and its flow's limits (API 1g);
//! the callback's own slots (its host's and app's bulkheads, the executor's
//! concurrency) are taken by the attempt through
//! [`ExecutorHandle::enter_bulkheads`] and [`ExecutorHandle::executor_permit`],
//! inside its stall-resend loop.

use std::sync::atomic::Ordering;
use std::time::Duration;

use xtimer_core::fire::{ClaimedFire, FireStatus};
use xtimer_core::timer::{MisfirePolicy, Notify, OverlapPolicy, Timer};

use crate::bulkhead::{Pass, Refusal};
use crate::flows::{FlowSlot, Turn};
use crate::handle::{ExecutorHandle, FireOutcome, Held, NotSent};

/// How often a fire waiting under `overlap: buffer_one` looks again.
const OVERLAP_POLL: Duration = Duration::from_millis(100);

impl ExecutorHandle {
    /// Whether attempt `attempt` of `fire` may go, before its callback
    /// takes any slot: not while its app is paused (every attempt, a
    /// retry's and a replay's too), not past its timer's overlap policy (a
    /// first attempt), and once its flow gives it a turn. `Ok`: go, holding
    /// the flow's slot (if any) while the callback is open; `Err`: how it
    /// ended here (its result handed to the recorder, or its claim given back).
    pub(crate) async fn admit(
        &self,
        timer: &Timer,
        fire: &ClaimedFire,
        attempt: u32,
        held: &mut Held,
    ) -> Result<Option<FlowSlot>, FireOutcome> {
        let inner = &self.inner;
        // Every attempt, a retry's and a replay's too: a paused app sends nothing.
        if let Some(reason) = inner.app_pauses.reason(&timer.app, fire.key.run_ms).await {
            let output = format!("app paused: {reason}");
            self.send_missed(timer, fire, FireStatus::Skipped, &output, 0).await;
            return Err(FireOutcome::Skipped);
        }
        if attempt == 1 && timer.overlap != OverlapPolicy::Allow {
            if let Some(outcome) = self.overlap_gate(timer, fire).await {
                return Err(outcome);
            }
        }
        let slot = match self.flow_turn(timer, fire, attempt, held).await {
            Ok(slot) => slot,
            Err(not_sent) => return Err(self.not_sent(timer, fire, not_sent).await),
        };
        // A fire that waited for its flow may come out into a pause of its app.
        if slot.is_some() {
            if let Some(reason) = inner.app_pauses.reason(&timer.app, fire.key.run_ms).await {
                drop(slot);
                let output = format!("app paused: {reason}");
                self.send_missed(timer, fire, FireStatus::Skipped, &output, 0).await;
                return Err(FireOutcome::Skipped);
            }
        }
        Ok(slot)
    }

    /// Applies the timer's overlap policy before a fire's first attempt:
    /// with fires of the timer due before it still running, `skip` records
    /// it skipped; `buffer_one` waits for the one running to end (up to
    /// half the claim lease, then fires anyway) and records it skipped when
    /// another is already waiting. `None`: go ahead (also when the count
    /// cannot be read: at-least-once).
    async fn overlap_gate(&self, timer: &Timer, fire: &ClaimedFire) -> Option<FireOutcome> {
        let inner = &self.inner;
        let give_up_at = inner.clock.now_ms() + inner.config.lease_ms as i64 / 2;
        loop {
            let running = match inner.fires.running_before(timer.id, fire.task_id, fire.key.run_ms).await {
                Ok(n) => n,
                Err(err) => {
                    tracing::warn!(timer_id = timer.id, error = %xtimer_core::error::error_chain(&err), "Reading overlapping fires failed; firing.");
                    return None;
                }
            };
            let skip = match (timer.overlap, running) {
                (_, 0) | (OverlapPolicy::Allow, _) => return None,
                (OverlapPolicy::Skip, _) => "skipped: the fire before is still running (overlap: skip)",
                (OverlapPolicy::BufferOne, 1) if inner.clock.now_ms() >= give_up_at => return None,
                (OverlapPolicy::BufferOne, 1) => {
                    tokio::select! {
                        _ = inner.hard_stop.cancelled() => {
                            self.release(std::slice::from_ref(fire)).await;
                            return Some(FireOutcome::Released);
                        }
                        _ = tokio::time::sleep(OVERLAP_POLL) => continue,
                    }
                }
                (OverlapPolicy::BufferOne, _) => {
                    "skipped: a fire is already waiting for the one running (overlap: buffer_one)"
                }
            };
            self.send_missed(timer, fire, FireStatus::Skipped, skip, 0).await;
            return Some(FireOutcome::Skipped);
        }
    }

    /// Waits for the fire's turn in its flow when the flow has limits
    /// (API 1g), holding no callback slot; returns the flow's slot to hold
    /// while the callback is open. While it waits, its claim is renewed
    /// (a third of the lease at a time, in the batches of claim checks),
    /// so no other node takes it over; a claim found taken over is not
    /// sent. A node that stops gives its waiting fires back (pending again
    /// for another node, or for itself after a restart). A first attempt past its catch-up window meanwhile is missed
    /// when its timer's misfire policy says so.
    async fn flow_turn(
        &self,
        timer: &Timer,
        fire: &ClaimedFire,
        attempt: u32,
        held: &mut Held,
    ) -> Result<Option<FlowSlot>, NotSent> {
        let inner = &self.inner;
        let Notify::Http(notify) = &timer.notify else { return Ok(None) };
        if !inner.flows.any_limited(&timer.app) {
            return Ok(None);
        }
        let key = notify.flow_key();
        if !inner.flows.limited(&timer.app, &key) {
            return Ok(None);
        }
        let missed_at = if attempt == 1 && !fire.manual { self.missed_at(timer, fire) } else { None };
        let mut turn = inner.flows.join(&timer.app, &key, fire.key.run_ms, fire.task_id, missed_at);
        let renew = Duration::from_millis(inner.config.lease_ms / 3);
        loop {
            tokio::select! {
                turn = &mut turn => return match turn {
                    Ok(Turn::Go(slot)) => Ok(Some(slot)),
                    Ok(Turn::Missed) => Err(NotSent::Missed),
                    Err(_) => Ok(None),
                },
                // A node that stops gives its waiting fires back at once.
                _ = inner.stop_claiming.cancelled() => return Err(NotSent::Stopped),
                _ = tokio::time::sleep(renew) => {
                    let checked = self.held_now();
                    match self.confirm(fire).await {
                        Some(true) => *held = checked.renewed(),
                        Some(false) => return Err(NotSent::TakenOver),
                        None => {}
                    }
                }
            }
        }
    }

    /// When a fire waiting for its flow is past its catch-up window and its
    /// timer's misfire policy says missed: `skip` at the window's end,
    /// `fire_once` once its next scheduled time has come too, `fire_all`
    /// never.
    fn missed_at(&self, timer: &Timer, fire: &ClaimedFire) -> Option<i64> {
        let default = self.inner.misfire_threshold_ms.load(Ordering::Relaxed);
        let window_end = fire.key.run_ms + timer.timing.misfire_threshold_or(default) as i64;
        match timer.misfire {
            MisfirePolicy::FireAll => None,
            MisfirePolicy::Skip => Some(window_end),
            MisfirePolicy::FireOnce => {
                let next = timer.timing.next_at_or_after(&timer.schedule, fire.scheduled_ms + 1)?;
                Some(window_end.max(next))
            }
        }
    }

    /// A slot of `app` and of `host` in their bulkheads (the host's circuit
    /// breaker allowing), waiting up to `wait`; `Err` once the node stops hard.
    pub(crate) async fn enter_bulkheads(
        &self,
        app: &str,
        host: &str,
        wait: Duration,
    ) -> Result<Result<Pass, Refusal>, NotSent> {
        let inner = &self.inner;
        // Biased: entering is tried first, so a fire whose slots are free
        // never waits on the stop token (each wait registers with it).
        tokio::select! {
            biased;
            entered = inner.bulkheads.enter(app, host, wait) => Ok(entered),
            _ = inner.hard_stop.cancelled() => Err(NotSent::Stopped),
        }
    }

    /// A slot of the executor's whole concurrency; none once the node
    /// stops hard.
    pub(crate) async fn executor_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if self.inner.hard_stop.is_cancelled() {
            return None;
        }
        // A free slot is taken without waiting on the stop token (each wait
        // on it registers with the token, shared by every fire).
        if let Ok(permit) = self.inner.permits.clone().try_acquire_owned() {
            return Some(permit);
        }
        tokio::select! {
            _ = self.inner.hard_stop.cancelled() => None,
            permit = self.inner.permits.clone().acquire_owned() => Some(permit.expect("semaphore never closes")),
        }
    }
}
