//! Notifications fires owe, one mechanism for all three: a timer's
//! `onFailure`, told when one of its fires ends failed; its `onMissed`,
//! told when one is recorded missed or skipped (by its misfire policy, its
//! `overlap`, a paused app: not because the timer itself was disabled or
//! deleted); its `onLate`, told once for a fire whose first callback left
//! later than `thresholdMs` after its run time. Each has the same JSON
//! body (the timer, the fire, its attempts and last output, and `alert`:
//! `failure`, `missed` or `late`).
//!
//! # Durable
//!
//! A notification is owed from the moment the result that owes it is
//! written (the failed, missed or skipped result; for `onLate` the first
//! attempt's): the [`Recorder`](crate::Recorder) writes both in one
//! transaction ([`NotifyRepo::record_owing`]), the notification held by the
//! fire's claim owner under a short lease. Right after the write the
//! recorder hands it to the `Notifier`, which sends it at once: no wait
//! for a sweep. Each failed send is retried with jittered exponential
//! backoff ([`FAILURE_NOTIFY_ATTEMPTS`] sends in all, counted across nodes),
//! the lease renewed past each wait; then it is given up (logged). Sent or
//! given up, it is deleted.
//!
//! A node that stops or crashes owing one leaves it in the database; the
//! [`NotifySweeper`](crate::NotifySweeper) of every node takes the ones whose lease lapsed (one
//! taker each: a lease with an owner token, as for fire claims) and sends
//! them the same way. A node stopping hard gives the ones it is waiting to
//! retry back at once.
//!
//! Delivery is at-least-once, like a callback's: a node that sent one and
//! died before deleting it leaves it to be sent again. The receiver tells
//! repeats by `Idempotency-Key: {fire's key}_failure` (`_missed`, `_late`).
//!
//! Fires the reconciler marks missed (their time passed while no node
//! could fire them) owe their `onMissed` in the same transaction
//! ([`xtimer_store::FireRepo::mark_missed`]), held by no one: the node
//! that marked them takes them at once, as a sweep does.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use xtimer_core::fire::{ClaimedFire, FireStatus};
use xtimer_core::timer::{HttpNotify, Timer};
use xtimer_core::SharedClock;
use xtimer_store::{NotifyRepo, OwedKind, OwedNotification, TimerRepo};

use crate::callback::{self, Answer, Target};
use crate::secrets::Callbacks;

/// Sends of one owed notification, at most, counted across nodes.
pub const FAILURE_NOTIFY_ATTEMPTS: u32 = 3;

/// Wait before the second send of a notification, ms; it doubles per send,
/// each wait jittered down to half.
const FAILURE_NOTIFY_BACKOFF_MS: u64 = 500;

/// A sender's lease on a notification past one send's timeout, ms.
const LEASE_MARGIN_MS: i64 = 5_000;

/// How often a node looks for notifications whose sender's lease lapsed.
pub const NOTIFY_SWEEP_PERIOD: Duration = Duration::from_secs(5);

/// Most notifications one sweep takes.
pub(crate) const SWEEP_PAGE: u32 = 100;

/// The notification a failed fire owes when its timer has an `onFailure`
/// (none otherwise), held by the fire's claim owner: stored with the fire's
/// result, then sent by the node that recorded it.
pub(crate) fn owed_failure(timer: &Timer, fire: &ClaimedFire, attempts: u32, output: &str) -> Option<OwedNotification> {
    timer.on_failure.as_ref()?;
    Some(owed(OwedKind::Failure, fire, attempts, output))
}

/// The notification a fire recorded `status` owes when that is missed or
/// skipped and its timer has an `onMissed` (none otherwise).
pub(crate) fn owed_missed(
    timer: &Timer,
    fire: &ClaimedFire,
    status: FireStatus,
    attempts: u32,
    output: &str,
) -> Option<OwedNotification> {
    timer.on_missed.as_ref()?;
    matches!(status, FireStatus::Missed | FireStatus::Skipped).then(|| owed(OwedKind::Missed, fire, attempts, output))
}

/// Whether a fire whose first attempt left `late_ms` after its run time
/// owes its timer's `onLate`: the timer has one, and the fire is later
/// than its threshold.
pub(crate) fn is_late(timer: &Timer, late_ms: i64) -> bool {
    timer.on_late.as_ref().is_some_and(|alert| late_ms > i64::try_from(alert.threshold_ms).unwrap_or(i64::MAX))
}

/// The `onLate` notification of a fire whose first attempt left `late_ms`
/// after its run time and ended with `output` (see [`is_late`]).
pub(crate) fn owed_late(timer: &Timer, fire: &ClaimedFire, late_ms: i64, output: &str) -> Option<OwedNotification> {
    let threshold = timer.on_late.as_ref()?.threshold_ms;
    let output = format!("sent {late_ms} ms after its run time (onLate.thresholdMs {threshold}); {output}");
    Some(owed(OwedKind::Late, fire, 1, &output))
}

/// A notification of `kind` owed by `fire`, held by its claim owner.
fn owed(kind: OwedKind, fire: &ClaimedFire, attempts: u32, output: &str) -> OwedNotification {
    OwedNotification {
        task_id: fire.task_id,
        kind,
        key: fire.key,
        manual: fire.manual,
        attempt: attempts,
        output: output.to_string(),
        sends: 0,
        owner: fire.owner.clone(),
    }
}

/// What a [`Notifier`] sends with.
pub(crate) struct NotifierParts {
    pub notes: Arc<dyn NotifyRepo>,
    pub timers: Arc<dyn TimerRepo>,
    pub clock: SharedClock,
    pub http: callback::Client,
    pub callbacks: Callbacks,
    /// Bytes of an answer kept for the log.
    pub max_output: usize,
    /// The callback timeout, ms: a sender's lease covers one send.
    pub timeout_ms: u64,
    /// The executor's in-flight work, so that its `idle` waits for sends.
    pub tracker: TaskTracker,
    /// Cancelled when the node stops hard: retries are given back.
    pub hard_stop: CancellationToken,
}

/// Sends owed notifications, each in its own task (see the module docs).
/// Cheap to clone.
#[derive(Clone)]
pub(crate) struct Notifier {
    pub(crate) parts: Arc<NotifierParts>,
}

/// One notification's request, made once for all its sends.
struct Message {
    target: Target,
    /// Its `Idempotency-Key`: the fire's, then `_failure`.
    key: String,
    app: String,
}

impl Notifier {
    pub(crate) fn new(parts: NotifierParts) -> Self {
        Self { parts: Arc::new(parts) }
    }

    /// The end of a sender's lease on a notification taken at `now_ms`.
    pub(crate) fn lease_until(&self, now_ms: i64) -> i64 {
        now_ms + self.parts.timeout_ms as i64 + LEASE_MARGIN_MS
    }

    /// Sends `owed` (held under its owner token) in its own task.
    pub(crate) fn send(&self, owed: OwedNotification) {
        let this = self.clone();
        self.parts.tracker.spawn(async move { this.deliver(owed).await });
    }

    /// Sends until delivered or given up, then deletes it; stops early when
    /// another node took it over, or (giving it back) when the node stops hard.
    async fn deliver(&self, owed: OwedNotification) {
        let Some(message) = self.message(&owed).await else { return };
        let mut sends = owed.sends;
        let mut last = String::new();
        while sends < FAILURE_NOTIFY_ATTEMPTS {
            let answer = self.call(&message, &owed).await;
            sends += 1;
            if answer.delivery.delivered() {
                self.settle(&owed).await;
                return;
            }
            let retry = !answer.delivery.permanent() && sends < FAILURE_NOTIFY_ATTEMPTS;
            last = answer.output;
            if !retry {
                break;
            }
            if !self.wait_to_retry(&owed, sends).await {
                return;
            }
        }
        tracing::warn!(
            timer_id = owed.key.timer_id,
            task_id = owed.task_id,
            alert = owed.kind.field(),
            sends,
            output = %last,
            "A timer's alert notify failed; it is not retried further."
        );
        self.settle(&owed).await;
    }

    /// Keeps `owed` through the backoff after send number `sends` and
    /// waits it out; false when the notification is no longer this
    /// sender's, or the node stops hard (it is given back then).
    async fn wait_to_retry(&self, owed: &OwedNotification, sends: u32) -> bool {
        let parts = &self.parts;
        let full = FAILURE_NOTIFY_BACKOFF_MS << (sends - 1).min(16);
        let backoff = rand::random_range(full / 2..=full);
        let next = parts.clock.now_ms() + backoff as i64;
        match parts.notes.reschedule_owed(owed, sends, self.lease_until(next)).await {
            Ok(true) => {}
            Ok(false) => return false,
            // The lease taken before this send still covers the wait.
            Err(err) => {
                tracing::warn!(task_id = owed.task_id, alert = owed.kind.field(), error = %err, "Keeping an alert notify failed.")
            }
        }
        tokio::select! {
            _ = parts.hard_stop.cancelled() => {
                // Given back: any node may send it from now.
                let _ = parts.notes.reschedule_owed(owed, sends, parts.clock.now_ms()).await;
                false
            }
            _ = tokio::time::sleep(Duration::from_millis(backoff)) => true,
        }
    }

    /// The request of `owed`, from its timer's `onFailure` (`onMissed`,
    /// `onLate`) as it is now. None when there is nothing to send (the
    /// timer is gone or no longer has that notify: the notification is
    /// deleted), or the timer cannot be read now (left for the sweep once
    /// its lease lapses).
    async fn message(&self, owed: &OwedNotification) -> Option<Message> {
        let parts = &self.parts;
        let timer = match parts.timers.get_timer(owed.key.timer_id).await {
            Ok(timer) => timer,
            Err(err) => {
                tracing::warn!(task_id = owed.task_id, error = %err, "Reading the timer of an alert notify failed.");
                return None;
            }
        };
        let Some((timer, notify)) = timer.and_then(|t| notify_of(&t, owed.kind).map(|n| (t, n))) else {
            self.settle(owed).await;
            return None;
        };
        let body = serde_json::json!({
            "timerId": timer.id,
            "app": timer.app,
            "name": timer.name,
            "taskId": owed.task_id,
            "runTimer": owed.key.run_ms,
            "manual": owed.manual,
            "attempts": owed.attempt,
            "output": owed.output,
            "alert": owed.kind.suffix(),
        });
        let notify = HttpNotify { body: Some(body.to_string()), ..notify };
        let target = Target::new(&notify, Some(&parts.callbacks.policy));
        Some(Message { target, key: idempotency_key(owed), app: timer.def.app })
    }

    /// One send of `message`, signed with its app's secret.
    async fn call(&self, message: &Message, owed: &OwedNotification) -> Answer {
        let parts = &self.parts;
        let secret = parts.callbacks.secrets.secret_for(&message.app).await;
        let signing = callback::Signing { secret: secret.as_bytes(), t: parts.clock.now_ms().div_euclid(1000) };
        let fire = callback::FireId {
            key: owed.key,
            scheduled_ms: owed.key.run_ms,
            idempotency_key: &message.key,
            replay: false,
            attempt: owed.sends + 1,
            traceparent: None,
        };
        callback::call_checked(&parts.http, &message.target, fire, parts.max_output, Some(signing)).await
    }

    /// Deletes `owed`: sent or given up. If that fails its lease lapses
    /// and another sweep sends it again (at-least-once).
    async fn settle(&self, owed: &OwedNotification) {
        if let Err(err) = self.parts.notes.settle_owed(owed).await {
            tracing::warn!(task_id = owed.task_id, error = %err, "Clearing a sent alert notify failed; it may be sent again.");
        }
    }
}

/// Where a notification of `kind` goes for `timer`, if it still has one.
fn notify_of(timer: &Timer, kind: OwedKind) -> Option<HttpNotify> {
    match kind {
        OwedKind::Failure => timer.on_failure.clone(),
        OwedKind::Missed => timer.on_missed.clone(),
        OwedKind::Late => timer.on_late.as_ref().map(|alert| alert.notify.clone()),
    }
}

/// `{fire's idempotency key}_failure` (`_missed`, `_late`): the fire's key
/// names a manual fire as such, so the two never collide.
fn idempotency_key(owed: &OwedNotification) -> String {
    let fire = ClaimedFire {
        task_id: owed.task_id,
        key: owed.key,
        scheduled_ms: owed.key.run_ms,
        attempt: owed.attempt,
        owner: String::new(),
        manual: owed.manual,
        replay: false,
        timer_modified: 0,
    };
    format!("{}_{}", fire.idempotency_key(), owed.kind.suffix())
}
