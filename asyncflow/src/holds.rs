//! Combines concurrent holds of one type into one statement.
//!
//! Holds of a type arrive from many workers at once and each is a write;
//! on SQLite every write goes through one connection, and every small
//! transaction rewrites the same index pages. So a hold joins its type's
//! queue, and whichever hold gets the type's turn first claims for every
//! hold queued behind it in one statement, then deals the tasks out in
//! queue order, oldest order_time first. Each task still goes to exactly
//! one hold: the statement claims it once, and the dealing splits the rows.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot::{self, error::TryRecvError};

use crate::wire::TaskData;
use crate::{Error, Result};

/// Most tasks one combined statement claims; holds past it wait for the next turn.
pub const MAX_COMBINED: u32 = 10_000;

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
    /// Holds up to `want` tasks of `task_type`, sharing one `claim(total)`
    /// with the holds of the same type that wait at the same time.
    pub async fn hold<F, Fut>(&self, task_type: &str, want: u32, claim: F) -> Result<Vec<TaskData>>
    where
        F: Fn(u32) -> Fut,
        Fut: Future<Output = Result<Vec<TaskData>>>,
    {
        let queue = self.queues.lock().expect("hold queues").entry(task_type.to_string()).or_default().clone();
        let (done, mut result) = oneshot::channel();
        queue.waiting.lock().expect("hold queue").push(Waiting { want, done });
        let _turn = queue.turn.lock().await;
        loop {
            // The holder of an earlier turn may have served this hold already.
            match result.try_recv() {
                Ok(served) => return served,
                Err(TryRecvError::Closed) => {
                    return Err(Error::WriteFailed("the hold claiming for this one was cancelled".into()))
                }
                Err(TryRecvError::Empty) => {}
            }
            // This hold is still queued: claim for the head of the queue.
            let batch = take_batch(&mut queue.waiting.lock().expect("hold queue"));
            let total = batch.iter().map(|w| w.want).sum();
            match claim(total).await {
                Ok(tasks) => deal(batch, tasks),
                Err(err) => {
                    let msg = err.to_string();
                    for w in batch {
                        let _ = w.done.send(Err(Error::WriteFailed(msg.clone())));
                    }
                }
            }
        }
    }
}

/// The queued holds whose wants fit in [`MAX_COMBINED`] (at least one), in queue order.
fn take_batch(waiting: &mut Vec<Waiting>) -> Vec<Waiting> {
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

/// Gives each hold its share of `tasks` (oldest first), in queue order.
fn deal(batch: Vec<Waiting>, tasks: Vec<TaskData>) {
    let mut tasks = tasks.into_iter();
    for w in batch {
        let share: Vec<TaskData> = tasks.by_ref().take(w.want as usize).collect();
        let _ = w.done.send(Ok(share));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    fn task(n: u32) -> TaskData {
        TaskData { task_id: n.to_string(), ..TaskData::default() }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_holds_share_one_claim_and_never_a_task() {
        let combiner = HoldCombiner::default();
        let claims = Arc::new(AtomicU32::new(0));
        let next = Arc::new(AtomicU32::new(0));
        let mut joins = Vec::new();
        for want in [3, 5, 2, 4] {
            let (combiner, claims, next) = (combiner.clone(), claims.clone(), next.clone());
            joins.push(tokio::spawn(async move {
                combiner
                    .hold("t", want, |total| {
                        let (claims, next) = (claims.clone(), next.clone());
                        async move {
                            claims.fetch_add(1, Ordering::SeqCst);
                            // A slow statement: the other holds queue behind it.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            let first = next.fetch_add(total, Ordering::SeqCst);
                            Ok((first..first + total).map(task).collect())
                        }
                    })
                    .await
                    .map(|tasks| (want, tasks))
            }));
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
        assert_eq!(claims.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_short_claim_leaves_later_holds_short_and_errors_reach_every_hold() {
        let combiner = HoldCombiner::default();
        let got = combiner.hold("t", 5, |_| async { Ok((0..2).map(task).collect()) }).await.unwrap();
        assert_eq!(got.len(), 2);
        let err = combiner.hold("t", 5, |_| async { Err(Error::Invalid("boom".into())) }).await.unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
    }

    #[test]
    fn batches_stop_at_the_combined_cap_but_take_at_least_one() {
        let mut waiting: Vec<Waiting> =
            [6_000, 4_000, 1].iter().map(|&want| Waiting { want, done: oneshot::channel().0 }).collect();
        assert_eq!(take_batch(&mut waiting).len(), 2);
        assert_eq!(take_batch(&mut waiting).len(), 1);
        let mut huge = vec![Waiting { want: MAX_COMBINED + 1, done: oneshot::channel().0 }];
        assert_eq!(take_batch(&mut huge).len(), 1);
    }
}
