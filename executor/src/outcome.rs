//! Outcome: the last room of a fire's path. [`ExecutorHandle::settle`]
//! turns an attempt's answer into its result (succeeded, retried, failed),
//! with the notifications it owes (`onFailure`, `onLate`; `onMissed` for a
//! fire recorded missed or skipped), what the receiver asked of its timer
//! (API 1e), and the timer's pause after failures; results go to the
//! recorder. Fires that ended before an attempt (missed, skipped, given
//! back) are recorded here too.

use xtimer_core::fire::{ClaimedFire, FireStatus};
use xtimer_core::spec::PAUSE_AFTER_FAILURES_FIELD;
use xtimer_core::steering;
use xtimer_core::timer::{RetryPolicy, Timer};
use xtimer_store::FireResult;

use crate::callback::{Answer, Delivery};
use crate::handle::{ExecutorHandle, FireOutcome, NotSent};
use crate::notify;
use crate::recorder;

/// Adds `note` to an attempt's output, after its status and before the
/// answer's body (`HTTP 200; note: body`), so a cut output keeps it.
fn annotate(output: &mut String, note: &str) {
    let at = output.find(": ").unwrap_or(output.len());
    output.insert_str(at, &format!("; {note}"));
}

/// How often, at most, one timer's failed fires are logged at `warn`, ms.
pub const FAILURE_LOG_EVERY_MS: i64 = 60_000;

/// Most timers whose last failure log is remembered; past it the oldest is
/// forgotten (and may be logged again within the minute).
pub(crate) const FAILURE_LOG_TIMERS: usize = 10_000;

impl ExecutorHandle {
    /// Settles attempt `attempt` of `fire` with the receiver's `answer`,
    /// sent `cost` ms after its run time: carries out what the receiver
    /// asked in its headers, and records it succeeded, to be retried (at
    /// its backoff, or the `Retry-After` asked) or failed (with the
    /// notifications it owes, and the timer paused past its failures in
    /// a row); returns how it ended.
    pub(crate) async fn settle(
        &self,
        timer: &Timer,
        fire: &ClaimedFire,
        attempt: u32,
        mut answer: Answer,
        cost: i64,
    ) -> FireOutcome {
        let inner = &self.inner;
        // A paced fire's first send (a backfilled fire's first attempt, a
        // replay's) is counted apart: it is late by design.
        let paced = inner.paced.take(fire.task_id);
        if paced || attempt == 1 {
            inner.metrics.first_send(paced || fire.replay, cost);
        }
        // The first attempt's lateness owes the timer's onLate, with that
        // attempt's result whatever it is (a paced fire is late by design).
        let late = (attempt == 1 && !paced && !fire.replay && notify::is_late(timer, cost)).then_some(cost);
        if !answer.asked.is_empty() {
            // Before the result: a one-shot moved on must not look ended.
            self.steer(timer, &mut answer).await;
        }
        if let Delivery::Rejected { status, .. } = answer.delivery {
            if timer.retry.gives_up_on(status) {
                annotate(&mut answer.output, &format!("not retried: {status} fails at once (retry.noRetryStatuses)"));
                answer.delivery = Delivery::NotSent { permanent: true };
            }
        }
        if answer.delivery.delivered() {
            let result = self.result_of(fire, FireStatus::Succeeded, attempt, &answer.output, cost, None);
            let owed = late.and_then(|ms| notify::owed_late(timer, fire, ms, &answer.output)).into_iter().collect();
            self.record(recorder::Pending { result, owed, may_end: self.may_end(fire) });
            return FireOutcome::Fired;
        }
        if answer.delivery.permanent() {
            // Every retry would fail the same way (the policy refuses the
            // target, or the task engine refuses the task as it is).
            self.warn_failed(timer, attempt, &answer.output);
            self.send_failed(timer, fire, attempt, &answer.output, cost, late).await;
            self.pause_if_failing(timer, fire).await;
            return FireOutcome::Failed;
        }
        match timer.retry.backoff_after(attempt) {
            Some(backoff) => {
                // Spread: timers that failed together do not retry together.
                let backoff = RetryPolicy::jittered(backoff, rand::random::<f64>());
                // A 429 or 503 with Retry-After waits as long as it asks.
                let asked = match answer.delivery {
                    Delivery::Rejected { retry_after_ms: Some(ms), .. } => ms,
                    _ => 0,
                };
                let at = inner.clock.now_ms() + backoff.max(asked) as i64;
                let lease = at + inner.config.lease_ms as i64;
                let result = self.result_of(fire, FireStatus::Running, attempt, &answer.output, cost, Some(lease));
                let owed = late.and_then(|ms| notify::owed_late(timer, fire, ms, &answer.output)).into_iter().collect();
                self.record(recorder::Pending { result, owed, may_end: self.may_end(fire) });
                FireOutcome::RetryAt(at)
            }
            None => {
                self.warn_failed(timer, attempt, &answer.output);
                self.send_failed(timer, fire, attempt, &answer.output, cost, late).await;
                self.pause_if_failing(timer, fire).await;
                FireOutcome::Failed
            }
        }
    }

    /// What became of a fire of `timer` that did not go out.
    pub(crate) async fn not_sent(&self, timer: &Timer, fire: &ClaimedFire, why: NotSent) -> FireOutcome {
        match why {
            NotSent::Stopped => {
                // Stopping before it went out: give the claim back.
                self.release(std::slice::from_ref(fire)).await;
                FireOutcome::Released
            }
            NotSent::TakenOver => FireOutcome::TakenOver,
            NotSent::Missed => {
                let late = self.inner.clock.now_ms() - fire.key.run_ms;
                let output =
                    format!("missed: {late} ms late, waited for its flow past its catch-up window (misfire policy)");
                self.send_missed(timer, fire, FireStatus::Missed, &output, late).await;
                FireOutcome::Skipped
            }
        }
    }

    /// Carries out what the receiver asked of `timer` in its answer's
    /// headers, noting in the answer's output what was done: a pause (on
    /// any answer), and on a one-shot's delivered answer its next run
    /// (not in the past; the service checks the app's limits).
    async fn steer(&self, timer: &Timer, answer: &mut Answer) {
        let Some(steering) = &self.inner.steering else {
            return annotate(&mut answer.output, "reply headers ignored: nothing here carries them out");
        };
        let asked = std::mem::take(&mut answer.asked);
        if let Some(value) = asked.pause {
            let reason = steering::pause_reason(&value);
            let note = match steering.pause(timer, &reason).await {
                Ok(()) => format!("paused: {reason} (X-Xtimer-Pause)"),
                Err(why) => format!("X-Xtimer-Pause not done: {why}"),
            };
            annotate(&mut answer.output, &note);
            if asked.next_run_at.is_some() {
                annotate(&mut answer.output, "X-Xtimer-Next-Run-At ignored: the timer is paused");
            }
            return;
        }
        let Some(value) = asked.next_run_at else { return };
        let now = self.inner.clock.now_ms();
        let note = match (steering::parse_next_run_at(&value), &timer.schedule) {
            _ if !answer.delivery.delivered() => "X-Xtimer-Next-Run-At ignored: the answer failed".to_owned(),
            (_, schedule) if schedule.repeats() => "X-Xtimer-Next-Run-At ignored: not a one-shot timer".to_owned(),
            (None, _) => format!("X-Xtimer-Next-Run-At ignored: `{value}` is neither RFC 3339 nor Unix ms"),
            (Some(at), _) if at <= now => {
                format!("X-Xtimer-Next-Run-At ignored: {} is in the past", xtimer_core::clock::rfc3339(at))
            }
            (Some(at), _) => match steering.run_again_at(timer, at).await {
                Ok(()) => format!("next run at {} (X-Xtimer-Next-Run-At)", xtimer_core::clock::rfc3339(at)),
                Err(why) => format!("X-Xtimer-Next-Run-At not done: {why}"),
            },
        };
        annotate(&mut answer.output, &note);
    }

    /// Logs a fire that ended failed at `warn`, at most once per
    /// [`FAILURE_LOG_EVERY_MS`] per timer, so a failing receiver is seen at
    /// the default log level without a line per fire.
    fn warn_failed(&self, timer: &Timer, attempts: u32, output: &str) {
        let logged = &self.inner.failure_logged;
        if !logged.contains(&timer.id) {
            logged.insert(timer.id, ());
            tracing::warn!(
                timer_id = timer.id,
                app = %timer.app,
                attempts,
                output,
                "A fire failed after its attempts; this timer's next failures are logged at most once a minute."
            );
        }
    }

    /// Disables the timer when this failed fire makes as many consecutive
    /// failures as it pauses after
    /// ([`TimerSpec::pause_after_failures`](xtimer_core::spec::TimerSpec::pause_after_failures),
    /// counted since the timer was last changed or enabled), recording why.
    /// A replayed fire counts toward no streak: the timer is often
    /// disabled by the very failures it resends.
    async fn pause_if_failing(&self, timer: &Timer, fire: &ClaimedFire) {
        let Some(n) = timer.pause_after_failures.filter(|_| !fire.replay) else { return };
        let reason = format!(
            "disabled after {n} consecutive failed fires ({PAUSE_AFTER_FAILURES_FIELD}), the last due at {}",
            xtimer_core::clock::rfc3339(fire.key.run_ms)
        );
        let now = self.inner.clock.now_ms();
        match self.inner.timers.pause_if_failing(timer.id, fire.task_id, n, timer.modify_time, &reason, now).await {
            Ok(true) => tracing::warn!(timer_id = timer.id, app = %timer.app, %reason, "Timer disabled."),
            Ok(false) => {}
            Err(err) => {
                tracing::warn!(timer_id = timer.id, error = %xtimer_core::error::error_chain(&err), "Checking {PAUSE_AFTER_FAILURES_FIELD} failed.")
            }
        }
    }

    /// Hands the result of one attempt to the recorder.
    pub(crate) async fn send_result(
        &self,
        fire: &ClaimedFire,
        status: FireStatus,
        attempt: u32,
        output: &str,
        cost_time: i64,
        lease_until: Option<i64>,
    ) {
        let result = self.result_of(fire, status, attempt, output, cost_time, lease_until);
        self.record(recorder::Pending { result, owed: Vec::new(), may_end: self.may_end(fire) });
    }

    /// Hands the missed or skipped result of `fire` (no attempt made) to
    /// the recorder, with the `onMissed` notification it owes if `timer`
    /// has one, written in one transaction as [`Self::send_failed`] does.
    pub(crate) async fn send_missed(
        &self,
        timer: &Timer,
        fire: &ClaimedFire,
        status: FireStatus,
        output: &str,
        cost_time: i64,
    ) {
        let result = self.result_of(fire, status, fire.attempt, output, cost_time, None);
        let owed = notify::owed_missed(timer, fire, status, fire.attempt, output).into_iter().collect();
        self.record(recorder::Pending { result, owed, may_end: self.may_end(fire) });
    }

    /// Hands the failed result of `fire`'s last attempt to the recorder,
    /// with the `onFailure` notification it owes if the timer has one (and
    /// its `onLate`, when this first attempt left `late` ms late): both
    /// are written in one transaction, then the notification is sent (see
    /// [`notify`]), so a crash in between loses neither.
    async fn send_failed(
        &self,
        timer: &Timer,
        fire: &ClaimedFire,
        attempt: u32,
        output: &str,
        cost_time: i64,
        late: Option<i64>,
    ) {
        let result = self.result_of(fire, FireStatus::Failed, attempt, output, cost_time, None);
        let mut owed: Vec<_> = notify::owed_failure(timer, fire, attempt, output).into_iter().collect();
        owed.extend(late.and_then(|ms| notify::owed_late(timer, fire, ms, output)));
        self.record(recorder::Pending { result, owed, may_end: self.may_end(fire) });
    }

    /// `fire`'s timer, unless it is known to go on after this fire (a cron
    /// or interval timer kept here with no end): the finisher then need not
    /// look at it.
    fn may_end(&self, fire: &ClaimedFire) -> Option<i64> {
        let goes_on = self
            .inner
            .cache
            .get(&fire.key.timer_id)
            .is_some_and(|cached| cached.timer.schedule.repeats() && cached.timer.timing.end_ms().is_none());
        (!goes_on).then_some(fire.key.timer_id)
    }

    fn result_of(
        &self,
        fire: &ClaimedFire,
        status: FireStatus,
        attempt: u32,
        output: &str,
        cost_time: i64,
        lease_until: Option<i64>,
    ) -> FireResult {
        self.inner.metrics.fires_ended(status, 1);
        FireResult {
            task_id: fire.task_id,
            run_ms: fire.key.run_ms,
            owner: fire.owner.clone(),
            status,
            attempt,
            output: output.to_string(),
            cost_time,
            lease_until,
        }
    }

    fn record(&self, pending: recorder::Pending) {
        let task_id = pending.result.task_id;
        if !self.inner.results.send(pending) {
            tracing::error!(task_id, "Recorder is gone; the result is lost and the lease will expire.");
        }
    }

    pub(crate) async fn release(&self, fires: &[ClaimedFire]) {
        if let Err(err) = self.inner.fires.release(fires, self.inner.clock.now_ms()).await {
            tracing::warn!(fires = fires.len(), error = %xtimer_core::error::error_chain(&err), "Releasing claims failed; their leases will expire.");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::annotate;

    #[test]
    fn a_note_goes_after_the_status_and_before_the_body() {
        let mut output = "HTTP 200: {\"ok\":true}".to_owned();
        annotate(&mut output, "paused: quota (X-Xtimer-Pause)");
        assert_eq!(output, "HTTP 200; paused: quota (X-Xtimer-Pause): {\"ok\":true}");
        let mut bare = "HTTP 401".to_owned();
        annotate(&mut bare, "not retried");
        assert_eq!(bare, "HTTP 401; not retried");
    }
}
