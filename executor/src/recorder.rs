//! Group commit of fire results, kept until the database takes them.
//!
//! Results wait in memory while the database is unreachable, however long:
//! each batch is retried with jittered, capped backoff and never dropped
//! for an outage, so the fires of an outage are not sent again once it
//! ends (their claims would lapse and be reclaimed). Memory stays bounded
//! by the `Backlog`: past its cap of results not yet written the
//! executor claims nothing more, and its claimed fires finish.
//!
//! Only a result the database refuses as it is (no retry could write it)
//! is dropped, with an error logged; its fire is reclaimed once its lease
//! lapses. At shutdown (every sender gone) with the database unreachable,
//! the recorder gives up after [`SHUTDOWN_DEADLINE`] and logs how many
//! results were not written.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use xtimer_core::batch::Gather;
use xtimer_core::error::error_chain;
use xtimer_core::SharedClock;
use xtimer_store::{FireRepo, FireResult, NotifyRepo, OwedNotification};

use crate::notify::Notifier;

/// Most results waiting to be written, in batches of the executor's
/// `batch_size`: past it the executor stops claiming.
pub const PENDING_BATCHES: usize = 16;

/// First wait before a failed write is tried again; it doubles (each wait
/// jittered down to half) up to [`WRITE_BACKOFF_MAX`], so a write goes
/// through within about that long of the database coming back.
const WRITE_BACKOFF_MIN: Duration = Duration::from_millis(50);
const WRITE_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// How often, at most, failing writes are logged while an outage lasts.
const FAILURE_LOG_EVERY: Duration = Duration::from_secs(30);

/// How often, at most, refused claims are logged while the backlog is full, ms.
const FULL_LOG_EVERY_MS: i64 = 10_000;

/// How long the recorder keeps trying at shutdown (every sender gone)
/// before it gives up on the results it could not write.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(15);

/// A result on its way to the database, and the notifications it owes.
#[derive(Debug)]
pub(crate) struct Pending {
    pub result: FireResult,
    pub owed: Vec<OwedNotification>,
    /// The fire's timer when it may have nothing left once this fire ends
    /// (told to the finisher once a final result is written).
    pub may_end: Option<i64>,
}

/// Results handed to the recorder and not written yet, shared by the
/// executor (which adds them and stops claiming when full) and the
/// recorder (which takes them off once written).
#[derive(Debug)]
pub(crate) struct Backlog {
    pending: AtomicUsize,
    cap: usize,
    /// Unix ms of the last "backlog full" log.
    full_logged_at: AtomicI64,
}

impl Backlog {
    /// A backlog that is full at `cap` results.
    pub(crate) fn new(cap: usize) -> Self {
        Self { pending: AtomicUsize::new(0), cap, full_logged_at: AtomicI64::new(i64::MIN) }
    }

    /// Results waiting now.
    pub(crate) fn len(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// At or past the cap: claim nothing more. Logged at most every
    /// [`FULL_LOG_EVERY_MS`] (by `now_ms`) while it lasts.
    pub(crate) fn is_full(&self, now_ms: i64) -> bool {
        let pending = self.len();
        if pending < self.cap {
            return false;
        }
        let last = self.full_logged_at.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) >= FULL_LOG_EVERY_MS
            && self.full_logged_at.compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            tracing::warn!(
                pending,
                cap = self.cap,
                "Results are waiting for the database; claiming no more fires until they are written."
            );
        }
        true
    }

    fn add(&self) {
        self.pending.fetch_add(1, Ordering::AcqRel);
    }

    fn done(&self, n: usize) {
        self.pending.fetch_sub(n, Ordering::AcqRel);
    }
}

/// The executor's side of the recorder: hands results over.
#[derive(Debug)]
pub(crate) struct Results {
    tx: mpsc::UnboundedSender<Pending>,
    backlog: Arc<Backlog>,
}

impl Results {
    /// Hands `pending` to the recorder; false when the recorder is gone.
    pub(crate) fn send(&self, pending: Pending) -> bool {
        self.backlog.add();
        if self.tx.send(pending).is_err() {
            self.backlog.done(1);
            return false;
        }
        true
    }

    /// The backlog this feeds.
    pub(crate) fn backlog(&self) -> &Backlog {
        &self.backlog
    }
}

/// What the recorder writes with.
pub(crate) struct RecorderParts {
    pub fires: Arc<dyn FireRepo>,
    pub notes: Arc<dyn NotifyRepo>,
    pub notifier: Notifier,
    pub clock: SharedClock,
    pub batch_size: usize,
    /// How long a batch waits for more results.
    pub linger: Duration,
    /// Told the timers of the fires each batch ended.
    pub ended: Option<Arc<xtimer_core::node::EndedFires>>,
}

/// The channel between the executor and its recorder: the executor's end,
/// and the recorder (run it).
pub(crate) fn channel(parts: RecorderParts) -> (Results, Recorder) {
    let (tx, rx) = mpsc::unbounded_channel();
    let backlog = Arc::new(Backlog::new(parts.batch_size.max(1) * PENDING_BATCHES));
    let inbox = Gather::new(rx, parts.batch_size, parts.linger);
    (Results { tx, backlog: backlog.clone() }, Recorder { parts, inbox, backlog })
}

/// Writes results in batches: whatever is waiting goes in one transaction,
/// with the notifications the batch owes.
pub struct Recorder {
    parts: RecorderParts,
    inbox: Gather<Pending, mpsc::UnboundedReceiver<Pending>>,
    backlog: Arc<Backlog>,
}

/// A batch of results and the notifications they owe.
#[derive(Default)]
struct Batch {
    results: Vec<FireResult>,
    owed: Vec<OwedNotification>,
    /// Timers of the fires whose result is final.
    ended: Vec<i64>,
}

impl Batch {
    fn push(&mut self, pending: Pending) {
        if let Some(timer_id) = pending.may_end.filter(|_| pending.result.status.is_final()) {
            self.ended.push(timer_id);
        }
        self.results.push(pending.result);
        self.owed.extend(pending.owed);
    }

    fn len(&self) -> usize {
        self.results.len()
    }

    fn clear(&mut self) {
        self.results.clear();
        self.owed.clear();
        self.ended.clear();
    }

    /// The notifications owed by the fire of `result`.
    fn owed_by(&self, result: &FireResult) -> Vec<OwedNotification> {
        self.owed.iter().filter(|n| n.task_id == result.task_id && n.owner == result.owner).cloned().collect()
    }
}

/// How one write of a batch ended after its retries.
enum Written {
    /// In the database.
    Yes,
    /// Refused as it is: no retry will write it.
    Refused(xtimer_store::Error),
    /// Shutting down and past the deadline.
    GaveUp,
}

impl Recorder {
    /// Writes until every sender is gone (the executor dropped) and what
    /// they sent is written, so nothing recorded is cut off by shutdown:
    /// this path is never cancelled. With the database unreachable at
    /// shutdown it gives up after [`SHUTDOWN_DEADLINE`].
    pub async fn run(mut self) {
        let mut batch = Batch::default();
        let mut closing_since = None;
        while self.gather(&mut batch).await {
            if !self.write(&batch, &mut closing_since).await {
                tracing::error!(
                    results = self.backlog.len(),
                    "Stopping with results the database did not take; their fires will be reclaimed and sent again."
                );
                return;
            }
            self.backlog.done(batch.len());
            if let Some(ended) = &self.parts.ended {
                ended.ended(batch.ended.drain(..));
            }
            batch.clear();
        }
    }

    /// Waits for results and takes what arrives within the linger, up to a
    /// batch; false when every sender is gone and nothing is left.
    async fn gather(&mut self, batch: &mut Batch) -> bool {
        let mut got = Vec::with_capacity(self.parts.batch_size);
        if !self.inbox.next(&mut got).await {
            return false;
        }
        got.into_iter().for_each(|p| batch.push(p));
        true
    }

    /// Writes `batch` until the database takes it. A batch it refuses is
    /// written one result at a time ([`Recorder::write_one`]). False when
    /// shutting down past the deadline.
    async fn write(&self, batch: &Batch, closing_since: &mut Option<Instant>) -> bool {
        if batch.len() > 1 {
            match self.write_retrying(&batch.results, &batch.owed, closing_since).await {
                Written::Yes => return true,
                Written::GaveUp => return false,
                Written::Refused(_) => {}
            }
        }
        for result in &batch.results {
            if !self.write_one(result, &batch.owed_by(result), closing_since).await {
                return false;
            }
        }
        true
    }

    /// Writes one result and the notifications it owes. If the database
    /// refuses them, the result is written alone (the notifications are
    /// lost, logged); a result it refuses alone is dropped (logged): no
    /// retry could write it, and its fire is reclaimed once its lease
    /// lapses. False when shutting down past the deadline.
    async fn write_one(
        &self,
        result: &FireResult,
        owed: &[OwedNotification],
        closing_since: &mut Option<Instant>,
    ) -> bool {
        let results = std::slice::from_ref(result);
        let err = match self.write_retrying(results, owed, closing_since).await {
            Written::Yes => return true,
            Written::GaveUp => return false,
            Written::Refused(err) => err,
        };
        if !owed.is_empty() {
            tracing::error!(
                task_id = result.task_id,
                "The database refused the notifications a result owes: {}; the result is written without them.",
                error_chain(&err)
            );
            match self.write_retrying(results, &[], closing_since).await {
                Written::Yes => return true,
                Written::GaveUp => return false,
                Written::Refused(err) => refused(result, &err),
            }
            return true;
        }
        refused(result, &err);
        true
    }

    /// Writes `results` (and `owed`) in one transaction, retrying while the
    /// database is unreachable.
    async fn write_retrying(
        &self,
        results: &[FireResult],
        owed: &[OwedNotification],
        closing_since: &mut Option<Instant>,
    ) -> Written {
        let mut backoff = WRITE_BACKOFF_MIN;
        let mut failures: u64 = 0;
        let mut logged_at: Option<Instant> = None;
        loop {
            let err = match self.write_once(results, owed).await {
                Ok(()) => {
                    if failures > 0 {
                        tracing::info!(
                            results = results.len(),
                            failures,
                            "Results written after the database came back."
                        );
                    }
                    return Written::Yes;
                }
                Err(err) if !err.is_transient() => return Written::Refused(err),
                Err(err) => err,
            };
            failures += 1;
            if logged_at.is_none_or(|at| at.elapsed() >= FAILURE_LOG_EVERY) {
                logged_at = Some(Instant::now());
                tracing::warn!(
                    results = results.len(),
                    waiting = self.backlog.len(),
                    failures,
                    "Writing results failed: {}; kept and retried until the database takes them.",
                    error_chain(&err)
                );
            }
            if self.inbox.is_closed() && closing_since.get_or_insert_with(Instant::now).elapsed() >= SHUTDOWN_DEADLINE {
                return Written::GaveUp;
            }
            let wait = rand::random_range(backoff / 2..=backoff);
            tokio::time::sleep(wait).await;
            backoff = (backoff * 2).min(WRITE_BACKOFF_MAX);
        }
    }

    /// One write: the results, and with them the notifications they owe
    /// (then sent at once by the notifier).
    async fn write_once(&self, results: &[FireResult], owed: &[OwedNotification]) -> xtimer_store::Result<()> {
        let parts = &self.parts;
        let now = parts.clock.now_ms();
        if owed.is_empty() {
            parts.fires.record(results, now).await?;
            return Ok(());
        }
        let recorded = parts.notes.record_owing(results, owed, parts.notifier.lease_until(now), now).await?;
        for owed in recorded.owed {
            parts.notifier.send(owed);
        }
        Ok(())
    }
}

/// Logs a result the database refused (dropped: its fire is reclaimed
/// once its lease lapses).
fn refused(result: &FireResult, err: &xtimer_store::Error) {
    tracing::error!(
        task_id = result.task_id,
        status = ?result.status,
        "The database refused a result: {}; it is dropped and its fire will be reclaimed.",
        error_chain(err)
    );
}
