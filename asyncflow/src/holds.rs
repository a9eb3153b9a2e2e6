//! Combines concurrent holds of one type into one statement.
//!
//! Holds of a type arrive from many workers at once and each is a write;
//! on SQLite every write goes through one connection, and every small
//! transaction rewrites the same index pages. So a hold joins its type's
//! queue, and whichever hold gets the type's turn first claims for every
//! hold queued behind it in one statement, then deals the tasks out in
//! queue order, in the order the claim returned them: oldest order_time
//! first, or, for a `fair_by_user` type, round-robin across user_ids (each
//! share is a run of that order, so the claim as a whole stays fair). Each
//! task still goes to exactly one hold: the statement claims it once, and
//! the dealing splits the rows.
//!
//! A hold whose caller went away (its future dropped) claims nothing for
//! itself: the claim and the dealing run in their own task, so dropping
//! the hold that started them cannot cut them short, and a share nobody is
//! left to receive is given back (pending again) at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::oneshot::{self, error::TryRecvError};

use crate::wire::TaskData;
use crate::{Error, Result};

/// Most tasks one combined statement claims; holds past it wait for the next turn.
pub const MAX_COMBINED: u32 = 10_000;

/// The store side of a combined hold of one type.
#[async_trait]
pub trait Claim: Send + Sync + 'static {
    /// Claims up to `total` due tasks, in the order they are to be dealt
    /// (oldest order_time first, or the type's fair order).
    async fn claim(&self, total: u32) -> Result<Vec<TaskData>>;
    /// Makes claimed tasks that reached no hold pending again.
    async fn give_back(&self, tasks: Vec<TaskData>);
}

struct Waiting {
    want: u32,
    done: oneshot::Sender<Result<Vec<TaskData>>>,
}

#[derive(Default)]
struct TypeQueue {
    waiting: Mutex<Vec<Waiting>>,
    turn: tokio::sync::Mutex<()>,
}

/// The hold queues of every type. Cheap to clone.
#[derive(Clone, Default)]
pub struct HoldCombiner {
    queues: Arc<Mutex<HashMap<String, Arc<TypeQueue>>>>,
}

impl HoldCombiner {
    /// Holds up to `want` tasks of `task_type`, sharing one
    /// [`Claim::claim`] with the holds of the same type that wait at the
    /// same time.
    pub async fn hold(&self, task_type: &str, want: u32, claim: Arc<dyn Claim>) -> Result<Vec<TaskData>> {
        let queue = self.queues.lock().expect("hold queues").entry(task_type.to_string()).or_default().clone();
        let (done, mut result) = oneshot::channel();
        queue.waiting.lock().expect("hold queue").push(Waiting { want, done });
        let _turn = queue.turn.lock().await;
        loop {
            // The holder of an earlier turn may have served this hold already.
            match result.try_recv() {
                Ok(served) => return served,
                Err(TryRecvError::Closed) => return Err(Error::Interrupted),
                Err(TryRecvError::Empty) => {}
            }
            // Claim for the head of the queue, this hold among it.
            let batch = take_batch(&mut queue.waiting.lock().expect("hold queue"));
            if batch.is_empty() {
                // Not queued, not served: a dropped holder's claim is still
                // dealing this hold its share.
                return result.await.unwrap_or(Err(Error::Interrupted));
            }
            let claim = claim.clone();
            // Awaited with the turn held; if this hold is dropped meanwhile, the task still deals.
            let _ = tokio::spawn(claim_and_deal(claim, batch)).await;
        }
    }
}

async fn claim_and_deal(claim: Arc<dyn Claim>, batch: Vec<Waiting>) {
    let total = batch.iter().map(|w| w.want).sum();
    match claim.claim(total).await {
        Ok(tasks) => {
            let undelivered = deal(batch, tasks);
            if !undelivered.is_empty() {
                claim.give_back(undelivered).await;
            }
        }
        Err(err) => {
            let cause = Arc::new(err);
            for w in batch {
                let _ = w.done.send(Err(Error::WriteFailed(cause.clone())));
            }
        }
    }
}

/// The queued holds whose wants fit in [`MAX_COMBINED`] (at least one),
/// in queue order; holds whose caller went away are dropped first.
fn take_batch(waiting: &mut Vec<Waiting>) -> Vec<Waiting> {
    waiting.retain(|w| !w.done.is_closed());
    let mut total = 0;
    let fit = waiting
        .iter()
        .take_while(|w| {
            total += w.want;
            total <= MAX_COMBINED
        })
        .count()
        .max(1);
    waiting.drain(..fit.min(waiting.len())).collect()
}

/// Gives each hold its share of `tasks` in their order (the first hold the
/// first ones), in queue order; returns the tasks no hold took.
fn deal(batch: Vec<Waiting>, tasks: Vec<TaskData>) -> Vec<TaskData> {
    let mut tasks = tasks.into_iter();
    let mut undelivered = Vec::new();
    for w in batch {
        let share: Vec<TaskData> = tasks.by_ref().take(w.want as usize).collect();
        if let Err(Ok(share)) = w.done.send(Ok(share)) {
            undelivered.extend(share);
        }
    }
    undelivered.extend(tasks);
    undelivered
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    fn task(n: u32) -> TaskData {
        TaskData { task_id: n.to_string(), ..TaskData::default() }
    }

    /// Hands out consecutive task numbers, slowly; records what comes back.
    #[derive(Default)]
    struct Counter {
        claims: AtomicU32,
        next: AtomicU32,
        given_back: Mutex<Vec<String>>,
        fail: bool,
    }

    #[async_trait]
    impl Claim for Counter {
        async fn claim(&self, total: u32) -> Result<Vec<TaskData>> {
            self.claims.fetch_add(1, Ordering::SeqCst);
            // A slow statement: other holds queue behind it.
            tokio::time::sleep(Duration::from_millis(10)).await;
            if self.fail {
                return Err(Error::Invalid("boom".into()));
            }
            let first = self.next.fetch_add(total, Ordering::SeqCst);
            Ok((first..first + total).map(task).collect())
        }

        async fn give_back(&self, tasks: Vec<TaskData>) {
            self.given_back.lock().unwrap().extend(tasks.into_iter().map(|t| t.task_id));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_holds_share_one_claim_and_never_a_task() {
        let combiner = HoldCombiner::default();
        let counter = Arc::new(Counter::default());
        let mut joins = Vec::new();
        for want in [3, 5, 2, 4] {
            let (combiner, claim) = (combiner.clone(), counter.clone() as Arc<dyn Claim>);
            joins.push(tokio::spawn(async move { combiner.hold("t", want, claim).await.map(|t| (want, t)) }));
        }
        let mut seen = std::collections::HashSet::new();
        for join in joins {
            let (want, tasks) = join.await.unwrap().unwrap();
            assert_eq!(tasks.len() as u32, want);
            for t in tasks {
                assert!(seen.insert(t.task_id), "a task went to two holds");
            }
        }
        assert_eq!(seen.len(), 14);
        // The first hold claimed alone; the three queued behind it shared one claim.
        assert_eq!(counter.claims.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_hold_loses_no_task_and_fails_no_other_hold() {
        let combiner = HoldCombiner::default();
        let counter = Arc::new(Counter::default());
        // The first hold starts a claim and is dropped in the middle of it.
        let first = tokio::spawn({
            let (combiner, claim) = (combiner.clone(), counter.clone() as Arc<dyn Claim>);
            async move { combiner.hold("t", 4, claim).await }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        let second = tokio::spawn({
            let (combiner, claim) = (combiner.clone(), counter.clone() as Arc<dyn Claim>);
            async move { combiner.hold("t", 3, claim).await }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        first.abort();
        let second = second.await.unwrap().unwrap();
        assert_eq!(second.len(), 3, "the other hold is served");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut back = counter.given_back.lock().unwrap().clone();
        back.sort();
        assert_eq!(back, ["0", "1", "2", "3"], "the dropped hold's claim is given back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_whose_leader_was_dropped_mid_claim_gets_its_share_from_that_claim() {
        let combiner = HoldCombiner::default();
        let counter = Arc::new(Counter::default());
        let spawn = |want| {
            let (combiner, claim) = (combiner.clone(), counter.clone() as Arc<dyn Claim>);
            tokio::spawn(async move { combiner.hold("t", want, claim).await })
        };
        // `first` holds the turn while `leader` and `follower` queue behind it.
        let first = spawn(1);
        tokio::time::sleep(Duration::from_millis(1)).await;
        let leader = spawn(4);
        let follower = spawn(3);
        first.await.unwrap().unwrap();
        // `leader` now claims for both; it is dropped before the claim ends.
        tokio::time::sleep(Duration::from_millis(1)).await;
        leader.abort();
        let share = follower.await.unwrap().unwrap();
        assert_eq!(share.len(), 3);
        assert_eq!(counter.claims.load(Ordering::SeqCst), 2, "the follower was served by the leader's claim");
    }

    #[tokio::test]
    async fn a_failed_claim_reaches_the_hold_as_an_error() {
        let combiner = HoldCombiner::default();
        let failing = Arc::new(Counter { fail: true, ..Counter::default() });
        let err = combiner.hold("t", 5, failing).await.unwrap_err();
        assert!(matches!(err, Error::WriteFailed(_)), "{err:?}");
        let cause = std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default();
        assert!(cause.contains("boom"), "the claim's own error is its source: {err:?}");
    }

    #[test]
    fn dealing_keeps_the_order_the_claim_returned() {
        // A fair claim's order is by round, not by order_time: it is dealt as it is.
        let ids = |tasks: Vec<TaskData>| tasks.into_iter().map(|t| t.task_id).collect::<Vec<_>>();
        let claimed = ["b1", "a1", "c1", "b2", "a2", "a3"];
        let tasks = claimed.iter().map(|id| TaskData { task_id: id.to_string(), ..TaskData::default() }).collect();
        let (first, mut first_rx) = oneshot::channel();
        let (second, mut second_rx) = oneshot::channel();
        let left = deal(vec![Waiting { want: 2, done: first }, Waiting { want: 3, done: second }], tasks);
        assert_eq!(ids(first_rx.try_recv().unwrap().unwrap()), ["b1", "a1"]);
        assert_eq!(ids(second_rx.try_recv().unwrap().unwrap()), ["c1", "b2", "a2"]);
        assert_eq!(ids(left), ["a3"], "what no hold wanted is given back");
    }

    #[test]
    fn batches_stop_at_the_combined_cap_but_take_at_least_one() {
        let mut waiting: Vec<Waiting> = [6_000, 4_000, 1]
            .iter()
            .map(|&want| {
                // A hold still waiting: its receiver stays open.
                let (done, rx) = oneshot::channel();
                std::mem::forget(rx);
                Waiting { want, done }
            })
            .collect();
        assert_eq!(take_batch(&mut waiting).len(), 2);
        assert_eq!(take_batch(&mut waiting).len(), 1);
        let (done, _rx) = oneshot::channel();
        let mut huge = vec![Waiting { want: MAX_COMBINED + 1, done }];
        assert_eq!(take_batch(&mut huge).len(), 1);
    }
}
