//! Attempt: one try of a fire, from its admission to the receiver's
//! answer. [`ExecutorHandle::attempt_of`] admits it (see the admission
//! room), sends its HTTP callback (signed, traced, checked against the
//! target policy; re-sent when a stall of this node cut it short) or
//! creates its asyncflow task, and hands the answer to the outcome room.

use std::time::Duration;

use xtimer_core::error::error_chain;
use xtimer_core::fire::{ClaimedFire, FireKey};
use xtimer_core::template::{self, FireFacts};
use xtimer_core::timer::{AsyncflowNotify, Notify};

use crate::callback::{self, Answer, Delivery, Target};
use crate::handle::{CachedTimer, ExecutorHandle, FireOutcome, Held, NotSent};
use crate::task_creator::CreateTaskError;
use crate::traces;

/// Re-sends, at most, of one attempt whose request was cut short by a stall
/// of this node (not the receiver's fault).
const STALL_RESENDS: u32 = 3;

impl ExecutorHandle {
    /// Makes attempt number `attempt` (1-based) of `fire` with its timer's
    /// definition: admitted (app pause, overlap, flow), its callback sent (or
    /// its task created), and its answer settled (recorded, retried or
    /// failed); returns how it ended.
    pub(crate) async fn attempt_of(
        &self,
        fire: &ClaimedFire,
        attempt: u32,
        cached: &CachedTimer,
        held: &mut Held,
    ) -> FireOutcome {
        let inner = &self.inner;
        let timer = &cached.timer;
        let slot = match self.admit(timer, fire, attempt, held).await {
            Ok(slot) => slot,
            Err(outcome) => return outcome,
        };
        let answer = match (&timer.notify, &cached.target) {
            (Notify::Http(notify), _) if notify.template => {
                let key = fire.idempotency_key();
                let facts = FireFacts {
                    timer,
                    run_ms: fire.key.run_ms,
                    scheduled_ms: fire.scheduled_ms,
                    fire_key: &key,
                    attempt,
                };
                let target = Target::new(&template::render(notify, &facts), Some(&inner.callbacks.policy));
                self.call(&timer.app, &target, fire, attempt, held).await
            }
            (Notify::Http(_), Some(target)) => self.call(&timer.app, target, fire, attempt, held).await,
            (Notify::Http(notify), None) => {
                self.call(&timer.app, &inner.endpoints.target(notify), fire, attempt, held).await
            }
            (Notify::Asyncflow(task), _) => self.create_task_held(&timer.app, task, fire, held).await,
        };
        drop(slot);
        let (answer, cost) = match answer {
            Ok(sent) => sent,
            Err(not_sent) => return self.not_sent(timer, fire, not_sent).await,
        };
        self.settle(timer, fire, attempt, answer, cost).await
    }

    /// Sends one HTTP callback through its host's and app's bulkheads and
    /// the executor's concurrency; returns the answer and its lateness (ms
    /// from the run time to the request leaving), or why it did not go out:
    /// the node stopped hard, or it stood still while holding the claim
    /// and another node took the fire over.
    ///
    /// Time this node stood still is never the receiver's fault: a wait
    /// for a slot, or a request whose answer did not come, across a stall
    /// is made again (the claim checked first) and not counted against the
    /// host's circuit breaker.
    async fn call(
        &self,
        app: &str,
        target: &Target,
        fire: &ClaimedFire,
        attempt: u32,
        held: &mut Held,
    ) -> Result<(Answer, i64), NotSent> {
        let inner = &self.inner;
        let key = fire.key;
        let timeout = target.timeout().unwrap_or(Duration::from_millis(inner.config.timeout_ms));
        let mut stalls = 0;
        loop {
            if inner.hard_stop.is_cancelled() {
                return Err(NotSent::Stopped);
            }
            // Checked before the slots are taken too: a check waiting for an
            // unreachable database holds no host's or app's slot.
            self.still_ours(fire, held).await?;
            let entering = inner.pause.mark();
            let entered = self.enter_bulkheads(app, target.host(), timeout).await?;
            let pass = match entered {
                Ok(pass) => pass,
                Err(_) if stalls < STALL_RESENDS && inner.pause.crossed(entering) => {
                    stalls += 1;
                    continue;
                }
                Err(refusal) => {
                    let output = callback::truncate(format!("not sent: {refusal}"), inner.config.max_output_bytes);
                    let answer = Answer::new(Delivery::NotSent { permanent: false }, output);
                    return Ok((answer, inner.clock.now_ms() - key.run_ms));
                }
            };
            let _permit = self.executor_permit().await.ok_or(NotSent::Stopped)?;
            let secret = inner.callbacks.secrets.secret_for(app).await;
            // Again at the last moment (no database round trip unless the
            // node stood still, its heartbeats failed, or the claim's lease
            // could have lapsed by the monotonic clock).
            self.still_ours(fire, held).await?;
            let sending = self.held_now();
            let signing = callback::Signing { secret: secret.as_bytes(), t: sending.at_ms.div_euclid(1000) };
            let idempotency_key = fire.idempotency_key();
            let span = inner.traces.as_ref().map(|traces| {
                let facts =
                    traces::AttemptFacts { key, scheduled_ms: fire.scheduled_ms, app, attempt, host: target.host() };
                traces.start(facts)
            });
            let id = callback::FireId {
                key,
                scheduled_ms: fire.scheduled_ms,
                idempotency_key: &idempotency_key,
                replay: fire.replay,
                attempt,
                traceparent: span.as_ref().map(traces::AttemptSpan::traceparent),
            };
            let answer =
                callback::call_checked(&inner.http, target, id, inner.config.max_output_bytes, Some(signing)).await;
            if let Some(span) = span {
                span.end(&answer, sending.at_ms - key.run_ms);
            }
            let answered = !matches!(answer.delivery, Delivery::Unanswered);
            if !answered && stalls < STALL_RESENDS && inner.pause.crossed(sending.mark) {
                // Cut short by this node's own stall: sent again once the
                // claim is checked (the receiver may have it: it was in flight).
                tracing::info!(
                    task_id = fire.task_id,
                    "A callback was cut short by a stall of this node; sending it again."
                );
                drop(pass);
                stalls += 1;
                *held = Held { at_ms: sending.at_ms, ..*held };
                continue;
            }
            pass.report(&inner.bulkheads, answered);
            return Ok((answer, sending.at_ms - key.run_ms));
        }
    }

    /// [`ExecutorHandle::create_task`] in a slot of the executor, the claim
    /// checked as a callback's is (before the slot and at the last moment).
    async fn create_task_held(
        &self,
        app: &str,
        task: &AsyncflowNotify,
        fire: &ClaimedFire,
        held: &mut Held,
    ) -> Result<(Answer, i64), NotSent> {
        self.still_ours(fire, held).await?;
        let _permit = self.executor_permit().await.ok_or(NotSent::Stopped)?;
        self.still_ours(fire, held).await?;
        Ok(self.create_task(app, task, fire.key).await)
    }

    /// The fire of a timer that creates a task: success is the task
    /// created; a task the engine refuses as it is (an unknown type, another
    /// app's type, invalid input) fails the fire at once, a storage failure
    /// is retried.
    async fn create_task(&self, app: &str, task: &AsyncflowNotify, key: FireKey) -> (Answer, i64) {
        let cost = self.inner.clock.now_ms() - key.run_ms;
        let created = match &self.inner.tasks {
            Some(tasks) => tasks.create_task(app, task, key).await,
            None => Err(CreateTaskError::NoEngine),
        };
        let answer = match created {
            Ok(task_id) => Answer::new(Delivery::Delivered, format!("created task {task_id}")),
            Err(err) => Answer::new(
                Delivery::NotSent { permanent: err.is_permanent() },
                callback::truncate(
                    format!("creating the task failed: {}", error_chain(&err)),
                    self.inner.config.max_output_bytes,
                ),
            ),
        };
        (answer, cost)
    }
}
